"""What a store tells the conformance suite besides the contract's outcomes: harness errors, unsupported operations.

A store run over the wire (:mod:`workmem.adapters.wire`) may break the protocol
(:class:`~workmem.errors.HarnessError`) or declare that it cannot do an
operation (:class:`~workmem.errors.OperationNotSupportedError`). A check may
catch either, or meet it on a worker thread whose exception ends up inside an
assertion's text; so the adapter also *notes* each one here, and the suite,
which watches every check (:func:`watching`), reports the check by what was
noted, whatever the check itself concluded. No I/O, no driver.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

__all__ = ["Incident", "Kind", "note", "watching"]

Kind = Literal["harness_error", "unsupported"]


@dataclass(frozen=True, slots=True)
class Incident:
    kind: Kind
    message: str


_lock = threading.Lock()
_watchers: list[list[Incident]] = []


def note(kind: Kind, message: str) -> None:
    """Tell every active :func:`watching` block (of any thread of this process) about an incident."""
    with _lock:
        for seen in _watchers:
            seen.append(Incident(kind, message))


@contextmanager
def watching() -> Iterator[list[Incident]]:
    """Collect the incidents noted in this process while the block runs (in the order they were noted)."""
    seen: list[Incident] = []
    with _lock:
        _watchers.append(seen)
    try:
        yield seen
    finally:
        with _lock:
            _watchers.remove(seen)
