"""The insert-only ``create_thread`` checks have teeth: check-then-act and replacing creates fail them."""

from __future__ import annotations

import dataclasses
import time
import uuid

from workmem import Thread, ThreadExistsError
from workmem.adapters.reference import ReferenceStorage
from workmem.conformance import PROFILES, run

FAST = dataclasses.replace(PROFILES["standard"], shrink_seconds=2)
CHECKS = {"create_thread_insert_only", "create_thread_race"}


class CheckThenAct(ReferenceStorage):
    """create_thread reads, pauses, then saves: what ``Memory.create_thread`` used to do."""

    def create_thread(self, thread: Thread) -> Thread:
        if self.get_thread(thread.id) is not None:
            raise ThreadExistsError(thread.id)
        time.sleep(0.005)
        return self.save_thread(thread)


class Replacing(ReferenceStorage):
    """create_thread replaces the same owner's thread (``save_thread``'s upsert)."""

    def create_thread(self, thread: Thread) -> Thread:
        return self.save_thread(thread)


def _verdicts(cls: type[ReferenceStorage]) -> dict[str, str]:
    name = f"creation-{cls.__name__}-{uuid.uuid4().hex}"
    report = run(lambda: cls(name), profile=FAST, only=CHECKS)
    return {c.name: c.status for c in report.checks}


def test_check_then_act_loses_the_race() -> None:
    assert _verdicts(CheckThenAct) == {"create_thread_insert_only": "passed", "create_thread_race": "failed"}


def test_replacing_create_fails_both() -> None:
    assert _verdicts(Replacing) == {"create_thread_insert_only": "failed", "create_thread_race": "failed"}


def test_reference_adapter_passes() -> None:
    assert _verdicts(ReferenceStorage) == dict.fromkeys(CHECKS, "passed")
