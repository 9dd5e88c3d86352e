"""The state machine's reopens, watched from inside a persistent adapter: each one is read back through the
reopened connection, and none repeats a reopen of a state nothing has written to since."""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

import workmem
from workmem.adapters.reference import ReferenceStorage
from workmem.conformance import PROFILES, run

_WRITES = (
    "save_thread",
    "create_thread",
    "update_thread",
    "delete_thread",
    "save_resource",
    "update_resource",
    "set_working_memory",
    "merge_working_memory",
)
_READS = ("get_resource", "list_threads")


class WatchedStorage(ReferenceStorage):
    """The reference adapter claiming persistence (its connections share one named store), logging its calls."""

    capabilities = workmem.Capabilities(cross_process_atomic=False, persistent=True)
    log: ClassVar[list[tuple[str, int]]] = []

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.serial = len(self.log)  # not id(): a closed connection's id may be a later one's
        self.log.append(("open", self.serial))


def _logged(name: str, kind: str) -> Any:
    method = getattr(ReferenceStorage, name)

    def call(self: WatchedStorage, *args: Any, **kwargs: Any) -> Any:
        self.log.append((kind, self.serial))
        return method(self, *args, **kwargs)

    return call


def _close(self: WatchedStorage) -> None:
    self.log.append(("close", self.serial))
    ReferenceStorage.close(self)


WatchedStorage.close = _close  # type: ignore[method-assign]
for _name in _WRITES:
    setattr(WatchedStorage, _name, _logged(_name, "write"))
for _name in _READS:
    setattr(WatchedStorage, _name, _logged(_name, "read"))


def test_each_reopen_is_read_back_through_the_new_connection_and_never_repeats_an_unwritten_state() -> None:
    WatchedStorage.log.clear()
    name = f"watched-{uuid.uuid4().hex}"
    report = run(lambda: WatchedStorage(name), profile=PROFILES["standard"], only=["stateful"])
    assert report.passed, report.format_failures()
    log = WatchedStorage.log
    # The machine's two connections are opened one after the other (the runner may open one and close it first).
    start = next(i for i in range(len(log) - 1) if log[i][0] == log[i + 1][0] == "open")
    opens = [i for i, (kind, _) in enumerate(log) if kind == "open" and i >= start]
    slots = {log[opens[0]][1]: 0, log[opens[1]][1]: 1}
    reopened_at = {0: -1, 1: -1}
    last_write = -1
    for at in opens[2:]:
        last_write = max([i for i in range(last_write + 1, at) if log[i][0] == "write"], default=last_write)
        closed, conn = log[at - 1], log[at][1]
        assert closed[0] == "close", f"a connection opened without one closed first: {log[at - 3 : at + 1]}"
        slot = slots[conn] = slots[closed[1]]
        assert reopened_at[slot] < last_write, f"connection {slot} reopened with nothing written since it was"
        reopened_at[slot] = at
        first = log[at + 1 : at + 7]  # three get_resource and three list_threads
        assert first == [("read", conn)] * 6, f"after a reopen the state was read through {first}, not {conn}"
    assert len(opens) - 2 >= 10, f"only {len(opens) - 2} reopens: the test would prove nothing"
