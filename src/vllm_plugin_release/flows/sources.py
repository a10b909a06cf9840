"""The verified sources of one pairing (the core source tree, the plugin checkout), fetched
or resolved once and handed to every stage and check."""

from __future__ import annotations

import functools
from pathlib import Path

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import Context, Sources
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.edges.fetch import Fetcher, source_tree
from vllm_plugin_release.edges.plugin_source import PluginSource, resolve
from vllm_plugin_release.edges.proc import Ahead


class Inputs:
    """Lazily fetched, then kept: a command that needs no plugin never resolves it."""

    def __init__(self, spec: Spec, cache: Cache, plugin_source: Path | None = None) -> None:
        self.spec = spec
        self.cache = cache
        self.plugin_source = plugin_source
        self.fetcher = Fetcher(cache)

    @functools.cached_property
    def tree(self) -> Path:
        """The verified core source tree."""
        return source_tree(self.spec, self.fetcher)

    @functools.cached_property
    def plugin(self) -> PluginSource:
        """The plugin checkout at its pinned commit (or the local clone given)."""
        return resolve(self.spec, self.cache, self.plugin_source)

    def sources(self) -> Sources:
        return Sources(plugin_root=lambda: self.plugin.root, core_tree=lambda: self.tree)

    def context(self, runner: str, dist_root: Path, ahead: Ahead | None = None) -> Context:
        """The conformance context on `runner` (`ahead`: the runs the walk started ahead)."""
        return Context(
            spec=self.spec,
            runner=runner,
            cache=self.cache,
            dist=dist_dir(dist_root, self.spec.name),
            sources=self.sources(),
            ahead=ahead,
        )
