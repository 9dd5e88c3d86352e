"""A local stand-in for Upstash: the Upstash Redis REST API in front of a real ``redis-server``.

For tests, CI and development without an Upstash account::

    python -m workmem.testing.upstash_bridge --redis redis://127.0.0.1:6379 --port 8079 --token TOKEN

then ``workmem.connect("upstash+http://127.0.0.1:8079?token=TOKEN")``. It speaks
the REST wire contract the ``upstash-redis`` client uses (``POST /``,
``/pipeline``, ``/multi-exec``, bearer token, optional base64 encoding) and
nothing more: no path-style commands, no pub/sub, no blocking commands. It is
a development tool, not a production proxy. From Python, :func:`spawn_bridge`
starts one as a child process (a free port, a random token) for tests and tools.
"""

from __future__ import annotations

from workmem.testing.upstash_bridge.process import BridgeProcess, spawn_bridge
from workmem.testing.upstash_bridge.server import BridgeServer

__all__ = ["BridgeProcess", "BridgeServer", "spawn_bridge"]
