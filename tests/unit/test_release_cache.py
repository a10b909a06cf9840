"""flows/releasecache: what `vpr release --graph` says each stage has cached. A fresh cache
has nothing; an entry made under the key the stage itself computes (its own key
function) is found; a changed input (the lock's bytes, the env's wheels) loses it; a key
that needs what is not in the cache yet is unknown; and drawing never fetches, builds
or writes."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.buildspec.model import PluginSourceSpec, PluginSpec, SdistSource, Spec
from vllm_plugin_release.core import records
from vllm_plugin_release.core.cache import Cache, sha256_file
from vllm_plugin_release.core.stagegraph import CACHED, NOT_CACHED, cache_states
from vllm_plugin_release.edges import guard
from vllm_plugin_release.edges.fetch import cached_source_tree
from vllm_plugin_release.edges.plugin_source import present, resolve
from vllm_plugin_release.flows.release import Options, Outcome, graph
from vllm_plugin_release.flows.releasecache import Probes
from vllm_plugin_release.stages import build_core, build_guard, build_plugin
from vllm_plugin_release.stages.wheelbuild import runner_for


def _spec_with_own_locks(tmp_path: Path) -> Spec:
    """The reference spec reading copies of its build and env locks (mutated by tests)."""
    spec = load_spec(REFERENCE_SPEC)
    build_lock, env_lock = tmp_path / "build-lock.txt", tmp_path / "env-lock.txt"
    shutil.copy(spec.resolve(spec.build.constraints), build_lock)
    env_lock.write_text("# env lock\n")
    build = dataclasses.replace(spec.build, constraints=str(build_lock))
    env = dataclasses.replace(spec.env, constraints=str(env_lock))
    return dataclasses.replace(spec, build=build, env=env)


def _wheel_entry(stage_dir: Path, record_name: str, wheel: str) -> dict[str, object]:
    """A wheel stage's cache entry as the stage leaves it: the wheel and its record."""
    stage_dir.mkdir(parents=True)
    (stage_dir / wheel).write_bytes(b"wheel " + wheel.encode())
    record = {"wheel": {"filename": wheel, "sha256": sha256_file(stage_dir / wheel)}}
    (stage_dir / record_name).write_text(json.dumps(record))
    return record


def _keep_core(spec: Spec, cache: Cache) -> dict[str, object]:
    lock_sha = sha256_file(spec.resolve(spec.build.constraints))
    key = build_core.stage_key(spec, lock_sha, runner_for(spec, cache).isolate)
    return _wheel_entry(cache.stage_dir(build_core.STAGE, key), build_core.RECORD, "vllm.whl")


def _keep_guard(cache: Cache) -> None:
    key = build_guard.stage_key(build_guard.source_digest(guard.guard_source()))
    _wheel_entry(cache.stage_dir(build_guard.STAGE, key), build_guard.RECORD, "guard.whl")


def _states(spec: Spec, cache: Cache, dist: Path) -> dict[str, str]:
    return cache_states(graph(spec, Options(cache=cache, dist_root=dist), Outcome()))


def test_a_fresh_cache_has_nothing_cached_and_probing_writes_nothing(tmp_path: Path) -> None:
    spec = _spec_with_own_locks(tmp_path)
    states = _states(spec, Cache(tmp_path / "c"), tmp_path / "d")
    assert states["build-core"] == states["build-guard"] == NOT_CACHED
    assert states["build-plugin"].startswith("unknown: needs the plugin checkout")
    assert states["env"].startswith("unknown: needs build-core's output")
    assert states["conform"] == "unknown: needs env's output"
    assert CACHED not in states.values()
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()


def test_an_entry_under_today_s_key_is_cached_and_a_changed_lock_loses_it(
    tmp_path: Path,
) -> None:
    spec = _spec_with_own_locks(tmp_path)
    cache = Cache(tmp_path / "c")
    _keep_core(spec, cache)
    _keep_guard(cache)
    states = _states(spec, cache, tmp_path / "d")
    assert states["build-core"] == states["build-guard"] == CACHED
    lock = spec.resolve(spec.build.constraints)
    lock.write_bytes(lock.read_bytes() + b"\n# one byte more\n")  # a new lock: a new key
    states = _states(spec, cache, tmp_path / "d")
    assert states["build-core"] == NOT_CACHED
    assert states["build-guard"] == CACHED  # the guard does not depend on the lock
    lock.unlink()  # what a probe cannot read is unknown, with the reason, never an error
    assert _states(spec, cache, tmp_path / "d")["build-core"].startswith("unknown: no build lock")


def test_the_env_is_cached_only_for_today_s_wheels_and_lock(tmp_path: Path) -> None:
    spec = _spec_with_own_locks(tmp_path)
    cache, dist = Cache(tmp_path / "c"), tmp_path / "d" / spec.name
    core = _keep_core(spec, cache)
    plugin = {"wheel": {"filename": "plugin.whl", "sha256": "ab" * 32}}
    dist.mkdir(parents=True)
    (dist / records.BUILD_CORE).write_text(json.dumps(core))
    (dist / records.BUILD_PLUGIN).write_text(json.dumps(plugin))
    probes = Probes(spec, cache, dist.parent)
    assert probes.env().startswith("unknown: no env record")
    env_dir = tmp_path / "c" / "envs" / "pair"
    env_dir.mkdir(parents=True)
    (env_dir / ".vpr-env.json").write_text("{}")
    env = {
        "runner": "cpu",
        "python": str(env_dir / "bin" / "python"),
        "lock_sha256": sha256_file(spec.resolve(spec.env_constraints)),
        "core_wheel": core["wheel"],
        "plugin_wheel": plugin["wheel"],
    }
    (dist / records.ENV).write_text(json.dumps(env))
    assert probes.env() == CACHED
    assert Probes(spec, cache, dist.parent, runner="hardware").env() == NOT_CACHED
    spec.resolve(spec.env_constraints).write_text("# another env lock\n")
    assert probes.env() == NOT_CACHED
    (dist / records.BUILD_CORE).write_text(json.dumps({"wheel": {"sha256": "00" * 32}}))
    assert probes.env().startswith("unknown: needs build-core's output")


def test_the_graph_shows_what_is_cached_and_still_fetches_and_writes_nothing(
    tmp_path: Path,
) -> None:
    spec = load_spec(REFERENCE_SPEC)
    cache = Cache(tmp_path / "c")
    _keep_core(spec, cache)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    base = ["release", "--spec", str(REFERENCE_SPEC), "--cache-dir", str(cache.root)]
    done = vpr(*base, "--dist", str(tmp_path / "d"), "--graph", "--no-publish")
    assert " 2. build-core [cached]  <- lock, build-env" in done.stdout
    assert " 4. build-guard [not cached]  <- build-core" in done.stdout
    dot = vpr(*base, "--dist", str(tmp_path / "d"), "--graph", "dot").stdout
    assert '"build-core" [style=filled, label="build-core\\ncached", fillcolor=palegreen];' in dot
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_build_plugin_is_known_once_the_plugin_tree_and_core_source_are_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec_with_own_locks(tmp_path)
    cache = Cache(tmp_path / "c")
    probes = Probes(spec, cache, tmp_path / "d")
    assert present(spec, cache) is None  # nothing exported yet
    assert probes.build_plugin().startswith("unknown: needs the plugin checkout")
    made = resolve(spec, cache)  # the export build-plugin makes (local, a small tree)
    found = present(spec, cache)
    assert found is not None and (found.root, found.record()) == (made.root, made.record())
    assert probes.build_plugin().startswith("unknown: needs the core source")
    assert cached_source_tree(spec, cache) is None
    assert isinstance(spec.core.source, SdistSource)
    (cache.src_dir(spec.core.source.sha256) / "vllm-x").mkdir(parents=True)
    assert cached_source_tree(spec, cache) == cache.src_dir(spec.core.source.sha256) / "vllm-x"
    # The lock's check against the core's requirements reads the real source: the
    # stand-in tree has none, so the lock is taken as the stage would find it.
    lock = spec.resolve(spec.build.constraints)
    monkeypatch.setattr(build_plugin, "lock_for", lambda spec, root, tree: lock)
    assert probes.build_plugin() == NOT_CACHED
    key = build_plugin.stage_key(spec, runner_for(spec, cache), made, sha256_file(lock))
    _wheel_entry(cache.stage_dir(build_plugin.STAGE, key), build_plugin.RECORD, "plugin.whl")
    assert probes.build_plugin() == CACHED
    lock.write_bytes(lock.read_bytes() + b"\n# changed\n")
    assert probes.build_plugin() == NOT_CACHED


def test_a_pinned_git_plugin_is_present_only_once_cloned_and_as_resolve_gives_it(
    tmp_path: Path,
) -> None:
    from types import SimpleNamespace

    from tests.support import git

    repo = tmp_path / "repo"
    (repo / "pkg" / "demo").mkdir(parents=True)
    (repo / "pkg" / "demo" / "__init__.py").write_text("X = 1\n")
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "plugin", cwd=repo, date="2026-07-25T00:00:00Z")
    source = PluginSourceSpec("git", url=str(repo), commit=git("rev-parse", "HEAD", cwd=repo))
    plugin = PluginSpec("demo", source, subdirectory="pkg")
    spec = SimpleNamespace(path=repo / "s.toml", plugin=plugin)
    cache = Cache(tmp_path / "c")
    assert present(spec, cache) is None and not cache.root.exists()  # nothing cloned
    made = resolve(spec, cache)
    found = present(spec, cache)
    assert found is not None and (found.root, found.record()) == (made.root, made.record())
