"""The conformance suite against the in-process reference adapter, and the pytest plugin that runs it.

``TestMemoryConformance`` is how every backend's test module runs the suite.
The ``pytester`` tests run pytest inside pytest to check the plugin's three
promises: ``--workmem-url`` / ``WORKMEM_CONFORMANCE_URL`` run the suite, no URL adds
nothing, and a subclass cannot replace a standard check except by ``xfail``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from workmem.conformance import ConformanceTests, all_checks

pytest_plugins = ["pytester"]

CHECK_COUNT = len(all_checks())
OPTIONAL = 2  # cross_process_atomic, persistence: capabilities ReferenceStorage does not declare


class TestMemoryConformance(ConformanceTests):
    @pytest.fixture
    def workmem_target(self) -> str:
        return "memory://"  # the runner gives each check a fresh random name


class TestMemoryConformanceAsync(TestMemoryConformance):
    """The same checks through the async API (``workmem.connect_async``), each call awaited on the suite's loop."""

    workmem_api = "async"


def test_one_collected_test_per_check() -> None:
    names = {name for name in dir(TestMemoryConformance) if name.startswith("test_")}
    assert names == {f"test_{c.name}" for c in all_checks()}


def test_url_option_runs_the_suite(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--workmem-url", "memory://", "--workmem-profile", "quick", "-v")
    result.assert_outcomes(passed=CHECK_COUNT - OPTIONAL, skipped=OPTIONAL)
    result.stdout.fnmatch_lines(["*TestWorkmemConformance::test_stateful PASSED*"])


def test_env_var_runs_the_suite_next_to_given_paths(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    monkeypatch.setenv("WORKMEM_CONFORMANCE_URL", "memory://")
    result = pytester.runpytest("test_mine.py", "--workmem-profile", "quick", "-k", "mine or stateful")
    result.assert_outcomes(passed=2)


def test_env_var_never_takes_the_projects_own_tests_out(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    monkeypatch.setenv("WORKMEM_CONFORMANCE_URL", "memory://")
    result = pytester.runpytest("--workmem-profile", "quick", "-v", "-k", "mine or stateful")  # no paths
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_mine PASSED*", "*test_stateful PASSED*"])
    header = next(line for line in result.stdout.lines if line.startswith("workmem conformance suite:"))
    assert header == "workmem conformance suite: memory:// (from WORKMEM_CONFORMANCE_URL), profile quick, sync API"


def test_api_option_runs_the_suite_through_the_async_api(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        "--workmem-url", "memory://", "--workmem-api", "async", "--workmem-profile", "quick", "-v", "-k", "stateful"
    )
    result.assert_outcomes(passed=1)
    header = next(line for line in result.stdout.lines if line.startswith("workmem conformance suite:"))
    assert header == "workmem conformance suite: memory:// (from --workmem-url), profile quick, async API"


_ASYNC_FACTORY = """
import uuid

import pytest
from workmem.adapters.reference import AsyncReferenceStorage
from workmem.conformance import ConformanceTests

class TestAsyncFactory(ConformanceTests):
    workmem_profile = "quick"

    @pytest.fixture
    def workmem_target(self):
        name = uuid.uuid4().hex
        return lambda: AsyncReferenceStorage(name)
"""


def test_the_api_option_and_variable_reach_every_conformance_class(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An async factory works only where the API is async: proof the option (or variable) picked the API."""
    monkeypatch.delenv("WORKMEM_CONFORMANCE_API", raising=False)
    pytester.makepyfile(test_async_factory=_ASYNC_FACTORY)
    result = pytester.runpytest("-k", "owner_immutable")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not a MemoryStorage (an async storage: run with api='async')*"])
    result = pytester.runpytest("-k", "owner_immutable", "--workmem-api", "async")
    result.assert_outcomes(passed=1)
    assert "workmem conformance suite: async API (from --workmem-api)" in result.stdout.lines
    monkeypatch.setenv("WORKMEM_CONFORMANCE_API", "async")
    result = pytester.runpytest("-k", "owner_immutable")
    result.assert_outcomes(passed=1)
    assert "workmem conformance suite: async API (from WORKMEM_CONFORMANCE_API)" in result.stdout.lines
    monkeypatch.setenv("WORKMEM_CONFORMANCE_API", "both")
    result = pytester.runpytest("-k", "owner_immutable")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*WORKMEM_CONFORMANCE_API*api must be one of*"])


def test_a_class_pins_its_api(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKMEM_CONFORMANCE_API", raising=False)
    pinned = _ASYNC_FACTORY.replace('workmem_profile = "quick"', 'workmem_profile = "quick"\n    workmem_api = "async"')
    pytester.makepyfile(test_pinned=pinned)
    result = pytester.runpytest("-k", "owner_immutable")
    result.assert_outcomes(passed=1)
    # the output names what the class runs, though no option or variable set it
    assert "workmem conformance: test_pinned.py::TestAsyncFactory, profile quick, async API" in result.stdout.lines
    result = pytester.runpytest("-k", "owner_immutable", "--workmem-api", "sync")
    assert "workmem conformance: test_pinned.py::TestAsyncFactory, profile quick, async API" in result.stdout.lines
    pytester.makepyfile(
        test_bad_api="""
from workmem.conformance import ConformanceTests

class TestBadApi(ConformanceTests):
    workmem_api = "both"
"""
    )
    result = pytester.runpytest("test_bad_api.py")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*TestBadApi.workmem_api: api must be one of*"])


def test_an_applications_workmem_url_means_nothing_to_the_plugin(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The examples read $WORKMEM_URL as the application's storage: it must not turn a project's run into the suite."""
    pytester.makepyfile(test_mine="def test_mine():\n    assert True\n")
    monkeypatch.setenv("WORKMEM_URL", "memory://")
    monkeypatch.delenv("WORKMEM_CONFORMANCE_URL", raising=False)
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1)
    assert "conformance" not in result.stdout.str().lower()


def test_without_a_url_the_plugin_adds_nothing(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WORKMEM_CONFORMANCE_URL", raising=False)
    pytester.makepyfile(test_own="def test_own():\n    assert True\n")
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1)
    assert "conformance" not in result.stdout.str().lower().replace("workmem-conformance", "")


def test_a_subclass_may_use_a_factory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_factory="""
import uuid
import subprocess
import sys

import pytest
from workmem.adapters.reference import ReferenceStorage
from workmem.conformance import ConformanceTests

class TestFactory(ConformanceTests):
    workmem_profile = "quick"

    @pytest.fixture
    def workmem_target(self):
        name = uuid.uuid4().hex
        return lambda: ReferenceStorage(name)
"""
    )
    result = pytester.runpytest("-k", "owner or pagination")
    result.assert_outcomes(passed=3)


def test_overriding_a_check_in_the_class_body_fails_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_cheat="""
from workmem.conformance import ConformanceTests

class TestCheat(ConformanceTests):
    def test_no_lost_updates_resource(self):
        pass
"""
    )
    result = pytester.runpytest()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*overrides the standard conformance check(s) test_no_lost_updates_resource*"])


def test_swapping_a_check_after_the_class_is_made_fails_collection(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_sneaky="""
from workmem.conformance import ConformanceTests

class TestSneaky(ConformanceTests):
    pass

TestSneaky.test_validation = lambda self: None
"""
    )
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*replaces the standard conformance check(s) test_validation*xfail*"])


def test_xfail_needs_a_known_check_and_a_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_bad_xfail="""
from workmem.conformance import ConformanceTests

class TestNoReason(ConformanceTests):
    xfail = {"validation": ""}
"""
    )
    result = pytester.runpytest()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*TestNoReason.xfail*validation*needs a reason*"])


def test_an_explicit_xfail_turns_a_failing_check_into_xfailed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_gap="""
import uuid
import subprocess
import sys

import pytest
from workmem.adapters.reference import ReferenceStorage
from workmem.conformance import ConformanceTests

class StripsNul(ReferenceStorage):
    def set_working_memory(self, content, **kw):
        super().set_working_memory(content.replace("\\x00", ""), **kw)

class TestGap(ConformanceTests):
    workmem_profile = "quick"
    xfail = {"validation": "strips NUL instead of rejecting it (issue 99)"}

    @pytest.fixture
    def workmem_target(self):
        name = uuid.uuid4().hex
        return lambda: StripsNul(name)
"""
    )
    result = pytester.runpytest("-k", "validation", "-rx")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*strips NUL instead of rejecting it (issue 99)*"])


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)


def test_run_needs_no_pytest() -> None:
    proc = _python(
        "import sys; sys.modules['pytest'] = None\n"
        "from workmem.conformance import run\n"
        "report = run('memory://', profile='quick', only=['stateful', 'validation'])\n"
        "print(report.passed, [c.status for c in report.checks])"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True ['passed', 'passed']"


def test_missing_hypothesis_names_the_conformance_extra() -> None:
    proc = _python(
        "import sys; sys.modules['hypothesis'] = None\n"
        "import workmem.conformance as c\n"
        "try:\n"
        "    c.run('memory://')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("MissingDriverError") and "workmem[conformance]" in proc.stdout
