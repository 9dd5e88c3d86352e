"""A real libSQL server (``sqld``) for the remote-libSQL tests: found, started, stopped by pid.

The binary is ``WORKMEM_SQLD``, else ``.cache/sqld/sqld`` as ``python ci/install_sqld.py``
(which ``.ci/run`` runs) leaves it. Without it the tests skip loudly as backend ``sqld``,
which fails instead when ``WORKMEM_REQUIRE_BACKENDS`` names ``sqld``.

:func:`shared_sqld` is one server per test session (no auth); sqld serves one database
here, so tests share it one after another, each emptying it afterwards
(:func:`fresh_sqld_url`). Tests that kill, restart or authenticate a server start
their own :class:`Sqld`, as do the Mastra interop tests (``@mastra/libsql``'s
concurrent start deadlocked on a server shared with other tests).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from servers import skip_or_fail

__all__ = ["Sqld", "jwt_keys", "shared_sqld", "sign_jwt", "sqld_binary"]

BACKEND = "sqld"
ROOT = Path(__file__).resolve().parent.parent
CACHED = ROOT / ".cache" / "sqld" / "sqld"


def sqld_binary() -> Path:
    """The ``sqld`` executable, or a loud skip (a failure when ``sqld`` is a required backend)."""
    given = os.environ.get("WORKMEM_SQLD")
    path = Path(given) if given else CACHED
    if not (path.is_file() and os.access(path, os.X_OK)):
        where = f"WORKMEM_SQLD={given}" if given else str(CACHED)
        skip_or_fail(BACKEND, f"no sqld binary at {where}: run `python ci/install_sqld.py` (or set WORKMEM_SQLD)")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Sqld:
    """One ``sqld`` process on a free loopback port, its database in a directory of its own."""

    def __init__(self, *, jwt_public_key: bytes | None = None, port: int | None = None) -> None:
        self.binary = sqld_binary()
        self.directory = Path(tempfile.mkdtemp(prefix="wm_sqld_"))
        self.port = port or free_port()
        self.key_file: Path | None = None
        if jwt_public_key is not None:
            self.key_file = self.directory / "jwt.pem"
            self.key_file.write_bytes(jwt_public_key)
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.directory / "sqld.log"
        self.start()

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        """workmem's URL for it: ``libsql://127.0.0.1:PORT?tls=0``."""
        return f"libsql://127.0.0.1:{self.port}?tls=0"

    def start(self, timeout: float = 15.0) -> None:
        command = [str(self.binary), "--db-path", str(self.directory / "data.sqld")]
        command += ["--http-listen-addr", f"127.0.0.1:{self.port}", "--no-welcome"]
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


_shared: Sqld | None = None
_shared_lock = threading.Lock()


def shared_sqld() -> Sqld:
    """The test session's sqld without auth (started on first use, stopped by pid when the process exits)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.process is None or _shared.process.poll() is not None:
            _shared = Sqld()
            atexit.register(_shared.close)
        return _shared


@contextlib.contextmanager
def fresh_sqld_url() -> Iterator[str]:
    """``libsql://127.0.0.1:PORT?tls=0`` of the session's sqld, its database emptied after the test."""
    server = shared_sqld()
    try:
        yield server.url
    finally:
        server.drop_all()


def jwt_keys() -> tuple[bytes, object]:
    """``(public key as SPKI PEM, private key)``: a fresh Ed25519 pair for ``--auth-jwt-key-file``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return public, private


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def sign_jwt(private_key: object, claims: dict[str, object]) -> str:
    """An EdDSA JWT of ``claims`` signed with ``private_key`` (sqld takes ``{"a": "rw"}``, ``exp``)."""
    header = _b64(json.dumps({"alg": "EdDSA", "typ": "JWT"}).encode())
    body = _b64(json.dumps(claims).encode())
    signature = private_key.sign(f"{header}.{body}".encode())  # type: ignore[attr-defined]
    return f"{header}.{body}.{_b64(signature)}"
