"""What the suite runs against: a URL or a factory of connections to one backend namespace.

Every check opens its connections through :class:`Target`, so the concurrency
checks get one connection per worker. A plain ``memory://`` URL is given a
fresh random name, so that its connections share one in-process store.

With ``api="async"`` each connection is opened with
:func:`workmem.connect_async` (or the async factory) and handed to the checks
as an :class:`~workmem.conformance.apis.AsyncStorageView`; all the connections
of one check share one event loop, on a thread of its own, stopped by
:meth:`Target.close_all`.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable

from workmem.aio import AsyncMemoryStorage
from workmem.errors import OperationNotSupportedError
from workmem.history import check_history
from workmem.registry import connect, connect_async
from workmem.storage import MemoryStorage
from workmem.urls import mask_secrets, mask_url, scheme_of, url_secrets

from .apis import Api, AsyncStorageView, EventLoopThread, check_api, opened

__all__ = ["AsyncFactory", "Factory", "History", "Target", "TargetLike", "masked"]

History = bool | int | None
"""``connect``'s ``history``: ``None`` off, ``True`` every version, N the newest N of each working memory."""

Factory = Callable[[], MemoryStorage]
"""A zero-argument callable returning a NEW connection to the same backend namespace."""

AsyncFactory = Callable[[], AsyncMemoryStorage | Awaitable[AsyncMemoryStorage]]
"""For ``api="async"``: a zero-argument callable (or coroutine function) giving a NEW async connection."""

TargetLike = str | Factory | AsyncFactory
"""What :func:`workmem.conformance.run` accepts."""


def _url_secrets(url: str) -> list[str]:
    return url_secrets(url)


def _record_history(storage: MemoryStorage | AsyncMemoryStorage, history: History) -> None:
    """Set a factory's connection to record by ``history``, as ``connect(url, history=...)`` does."""
    policy = check_history(history)
    if policy is not None:
        if not storage.capabilities.history:
            raise OperationNotSupportedError(f"working memory history on {type(storage).__name__}")
        storage.history = policy


def masked(url: str, text: str | None = None) -> str:
    """``text`` with the URL's password and secret query values masked; without ``text``, ``url`` itself, masked.

    The URL is masked where each secret stands in it (:func:`~workmem.urls.mask_url`), so a
    short token leaves the rest alone; other text by :func:`~workmem.urls.mask_secrets`.
    """
    return mask_url(url) if text is None else mask_secrets(text, *_url_secrets(url))


class Target:
    """Opens connections to one backend namespace and remembers them, to close them all at the end."""

    def __init__(self, target: TargetLike, api: Api = "sync") -> None:
        self.api: Api = check_api(api)
        """The API the checks drive: ``sync``, or ``async`` through :class:`AsyncStorageView`."""
        if isinstance(target, str):
            self.given_url: str | None = target
            if target.rstrip("/") in ("memory:", "memory:/", "memory://"):
                target = f"memory://conformance-{uuid.uuid4().hex}"
            self.url: str | None = target
            url = target
            self._factory: Callable[[History], object] = (
                (lambda history: connect(url, history=history))
                if api == "sync"
                else (lambda history: connect_async(url, history=history))
            )
        elif callable(target):
            self.given_url = self.url = None
            factory = target
            self._factory = lambda history: factory()
        else:
            raise TypeError(f"expected a URL or a zero-argument factory, got {type(target).__name__}")
        self._secrets = _url_secrets(self.url) if self.url else []
        self._open: list[MemoryStorage] = []
        self._loop: EventLoopThread | None = None

    def open(self, *, history: History = None) -> MemoryStorage:
        """A new connection (closed by :meth:`close_all`); with the async API, a view of one.

        ``history`` is ``connect``'s (``True``, or the number of versions to keep): a URL is
        opened with it; a factory's connection is set to record by it, as ``connect`` does.
        """
        if self.api == "sync":
            storage = self._factory(history)
            if not isinstance(storage, MemoryStorage):
                kind = " (an async storage: run with api='async')" if isinstance(storage, AsyncMemoryStorage) else ""
                raise TypeError(f"the factory returned {type(storage).__name__}, not a MemoryStorage{kind}")
            _record_history(storage, history)
        else:
            if self._loop is None or not self._loop.running:
                self._loop = EventLoopThread()
            factory, loop = self._factory, self._loop

            async def make() -> AsyncMemoryStorage:
                return await opened(factory(history))

            inner = loop.run(make())
            _record_history(inner, history)
            storage = AsyncStorageView(inner, loop)
        self._open.append(storage)
        return storage

    def close_all(self) -> None:
        """Close every connection this target opened (errors on close are ignored), then stop the event loop."""
        while self._open:
            with contextlib.suppress(Exception):  # closing is best effort at the end of a check
                self._open.pop().close()
        if self._loop is not None:
            self._loop.stop()
            self._loop = None

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
