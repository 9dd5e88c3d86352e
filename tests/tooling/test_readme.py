"""The code blocks of README.md, CONTRIBUTING.md and every page under docs/ are run or checked.

* A ``python`` block that is a whole program (it starts with an import and opens
  ``"file:agent.db"``, or an in-process ``"memory://..."`` store) runs: all of them, README
  first, then the pages in path order, one after another and again, in one folder (one ``agent.db``).
* Any other ``python`` block is a fragment (it names a server, a model or your own objects):
  it must compile (top-level ``await`` allowed, as in a notebook), its imports must import,
  and every ``workmem.NAME`` it uses must exist.
* ``bash`` blocks: every ``workmem`` command names a real subcommand and options it accepts,
  every ``pip install`` names extras the project defines, every ``python -m`` a module that
  exists, every ``pytest --workmem-…`` option one the plugin adds.
* ``json`` and ``toml`` blocks parse.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import workmem

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks(language: str, pages: list[Path] = PAGES) -> list[tuple[Path, str]]:
    return [
        (page, body)
        for page in pages
        for lang, body in FENCE.findall(page.read_text(encoding="utf-8"))
        if lang == language
    ]


def _is_program(block: str) -> bool:
    return block.startswith(("import ", "from ")) and ('"file:agent.db"' in block or '"memory://' in block)


def _runnable_blocks() -> list[tuple[Path, str]]:
    """The blocks that are whole programs: they import what they use and open ``file:agent.db`` or ``memory://``."""
    return [(page, block) for page, block in _blocks("python") if _is_program(block)]


def _fragments() -> list[tuple[Path, str]]:
    return [(page, block) for page, block in _blocks("python") if not _is_program(block)]


def _name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def test_the_pages_have_the_runnable_blocks_this_test_expects() -> None:
    found: dict[str, list[str]] = {}
    for page, block in _runnable_blocks():
        found.setdefault(_name(page), []).append(block)
    expected = {
        "README.md": ["memory.create_thread"],
        "docs/agent.md": ["memory.create_thread", "AsyncMemory.open"],
        "docs/async.md": ["workmem.connect_async"],
        "docs/backends/libsql.md": ["storage.query"],
        "docs/getting-started.md": ["storage.save_thread", "memory.create_thread"],
        "docs/history.md": ["working_memory_history", "delete_resource"],
        "docs/storage.md": ["storage.save_thread"],
    }
    assert sorted(found) == sorted(expected)
    for name, needles in expected.items():
        assert len(found[name]) == len(needles), name
        assert all(needle in block for needle, block in zip(needles, found[name], strict=True)), name


def test_runnable_blocks_run_in_sequence_and_twice(tmp_path: Path) -> None:
    for run in range(2):
        for page, block in _runnable_blocks():
            done = subprocess.run(
                [sys.executable, "-c", block], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
            )
            assert done.returncode == 0, f"run {run + 1}, a block of {_name(page)} failed:\n{block}\n{done.stderr}"
    assert (tmp_path / "agent.db").exists()


def _workmem_names(tree: ast.AST) -> set[str]:
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "workmem"
    }


@pytest.mark.parametrize(("page", "block"), _fragments(), ids=lambda value: getattr(value, "name", "block"))
def test_fragments_compile_import_and_name_what_exists(page: Path, block: str) -> None:
    code = compile(block, _name(page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    assert code is not None
    tree = ast.parse(block)
    imports = [node for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)]
    exec(compile(ast.Module(body=imports, type_ignores=[]), _name(page), "exec"), {})  # the imports import
    missing = sorted(name for name in _workmem_names(tree) if not hasattr(workmem, name))
    assert not missing, f"{_name(page)} uses workmem.{missing}, which does not exist"


def test_a_fragment_naming_what_does_not_exist_fails_the_check() -> None:
    with pytest.raises(AssertionError, match="no_such_thing"):
        test_fragments_compile_import_and_name_what_exists(README, "import workmem\nworkmem.no_such_thing()\n")
    with pytest.raises(ImportError):
        test_fragments_compile_import_and_name_what_exists(README, "from workmem import NoSuchThing\n")


def _commands() -> list[tuple[Path, list[str]]]:
    """Each command of the bash blocks, split into words (``&&``, ``;`` and ``|`` separate commands)."""
    commands = []
    for page, block in _blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():  # a line ending in \ goes on on the next
            words = shlex.split(line, comments=True)
            command: list[str] = []
            for word in [*words, "&&"]:
                if word in ("&&", ";", "|", "||"):
                    if command:
                        commands.append((page, command))
                    command = []
                else:
                    command.append(word.strip("()"))
    return commands


def _without_env(command: list[str]) -> list[str]:
    while command and re.fullmatch(r"[A-Z_]+=.*", command[0]):
        command = command[1:]
    return command


def _cli_help(subcommand: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "workmem", *subcommand.split(), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_workmem_commands_of_the_pages_exist_with_their_options() -> None:
    seen = 0
    helps: dict[str, str] = {}
    for page, command in _commands():
        command = _without_env(command)
        if not command or command[0] != "workmem":
            continue
        words = 3 if command[1:3] == ["conformance", "table"] else 2  # a command of two words
        subcommand = " ".join(command[1:words])
        helps.setdefault(subcommand, _cli_help(subcommand))
        options = [word.split("=", 1)[0] for word in command[words:] if word.startswith("--")]
        unknown = [option for option in options if not re.search(rf"{re.escape(option)}\b", helps[subcommand])]
        assert not unknown, f"{_name(page)}: workmem {subcommand} has no {unknown}"
        seen += 1
    assert seen >= 8


def test_the_pip_installs_and_modules_of_the_pages_exist() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project["optional-dependencies"])
    installs = modules = 0
    for page, command in _commands():
        command = _without_env(command)
        if command[:2] == ["pip", "install"]:
            for word in command[2:]:
                named = re.search(r"(?:workmem|^\.)\[([^\]]+)\]", word)
                if named:
                    unknown = set(named.group(1).split(",")) - extras
                    assert not unknown, f"{_name(page)}: no extra {sorted(unknown)} in pyproject.toml"
                    installs += 1
        if len(command) > 2 and command[0] in ("python", "python3") and command[1] == "-m":
            assert importlib.util.find_spec(command[2]) is not None, f"{_name(page)}: no module {command[2]}"
            modules += 1
    assert installs >= 6 and modules >= 3


def test_the_pytest_options_of_the_pages_are_the_plugins() -> None:
    from workmem.conformance import pytest_plugin

    class Group:
        def __init__(self) -> None:
            self.names: set[str] = set()

        def addoption(self, *names: str, **_: object) -> None:
            self.names.update(names)

        def getgroup(self, *_: object, **__: object) -> Group:
            return self

        def addini(self, *_: object, **__: object) -> None:
            pass

    parser = Group()
    pytest_plugin.pytest_addoption(parser)  # type: ignore[arg-type]
    used = [
        (page, word.split("=", 1)[0])
        for page, command in _commands()
        for word in _without_env(command)
        if word.startswith("--workmem-")
    ]
    assert used
    assert all(option in parser.names for _, option in used), (used, parser.names)


@pytest.mark.parametrize("language", ["json", "toml"])
def test_data_blocks_parse(language: str) -> None:
    blocks = _blocks(language)
    assert blocks
    for page, block in blocks:
        try:
            json.loads(block) if language == "json" else tomllib.loads(block)
        except ValueError as error:
            raise AssertionError(f"a {language} block of {_name(page)} does not parse: {error}") from error


def test_the_mastra_versions_the_docs_name_are_those_of_the_lock() -> None:
    lock = json.loads((ROOT / "interop" / "package-lock.json").read_text(encoding="utf-8"))["packages"]
    pinned = json.loads((ROOT / "interop" / "package.json").read_text(encoding="utf-8"))["dependencies"]
    page = (DOCS / "testing.md").read_text(encoding="utf-8")
    section = page.split("### Mastra interop (the published packages)", 1)[1]
    named = dict(re.findall(r"^\| `([^`]+)`[^|]* \| ([\d.]+) \|$", section.split("\n### ", 1)[0], re.MULTILINE))
    assert named == {name: lock[f"node_modules/{name}"]["version"] for name in pinned}
    assert all(pinned[name] == version for name, version in named.items()), "package.json pins exact versions"


def test_the_readme_is_a_front_page() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)
    commands = FENCE.findall("\n".join(lines) + "\n")[0][1].splitlines()
    assert commands[0].endswith("pip install -e '.[libsql,conformance]' && workmem conformance")
    assert commands[1] == "pip install -e '.[dev]' && python -m pytest"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -q -e '.[dev]'" in ci and "\nworkmem conformance\n" in ci and "\npython -m pytest" in ci


def test_every_page_is_in_the_site_navigation() -> None:
    import yaml

    def pages(entries: list[object]) -> list[str]:
        found: list[str] = []
        for entry in entries:
            if isinstance(entry, str):
                found.append(entry)
            elif isinstance(entry, dict):
                for value in entry.values():
                    found.extend(pages(value) if isinstance(value, list) else [value])
        return found

    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    on_disk = {page.relative_to(DOCS).as_posix() for page in DOCS.rglob("*.md")}
    assert set(pages(nav)) == on_disk


def test_the_site_shows_the_docstrings_sphinx_roles_as_code() -> None:
    import importlib.util as util

    spec = util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    rendered = "see :class:<code>~workmem.storage.MemoryStorage</code> and :func:<code>workmem.connect</code>."
    assert hooks.sphinx_roles_as_code(rendered) == "see <code>MemoryStorage</code> and <code>workmem.connect</code>."
    assert "docs/hooks.py" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a name inside a module (its parent is no package)
        return False


def test_every_workmem_name_the_pages_give_exists() -> None:
    """A dotted name in backticks (`workmem.changes.replaced_thread`) resolves: no page names a removed one."""
    files = {"workmem.db"}  # a file name, not a module
    missing = []
    for page in [*PAGES, ROOT / "CHANGELOG.md"]:
        for name in sorted(set(re.findall(r"`(workmem(?:\.[A-Za-z_]\w*)+)", page.read_text(encoding="utf-8"))) - files):
            parts = name.split(".")
            found = next(i for i in range(len(parts), 0, -1) if _is_module(".".join(parts[:i])))
            target: object = importlib.import_module(".".join(parts[:found]))
            for attribute in parts[found:]:
                target = getattr(target, attribute, None)
            if target is None:
                missing.append(f"{_name(page)}: {name}")
    assert not missing, missing
