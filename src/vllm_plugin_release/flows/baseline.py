"""A pairing on another core: the same plugin with a released core from the index or a
commit of the core's history, its cpu environment made by walking the pairing graph
(core-source, build-lock, build-core, env-lock, plugin-wheel, env); and `vpr plugin-tests`."""

from __future__ import annotations

import dataclasses
import email.parser
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec, torch_for
from vllm_plugin_release.core import bounded, progress, records
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.columns import PythonChoice, choose_python
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.edges.fetch import ArchiveLimits, Fetcher, index_files
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.flows.sources import Inputs
from vllm_plugin_release.flows.stagewalk import Context, extended, walk

if TYPE_CHECKING:
    from vllm_plugin_release.conform.checks import plugin_tests as pt
    from vllm_plugin_release.core.lockfile import LockRequest


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
    """Build the pairing on the released core `version` (cached like any stage) and return its
    environment; only the core (and its Python) changes. BadInput when no Python fits both the core
    and the runtime."""

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


# The pairing graph: the cpu pairing environment of a derived spec (another core, the same
# plugin wheel), walked by baseline, nightly, bisect, matrix and `vpr plugin-tests`. Each
# caller hands in how its core is found (`Source`) and a title for the walk's rules.


# How a flow finds its core: the derived spec and its verified source tree.
Source = Callable[[Fetcher], "tuple[Spec, Path]"]


@dataclasses.dataclass
class Pairing:
    """One walk's inputs and what its stages hand on (the spec, once core-source ran)."""

    source: Source
    cache: Cache
    dist: Path  # the plugin's dist folder: its wheel and build record
    plugin: PluginSource
    dist_root: Path  # where the pairing's records go (dist_root/NAME)
    fetcher: Fetcher
    spec: Spec | None = None
    tree: Path | None = None
    env: EnvRecord | None = None

    @property
    def base(self) -> Spec:
        if self.spec is None:
            raise RuntimeError("the pairing's spec is read before core-source ran")
        return self.spec

    @property
    def core_tree(self) -> Path:
        if self.tree is None:
            raise RuntimeError("the pairing's core tree is read before core-source ran")
        return self.tree

    def context(self) -> Context:
        return Context("pairing", self.base, self.cache, self.dist_root)


def _relock(request: LockRequest, path: Path, base: Spec) -> None:
    """Resolve a derived lock when it is missing or its inputs changed."""
    from vllm_plugin_release.edges.uv import compile_lock

    if not path.exists() or request.inputs_key not in path.read_text():
        compile_lock(request, path, base.build.find_links)


def core_source(p: Pairing) -> None:
    p.spec, p.tree = p.source(p.fetcher)


def build_lock(p: Pairing) -> None:
    from vllm_plugin_release.stages.requests import build_request

    request, _ = build_request(p.base, p.core_tree)
    _relock(request, p.base.resolve(p.base.build.constraints), p.base)


def build_core(p: Pairing) -> None:
    from packaging.utils import parse_wheel_filename

    from vllm_plugin_release.stages.build_core import build_core as run

    built = run(p.base, cache=p.cache, dist_root=p.dist_root, tree=p.core_tree, fetcher=p.fetcher)
    # A core built from a git commit carries the version its tree declares (a dev version
    # between tags); the environment checks that version.
    version = parse_wheel_filename(built.wheel.name)[1].public
    if version != p.base.core.version:
        p.spec = dataclasses.replace(p.base, core=dataclasses.replace(p.base.core, version=version))


def env_lock(p: Pairing) -> None:
    from vllm_plugin_release.stages.requests import env_lock_request, runtime_plan

    plan = runtime_plan(p.base, "cpu", None)
    request = env_lock_request(p.base, p.core_tree, p.plugin.root, plan)
    _relock(request, p.base.resolve(p.base.env_constraints), p.base)


def plugin_wheel(p: Pairing) -> None:
    """The plugin wheel already built for the spec, and its record, beside the pairing's."""
    target = p.dist_root / p.base.name
    built = records.build_record(
        p.dist, records.BUILD_PLUGIN, records.producer(records.BUILD_PLUGIN)
    )
    shutil.copy2(p.dist / records.BUILD_PLUGIN, target / records.BUILD_PLUGIN)
    wheel = built.wheel.filename
    shutil.copy2(p.dist / wheel, target / wheel)


def env(p: Pairing) -> None:
    from vllm_plugin_release.stages.pairing_env import PairingContext, create_env

    # As in the release: a finding about the plugin (a module of it that does not import on
    # this core) is recorded, not a stop; the plugin's tests run here to show its effect.
    pairing = PairingContext(p.base, p.cache, p.dist_root, p.plugin, p.core_tree, site="cpu")
    p.env = create_env(pairing, conduct_gate=False)


def graph(p: Pairing) -> Graph:
    """The pairing's stages and what each needs, with the extras that join "pairing"."""

    def on(step: Callable[[Pairing], None]) -> Callable[[], None]:
        return lambda: step(p)

    stages = [
        Stage("core-source", on(core_source), about="the derived spec and its core tree"),
        Stage("build-lock", on(build_lock), ("core-source",), about="derived, when stale"),
        Stage("build-core", on(build_core), ("build-lock",)),
        Stage("env-lock", on(env_lock), ("build-core",), about="derived, when stale"),
        Stage("plugin-wheel", on(plugin_wheel), ("build-core",), about="the spec's, copied"),
        Stage("env", on(env), ("env-lock", "plugin-wheel"), about="the cpu pairing env"),
    ]
    return Graph(extended("pairing", stages, p.context))


def pairing_env(
    source: Source,
    *,
    title: str,
    cache: Cache,
    dist: Path,
    plugin: PluginSource,
    dist_root: Path | None = None,
) -> EnvRecord:
    """Walk the pairing graph for the core `source` gives, with the plugin wheel already in `dist`;
    the environment's record. Its records go to `dist_root`/NAME (default: .vpr/baseline/dist)."""
    p = Pairing(
        source=source,
        cache=cache,
        dist=dist,
        plugin=plugin,
        dist_root=dist_root or cache.root / "baseline" / "dist",
        fetcher=Fetcher(cache),
    )
    walk(graph(p), title=title)
    if p.env is None:  # every stage ran or one raised: env set it
        raise RuntimeError("the pairing walk ended without its environment")
    return p.env


# `vpr plugin-tests`


def run_plugin_tests(inputs: Inputs, dist_root: Path, runner: str, baseline: str | None) -> int:
    """`vpr plugin-tests`: the plugin's tests in the pairing env (with `baseline`, also on that
    core, for regressions); writes the record and JUnit XML, prints the outcome; the exit code."""
    from vllm_plugin_release.conform.checks import plugin_tests as pt

    spec, cache = inputs.spec, inputs.cache
    dist = dist_dir(dist_root, spec.name)
    env_file = dist / records.ENV
    env = records.env_record(dist, hint=f"vpr env --spec {spec.path}")
    if env.runner != runner:
        raise BadInput(
            f"{env_file}: the environment is for runner {env.runner!r}, not {runner!r}",
            hint=f"run `vpr env --spec {spec.path} --site {runner}` first",
        )
    cfg = pt.settings_for(spec)
    root = inputs.plugin.root
    with cache.scratch("plugin-tests-") as tmp:
        run = pt.run_in_env(env, root, cfg, tmp / "junit.xml")
        (dist / f"plugin-tests-{runner}.xml").write_bytes((tmp / "junit.xml").read_bytes())
        base_run = None
        version = None
        if baseline:
            version = installer_pin(spec, root) if baseline == "auto" else baseline
            base_env = baseline_env(spec, version, cache=cache, dist=dist, plugin=inputs.plugin)
            base_run = pt.run_in_env(base_env, root, cfg, tmp / "baseline.xml")
    record = pt.write_record(dist, run, base_run, version, spec.core.version)
    _report(runner, run, base_run, version, record)
    return 1 if run.failing or record.regressions else 0


def _report(
    runner: str,
    run: pt.TestRun,
    base_run: pt.TestRun | None,
    version: str | None,
    record: pt.TestsRecord,
) -> None:
    c = run.counts
    progress.info(
        f"plugin-tests ({runner}): {c['passed']} passed, {c['failed']} failed, "
        f"{c['error']} errors, {c['skipped']} skipped, {c['deferred']} deferred (need the runtime)"
    )
    for test in run.failing:
        progress.info(f"  failing: {test}")
    for path in run.deferred:
        progress.info(f"  deferred to the hardware runner: {path}")
    if base_run is not None:
        progress.info(f"  regressions vs vLLM {version}: {len(record.regressions)}")
        for test in record.regressions:
            progress.info(f"    {test}")


def installer_pin(spec: Spec, root: Path) -> str:
    """The core version the plugin's installer pins exactly (read by the pinning check)."""
    from vllm_plugin_release.conform.lib import installscan

    options = installscan.pinning_options(spec)
    files = installscan.input_files(spec, options.files)
    report = installscan.scan(root, files, spec.core.name, options.build_args)
    pin = report.core_pin
    if not pin or not pin.get("exact") or not pin.get("version"):
        raise BadInput(
            f"{root}: the plugin's installer pins no exact {spec.core.name} version",
            hint="pass --baseline VERSION",
        )
    return str(pin["version"])
