"""Input rules shared by every adapter, checked before anything is written.

Each adapter stores a different subset of what its database could take; these
limits are the intersection, so the same input is accepted or rejected the same
way everywhere:

* strings: valid Unicode (no lone surrogates), no NUL character;
* ids: 1 to 512 UTF-8 bytes (Oracle's ``VARCHAR2(512)``);
* titles: at most 1024 UTF-8 bytes (Oracle's ``VARCHAR2(1024)``);
* JSON values: ``None``, ``bool``, ``int`` within +/- (2**53 - 1) (exact in
  JavaScript and in Lua), finite ``float``, ``str``, ``list``, and ``dict`` with
  ``str`` keys; nesting at most 32 deep (MongoDB allows 100 levels per document);
* working memory and metadata: at most 4 MiB each once UTF-8 / JSON encoded.
  Thread-scoped working memory (a string under ``thread.metadata["workingMemory"]``)
  is working memory, not metadata: its text counts against the working-memory
  limit, the rest of that metadata against the metadata limit
  (:func:`workmem.records.validate_thread_metadata`), so both scopes take the same memory.

Validated JSON comes back as a plain copy in which ``-0.0`` is ``0.0`` (equal in
Python; PostgreSQL's ``numeric`` has no negative zero), so every backend stores
the same value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from workmem.errors import ValidationError

__all__ = [
    "MAX_DEPTH",
    "MAX_ID_BYTES",
    "MAX_SAFE_INT",
    "MAX_TEXT_BYTES",
    "MAX_TITLE_BYTES",
    "dump_json",
    "json_type",
    "validate_id",
    "validate_json_object",
    "validate_text",
    "validate_title",
]

MAX_ID_BYTES = 512
MAX_TITLE_BYTES = 1024
MAX_TEXT_BYTES = 4 * 1024 * 1024
MAX_SAFE_INT = 2**53 - 1
MAX_DEPTH = 32


def json_type(value: object) -> str:
    """The JSON name of ``value``'s type (``object``, ``array``, ``string``, ``number``, ``boolean``, ``null``).

    For messages: a value that is no JSON value at all is named by its Python
    type (``set``, ``bytes``, ...), since no JSON name fits it.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for kind, name in ((Mapping, "object"), (str, "string"), (int | float, "number"), (list | tuple, "array")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _utf8_size(value: str, what: str) -> int:
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{what} is not valid Unicode (lone surrogate at {exc.start})") from None
    if "\x00" in value:
        raise ValidationError(f"{what} contains a NUL character")
    return size


def validate_text(value: object, what: str = "working memory", *, limit: int = MAX_TEXT_BYTES) -> str:
    """Check a free text value (working memory, message text) and return it."""
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, got {json_type(value)}")
    if _utf8_size(value, what) > limit:
        raise ValidationError(f"{what} is larger than {limit} bytes")
    return value


def validate_id(value: object, what: str = "id") -> str:
    """Check a resource or thread id and return it."""
    # Every read starts here: an ASCII str of at most MAX_ID_BYTES characters is that many bytes,
    # has no lone surrogate, and only the NUL test is left (all O(1) but that one scan).
    if type(value) is str and value.isascii() and 0 < len(value) <= MAX_ID_BYTES and "\x00" not in value:
        return value
    if not isinstance(value, str):
        raise ValidationError(f"{what} must be a string, got {json_type(value)}")
    size = _utf8_size(value, what)
    if size == 0:
        raise ValidationError(f"{what} must not be empty")
    if size > MAX_ID_BYTES:
        raise ValidationError(f"{what} is longer than {MAX_ID_BYTES} bytes")
    return value


def validate_title(value: object) -> str:
    """Check a thread title (the empty string is allowed) and return it."""
    return validate_text(value, "title", limit=MAX_TITLE_BYTES)


def _check_value(value: object, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValidationError(f"{path} is nested more than {MAX_DEPTH} levels deep")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INT:
            raise ValidationError(f"{path} is an integer outside +/-(2**53 - 1)")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{path} is not a finite number")
    elif isinstance(value, str):
        _utf8_size(value, path)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_value(item, f"{path}[{index}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{path} has a non-string key {key!r}")
            _utf8_size(key, f"key {key!r} of {path}")
            _check_value(item, f"{path}[{key!r}]", depth + 1)
    else:
        raise ValidationError(f"{path} holds a {type(value).__name__}, which is not a JSON value")


def validate_json_object(value: object, what: str = "metadata") -> dict[str, Any]:
    """Check that ``value`` is a JSON object of JSON values within the limits; return a plain dict copy."""
    return validated_json_object(value, what)[0]


def validated_json_object(value: object, what: str) -> tuple[dict[str, Any], str]:
    """:func:`validate_json_object`, and the compact JSON text of what it returns (serialized once)."""
    if not isinstance(value, Mapping):
        raise ValidationError(f"{what} must be a JSON object, got {json_type(value)}")
    text = json_object_text(dict(value), what)
    plain: dict[str, Any] = _DECODER.decode(text)
    return plain, (dump_json(plain) if "-0.0" in text else text)  # -0.0 read back as 0.0: its text follows


def json_object_text(value: dict[str, Any], what: str, text: str | None = None) -> str:
    """The compact JSON text of ``value`` (as :func:`dump_json`) once it is checked within the input rules.

    ``text``: that text, when the caller has written it already (it is not written again).
    """
    _check_value(value, what, 1)
    text = dump_json(value) if text is None else text
    if len(text.encode("utf-8")) > MAX_TEXT_BYTES:
        raise ValidationError(f"{what} is larger than {MAX_TEXT_BYTES} bytes as JSON")
    return text


def _float(text: str) -> float:
    return float(text) + 0.0  # -0.0 + 0.0 is 0.0; every other float is unchanged


_DECODER = json.JSONDecoder(parse_float=_float)  # built once: json.loads with an option builds one per call
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))  # likewise json.dumps


def dump_json(value: Any) -> str:
    """Compact JSON text, non-ASCII kept as is, NaN/Infinity refused."""
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"not serializable as JSON: {exc}") from None
