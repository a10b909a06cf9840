"""What a conformance check is handed: the spec, the runner, and the pairing's inputs.

Checks never resolve or build, and never fetch what they are handed: the flow that runs
them hands in where the verified sources are (`Sources`, two callables the flow builds
from the edges, called at most once and only by a check that needs them), and the
records of earlier stages are read from dist/NAME through `core/records.py`. A check
that reads the network itself declares it (`CheckDef.needs` has "network"): `cadence`
reads the core's releases from its package index (or a git remote) through the edges.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import records
from vllm_plugin_release.core.buildrecord import BuildRecord
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:
    from vllm_plugin_release.edges.interpreters import Interpreter
    from vllm_plugin_release.replay.model import ReplayReport


@dataclass(frozen=True)
class Sources:
    """Where the verified sources are; each callable is the flow's, run on first use."""

    plugin_root: Callable[[], Path]
    core_tree: Callable[[], Path]


@dataclass
class Context:
    spec: Spec
    runner: str
    cache: Cache
    dist: Path
    sources: Sources
    _memo: dict[str, Any] = field(default_factory=dict)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def _once(self, key: str, make: Callable[[], Any]) -> Any:
        """`make()` once per key, also when checks running side by side ask at once (each
        key has its own lock: a long replay does not hold up a record read)."""
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = make()
            return self._memo[key]

    @property
    def plugin_root(self) -> Path:
        return self._once("plugin", self.sources.plugin_root)

    @property
    def core_tree(self) -> Path:
        return self._once("tree", self.sources.core_tree)

    def build(self, name: str) -> BuildRecord:
        """A build record in dist/NAME (build-core.json, build-plugin.json), typed."""
        hint = records.producer(name, self.spec.path)
        return self._once(f"build:{name}", lambda: records.build_record(self.dist, name, hint))

    @property
    def env(self) -> EnvRecord:
        """dist/NAME/env.json, typed (BadInput naming the file and key, or another runner's)."""
        hint = f"vpr env --spec {self.spec.path} --site {self.runner}"
        env: EnvRecord = self._once("env", lambda: records.env_record(self.dist, hint=hint))
        if env.runner != self.runner:
            raise BadInput(
                f"{self.dist / records.ENV}: built for runner {env.runner!r}, not {self.runner!r}",
                hint=f"run `vpr env --spec {self.spec.path} --site {self.runner}`",
            )
        return env

    def refuse_other_interpreter(self, named: Interpreter | None, source: str) -> None:
        """BadInput when the pairing environment in dist/NAME was made from another
        interpreter than `named` (the one `source`, --interpreter or VPR_INTERPRETER,
        names): the checks would certify that environment, not one of `named`. Nothing
        when none is named or no environment is recorded yet."""
        if named is None or not (self.dist / records.ENV).exists():
            return
        made = self.env.interpreter
        if made is not None and made.sha256 == named.sha256:
            return
        was = f"CPython {made.version} at {made.path}" if made else "a --runtime-env's python"
        raise BadInput(
            f"{source} {named.path} (CPython {named.version}): the pairing environment in "
            f"{self.dist} was made from {was}, another interpreter; its checks would not be "
            "those of this one",
            hint=f"make the environment with it first: `vpr env --spec {self.spec.path} "
            f"--site {self.runner} --interpreter {named.path}`, or leave {source} out",
        )

    @property
    def python(self) -> Path:
        return self.env.python

    @property
    def core_wheel(self) -> Path:
        return self.dist / self.build(records.BUILD_CORE).wheel.filename

    def built_core_wheel(self) -> tuple[Path | None, str | None]:
        """(the core wheel, None) once build-core ran; (None, why not) before: a check that
        can do without it (isolation scans the verified source tree) says so."""
        if not (self.dist / records.BUILD_CORE).exists():
            return None, (
                f"no {records.BUILD_CORE} in {self.dist}: the core wheel is not built "
                f"(`vpr build-core --spec {self.spec.path}`)"
            )
        return self.core_wheel, None

    @property
    def platform_class(self) -> str | None:
        """The plugin's Platform class path when its runtime (or stand-in) imports."""
        return self.env.platform_class

    def replay(self) -> ReplayReport | None:
        """The scheduler replay of the spec's request mix, run once (None when the spec has
        none); its files are written to dist/NAME."""
        return self._once("replay", lambda: _run_replay(self))


def _run_replay(ctx: Context) -> ReplayReport | None:
    """The scheduler replay of the spec's request mix (None when the spec has none)."""
    from vllm_plugin_release.replay import config, mix, model, runner

    if not config.configured(ctx.spec):
        return None

    outcome = runner.replay(
        ctx.python,
        mix.from_spec(ctx.spec),
        config.from_spec(ctx.spec),
        name=ctx.spec.name,
        out=runner.Output(ctx.dist),
    )
    return model.parse_report(outcome.report)
