"""A store without history or erasure, for tests of what meets one: the reference adapter declaring neither."""

from __future__ import annotations

import uuid
from typing import ClassVar

import workmem
from workmem.adapters.reference import ReferenceStorage
from workmem.hooks import Capabilities

__all__ = ["NoHistoryStorage", "no_history_url"]


class NoHistoryStorage(ReferenceStorage):
    """``memory://`` as a third-party adapter without the optional hooks would be: no history, no erasure."""

    capabilities: ClassVar[Capabilities] = Capabilities(cross_process_atomic=False, persistent=False)
    async_adapter = None  # connect_async runs it on worker threads

    async def _history(self, *args: object) -> list[workmem.MemoryVersion]:
        raise workmem.OperationNotSupportedError("working memory history")

    async def _insert_versions(self, *args: object) -> int:
        raise workmem.OperationNotSupportedError("working memory history")


_SCHEME = f"nohistory-{uuid.uuid4().hex[:8]}"
workmem.register(_SCHEME, f"{__name__}:NoHistoryStorage")


def no_history_url() -> str:
    """A fresh named store of :class:`NoHistoryStorage` (shared by every connection to this URL)."""
    return f"{_SCHEME}://{uuid.uuid4().hex}"
