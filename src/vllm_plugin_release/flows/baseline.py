"""A baseline pairing: the same plugin on another core version (the one its installer pins).

The baseline core is found on the spec's index; its sha256 comes from the index
listing (recorded as such) and is verified on download like any other pin. Its
locks are derived, not committed: they live under .vpr/baseline/VERSION/.
"""

from __future__ import annotations

import dataclasses
import tarfile
from pathlib import Path

from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.fetch import Fetcher, index_files, source_tree
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.flows.pairing_graph import pairing_python


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
    env = dataclasses.replace(spec.env, constraints=str(folder / "env.txt"))
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
    env = dataclasses.replace(spec.env, constraints=str(folder / "env.txt"))
    return dataclasses.replace(spec, name=f"{spec.name}-{suffix}", core=core, build=build, env=env)


def baseline_python(
    spec: Spec, version: str, *, cache: Cache, dist: Path, plugin: PluginSource
) -> Path:
    """Build the baseline pairing (cached like any stage) and return its Python: the
    pairing graph (flows/pairing_graph) walked with the core `version` from the index.

    The plugin wheel is the one already built for `spec` (its record in `dist`), the
    plugin checkout the one already resolved (`plugin`): only the core changes."""

    def source(fetcher: Fetcher) -> tuple[Spec, Path]:
        base = baseline_spec(spec, version, cache)
        progress.info(
            f"baseline: vLLM {version} (sha256 {base.core.source.sha256[:12]} from the index)"
        )
        return base, source_tree(base, fetcher)

    return pairing_python(
        source, title=f"baseline {version}", cache=cache, dist=dist, plugin=plugin
    )
