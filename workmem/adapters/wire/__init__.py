"""Stores written in any language, run as a child process over JSON lines: ``wire:COMMAND``.

See ``docs/wire-protocol.md``. :class:`WireStorage` (sync) and
:class:`AsyncWireStorage` (async) start the command, shake hands with it and
send it every hook of the contract as a request; the ``mastra+*`` schemes
(:mod:`workmem.adapters.wire.mastra`) run the TypeScript Mastra stores through
the shim in ``interop/``.
"""

from __future__ import annotations

from .hooks import PROTOCOL, AsyncWireStorage, Launch, WireHooks, WireStorage, command_of

__all__ = ["PROTOCOL", "AsyncWireStorage", "Launch", "WireHooks", "WireStorage", "command_of"]
