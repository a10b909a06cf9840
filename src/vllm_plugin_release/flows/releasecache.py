"""What `vpr release --graph` says of each stage's cache, found without fetching, building or
writing anything; a probe that cannot tell says "unknown" with the reason."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import records
from vllm_plugin_release.core.cache import Cache, sha256_file
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.core.stagegraph import CACHED, NOT_CACHED


class WheelNamed(NamedTuple):
    """A wheel stage's record's `wheel` file name and sha256 (each None when not text)."""

    filename: str | None
    sha256: str | None


def parse_wheel_named(data: Any) -> WheelNamed | None:
    """A build record's `wheel` (file name, sha256); None without a `wheel` object."""
    wheel = data.get("wheel") if isinstance(data, dict) else None
    if not isinstance(wheel, dict):
        return None
    filename, sha256 = wheel.get("filename"), wheel.get("sha256")
    return WheelNamed(
        filename if isinstance(filename, str) else None,
        sha256 if isinstance(sha256, str) else None,
    )


def _json(path: Path) -> WheelNamed | None:
    """A wheel stage's record (bounded), or None when absent or without a `wheel` object."""
    return records.read_object(path, parse_wheel_named)


def _wheel_sha(record: WheelNamed | None) -> str | None:
    return record.sha256 if record else None


def _kept_wheel(stage_dir: Path, record_name: str) -> WheelNamed | None:
    """A wheel stage's cache entry (its record, with its wheel beside it), or None."""
    record = _json(stage_dir / record_name)
    if record is None or not (stage_dir / str(record.filename)).is_file():
        return None
    return record


class Probes:
    """The release's stages' cache probes over one spec, cache and dist folder."""

    def __init__(
        self,
        spec: Spec,
        cache: Cache,
        dist_root: Path,
        runner: str = "cpu",
        plugin_source: Path | None = None,
    ) -> None:
        self.spec = spec
        self.cache = cache
        self.plugin_source = plugin_source  # `--plugin-source PATH`
        self.dist_root = dist_root
        self.dist = dist_dir(dist_root, spec.name)
        self.runner = runner

    @functools.cached_property
    def core_entry(self) -> WheelNamed | None:
        """build-core's cache entry for today's spec and lock, or None."""
        from vllm_plugin_release.stages import build_core

        lock = self.spec.resolve(self.spec.build.constraints)
        if not lock.is_file():
            raise FileNotFoundError(f"no build lock at {lock}")
        key = build_core.stage_key(self.spec, sha256_file(lock), self._isolated())
        return _kept_wheel(self.cache.stage_dir(build_core.STAGE, key), build_core.RECORD)

    def _isolated(self) -> bool:
        """Whether the build runs without network (a key input), as the runner says."""
        if self.spec.build.backend == "local":
            from vllm_plugin_release.stages.wheelbuild import runner_for

            return runner_for(self.spec, self.cache).isolate  # a local runner writes nothing
        from vllm_plugin_release.edges.container import ContainerRunner

        return ContainerRunner.isolate  # made here, it would create the uv cache folder

    def build_core(self) -> str:
        return CACHED if self.core_entry is not None else NOT_CACHED

    def build_guard(self) -> str:
        from vllm_plugin_release.edges import guard
        from vllm_plugin_release.stages import build_guard

        key = build_guard.stage_key(build_guard.source_digest(guard.guard_source()))
        entry = _kept_wheel(self.cache.stage_dir(build_guard.STAGE, key), build_guard.RECORD)
        return CACHED if entry is not None else NOT_CACHED

    def build_plugin(self) -> str:
        """Its key needs the plugin's tree and the lock it is built in (checked against
        the core source's requirements): known when both are already in the cache."""
        from vllm_plugin_release.edges.fetch import cached_source_tree
        from vllm_plugin_release.edges.plugin_source import present
        from vllm_plugin_release.stages import build_plugin
        from vllm_plugin_release.stages.wheelbuild import runner_for

        if self.spec.build.backend != "local":  # its image is known once it is made
            return "unknown: needs the build image (made when build-plugin runs)"
        src = present(self.spec, self.cache, self.plugin_source)
        if src is None:
            return "unknown: needs the plugin checkout (made when build-plugin runs)"
        tree = cached_source_tree(self.spec, self.cache)
        if tree is None:
            return "unknown: needs the core source (fetched when the lock is checked)"
        lock = build_plugin.lock_for(self.spec, src.root, tree)
        runner = runner_for(self.spec, self.cache)  # a local runner writes nothing
        key = build_plugin.stage_key(self.spec, runner, src, sha256_file(lock))
        entry = _kept_wheel(self.cache.stage_dir(build_plugin.STAGE, key), build_plugin.RECORD)
        return CACHED if entry is not None else NOT_CACHED

    def env(self) -> str:
        """Cached when dist/NAME's env record was made from today's wheels and lock, in
        the environment it names, which is still kept; the key itself needs the built
        wheels and the interpreter, so without those records it is unknown."""
        core = _json(self.dist / records.BUILD_CORE)
        if self.core_entry is None or _wheel_sha(core) != _wheel_sha(self.core_entry):
            return f"unknown: needs build-core's output in {self.dist}"
        plugin = _json(self.dist / records.BUILD_PLUGIN)
        if _wheel_sha(plugin) is None:
            return f"unknown: needs build-plugin's output in {self.dist}"
        env = records.env_record_at(self.dist)
        if env is None:
            return f"unknown: no env record for these wheels in {self.dist}"
        lock = self.spec.resolve(self.spec.env_constraints)
        made_from = (
            env.runner,
            env.lock_sha256,
            env.core_wheel.sha256 if env.core_wheel else None,
            env.plugin_wheel.sha256 if env.plugin_wheel else None,
        )
        today = (self.runner, sha256_file(lock), _wheel_sha(core), _wheel_sha(plugin))
        kept = env.python.parent.parent / ".vpr-env.json"
        return CACHED if made_from == today and kept.is_file() else NOT_CACHED

    def conform(self) -> str:
        """The scorecard's key is read from the records in dist/NAME (conform_key)."""
        if self.env() != CACHED:
            return "unknown: needs env's output"
        from vllm_plugin_release.conform.suite import conform_key
        from vllm_plugin_release.flows.sources import Inputs

        ctx = Inputs(self.spec, self.cache).context(self.runner, self.dist_root)
        found = self.cache.stage_dir("conform", conform_key(ctx)) / records.SCORECARD
        return CACHED if found.is_file() else NOT_CACHED
