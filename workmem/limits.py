"""The working-memory size limit (``max_chars``): how a size is counted and when a write is refused (no I/O).

One copy of the rule, used by the agent layer (what the model is shown, and
the checks it makes before writing anything) and by every adapter inside the
atomic step that writes (a row lock, a transaction, a compare-and-set, a
store's lock), where concurrent writers cannot slip in between the check and
the write:

* a replace (``set_working_memory``, a working memory given to
  ``update_resource`` / ``update_thread``) stores the text as given: its size is
  ``len()`` of that text, and what it replaces counts as :func:`text_size`;
* a merge stores the merged document as compact JSON
  (:func:`~workmem.validation.dump_json`): its size is ``len()`` of that text,
  and what it merges into counts as :func:`document_size`, the stored document
  written the same way (so text another program stored indented counts as what
  workmem would store).

:func:`check_limit` refuses a result over the limit that is also larger than
what it replaces; one that does not grow the memory is accepted even above the
limit, so memory stored above it (before the limit was set, or by a writer
without one) can be condensed step by step.
"""

from __future__ import annotations

from workmem.errors import ValidationError, WorkingMemoryFormatError, WorkingMemoryTooLargeError
from workmem.merge_patch import parse_json_object
from workmem.validation import dump_json

__all__ = ["check_limit", "check_max_chars", "document_size", "text_size"]


def check_max_chars(max_chars: object) -> int | None:
    """``max_chars`` checked: ``None`` (no limit) or an ``int`` >= 1; :class:`ValidationError` otherwise."""
    if max_chars is None:
        return None
    if isinstance(max_chars, bool) or not isinstance(max_chars, int):
        raise ValidationError(f"max_chars must be an int >= 1 or None, not {type(max_chars).__name__}")
    if max_chars < 1:
        raise ValidationError(f"max_chars must be an int >= 1 or None, not {max_chars}")
    return max_chars


def text_size(stored: str | None) -> int:
    """The size of stored working memory that a replace compares with: ``len()``; nothing or blank text is 0."""
    if stored is None or not stored.strip():
        return 0
    return len(stored)


def document_size(stored: str | None) -> int:
    """The size of stored working memory as a document: ``len()`` of its compact JSON (what a merge stores).

    Whatever formatting the stored text has (another program's, a backend's own
    JSON output), so the count is the same on every backend. Nothing stored (or
    blank) is 0; text that is no JSON object within the input rules counts as is.
    """
    if stored is None or not stored.strip():
        return 0
    try:
        return len(dump_json(parse_json_object(stored)))
    except (ValidationError, WorkingMemoryFormatError, RecursionError):
        return len(stored)


def check_limit(size: int, current: int, max_chars: int | None) -> None:
    """Refuse a result of ``size`` characters over ``max_chars`` that is also larger than the ``current`` one.

    Raises :class:`~workmem.errors.WorkingMemoryTooLargeError`; ``None`` is no limit.
    """
    if max_chars is not None and size > max_chars and size > current:
        raise WorkingMemoryTooLargeError(size=size, limit=max_chars, current=current)
