"""A local stand-in for Upstash: the Upstash Redis REST API in front of a real ``redis-server``.

For tests, CI and development without an Upstash account::

    python -m workmem.bridge --redis redis://127.0.0.1:6379 --port 8079 --token TOKEN

then ``workmem.connect("upstash+http://127.0.0.1:8079?token=TOKEN")``. It speaks
the REST wire contract the ``upstash-redis`` client uses (``POST /``,
``/pipeline``, ``/multi-exec``, bearer token, optional base64 encoding) and
nothing more: no path-style commands, no pub/sub, no blocking commands. It is
a development tool, not a production proxy.
"""

from __future__ import annotations

from workmem.bridge.server import BridgeServer

__all__ = ["BridgeServer"]
