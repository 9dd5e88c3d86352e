"""``python -m workmem.testing.upstash_bridge``: serve the Upstash REST API in front of a redis-server.

Options fall back to environment variables: ``WORKMEM_BRIDGE_REDIS``
(default ``redis://127.0.0.1:6379``), ``WORKMEM_BRIDGE_HOST`` (``127.0.0.1``),
``WORKMEM_BRIDGE_PORT`` (``8079``; ``0`` picks a free port) and
``WORKMEM_BRIDGE_TOKEN`` (required; prefer it to ``--token``, which other users
of the machine can see in the process list). Once listening it prints one line,
``workmem bridge listening on http://HOST:PORT``, to stdout.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from types import FrameType

from workmem.testing.upstash_bridge.server import BridgeServer
from workmem.urls import mask_url

__all__ = ["main"]


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    env = os.environ
    parser = argparse.ArgumentParser(
        prog="python -m workmem.testing.upstash_bridge", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--redis", default=env.get("WORKMEM_BRIDGE_REDIS", "redis://127.0.0.1:6379"))
    parser.add_argument("--host", default=env.get("WORKMEM_BRIDGE_HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(env.get("WORKMEM_BRIDGE_PORT", "8079")))
    parser.add_argument("--token", default=env.get("WORKMEM_BRIDGE_TOKEN"))
    parser.add_argument("--verbose", action="store_true", help="log every request to stderr (token masked)")
    args = parser.parse_args(argv)
    if not args.token:
        parser.error("a token is required: --token or WORKMEM_BRIDGE_TOKEN")
    server = BridgeServer((args.host, args.port), redis_url=args.redis, token=args.token, verbose=args.verbose)
    signal.signal(signal.SIGTERM, _stop)
    print(f"workmem bridge listening on {server.url} -> {mask_url(args.redis)}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
