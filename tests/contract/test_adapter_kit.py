"""``workmem.kit`` is the one import an adapter author needs, with ``workmem.errors``.

The example adapter of ``docs/adapters.md`` is held to it (its imports from workmem
are read from its source), every name the kit exports resolves, and the kit's own
helpers behave as documented: ``import_driver`` names what to install, ``backoff``
stays within its bounds.
"""

from __future__ import annotations

import ast
import statistics
import sys
from pathlib import Path

import pytest

import workmem.kit as kit
from workmem.errors import MissingDriverError, ThreadOwnershipError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "adapter_dict" / "workmem_dictstore" / "__init__.py"


def _workmem_imports(source: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "workmem":
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names if alias.name.split(".")[0] == "workmem")
    return modules


def test_the_example_adapter_imports_the_kit_and_the_errors_only() -> None:
    assert _workmem_imports(EXAMPLE) == {"workmem.kit", "workmem.errors"}


ADAPTERS = Path(__file__).resolve().parents[2] / "workmem" / "adapters"


def test_the_kit_has_every_name_an_adapter_takes_from_the_core() -> None:
    """What an adapter of workmem imports from the core (not its own package, the errors or the kit) is in the kit,
    so each import line can become ``from workmem.kit import ...``; the Mastra scheme table is the wire's own."""
    outside: dict[str, list[str]] = {}
    for path in ADAPTERS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("workmem.")):
                continue
            if node.module.startswith(("workmem.adapters", "workmem.errors", "workmem.kit", "workmem.registry")):
                continue
            for alias in node.names:
                if alias.name not in kit.__all__:
                    outside.setdefault(f"{node.module}.{alias.name}", []).append(path.name)
    assert outside == {}


def test_every_name_the_kit_exports_resolves() -> None:
    missing = [name for name in kit.__all__ if not hasattr(kit, name)]
    assert missing == []
    # the contract an adapter implements is among them
    for name in ("MemoryStorage", "StorageHooks", "Capabilities", "ListQuery", "ScopeTarget", "check_owner"):
        assert name in kit.__all__


def test_the_kit_has_one_owner_rule() -> None:
    import workmem.changes

    assert not hasattr(workmem.changes, "owned")
    thread = kit.Thread(id="t", resource_id="a")
    assert kit.check_owner(thread, None) is thread
    assert kit.check_owner(thread, "a") is thread
    with pytest.raises(ThreadOwnershipError):
        kit.check_owner(thread, "b")


def test_import_driver_names_a_workmem_extra_or_the_given_requirement() -> None:
    assert kit.import_driver("json", "postgres") is sys.modules["json"]
    with pytest.raises(MissingDriverError, match=r"pip install 'workmem\[postgres\]'"):
        kit.import_driver("no_such_driver_module_xyz", "postgres")
    with pytest.raises(MissingDriverError, match=r"pip install 'redis>=5'") as caught:
        kit.import_driver("no_such_driver_module_xyz", install="redis>=5")
    assert "workmem[" not in str(caught.value)


@pytest.mark.parametrize("arguments", [{}, {"extra": "postgres", "install": "redis"}])
def test_import_driver_takes_exactly_one_hint(arguments: dict[str, str]) -> None:
    with pytest.raises(TypeError, match=r"one of extra= .* or install="):
        kit.import_driver("json", **arguments)


def test_backoff_is_jittered_exponential_and_capped() -> None:
    for attempt in range(40):
        pauses = [kit.backoff(attempt, first=0.001, cap=0.05) for _ in range(200)]
        assert all(0 <= pause <= min(0.05, 0.001 * 2**attempt) for pause in pauses)
        assert len(set(pauses)) > 1  # jittered, not in step
    # it grows: later attempts wait longer on average, until the cap
    assert statistics.mean(kit.backoff(1) for _ in range(2000)) < statistics.mean(kit.backoff(5) for _ in range(2000))
