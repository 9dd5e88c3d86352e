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
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from servers import skip_or_fail

from workmem.testing import sqld as _server
from workmem.testing.sqld import CACHED

__all__ = ["CACHED", "Sqld", "fresh_sqld_url", "jwt_keys", "shared_sqld", "sign_jwt", "sqld_binary"]

BACKEND = "sqld"


def sqld_binary() -> Path:
    """The ``sqld`` executable, or a loud skip (a failure when ``sqld`` is a required backend)."""
    path, where = _server.find_sqld()
    if path is None:
        skip_or_fail(BACKEND, f"no sqld binary at {where}: run `python ci/install_sqld.py` (or set WORKMEM_SQLD)")
    return path


class Sqld(_server.Sqld):
    """:class:`workmem.testing.sqld.Sqld` on the binary :func:`sqld_binary` finds (or a loud skip)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(sqld_binary(), **options)


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
