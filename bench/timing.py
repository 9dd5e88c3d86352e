"""Latency samples: warm-up, interleaved blocks, median and p99.

Every subject is a callable taking the sample index ``i`` (so it can pick a
fresh id per call). :func:`interleaved` warms each subject up, then runs them
in alternating blocks -- A, B, A, B, ... with the starting subject rotating --
so that drift on a shared, noisy machine (other processes, cache state,
checkpoints) lands on all subjects alike and their ratio stays meaningful.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["AsyncSubject", "Stats", "Subject", "interleaved", "percentile", "summarize", "time_calls"]

Subject = Callable[[int], object]
"""One timed operation; called with the sample index."""


class AsyncSubject:
    """A coroutine function as a subject: each ``await call(i)`` is one sample, timed inside ``loop``.

    :func:`time_calls` runs a whole block as one coroutine on ``loop`` (which
    must not be running), so the cost of entering the loop is not in any
    sample; what is, is the await of the call itself (task switches, a hop to a
    worker thread and back). Mixed with plain subjects in :func:`interleaved`,
    the sync API and the async API of one storage are timed in alternating blocks.
    """

    __slots__ = ("call", "loop")

    def __init__(self, call: Callable[[int], Awaitable[object]], loop: asyncio.AbstractEventLoop) -> None:
        self.call = call
        self.loop = loop

    def __call__(self, i: int) -> object:
        return self.loop.run_until_complete(_awaited(self.call(i)))

    def time(self, start: int, count: int) -> list[float]:
        return self.loop.run_until_complete(_time_awaits(self.call, start, count))


async def _awaited(awaitable: Awaitable[object]) -> object:
    return await awaitable


async def _time_awaits(call: Callable[[int], Awaitable[object]], start: int, count: int) -> list[float]:
    clock = time.perf_counter_ns
    out: list[float] = []
    for i in range(start, start + count):
        begin = clock()
        await call(i)
        out.append((clock() - begin) / 1e9)
    return out


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of one subject's samples, in microseconds."""

    n: int
    median_us: float
    p99_us: float
    mean_us: float
    min_us: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "median_us": round(self.median_us, 2),
            "p99_us": round(self.p99_us, 2),
            "mean_us": round(self.mean_us, 2),
            "min_us": round(self.min_us, 2),
        }


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (``fraction`` in [0, 1])."""
    if not sorted_values:
        raise ValueError("no samples")
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def summarize(seconds: Sequence[float]) -> Stats:
    """Median, p99, mean and minimum of samples given in seconds."""
    values = sorted(seconds)
    n = len(values)
    if n == 0:
        raise ValueError("no samples")
    middle = n // 2
    median = values[middle] if n % 2 else (values[middle - 1] + values[middle]) / 2
    return Stats(
        n=n,
        median_us=median * 1e6,
        p99_us=percentile(values, 0.99) * 1e6,
        mean_us=sum(values) / n * 1e6,
        min_us=values[0] * 1e6,
    )


def time_calls(subject: Subject, start: int, count: int) -> list[float]:
    """Call ``subject(i)`` for ``i`` in ``start .. start + count - 1``; each call's duration in seconds.

    An :class:`AsyncSubject` is awaited instead, on its loop.
    """
    if isinstance(subject, AsyncSubject):
        return subject.time(start, count)
    clock = time.perf_counter_ns
    out: list[float] = []
    for i in range(start, start + count):
        begin = clock()
        subject(i)
        out.append((clock() - begin) / 1e9)
    return out


def interleaved(
    subjects: Mapping[str, Subject],
    *,
    samples: int,
    block: int = 10,
    warmup: int = 20,
    budget_s: float | None = None,
    min_samples: int = 30,
) -> dict[str, Stats]:
    """Warm up, then time the subjects in alternating blocks; one :class:`Stats` per subject.

    Stops at ``samples`` per subject, or once ``budget_s`` seconds have passed
    and every subject has at least ``min_samples``. Warm-up calls use indexes
    ``0 .. warmup - 1``; timed calls continue from there, so a subject that
    needs a fresh id per call gets one every time.
    """
    if not subjects:
        return {}
    names = list(subjects)
    for name in names:
        time_calls(subjects[name], 0, warmup)
    collected: dict[str, list[float]] = {name: [] for name in names}
    deadline = None if budget_s is None else time.monotonic() + budget_s
    turn = 0
    while True:
        done = min(len(values) for values in collected.values())
        if done >= samples:
            break
        if deadline is not None and done >= min_samples and time.monotonic() >= deadline:
            break
        count = min(block, samples - done)
        order = names[turn % len(names) :] + names[: turn % len(names)]
        for name in order:
            collected[name].extend(time_calls(subjects[name], warmup + len(collected[name]), count))
        turn += 1
    return {name: summarize(values) for name, values in collected.items()}
