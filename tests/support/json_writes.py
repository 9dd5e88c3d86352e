"""Count the JSON documents workmem writes: every ``json.dumps`` call inside the block, by the value written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def json_writes() -> Iterator[list[object]]:
    """The values passed to ``json.dumps`` while the block runs, in order (``json.dumps`` restored after)."""
    written: list[object] = []
    dumps = json.dumps

    def counting(value: object, *args: Any, **kwargs: Any) -> str:
        written.append(value)
        return dumps(value, *args, **kwargs)

    json.dumps = counting  # type: ignore[assignment]
    try:
        yield written
    finally:
        json.dumps = dumps
