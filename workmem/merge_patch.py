"""RFC 7396 JSON Merge Patch, and reading working memory as a JSON object."""

from __future__ import annotations

import json
from typing import Any

from workmem.errors import WorkingMemoryFormatError

__all__ = ["apply_merge_patch", "parse_json_object"]


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Return ``target`` patched by ``patch`` (RFC 7396 section 2); neither argument is modified.

    Objects merge recursively, ``None`` deletes a key, anything else (arrays,
    scalars) replaces the target value whole.
    """
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result


def parse_json_object(text: str | None) -> dict[str, Any]:
    """Read stored working memory as a JSON object; ``None`` and blank text are ``{}``.

    Raises :class:`WorkingMemoryFormatError` when the text is not a JSON object.
    """
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        raise WorkingMemoryFormatError("stored working memory is not JSON; merge needs a JSON object") from None
    if not isinstance(value, dict):
        raise WorkingMemoryFormatError(
            f"stored working memory is a JSON {type(value).__name__}, not an object; merge needs an object"
        )
    return value
