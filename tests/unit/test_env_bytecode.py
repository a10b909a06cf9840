"""Bytecode kept from one pairing env and put into the next one made from the same lock:
used when the source is the same file (uv links installed files from its cache), never
when it differs (edges/envrun.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from vllm_plugin_release.edges import envrun

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
    assert envrun.site_packages(tmp_path / "env1") == first
    kept = envrun.keep_pyc(first, store, skip=("plugin_pkg",))
    assert kept == 2  # pkg/__init__ and pkg/mod; the plugin's are left out
    assert not (store / "plugin_pkg").exists()
    second = _site(tmp_path / "env2", like=first)  # the same installed files, elsewhere
    assert envrun.restore_pyc(store, second) == 2
    inode = _pyc(second).stat().st_ino
    assert _import(second) == "first"
    # Python found the kept pyc current: it did not write a new one.
    assert _pyc(second).stat().st_ino == inode
    assert envrun.keep_pyc(second, store, skip=("plugin_pkg",)) == 0  # nothing new


def test_kept_bytecode_goes_only_beside_the_same_file(tmp_path: Path) -> None:
    first = _site(tmp_path / "env1")
    _import(first)
    store = tmp_path / "store"
    envrun.keep_pyc(first, store)
    # Other bytes of the same size, written in the same second: a pyc checked by mtime
    # and size alone would be taken for it. It is never put there.
    changed = _site(tmp_path / "env2", MODULE.replace("first", "other"))
    assert envrun.restore_pyc(store, changed) == 0
    assert not _pyc(changed).exists()
    assert _import(changed) == "other"
    # The same bytes in another file (a copy, not uv's link) get none either.
    copied = _site(tmp_path / "env3")
    assert envrun.restore_pyc(store, copied) == 0


def test_bytecode_of_an_older_source_is_not_kept(tmp_path: Path) -> None:
    site = _site(tmp_path / "env1")
    _import(site)
    (site / "pkg" / "mod.py").write_text("VALUE = 'edited later, longer'\n")
    store = tmp_path / "store"
    envrun.keep_pyc(site, store)
    assert (store / "pkg" / "__pycache__").is_dir()
    assert not (store / _pyc(site).relative_to(site)).exists()


def test_existing_bytecode_is_left_alone(tmp_path: Path) -> None:
    first = _site(tmp_path / "env1")
    _import(first)
    store = tmp_path / "store"
    envrun.keep_pyc(first, store)
    second = _site(tmp_path / "env2")
    _import(second)
    before = _pyc(second).read_bytes()
    assert envrun.restore_pyc(store, second) == 0
    assert _pyc(second).read_bytes() == before


def test_bytecode_for_another_python_is_not_put_back(tmp_path: Path) -> None:
    """A pure-Python file is the same file in every Python's environment (uv's cache):
    only the pyc names the target's interpreter reads are linked there."""
    first = _site(tmp_path / "env1")
    _import(first)
    store = tmp_path / "store"
    envrun.keep_pyc(first, store)
    other = store / "pkg" / "__pycache__" / "mod.cpython-310.pyc"
    other.write_bytes(_pyc(first).read_bytes())
    second = _site(tmp_path / "env2", like=first)
    assert envrun.restore_pyc(store, second) == 3  # pkg, pkg.mod, plugin_pkg
    assert not (second / "pkg" / "__pycache__" / "mod.cpython-310.pyc").exists()


def test_a_lock_first_pairing_env_takes_the_build_environment_bytecode(tmp_path: Path) -> None:
    """The build env is installed with its bytecode; torch and its dependencies are the
    same files in the pairing env, so their bytecode is linked there, not compiled again.
    An unfinished build env gives none."""
    from vllm_plugin_release.core.cache import ENV_COMPLETE, Cache
    from vllm_plugin_release.stages.pairing_env import bytecode_from_build_envs

    cache = Cache(tmp_path / ".vpr")
    build_env = cache.env_dir("build-core", "0" * 64)
    build_site = _site(build_env)
    _import(build_site)
    pairing = _site(tmp_path / "pair", like=build_site)
    assert bytecode_from_build_envs(cache, pairing) == 0  # not finished: no marker
    (build_env / ENV_COMPLETE).write_text("ok\n")
    assert bytecode_from_build_envs(cache, pairing) == 3
    assert _pyc(pairing).stat().st_ino == _pyc(build_site).stat().st_ino
    assert _import(pairing) == "first"
    assert _pyc(pairing).stat().st_ino == _pyc(build_site).stat().st_ino  # found current
    # Kept for the next env of the lock: not what the build env gives it anyway.
    assert envrun.keep_pyc(pairing, tmp_path / "store") == 0


def test_bytecode_of_another_python_than_vprs_is_kept_too(tmp_path: Path) -> None:
    """A pairing env on another CPython (the TT pairing's 3.10, vpr on 3.11): its pyc
    carry that Python's magic number. Before, `current` compared them with vpr's own, so
    nothing of such an env was ever kept and each new one compiled its imports again."""
    from tests.support import interpreter_or_skip

    other = "3.12" if sys.version_info[:2] == (3, 10) else "3.10"
    python = interpreter_or_skip(other).path
    site = tmp_path / "env1" / "lib" / f"python{other}" / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "mod.py").write_text(MODULE)
    subprocess.run(
        [python, "-c", "import pkg.mod"],
        env={**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": ""},
        check=True,
    )
    tag = "cpython-" + other.replace(".", "")
    assert (site / "pkg" / "__pycache__" / f"mod.{tag}.pyc").is_file()
    assert envrun.keep_pyc(site, tmp_path / "store") == 2
    assert (tmp_path / "store" / "pkg" / "__pycache__" / f"mod.{tag}.pyc").is_file()


def test_a_pyc_whose_head_is_not_its_tags_python_is_not_kept(tmp_path: Path) -> None:
    site = _site(tmp_path / "env1")
    _import(site)
    pyc = _pyc(site)
    other = "cpython-310" if sys.implementation.cache_tag != "cpython-310" else "cpython-311"
    renamed = pyc.with_name(f"mod.{other}.pyc")  # this Python's bytes under another's name
    pyc.rename(renamed)
    assert envrun.pyc_magic(other) is not None
    assert envrun.keep_pyc(site, tmp_path / "store", skip=("plugin_pkg",)) == 1  # __init__
    assert not (tmp_path / "store" / "pkg" / "__pycache__" / renamed.name).exists()
    assert envrun.pyc_magic("cpython-399") is None  # an unknown Python: nothing kept


def test_a_build_environment_of_another_python_is_not_walked(tmp_path: Path, monkeypatch) -> None:
    """A 3.10 build env's bytecode is never for a 3.11 pairing env (restore would find no
    pyc of its cache tag after walking every folder of it): it is left out unwalked."""
    from vllm_plugin_release.core.cache import ENV_COMPLETE, Cache
    from vllm_plugin_release.stages import pairing_env

    cache = Cache(tmp_path / ".vpr")
    same = cache.env_dir("build-core", "1" * 64)
    same_site = _site(same)
    _import(same_site)
    other = cache.env_dir("build-core", "2" * 64)
    other_site = other / "lib" / "python3.10" / "site-packages"
    other_site.mkdir(parents=True)
    for env in (same, other):
        (env / ENV_COMPLETE).write_text("ok\n")
    walked: list[Path] = []
    restore = envrun.restore_pyc

    def spy(store: Path, site: Path) -> int:
        walked.append(store)
        return restore(store, site)

    monkeypatch.setattr(pairing_env.envrun, "restore_pyc", spy)
    pairing = _site(tmp_path / "pair", like=same_site)
    assert pairing_env.bytecode_from_build_envs(cache, pairing) == 3
    assert walked == [same_site]
