"""What one pairing is, for the stages that make its environment: built once by the flow
(`vpr release`, `vpr env`, the pairing graph, `vpr hardware conform`) and handed to them,
rather than the same keywords at every call.

Not to be confused with `flows/pairing_graph.Pairing`, the derived-pairing walk's inputs
and what its stages hand on: that walk builds a `PairingContext` for its env stage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.core.envrecord import SITES
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.records import dist_dir

if TYPE_CHECKING:
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.edges.interpreters import Interpreter
    from vllm_plugin_release.edges.plugin_source import PluginSource
    from vllm_plugin_release.edges.runner import Runner


@dataclass(frozen=True)
class PairingContext:
    """The spec, where its records and environments go, its verified sources, the site it
    is made for (`cpu` or `hardware`) and the runtime environment handed in, if any."""

    spec: Spec
    cache: Cache
    dist_root: Path  # the pairing's records go to dist_root/NAME
    plugin: PluginSource  # the plugin checkout at its pinned commit
    tree: Path  # the verified core source tree
    site: str = "cpu"  # one of envrecord.SITES
    runtime_env: Path | None = None  # a Python environment bringing the vendor runtime
    _interpreters: dict[str, Interpreter] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.site not in SITES:
            raise BadInput(f"unknown runner {self.site!r}; expected one of {', '.join(SITES)}")

    @property
    def dist(self) -> Path:
        """dist/NAME: the pairing's records and wheels."""
        return dist_dir(self.dist_root, self.spec.name)

    @property
    def backend(self) -> str:
        """Where its commands run: `local` or `docker` (the spec's `[build] backend`)."""
        return self.spec.build.backend

    def interpreter(self, runner: Runner) -> Interpreter | None:
        """The CPython the environment is made from, resolved once for this pairing (exit 3
        naming every place searched); None with a runtime environment (it brings its own)."""
        if self.runtime_env is not None:
            return None
        key = self.spec.build.python
        if key not in self._interpreters:
            self._interpreters[key] = runner.interpreter(key)
        return self._interpreters[key]
