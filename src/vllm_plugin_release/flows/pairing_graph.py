"""The cpu pairing environment of a derived spec (another core, the same plugin wheel), as a
stage graph that baseline, nightly, bisect, matrix and `vpr plugin-tests --baseline` all
walk (core/stagegraph, flows/stagewalk):

core-source -> build-lock -> build-core -> env-lock -> plugin-wheel -> env

Each caller hands in how its core is found (`source`: a released sdist on the index, or
a commit of the core's history) and a title for the walk's rules ("baseline 0.25.1
stage 3/6: build-core"); the locks are resolved when missing or stale, the core build
and the environment are cached like any stage's.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.core import records
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.edges.fetch import Fetcher
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.flows.stagewalk import Context, extended, walk

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.core.envrecord import EnvRecord
    from vllm_plugin_release.core.lockfile import LockRequest

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
    """Walk the pairing graph for the core `source` gives, with the plugin wheel already
    built in `dist`; the environment's record (its Python, whether the runtime is in it,
    the plugin's modules that do not import). Its records go to `dist_root`/NAME (default:
    .vpr/baseline/dist)."""
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
