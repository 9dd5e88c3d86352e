"""One store process and the requests in flight to it: JSON lines over its stdin and stdout, matched by id.

:class:`StoreProcess` starts the command, writes each request as one line
(``{"id", "op", "args"}``) and has a reader thread match each response line to
its request by ``id``, so any number of requests are in flight at once (from
threads of the sync API or tasks of the async one). :meth:`StoreProcess.call`
waits for the answer blocking, :meth:`StoreProcess.call_async` awaits it; both
share :meth:`send` and :meth:`outcome`, the one copy of the protocol's rules.

Whatever breaks the protocol is a :class:`~workmem.errors.HarnessError`, noted
for the conformance suite (:mod:`workmem.incidents`) where it is raised: the
process exited (``crash``; its last lines of stderr are quoted, secrets
masked), a line that is no response (``malformed``), no answer within the
timeout (``timeout``) or an error class workmem does not have
(``unknown_error_class``). After a crash, a malformed line or a timeout the
process is stopped and every later call raises the same harness error.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import itertools
import json
import subprocess
import threading
from collections.abc import Sequence
from typing import Any

from workmem import incidents
from workmem.errors import HarnessError, OperationNotSupportedError, StorageClosedError
from workmem.urls import mask_secrets

from .codec import decode_error, harness, malformed

__all__ = ["StoreProcess"]

_STDERR_LINES = 40


class StoreProcess:
    """A running store and its requests in flight (thread-safe)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        secrets: Sequence[str] = (),
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.timeout = timeout
        self._secrets = tuple(secrets)
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._broken: HarnessError | None = None
        self._closed = False
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        try:
            self._proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
            )
        except OSError as exc:
            raise harness(f"cannot start the store {argv[0]!r}: {exc}", "crash") from None
        self._stderr_reader = threading.Thread(target=self._read_stderr, name="workmem-wire-stderr", daemon=True)
        self._stderr_reader.start()
        self._reader = threading.Thread(target=self._read_stdout, name="workmem-wire-stdout", daemon=True)
        self._reader.start()

    # -- the two waits -------------------------------------------------------------------

    def call(self, op: str, args: dict[str, Any]) -> Any:
        """Send one request and wait for its answer, blocking."""
        request_id, future = self.send(op, args)
        try:
            reply = future.result(self.timeout)
        except concurrent.futures.TimeoutError:
            raise self._timed_out(op, request_id) from None
        return self.outcome(reply)

    async def call_async(self, op: str, args: dict[str, Any]) -> Any:
        """Send one request and await its answer."""
        request_id, future = self.send(op, args)
        try:
            reply = await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        except TimeoutError:
            raise self._timed_out(op, request_id) from None
        return self.outcome(reply)

    # -- the protocol, once -------------------------------------------------------------

    def send(self, op: str, args: dict[str, Any]) -> tuple[int, concurrent.futures.Future[dict[str, Any]]]:
        """Write one request line; the future its response line will resolve."""
        future: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        with self._lock:
            if self._closed:
                raise StorageClosedError("the wire store was closed")
            if self._broken is not None:  # met again, by this call (and the check making it)
                incidents.note("harness_error", str(self._broken))
                raise self._broken
            request_id = next(self._ids)
            self._pending[request_id] = future
        line = json.dumps({"id": request_id, "op": op, "args": args}, ensure_ascii=False, allow_nan=False) + "\n"
        try:
            with self._write_lock:
                assert self._proc.stdin is not None
                self._proc.stdin.write(line.encode())
                self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):  # the process is gone (the reader reports how)
            self._proc.poll()
        return request_id, future

    def outcome(self, reply: dict[str, Any]) -> Any:
        """The value of an ``ok`` response, or the workmem error an ``error`` response names, raised."""
        if "error" in reply:
            error = decode_error(reply["error"])
            if isinstance(error, OperationNotSupportedError):
                incidents.note("unsupported", str(error))
            raise error
        return reply["ok"]

    def _timed_out(self, op: str, request_id: int) -> HarnessError:
        error = harness(f"the store did not answer {op} (request {request_id}) in {self.timeout:g}s", "timeout")
        self._break(error)
        return error

    def _break(self, error: HarnessError) -> None:
        """Stop the process and fail every request in flight (and every later one) with ``error``."""
        with self._lock:
            if self._broken is None and not self._closed:
                self._broken = error
            pending, self._pending = list(self._pending.values()), {}
        for future in pending:
            if not future.done():
                future.set_exception(error)
        self._kill()

    def _kill(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    # -- the readers ---------------------------------------------------------------------

    def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        for raw in self._proc.stderr:
            self._stderr.append(raw.decode(errors="replace").rstrip())

    def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            try:
                reply = json.loads(raw)
            except ValueError:
                self._break(malformed(f"the store wrote a line that is not JSON: {self._shown(raw)}"))
                return
            problem = _shape_problem(reply)
            if problem is None:
                with self._lock:
                    future = self._pending.pop(reply["id"], None)
                if future is not None:
                    future.set_result(reply)
                    continue
                problem = f"it answers no request in flight (id {reply['id']!r})"
            self._break(malformed(f"the store wrote a line that is no response ({problem}): {self._shown(raw)}"))
            return
        code = self._proc.wait()
        self._stderr_reader.join(timeout=5)
        if not self._closed and self._broken is None:  # (a timeout or a malformed line killed it: said already)
            tail = self.stderr_tail()
            said = f": {tail}" if tail else ""
            self._break(harness(f"the store process exited with status {code}{said}", "crash"))

    def _shown(self, raw: bytes) -> str:
        return mask_secrets(raw.decode(errors="replace").rstrip()[:300], *self._secrets)

    def stderr_tail(self) -> str:
        """The store's last lines of standard error (secrets masked), for a harness error's message."""
        return mask_secrets(" | ".join(list(self._stderr)[-8:]), *self._secrets)[-2000:]

    # -- the end -------------------------------------------------------------------------

    def close(self, wait: float = 5.0) -> None:
        """Close the store's stdin (its sign to exit), wait up to ``wait`` seconds, then kill it. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            with self._write_lock:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(wait)
        except subprocess.TimeoutExpired:
            self._kill()
        self._reader.join(timeout=wait)


def _shape_problem(reply: Any) -> str | None:
    if not isinstance(reply, dict):
        return "not an object"
    if not isinstance(reply.get("id"), int) or isinstance(reply.get("id"), bool):
        return "no integer 'id'"
    if ("ok" in reply) == ("error" in reply):
        return "it needs exactly one of 'ok' and 'error'"
    return None
