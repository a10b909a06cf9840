"""Bytecode kept from one pairing env and put into the next one made from the same lock:
used when the source has the same bytes, never when it differs (edges/envbytecode.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from vllm_plugin_release.edges import envbytecode

MODULE = "VALUE = 'first'\n"


def _site(root: Path, text: str = MODULE) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "mod.py").write_text(text)
    (site / "plugin_pkg").mkdir()
    (site / "plugin_pkg" / "__init__.py").write_text("")
    return site


def _import(site: Path) -> str:
    """Import pkg.mod and plugin_pkg in a new interpreter (it writes their bytecode)."""
    done = subprocess.run(
        [sys.executable, "-c", "import plugin_pkg, pkg.mod as m; print(m.VALUE)"],
        env={**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _pyc(site: Path, module: str = "mod") -> Path:
    return site / "pkg" / "__pycache__" / f"{module}.{sys.implementation.cache_tag}.pyc"


def test_bytecode_is_kept_and_used_in_a_new_environment(tmp_path: Path) -> None:
    first = _site(tmp_path / "env1")
    assert _import(first) == "first"
    store = tmp_path / "store"
    assert envbytecode.site_packages(tmp_path / "env1") == first
    kept = envbytecode.keep(first, store, skip=("plugin_pkg",))
    assert kept == 2  # pkg/__init__ and pkg/mod; the plugin's are left out
    assert not (store / "plugin_pkg").exists()
    second = _site(tmp_path / "env2")  # same bytes, another path and mtime
    os.utime(second / "pkg" / "mod.py", (1, 1))
    assert envbytecode.restore(store, second) == 2
    inode = _pyc(second).stat().st_ino
    assert _import(second) == "first"
    # Python found the kept pyc valid: it did not write a new one.
    assert _pyc(second).stat().st_ino == inode
    assert _pyc(second).read_bytes()[4:8] == (0b11).to_bytes(4, "little")  # checked hash


def test_kept_bytecode_is_not_used_for_a_changed_source(tmp_path: Path) -> None:
    first = _site(tmp_path / "env1")
    _import(first)
    store = tmp_path / "store"
    envbytecode.keep(first, store)
    # Same size, other bytes: a timestamp check could be fooled, the hash is not.
    changed = _site(tmp_path / "env2", MODULE.replace("first", "other"))
    envbytecode.restore(store, changed)
    inode = _pyc(changed).stat().st_ino
    assert _import(changed) == "other"
    assert _pyc(changed).stat().st_ino != inode  # compiled again, written anew


def test_bytecode_of_an_older_source_is_not_kept(tmp_path: Path) -> None:
    site = _site(tmp_path / "env1")
    _import(site)
    (site / "pkg" / "mod.py").write_text("VALUE = 'edited later, longer'\n")
    store = tmp_path / "store"
    envbytecode.keep(site, store)
    assert (store / "pkg" / "__pycache__").is_dir()
    assert not (store / _pyc(site).relative_to(site)).exists()


def test_existing_bytecode_is_left_alone(tmp_path: Path) -> None:
    first = _site(tmp_path / "env1")
    _import(first)
    store = tmp_path / "store"
    envbytecode.keep(first, store)
    second = _site(tmp_path / "env2")
    _import(second)
    before = _pyc(second).read_bytes()
    assert envbytecode.restore(store, second) == 0
    assert _pyc(second).read_bytes() == before
