"""A real libSQL server (``sqld``) on a free loopback port, started and stopped by pid (tests and ``bench``).

The binary is ``WORKMEM_SQLD``, else ``.cache/sqld/sqld`` of the checkout as
``python ci/install_sqld.py`` leaves it (:func:`find_sqld`). :class:`Sqld` runs one
server, its database in a temporary directory of its own, removed by :meth:`Sqld.close`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

__all__ = ["CACHED", "Sqld", "find_sqld", "free_port"]

CACHED = Path(__file__).resolve().parents[2] / ".cache" / "sqld" / "sqld"
"""Where ``python ci/install_sqld.py`` puts the binary in a checkout."""


def find_sqld() -> tuple[Path | None, str]:
    """``(the sqld executable, where it was looked for)``; ``None`` when there is none."""
    given = os.environ.get("WORKMEM_SQLD")
    path = Path(given) if given else CACHED
    where = f"WORKMEM_SQLD={given}" if given else str(CACHED)
    return (path if path.is_file() and os.access(path, os.X_OK) else None), where


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Sqld:
    """One ``sqld`` process on a free loopback port, its database in a directory of its own."""

    def __init__(self, binary: Path, *, jwt_public_key: bytes | None = None, port: int | None = None) -> None:
        self.binary = binary
        self.directory = Path(tempfile.mkdtemp(prefix="wm_sqld_"))
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"
        """Where it listens: ``127.0.0.1:PORT``."""
        self.http_url = f"http://{self.address}"
        """Its HTTP API (``/health``; what the ``libsql`` driver connects to)."""
        self.url = f"libsql://{self.address}?tls=0"
        """workmem's URL for it: ``libsql://127.0.0.1:PORT?tls=0``."""
        self.key_file: Path | None = None
        if jwt_public_key is not None:
            self.key_file = self.directory / "jwt.pem"
            self.key_file.write_bytes(jwt_public_key)
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.directory / "sqld.log"
        self.start()

    def start(self, timeout: float = 15.0) -> None:
        command = [str(self.binary), "--db-path", str(self.directory / "data.sqld")]
        command += ["--http-listen-addr", self.address, "--no-welcome"]
        if self.key_file is not None:
            command += ["--auth-jwt-key-file", str(self.key_file)]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.directory)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"sqld exited with {self.process.returncode}: {self.log.read_text()[-2000:]}")
            if self.healthy():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sqld did not answer /health within {timeout} s: {self.log.read_text()[-2000:]}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.http_url}/health", timeout=1) as answer:
                return bool(answer.status == 200)
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: the server gone at once, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 10 s), by pid."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def drop_all(self) -> None:
        """Drop every table, index and trigger of the server's database (a test's leftovers)."""
        import libsql

        conn = libsql.connect(self.http_url)
        rows = conn.execute("SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'").fetchall()
        for kind, name in rows:
            if kind in ("table", "trigger"):  # indexes go with their tables
                conn.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
        conn.commit()
