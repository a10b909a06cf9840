"""Conformance checks: what a check is (`CheckDef`), what it is handed (`Context`) and what
it returns (`CheckResult`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import records
from vllm_plugin_release.core.buildrecord import BuildRecord
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.cardrecord import CheckResult, Evidence, Status
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:
    from vllm_plugin_release.edges.interpreters import Interpreter
    from vllm_plugin_release.edges.proc import Ahead
    from vllm_plugin_release.replay.model import ReplayReport


def from_findings(
    name: str,
    findings: tuple[list[str], list[str]],
    tail: str,
    *,
    evidence: list[Evidence],
    threshold: dict[str, Any],
    details: dict[str, Any],
) -> CheckResult:
    """fail on any failure, else warn on any warning, else pass; `tail` states the facts."""
    fails, warns = findings
    if fails:
        status: Status = "fail"
        summary = "; ".join(fails) + f" [{tail}]"
    elif warns:
        status, summary = "warn", "; ".join(warns) + f" [{tail}]"
    else:
        status, summary = "pass", tail
    details["failures"] = fails
    details["warnings"] = warns
    return CheckResult(name, status, summary, evidence, threshold, details)


# What a check needs beyond the spec, the plugin's source and the verified core tree (which
# the flow fetches and hands in, `Context`); shown by `vpr check --help` and
# docs/conformance.md.
NEEDS: Mapping[str, str] = {
    "env": "the pairing environment (`vpr env`)",
    "runtime": "the vendor runtime (or its labelled stand-in) importable there; without it "
    "the parts that need it are deferred, never passed",
    "network": "the check itself reads from the network (a package index, a git remote)",
    "device": "an accelerator (only the hardware runner has one)",
}


@dataclass(frozen=True)
class CheckDef:
    name: str
    summary: str
    run: Callable[[Context], CheckResult] | None
    tables: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()
    # What it needs (keys of NEEDS); `env` exactly when it reads the env (`inputs`).
    needs: tuple[str, ...] = ()
    # "any": `vpr conform` runs it on every runner; "hardware": only the hardware
    # runner's live part produces it (`vpr hardware live`), never `vpr conform`.
    runner: str = "any"
    # A check that needs the pairing env: what it can say when no env can be made here
    # (`suite.conform_env_free`); None from it (or no function) defers the check.
    without_env: Callable[[Context], CheckResult | None] | None = None
    # Whether `vpr conform` runs it for a spec (None: always); `vpr check NAME` always does.
    applies: Callable[[Spec], bool] | None = None

    def __post_init__(self) -> None:
        unknown = [n for n in self.needs if n not in NEEDS]
        if unknown:
            raise ValueError(f"check {self.name}: unknown needs {unknown}; known: {list(NEEDS)}")
        if ("env" in self.needs) != ("env" in self.inputs):
            raise ValueError(f"check {self.name}: needs 'env' exactly when it reads the env")


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
    ahead: Ahead | None = None  # the runs the walk started ahead (`vpr release`'s), if any
    _memo: dict[str, Any] = field(default_factory=dict)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def _once(self, key: str, make: Callable[[], Any]) -> Any:
        """`make()` once per key, also for checks asking at once (a lock per key)."""
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
        """BadInput when dist/NAME's pairing env was made from another interpreter than
        `named` (by `source`): the checks would certify that one, not `named`'s."""
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

    def built_core_wheel(self) -> tuple[Path | None, str | None]:
        """(the core wheel, None) once build-core ran; (None, why not) before."""
        if not (self.dist / records.BUILD_CORE).exists():
            return None, (
                f"no {records.BUILD_CORE} in {self.dist}: the core wheel is not built "
                f"(`vpr build-core --spec {self.spec.path}`)"
            )
        return self.dist / self.build(records.BUILD_CORE).wheel.filename, None

    def replay(self) -> ReplayReport | None:
        """The scheduler replay of the spec's request mix, run once (None without one)."""
        return self._once("replay", lambda: _run_replay(self))


def _run_replay(ctx: Context) -> ReplayReport | None:
    """The scheduler replay of the spec's request mix (None when the spec has none)."""
    from vllm_plugin_release.replay import config, mix, model, runner

    if not config.configured(ctx.spec):
        return None

    outcome = runner.replay(
        ctx.env.python,
        mix.from_spec(ctx.spec),
        config.from_spec(ctx.spec),
        name=ctx.spec.name,
        out=runner.Output(ctx.dist),
    )
    return model.parse_report(outcome.report)
