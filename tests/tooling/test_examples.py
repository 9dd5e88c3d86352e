"""The scripts in ``examples/`` run as a user would run them, and print what they claim."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from backends import backend_url
from servers import skip_or_fail

__all__ = ["backend_url"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(params=[pytest.param("default", marks=pytest.mark.backend("libsql")), "memory"])
def backend_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment to run an example in: its embedded libSQL default, or ``memory://``."""
    env = {k: v for k, v in os.environ.items() if k != "WORKMEM_URL"}
    if request.param == "memory":
        env["WORKMEM_URL"] = "memory://"
    else:
        try:
            importlib.import_module("workmem.adapters.libsql.storage")
        except ImportError as exc:
            skip_or_fail("libsql", f"the libSQL adapter (the examples' default) is not available ({exc})")
    return env


def _run(name: str, env: dict[str, str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout.splitlines()


def test_template_example(backend_env: dict[str, str]) -> None:
    _check_template(_run("template_memory.py", backend_env))


def _check_template(lines: list[str]) -> None:
    assert lines[0] == "tool: updateWorkingMemory"
    assert "user: My name is Sam and I'm from Berlin" in lines
    assert "user: I'm normally in CET" in lines
    assert lines.count("  updateWorkingMemory -> replaced") == 2
    # The memory message is refreshed each turn, never stacked: always 2 system messages.
    assert [line for line in lines if line.startswith("  prompt:")] == [
        "  prompt: 3 messages, 2 system",
        "  prompt: 5 messages, 2 system",
    ]
    assert "unfilled template -> ignored" in lines
    assert lines[-4:] == [
        "Name: Sam",
        "Location: Berlin",
        "Timezone: CET",
        "system message shows the data fenced: True",
    ]


def test_schema_example(backend_env: dict[str, str]) -> None:
    _check_schema(_run("schema_memory.py", backend_env))


def _check_schema(lines: list[str]) -> None:
    assert lines == [
        "tool parameters: ['memory']",
        "first facts: merged",
        '  memory = {"city": "Berlin", "contact": {"email": "sam@example.com"}, "interests": ["chess"], "name": "Sam"}',
        "nested merge: merged",
        '  memory = {"city": "Berlin", "contact": {"email": "sam@example.com", "phone": "+49 30 1234567"}, '
        '"interests": ["chess"], "name": "Sam"}',
        "null deletes: merged",
        '  memory = {"contact": {"email": "sam@example.com", "phone": "+49 30 1234567"}, "interests": ["chess"], '
        '"name": "Sam"}',
        "array replaced: merged",
        '  memory = {"contact": {"email": "sam@example.com", "phone": "+49 30 1234567"}, '
        '"interests": ["go", "climbing"], "name": "Sam"}',
        """invalid: error: the update does not match the schema: at $.interests: "go" is not of type 'array'. """
        "Nothing was stored.",
        '  memory = {"contact": {"email": "sam@example.com", "phone": "+49 30 1234567"}, '
        '"interests": ["go", "climbing"], "name": "Sam"}',
    ]


def test_scopes_example(backend_env: dict[str, str]) -> None:
    _check_scopes(_run("scopes.py", backend_env))


def _check_scopes(lines: list[str]) -> None:
    assert lines == [
        r"resource scope, tuesday sees: '# User\n- **Name**: Sam\n- **Diet**: vegetarian\n'",
        r"thread scope, monday sees: '# Conversation\n- **Topic**: trip to Rome\n'",
        "thread scope, tuesday sees: None",
        "resource memory mentions Rome: False",
        "thread memory mentions Sam: False",
        r"initial (resource scope) on the resource: '# User\n- **Name**: Kim\n- **Diet**:\n'",
        "thread metadata keeps a copy: False",
        r"initial (thread scope) in thread metadata: '# Conversation\n- **Topic**: jazz\n'",
        "ownership: thread 'monday' is not owned by resource 'user-kim'",
        "sub-agent workmem-sub-agent:researcher:user-sam, first delegation found: None",
        "sub-agent workmem-sub-agent:researcher:user-sam, second delegation found: "
        r"'# User\n- **Name**: Sam\n- **Diet**: (first look-up)\n'",
        r"parent memory unchanged: '# User\n- **Name**: Sam\n- **Diet**: vegetarian\n'",
    ]


def test_examples_run_in_sequence_and_again_on_one_database(backend_url: str) -> None:
    """On a persistent ``$WORKMEM_URL`` each example cleans up after the runs before it, its own and the others'."""
    env = {**os.environ, "WORKMEM_URL": backend_url}
    checks = {"template_memory.py": _check_template, "schema_memory.py": _check_schema, "scopes.py": _check_scopes}
    for _ in range(2):
        for name, check in checks.items():
            check(_run(name, env))
