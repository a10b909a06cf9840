"""A pairing on another core: the same plugin with a released core from the index (baseline,
bump, bisect, matrix) or a commit of the core's history (nightly, bisect, matrix main).

A released core's sha256 comes from the index listing (recorded as such) and is verified on
download like any other pin; its Python follows the core's `Requires-Python`. Derived locks
are not committed: they live under .vpr/baseline/VERSION/ and .vpr/derived/COMMIT/.
"""

from __future__ import annotations

import dataclasses
import email.parser
import tarfile
from pathlib import Path

from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec, torch_for
from vllm_plugin_release.core import bounded, progress
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.columns import PythonChoice, choose_python
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.fetch import ArchiveLimits, Fetcher, index_files
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.flows.pairing_graph import pairing_env


def sdist_epoch(archive: Path) -> int:
    """The newest file time inside an sdist: its natural SOURCE_DATE_EPOCH."""
    with tarfile.open(archive) as tf:
        return int(max(m.mtime for m in tf.getmembers()))


def requires_python(tree: Path) -> str | None:
    """`Requires-Python` of a verified sdist tree (its PKG-INFO), or None when it has none."""
    try:
        data = bounded.read_file(tree / "PKG-INFO", bounded.MiB, "sdist metadata (PKG-INFO)")
    except FileNotFoundError:
        return None
    value = email.parser.BytesHeaderParser().parsebytes(data).get("Requires-Python")
    return str(value).strip() if value else None


def python_for(spec: Spec, requires: str | None, core: str) -> PythonChoice:
    """The Python a pairing on `core` runs on: the spec's while the core accepts it, else the
    newest of the runtime's Pythons (`[runtime] python`) it accepts and `[build] torch` pins."""
    runtime = spec.runtime.python if spec.runtime else ()
    torch = spec.raw.get("build", {}).get("torch")
    pinned = [py for py in runtime if not isinstance(torch, dict) or py in torch]
    choice = choose_python(requires, spec.build.python, pinned, f"{spec.core.name} {core}")
    unpinned = sorted(set(runtime) - set(pinned))
    if choice.python is None and unpinned:
        return PythonChoice(
            None, f"{choice.why}; [build] torch pins none for {', '.join(unpinned)}"
        )
    return choice


def on_python(spec: Spec, python: str, folder: Path) -> Spec:
    """`spec` built and paired on `python`, its locks derived under `folder`."""
    py = python.replace(".", "")
    torch = spec.raw.get("build", {}).get("torch", spec.build.torch)
    same = python == spec.build.python
    build = dataclasses.replace(
        spec.build,
        python=python,
        torch=spec.build.torch if same else torch_for(torch, python),
        constraints=str(folder / f"build-core-py{py}.txt"),
        interpreter=spec.build.interpreter if same else None,
    )
    env = dataclasses.replace(spec.env, constraints=str(folder / f"env-py{py}.txt"))
    return dataclasses.replace(spec, build=build, env=env)


@dataclasses.dataclass(frozen=True)
class Release:
    """A released core on the spec's index, verified and extracted, with its Python."""

    spec: Spec  # the derived spec (None-free: its Python chosen, or the spec's own)
    tree: Path
    python: PythonChoice


def release_pairing(spec: Spec, version: str, fetcher: Fetcher) -> Release:
    """The core `version` from the spec's index (sha256 from the listing, verified on
    download), extracted, and the spec derived for it on the Python the core allows."""
    if not isinstance(spec.core.source, SdistSource):
        raise BadInput("a baseline needs an sdist core source ([core.source] kind = sdist)")
    filename = f"{spec.core.name}-{version}.tar.gz"
    files = {f.filename: f for f in index_files(spec.core.source.index, spec.core.name)}
    entry = files.get(filename)
    if entry is None or not entry.sha256:
        raise BadInput(
            f"{spec.core.source.index}: no {filename} with a sha256 on the index",
            hint="pass a released core version",
        )
    source = SdistSource(index=spec.core.source.index, filename=filename, sha256=entry.sha256)
    archive = fetcher.sdist(source, spec.core.name)
    tree = fetcher.source_tree(source, spec.core.name, ArchiveLimits.of(spec.fetch))
    core = dataclasses.replace(
        spec.core, version=version, source=source, source_date_epoch=sdist_epoch(archive)
    )
    choice = python_for(spec, requires_python(tree), version)
    base = dataclasses.replace(spec, name=f"{spec.name}-baseline-{version}", core=core)
    folder = fetcher.cache.root / "baseline" / version
    return Release(on_python(base, choice.python or spec.build.python, folder), tree, choice)


def commit_spec(spec: Spec, url: str, commit: str, epoch: int, cache: Cache, suffix: str) -> Spec:
    """`spec` with its core at `commit` of `url` (bisect, nightly), named NAME-`suffix`; its
    locks are derived under .vpr/derived/COMMIT/."""
    core = dataclasses.replace(
        spec.core,
        source=GitSource(url=url, tag=commit, commit=commit),
        source_date_epoch=epoch,
    )
    base = dataclasses.replace(spec, name=f"{spec.name}-{suffix}", core=core)
    return on_python(base, spec.build.python, cache.root / "derived" / commit)


def baseline_env(
    spec: Spec, version: str, *, cache: Cache, dist: Path, plugin: PluginSource
) -> EnvRecord:
    """Build the pairing on the released core `version` (cached like any stage) and return
    its environment: the pairing graph (flows/pairing_graph) walked with that core.

    The plugin wheel is the one already built for `spec` (its record in `dist`), the
    plugin checkout the one already resolved (`plugin`): only the core (and the Python it
    needs) changes. BadInput when no Python fits both the core and the runtime."""

    def source(fetcher: Fetcher) -> tuple[Spec, Path]:
        found = release_pairing(spec, version, fetcher)
        if found.python.python is None:
            raise BadInput(f"no Python for {spec.core.name} {version}: {found.python.why}")
        progress.info(
            f"baseline: vLLM {version} (sha256 {found.spec.core.source.sha256[:12]} from the "
            f"index) on Python {found.python.python}: {found.python.why}"
        )
        return found.spec, found.tree

    return pairing_env(source, title=f"baseline {version}", cache=cache, dist=dist, plugin=plugin)
