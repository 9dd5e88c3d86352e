"""RFC 7396 JSON Merge Patch, and reading working memory as a JSON object."""

from __future__ import annotations

import json
from typing import Any

from workmem.errors import ValidationError, WorkingMemoryFormatError
from workmem.validation import MAX_DEPTH, json_type, validated_json_object

__all__ = ["apply_merge_patch", "parse_json_object", "read_json_object"]


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` patched by ``patch`` (RFC 7396 section 2); neither argument is modified.

    Objects merge recursively, ``None`` deletes a key, anything else (arrays,
    scalars) replaces the target value whole. Written as a loop, not a
    recursion, so a patch nested deeper than Python's recursion limit merges too.
    """
    if not isinstance(patch, dict):
        return patch
    root = dict(target) if isinstance(target, dict) else {}
    pending: list[tuple[dict[str, Any], dict[str, Any]]] = [(root, patch)]
    while pending:
        result, part = pending.pop()
        for key, value in part.items():
            if value is None:
                result.pop(key, None)
            elif isinstance(value, dict):
                current = result.get(key)
                child = dict(current) if isinstance(current, dict) else {}
                result[key] = child  # filled in when its turn comes: its place among the keys is kept
                pending.append((child, value))
            else:
                result[key] = value
    return root


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def parse_json_object(text: str | None) -> dict[str, Any]:
    """Read stored working memory as a JSON object; ``None`` and blank text are ``{}`` (:func:`read_json_object`)."""
    return read_json_object(text)[0]


def read_json_object(text: str | None) -> tuple[dict[str, Any], str | None]:
    """Stored working memory as a JSON object, and that object written as workmem writes it (compact JSON).

    ``None`` and blank text are ``{}`` with no text (``None``: nothing is stored).

    The stored text must be a JSON object within the input rules of
    :mod:`workmem.validation` (nesting depth, finite numbers, integers within
    +/-(2**53 - 1), strings without NUL or lone surrogates) and name no key twice
    in one object, so every backend reads it as the same value; ``-0.0`` reads as
    ``0.0``, as in validated input. Anything else raises
    :class:`WorkingMemoryFormatError` (it is the stored text, not the caller's
    input, that is wrong): a merge into it changes nothing.
    """
    if text is None or not text.strip():
        return {}, None
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise WorkingMemoryFormatError(
            f"stored working memory is nested more than {MAX_DEPTH} levels deep; merge needs a JSON object within "
            "the limits"
        ) from None
    except _DuplicateKey as exc:
        raise WorkingMemoryFormatError(
            f"stored working memory names the key {exc.key!r} twice in one object; merge needs a JSON object with "
            "unique keys"
        ) from None
    except ValueError:
        raise WorkingMemoryFormatError("stored working memory is not JSON; merge needs a JSON object") from None
    if not isinstance(value, dict):
        raise WorkingMemoryFormatError(
            f"stored working memory is a JSON {json_type(value)}, not an object; merge needs an object"
        )
    try:
        return validated_json_object(value, "stored working memory")
    except ValidationError as exc:
        raise WorkingMemoryFormatError(f"{exc}; merge needs a JSON object within the limits") from None
