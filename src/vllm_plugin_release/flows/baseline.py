"""A baseline pairing: the same plugin on another core version (the one its installer pins).

The baseline core is found on the spec's index; its sha256 comes from the index
listing (recorded as such) and is verified on download like any other pin. Its
locks are derived, not committed: they live under .vpr/baseline/VERSION/.
"""

from __future__ import annotations

import dataclasses
import shutil
import tarfile
from pathlib import Path

from packaging.utils import parse_wheel_filename

from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.lockfile import LockRequest
from vllm_plugin_release.edges.fetch import Fetcher, index_files, source_tree
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.edges.uv import compile_lock
from vllm_plugin_release.stages.build_core import build_core
from vllm_plugin_release.stages.pairing_env import create_env
from vllm_plugin_release.stages.requests import build_request, env_lock_request, runtime_plan


def sdist_epoch(archive: Path) -> int:
    """The newest file time inside an sdist: its natural SOURCE_DATE_EPOCH."""
    with tarfile.open(archive) as tf:
        return int(max(m.mtime for m in tf.getmembers()))


def baseline_spec(spec: Spec, version: str, cache: Cache) -> Spec:
    if not isinstance(spec.core.source, SdistSource):
        raise BadInput("a baseline needs an sdist core source ([core.source] kind = sdist)")
    filename = f"{spec.core.name}-{version}.tar.gz"
    files = {f.filename: f for f in index_files(spec.core.source.index, spec.core.name)}
    entry = files.get(filename)
    if entry is None or not entry.sha256:
        raise BadInput(
            f"{spec.core.source.index}: no {filename} with a sha256 on the index",
            hint="pass a released core version to --baseline",
        )
    source = SdistSource(index=spec.core.source.index, filename=filename, sha256=entry.sha256)
    archive = Fetcher(cache).sdist(source, spec.core.name)
    folder = cache.root / "baseline" / version
    core = dataclasses.replace(
        spec.core, version=version, source=source, source_date_epoch=sdist_epoch(archive)
    )
    build = dataclasses.replace(spec.build, constraints=str(folder / "build-core.txt"))
    env = {**spec.env, "constraints": str(folder / "env.txt")}
    return dataclasses.replace(
        spec, name=f"{spec.name}-baseline-{version}", core=core, build=build, env=env
    )


def commit_spec(spec: Spec, url: str, commit: str, epoch: int, cache: Cache, suffix: str) -> Spec:
    """`spec` with its core at `commit` of `url` (bisect, nightly), named NAME-`suffix`; its
    locks are derived under .vpr/derived/COMMIT/."""
    folder = cache.root / "derived" / commit
    core = dataclasses.replace(
        spec.core,
        source=GitSource(url=url, tag=commit, commit=commit),
        source_date_epoch=epoch,
    )
    build = dataclasses.replace(spec.build, constraints=str(folder / "build-core.txt"))
    env = {**spec.env, "constraints": str(folder / "env.txt")}
    return dataclasses.replace(spec, name=f"{spec.name}-{suffix}", core=core, build=build, env=env)


def baseline_python(
    spec: Spec, version: str, *, cache: Cache, dist: Path, plugin: PluginSource
) -> Path:
    """Build the baseline pairing (cached like any stage) and return its Python.

    The plugin wheel is the one already built for `spec` (its record in `dist`), the
    plugin checkout the one already resolved (`plugin`): only the core changes."""
    base = baseline_spec(spec, version, cache)
    progress.info(
        f"baseline: vLLM {version} (sha256 {base.core.source.sha256[:12]} from the index)"
    )
    fetcher = Fetcher(cache)
    tree = source_tree(base, fetcher)
    return pairing_python(base, tree, cache=cache, dist=dist, plugin=plugin, fetcher=fetcher)


def _relock(request: LockRequest, path: Path, base: Spec) -> None:
    """Resolve a derived lock when it is missing or its inputs changed."""
    if not path.exists() or request.inputs_key not in path.read_text():
        compile_lock(request, path, base.build.find_links)


def pairing_python(
    base: Spec,
    tree: Path,
    *,
    cache: Cache,
    dist: Path,
    plugin: PluginSource,
    fetcher: Fetcher | None = None,
    dist_root: Path | None = None,
) -> Path:
    """The cpu pairing environment of `base` (a derived spec whose locks live in the cache)
    on the verified core `tree`, with the plugin wheel already built in `dist`; its Python.
    Its records go to `dist_root`/NAME (default: .vpr/baseline/dist).

    Its locks are resolved when missing or stale; the core build and the environment
    are cached like any stage's."""
    request, _ = build_request(base, tree)
    _relock(request, base.resolve(base.build.constraints), base)
    dist_root = dist_root or cache.root / "baseline" / "dist"
    built_core = build_core(
        base, cache=cache, dist_root=dist_root, tree=tree, fetcher=fetcher or Fetcher(cache)
    )
    # A core built from a git commit carries the version its tree declares (a dev version
    # between tags); the environment checks that version.
    version = parse_wheel_filename(built_core.wheel.name)[1].public
    if version != base.core.version:
        base = dataclasses.replace(base, core=dataclasses.replace(base.core, version=version))
    env_request = env_lock_request(base, tree, plugin.root, runtime_plan(base, "cpu", None))
    _relock(env_request, base.resolve(base.env_constraints), base)
    target = dist_root / base.name
    built = records.read(dist, records.BUILD_PLUGIN, records.producer(records.BUILD_PLUGIN))
    shutil.copy2(dist / records.BUILD_PLUGIN, target / records.BUILD_PLUGIN)
    plugin_wheel = built["wheel"]["filename"]
    shutil.copy2(dist / plugin_wheel, target / plugin_wheel)
    # As in the release: a finding about the plugin (a module of it that does not import on
    # this core) is recorded, not a stop; the plugin's tests run here to show its effect.
    record = create_env(
        base,
        cache=cache,
        dist_root=dist_root,
        runner_kind="cpu",
        plugin=plugin,
        tree=tree,
        conduct_gate=False,
    )
    return Path(record["python"])
