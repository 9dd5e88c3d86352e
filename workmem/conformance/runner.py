"""Running the checks against one target and collecting a :class:`~workmem.conformance.report.Report`."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime

import workmem
from workmem.incidents import Incident, watching
from workmem.timestamps import to_iso

from .apis import Api, adapter_module, adapter_name, check_api
from .profiles import DEFAULT_PROFILE, Profile, get_profile, shrink_budget
from .registry import Check, CheckContext, CheckSkipped, all_checks, get_check
from .report import CheckResult, Report, Status
from .target import Target, TargetLike

__all__ = ["describe_failure", "run", "run_check"]

MAX_REASON = 8000

Progress = Callable[[Check, CheckResult | None], None]
"""Called with ``(check, None)`` when a check starts and ``(check, result)`` when it ends."""


FLAKY_NOTE = (
    "The adapter broke the contract as shown below, but the same steps passed when Hypothesis replayed them: "
    "the adapter's behaviour depends on timing or on state outside the example. This is a failure of the adapter; "
    "the first failure is the one to read."
)


def _is_flaky(exc: BaseException) -> bool:
    try:
        from hypothesis.errors import Flaky
    except ImportError:  # pragma: no cover - the checks need Hypothesis
        return False
    return isinstance(exc, Flaky)


def describe_failure(exc: BaseException) -> str:
    """The exception, its notes (Hypothesis puts the falsifying example there) and any sub-exceptions.

    A failure Hypothesis could not reproduce on replay ("Flaky") is still the
    adapter's failure: its description says so first, then shows what failed.
    """
    if _is_flaky(exc):
        found = [sub for sub in getattr(exc, "exceptions", ()) if not _is_flaky(sub)]
        lines = [FLAKY_NOTE] + [describe_failure(sub) for sub in found]
        lines += [str(n) for n in getattr(exc, "__notes__", ())]
        lines.append(f"(Hypothesis: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
        text = "\n".join(lines)
        return text if len(text) <= MAX_REASON else text[: MAX_REASON - 20] + "\n... (truncated)"
    lines = [f"{type(exc).__name__}: {exc}".rstrip()]
    lines += [str(n) for n in getattr(exc, "__notes__", ())]
    if isinstance(exc, BaseExceptionGroup):
        for index, sub in enumerate(exc.exceptions, 1):
            lines.append(f"[{index}] " + describe_failure(sub))
    elif exc.__cause__ is not None and not isinstance(exc, AssertionError):
        lines.append(f"caused by {type(exc.__cause__).__name__}: {exc.__cause__}")
    text = "\n".join(lines)
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 20] + "\n... (truncated)"


def _overruled(status: Status, reason: str | None, incidents: list[Incident]) -> tuple[Status, str | None]:
    """What a check that met a harness error or an unsupported operation is reported as, whatever it concluded.

    A harness error (the store broke the wire protocol) says nothing about the contract: the
    check is neither passed nor failed. Nor is one that needed an operation the store declared
    unsupported (unless it was skipped before it got there).
    """
    for kind in ("harness_error", "unsupported"):
        found = list(dict.fromkeys(i.message for i in incidents if i.kind == kind))  # distinct, first first
        if found and (kind == "harness_error" or status != "skipped"):
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            return kind, found[0] + more
    return status, reason


def _execute(check: Check, target: Target, profile: Profile, xfail: str | None) -> CheckResult:
    started = time.perf_counter()
    status: Status
    ctx = CheckContext(target, profile)
    with watching() as incidents:
        try:
            if check.capability is not None and not getattr(ctx.capabilities, check.capability):
                status, reason = "skipped", f"the adapter does not declare capabilities.{check.capability}"
            else:
                with shrink_budget(profile.shrink_seconds):
                    check.func(ctx)
                status, reason = "passed", None
        except CheckSkipped as exc:
            if check.required:
                status, reason = "failed", f"a required check cannot be skipped: {exc}"
            else:
                status, reason = "skipped", str(exc)
        except Exception as exc:
            status, reason = "failed", describe_failure(exc)
        finally:
            target.close_all()
    status, reason = _overruled(status, reason, incidents)
    if xfail is not None:
        if status == "failed":
            status, reason = "xfailed", f"{xfail} [failure: {(reason or '').splitlines()[0]}]"
        elif status == "passed":
            reason = f"declared xfail ({xfail}) but passed"
    return CheckResult(
        check.name,
        check.title,
        check.required,
        status,
        None if reason is None else target.mask(reason),
        round(time.perf_counter() - started, 3),
    )


def _check_xfail(xfail: Mapping[str, str] | None, names: Iterable[str]) -> dict[str, str]:
    xfail = dict(xfail or {})
    known = set(names)
    for name, reason in xfail.items():
        if name not in known:
            raise ValueError(f"xfail names an unknown check {name!r}")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError(f"xfail of {name!r} needs a reason")
    return xfail


def run_check(
    check: Check | str,
    target: TargetLike,
    *,
    profile: str | Profile = DEFAULT_PROFILE,
    xfail: str | None = None,
    api: Api = "sync",
) -> CheckResult:
    """Run one check against a fresh :class:`Target` (what each pytest test does), through ``api``."""
    check = get_check(check) if isinstance(check, str) else check
    profile = get_profile(profile)
    return _execute(check, Target(target, check_api(api)), profile, xfail)


def run(
    target: TargetLike,
    *,
    profile: str | Profile = DEFAULT_PROFILE,
    xfail: Mapping[str, str] | None = None,
    only: Iterable[str] | None = None,
    progress: Progress | None = None,
    api: Api = "sync",
) -> Report:
    """Run the conformance suite against ``target`` (a URL, or a factory of new connections).

    ``api="async"`` runs the same checks on the async API: connections are
    opened with :func:`workmem.connect_async` (or ``target`` is an async
    factory) and each call is awaited on an event loop of the suite's own.
    ``xfail`` maps check names to the reason they are expected to fail;
    ``only`` restricts the run to some checks; ``progress`` is told when each
    check starts and ends. Connection failures raise before any check runs.
    """
    api = check_api(api)
    chosen = get_profile(profile)
    checks = all_checks()
    xfails = _check_xfail(xfail, (c.name for c in checks))
    if only is not None:
        wanted = set(only)
        unknown = wanted - {c.name for c in checks}
        if unknown:
            raise ValueError(f"unknown checks: {', '.join(sorted(unknown))}")
        checks = [c for c in checks if c.name in wanted]
    target_obj = Target(target, api)
    started_at = datetime.now(UTC)
    started = time.perf_counter()
    try:
        first = target_obj.open()
        adapter, module = adapter_name(first), adapter_module(first)
    finally:
        target_obj.close_all()
    results: list[CheckResult] = []
    budget: float | None = chosen.shrink_total_seconds
    for one in checks:
        if progress is not None:
            progress(one, None)
        sized = chosen
        if budget is not None:  # what failed checks have not used up of the run's shrinking time
            sized = dataclasses.replace(chosen, shrink_seconds=max(0, min(chosen.shrink_seconds, math.floor(budget))))
        result = _execute(one, target_obj, sized, xfails.get(one.name))
        if budget is not None and result.status in ("failed", "xfailed"):
            budget -= result.duration_s
        results.append(result)
        if progress is not None:
            progress(one, result)
    return Report(
        workmem_version=workmem.__version__,
        backend=target_obj.scheme or module.rsplit(".", 1)[-1],
        adapter=adapter,
        url=target_obj.masked_url,
        profile=chosen.name,
        started_at=to_iso(started_at),
        duration_s=round(time.perf_counter() - started, 3),
        checks=results,
        api=api,
    )
