"""Timestamps as workmem keeps them: timezone-aware UTC with millisecond precision."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from workmem.errors import ValidationError
from workmem.validation import json_type

__all__ = ["from_iso", "normalize", "to_iso", "utc_now"]


def normalize(value: datetime) -> datetime:
    """Return ``value`` in UTC, truncated to whole milliseconds; naive datetimes are rejected."""
    if type(value) is datetime and value.tzinfo is UTC and not value.microsecond % 1000:
        return value  # normalized already (every record's timestamps, each time they are checked again)
    if not isinstance(value, datetime):
        raise ValidationError(f"expected a datetime, got {json_type(value)}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError("timestamps must be timezone-aware")
    try:
        value = value.astimezone(UTC)
    except OverflowError:  # datetime.min at UTC+5 is before year 1 in UTC
        raise ValidationError(f"timestamp {value.isoformat()} is outside years 1 to 9999 in UTC") from None
    return value.replace(microsecond=value.microsecond - value.microsecond % 1000)


def utc_now() -> datetime:
    """The current time, normalized."""
    return normalize(datetime.now(UTC))


def to_iso(value: datetime) -> str:
    """``2025-01-02T03:04:05.678Z``: the text form Mastra writes in libSQL and Redis.

    As JavaScript's ``toISOString()``: always four year digits (``0001-01-01T…``;
    ``strftime("%Y")`` would write ``1-01-01T…``, which no ISO reader takes).
    """
    # isoformat writes four year digits; of a UTC time, its "+00:00" is cut
    return normalize(value).isoformat(timespec="milliseconds")[:-6] + "Z"


_SHORT_YEAR = re.compile(r"(\d{1,3})(?=-\d\d-\d\d)")


def from_iso(text: str, *, zone_required: bool = False) -> datetime:
    """Parse an ISO-8601 timestamp (``Z`` or an offset; naive text is taken as UTC unless ``zone_required``).

    A year of fewer than four digits (``1-01-01T…``, as earlier workmem versions
    wrote years before 1000) is read as that year. Raises ``ValueError`` for
    text that is no timestamp, :class:`ValidationError` for one outside years 1
    to 9999 in UTC and, with ``zone_required``, for one without a time zone (a
    date alone, or a time without ``Z`` or an offset).
    """
    text = text.strip().replace(" ", "T", 1)
    short = _SHORT_YEAR.match(text)
    if short:
        text = short.group(1).zfill(4) + text[short.end() :]
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        if zone_required:
            raise ValidationError(
                "no time zone (Z or an offset such as +02:00); a time without one is not taken as UTC"
            )
        parsed = parsed.replace(tzinfo=UTC)
    return normalize(parsed)
