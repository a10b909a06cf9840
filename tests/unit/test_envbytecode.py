"""Bytecode kept from one pairing env and put into the next one made from the same lock:
used when the source is the same file (uv links installed files from its cache), never
when it differs (edges/envbytecode.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from vllm_plugin_release.edges import envbytecode

MODULE = "VALUE = 'first'\n"


def _site(root: Path, text: str = MODULE, like: Path | None = None) -> Path:
    """A site-packages with pkg/mod.py; `like`: another one whose files it links, as uv
    links installed files from its cache into each environment."""
    site = root / "lib" / "python3.11" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "plugin_pkg").mkdir()
    for rel, content in (
        ("pkg/__init__.py", ""),
        ("pkg/mod.py", text),
        ("plugin_pkg/__init__.py", ""),
    ):
        if like is not None:
            os.link(like / rel, site / rel)
        else:
            (site / rel).write_text(content)
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
    second = _site(tmp_path / "env2", like=first)  # the same installed files, elsewhere
    assert envbytecode.restore(store, second) == 2
    inode = _pyc(second).stat().st_ino
    assert _import(second) == "first"
    # Python found the kept pyc current: it did not write a new one.
    assert _pyc(second).stat().st_ino == inode
    assert envbytecode.keep(second, store, skip=("plugin_pkg",)) == 0  # nothing new


def test_kept_bytecode_goes_only_beside_the_same_file(tmp_path: Path) -> None:
    first = _site(tmp_path / "env1")
    _import(first)
    store = tmp_path / "store"
    envbytecode.keep(first, store)
    # Other bytes of the same size, written in the same second: a pyc checked by mtime
    # and size alone would be taken for it. It is never put there.
    changed = _site(tmp_path / "env2", MODULE.replace("first", "other"))
    assert envbytecode.restore(store, changed) == 0
    assert not _pyc(changed).exists()
    assert _import(changed) == "other"
    # The same bytes in another file (a copy, not uv's link) get none either.
    copied = _site(tmp_path / "env3")
    assert envbytecode.restore(store, copied) == 0


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
