"""Count the JSON documents workmem writes: every ``json.dumps`` call inside the block, and every document
:func:`workmem.validation.dump_json` writes (through its encoder, built once), by the value written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from workmem import validation


class _CountingEncoder:
    def __init__(self, encoder: json.JSONEncoder, written: list[object]) -> None:
        self._encoder = encoder
        self._written = written

    def encode(self, value: object) -> str:
        self._written.append(value)
        return self._encoder.encode(value)


@contextmanager
def json_writes() -> Iterator[list[object]]:
    """The values passed to ``json.dumps`` or ``dump_json`` while the block runs, in order (both restored after)."""
    written: list[object] = []
    dumps = json.dumps
    encoder = validation._ENCODER

    def counting(value: object, *args: Any, **kwargs: Any) -> str:
        written.append(value)
        return dumps(value, *args, **kwargs)

    json.dumps = counting  # type: ignore[assignment]
    validation._ENCODER = _CountingEncoder(encoder, written)  # type: ignore[assignment]
    try:
        yield written
    finally:
        json.dumps = dumps
        validation._ENCODER = encoder
