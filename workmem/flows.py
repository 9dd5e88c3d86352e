"""The former home of the adapter contract, the operations and the sync driver; it still imports.

It was split by role: the adapter contract is :mod:`workmem.hooks`, the operations
are :mod:`workmem.operations`, the sync driver is :mod:`workmem._drive`. An adapter
imports what it needs from :mod:`workmem.kit`. (The agent layer's operations are
:mod:`workmem.agent.operations`.)
"""

from __future__ import annotations

from workmem import operations as _operations
from workmem._drive import SuspendedInSyncFlow, iterate_sync, run_sync
from workmem.hooks import Capabilities, StorageHooks, read_record_page
from workmem.operations import *  # noqa: F403
from workmem.operations import resources_after, restore_thread, threads_after

resource_page = resources_after
"""The former name of :func:`workmem.operations.resources_after`."""
thread_page = threads_after
"""The former name of :func:`workmem.operations.threads_after`."""
replace_thread = restore_thread
"""The former name of :func:`workmem.operations.restore_thread`."""

__all__ = [
    *_operations.__all__,
    "Capabilities",
    "StorageHooks",
    "SuspendedInSyncFlow",
    "iterate_sync",
    "read_record_page",
    "replace_thread",
    "resource_page",
    "run_sync",
    "thread_page",
]
