"""Progress of a long run: a bar (records, rate, ETA) on a terminal, a plain log line now and then otherwise."""

from __future__ import annotations

import time
from typing import TextIO

__all__ = ["Progress"]


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class Progress:
    """Counts records as a run goes and shows it on ``stream``.

    On a terminal (``tty=True``): one line redrawn at most ten times a second,
    ``copy  [#####.....]  12,000/40,000 records  3,100/s  ETA 0:00:09`` (the
    bar and ETA only once :attr:`total` is known). Otherwise one log line every
    ``interval`` seconds. :meth:`message` prints a line of its own without
    breaking the bar; :meth:`finish` ends it.
    """

    def __init__(self, stream: TextIO, *, tty: bool | None = None, interval: float = 5.0) -> None:
        self.stream = stream
        self.tty = stream.isatty() if tty is None else tty
        self.interval = interval
        self.label = ""
        self.total: int | None = None
        self.done = 0
        self._started = time.monotonic()
        self._shown = 0.0
        self._drawn = False

    def start(self, label: str, total: int | None = None) -> None:
        """Begin a phase (``copy``, ``verify``, ...) of ``total`` records (``None``: unknown)."""
        self.finish()
        self.label, self.total, self.done = label, total, 0
        self._started = self._shown = time.monotonic()

    def advance(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self._shown >= (0.1 if self.tty else self.interval):
            self._shown = now
            self._show(now)

    def _line(self, now: float) -> str:
        elapsed = max(now - self._started, 1e-9)
        rate = self.done / elapsed
        if self.total:
            share = min(self.done / self.total, 1.0)
            bar = "#" * int(share * 20)
            eta = _duration((self.total - self.done) / rate) if rate > 0 and self.done < self.total else "0:00:00"
            return (
                f"{self.label}  [{bar:.<20}] {share:4.0%}  {self.done:,}/{self.total:,} records  "
                f"{rate:,.0f}/s  ETA {eta}"
            )
        return f"{self.label}  {self.done:,} records  {rate:,.0f}/s  {_duration(elapsed)} elapsed"

    def _show(self, now: float) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + self._line(now))
            self._drawn = True
        else:
            self.stream.write(self._line(now) + "\n")
        self.stream.flush()

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[2K")
            self._drawn = False

    def message(self, text: str, stream: TextIO | None = None) -> None:
        """Print ``text`` as a line of its own (on ``stream``, default the progress stream), the bar redrawn after."""
        self._clear()
        target = stream or self.stream
        target.write(text + "\n")
        target.flush()
        if self.tty and self.label:
            self._show(time.monotonic())

    def finish(self) -> None:
        """End the phase with a final line of its counts (nothing when no phase was started)."""
        if not self.label:
            return
        self._clear()
        self.stream.write(self._line(time.monotonic()) + ", done\n")
        self.stream.flush()
        self.label = ""
