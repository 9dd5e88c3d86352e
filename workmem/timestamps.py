"""Timestamps as workmem keeps them: timezone-aware UTC with millisecond precision."""

from __future__ import annotations

from datetime import UTC, datetime

from workmem.errors import ValidationError

__all__ = ["from_iso", "normalize", "to_iso", "utc_now"]


def normalize(value: datetime) -> datetime:
    """Return ``value`` in UTC, truncated to whole milliseconds; naive datetimes are rejected."""
    if not isinstance(value, datetime):
        raise ValidationError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError("timestamps must be timezone-aware")
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond - value.microsecond % 1000)


def utc_now() -> datetime:
    """The current time, normalized."""
    return normalize(datetime.now(UTC))


def to_iso(value: datetime) -> str:
    """``2025-01-02T03:04:05.678Z``: the text form Mastra writes in libSQL and Redis."""
    value = normalize(value)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def from_iso(text: str) -> datetime:
    """Parse an ISO-8601 timestamp (``Z`` or an offset; naive text is taken as UTC)."""
    parsed = datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return normalize(parsed)
