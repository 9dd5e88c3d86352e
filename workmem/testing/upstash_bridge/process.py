"""Running the bridge as a child process: ``spawn_bridge(redis_url)`` for tests, benchmarks and tools."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["BridgeProcess", "spawn_bridge"]


@dataclass
class BridgeProcess:
    """A bridge started by :func:`spawn_bridge`: where it listens, its token, the Redis behind it."""

    url: str
    """``http://127.0.0.1:PORT``."""
    token: str
    redis_url: str
    process: subprocess.Popen[str]

    def storage_url(self, prefix: str = "") -> str:
        """The ``upstash+http://…`` URL that opens workmem's Upstash adapter on this bridge."""
        url = f"upstash+{self.url}?token={self.token}"
        return f"{url}&prefix={prefix}" if prefix else url

    def stop(self) -> None:
        """Terminate the bridge (kill it if it does not stop within 10 s) and close its pipes."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def spawn_bridge(redis_url: str, *, token: str | None = None, port: int = 0) -> BridgeProcess:
    """Start ``python -m workmem.testing.upstash_bridge`` (``port=0``: a free one) and return once it listens.

    The token travels in the environment, never on the command line.
    """
    token = token or secrets.token_urlsafe(24)
    process = subprocess.Popen(
        [sys.executable, "-m", "workmem.testing.upstash_bridge", "--redis", redis_url, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "WORKMEM_BRIDGE_TOKEN": token},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on " not in line:
        process.kill()
        _, err = process.communicate(timeout=10)
        raise RuntimeError(f"the bridge did not start: {line.strip()!r} {err.strip()[-500:]!r}")
    return BridgeProcess(line.split("listening on ", 1)[1].split()[0], token, redis_url, process)
