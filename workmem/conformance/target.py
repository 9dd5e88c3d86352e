"""What the suite runs against: a URL or a factory of connections to one backend namespace.

Every check opens its connections through :class:`Target`, so the concurrency
checks get one connection per worker. A plain ``memory://`` URL is given a
fresh random name, so that its connections share one in-process store.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable

from workmem.registry import connect
from workmem.storage import MemoryStorage
from workmem.urls import mask_secrets, scheme_of, url_secrets

__all__ = ["Factory", "Target", "TargetLike", "masked"]

Factory = Callable[[], MemoryStorage]
"""A zero-argument callable returning a NEW connection to the same backend namespace."""

TargetLike = str | Factory
"""What :func:`workmem.conformance.run` accepts."""


def _url_secrets(url: str) -> list[str]:
    return url_secrets(url)


def masked(url: str, text: str | None = None) -> str:
    """``text`` (default: ``url`` itself, as written) with the URL's password and secret query values masked."""
    return mask_secrets(url if text is None else text, *_url_secrets(url))


class Target:
    """Opens connections to one backend namespace and remembers them, to close them all at the end."""

    def __init__(self, target: TargetLike) -> None:
        if isinstance(target, str):
            self.given_url: str | None = target
            if target.rstrip("/") in ("memory:", "memory:/", "memory://"):
                target = f"memory://conformance-{uuid.uuid4().hex}"
            self.url: str | None = target
            self._factory: Factory = lambda: connect(target)
        elif callable(target):
            self.given_url = self.url = None
            self._factory = target
        else:
            raise TypeError(f"expected a URL or a zero-argument factory, got {type(target).__name__}")
        self._secrets = _url_secrets(self.url) if self.url else []
        self._open: list[MemoryStorage] = []

    def open(self) -> MemoryStorage:
        """A new connection (closed by :meth:`close_all`)."""
        storage = self._factory()
        if not isinstance(storage, MemoryStorage):
            raise TypeError(f"the factory returned {type(storage).__name__}, not a MemoryStorage")
        self._open.append(storage)
        return storage

    def close_all(self) -> None:
        """Close every connection this target opened; errors on close are ignored."""
        while self._open:
            with contextlib.suppress(Exception):  # closing is best effort at the end of a check
                self._open.pop().close()

    @property
    def masked_url(self) -> str | None:
        """The URL as given, with passwords and tokens masked; ``None`` for a factory."""
        return None if self.given_url is None else masked(self.given_url)

    @property
    def scheme(self) -> str | None:
        return None if self.url is None else scheme_of(self.url)

    def mask(self, text: str) -> str:
        """``text`` with this target's secrets masked."""
        return mask_secrets(text, *self._secrets)
