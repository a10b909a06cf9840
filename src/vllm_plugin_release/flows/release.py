"""`vpr release`: every stage for one pairing, each reusing its cached result, walked as
a graph (`vpr release --graph` draws it), with a summary at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import Cache, write_json
from vllm_plugin_release.core.errors import BadInput, PythonUnavailable, VprError
from vllm_plugin_release.core.lockfile import check_lock
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.edges import ci, envrun, proc
from vllm_plugin_release.flows.releasecache import Probes
from vllm_plugin_release.flows.sources import Inputs
from vllm_plugin_release.flows.stagewalk import Context, Walk, extended, walk
from vllm_plugin_release.stages.requests import build_request

if TYPE_CHECKING:
    from vllm_plugin_release.core.buildrecord import RunnerFacts
    from vllm_plugin_release.edges.interpreters import Search
    from vllm_plugin_release.stages.corememo import StageResult


@dataclass
class Options:
    cache: Cache
    dist_root: Path
    runner: str = "cpu"
    plugin_source: Path | None = None
    runtime_env: Path | None = None
    index: str | None = None
    store: str | None = None
    signing_key: str | None = None
    publish: bool = True
    allow_uncertified: bool = False


@dataclass
class Outcome:
    stages: dict[str, float] = field(default_factory=dict)
    facts: dict[str, str] = field(default_factory=dict)  # the summary's lines: name -> text
    # Where each stage that runs core or plugin code ran (its record's `backend`, read
    # back as the runner it describes; written into run.json as the record had it).
    ran_in: dict[str, RunnerFacts | None] = field(default_factory=dict)


BUILDS = ("build-core", "build-plugin", "build-guard")
# The summary's facts in the line's order (stages side by side add theirs in the order
# they end); any other after them, as added.
FACTS = ("core wheel", "plugin wheel", "guard wheel", "runtime", "verdict", "scorecard")


def _wheel(result: StageResult) -> str:
    return f"{result.wheel.name} sha256:{result.data.wheel.sha256}"


class _Stages:
    """The release's stages over one pairing, a method each: sources fetched once (`Inputs`),
    work started ahead held in `ahead`, the interpreter search in `search`."""

    def __init__(
        self, spec: Spec, opts: Options, out: Outcome, ahead: proc.Ahead, search: Search | None
    ) -> None:
        self.spec = spec
        self.opts = opts
        self.out = out
        self.ahead = ahead
        self.search = search
        self.inputs = Inputs(spec, opts.cache, opts.plugin_source)
        # The core's, the plugin's and the guard's, by stage (build-plugin and build-guard
        # run side by side: the order they end in is not the order they are listed in).
        self.built: dict[str, StageResult] = {}

    def context(self) -> Context:
        return Context("release", self.spec, self.opts.cache, self.opts.dist_root)

    def env_free(self, blocked: PythonUnavailable | None) -> None:
        if self.search is not None:  # they may look for the interpreter again
            self.search.wait()
        _env_free_checks(self.spec, self.opts, self.out, self.inputs, blocked)

    def build_env(self) -> None:
        from vllm_plugin_release.stages.build_core import prepare_build_env

        # what goes wrong, build-core meets again
        prepare_build_env(self.spec, self.opts.cache, self.search)

    def lock_check(self) -> None:
        request, _ = build_request(self.spec, self.inputs.tree)
        try:
            check_lock(self.spec.resolve(self.spec.build.constraints), request)
        except BadInput:  # the lock's error stands (exit 2); where the spec's Python is
            self.env_free(None)  # missing too, the env-free checks still run
            raise

    def build_core(self) -> None:
        from vllm_plugin_release.stages.build_core import build_core as run

        try:
            result = run(
                self.spec,
                cache=self.opts.cache,
                dist_root=self.opts.dist_root,
                tree=self.inputs.tree,
                fetcher=self.inputs.fetcher,
            )
        except PythonUnavailable as exc:  # the run stops here (exit 3), after the checks
            self.env_free(exc)  # that need no pairing env
            raise
        self.out.facts["core wheel"] = _wheel(result)
        self.out.ran_in["build-core"] = result.data.backend
        self.built["build-core"] = result

    def build_plugin(self) -> None:
        from vllm_plugin_release.stages.build_plugin import build_plugin as run

        result = run(
            self.spec,
            cache=self.opts.cache,
            dist_root=self.opts.dist_root,
            plugin=self.inputs.plugin,
            tree=self.inputs.tree,
        )
        self.out.facts["plugin wheel"] = _wheel(result)
        self.out.ran_in["build-plugin"] = result.data.backend
        self.built["build-plugin"] = result

    def build_guard(self) -> None:
        from vllm_plugin_release.stages.build_guard import build_guard as run

        result = run(self.spec, cache=self.opts.cache, dist_root=self.opts.dist_root)
        self.out.facts["guard wheel"] = _wheel(result)
        self.built["build-guard"] = result

    def twine_check(self) -> None:
        built = [self.built[name] for name in BUILDS if name in self.built]
        if not all(b.cached for b in built):
            # New wheels are final now: publish's `twine check` runs in conform's idle time
            # (cached wheels were most likely published and proven already).
            from vllm_plugin_release.stages.publish import start_check_ahead

            wheels = [(b.wheel, b.data.wheel.sha256) for b in built]
            start_check_ahead(self.ahead, wheels, self.opts.cache)

    def tests_ahead(self, python: Path, module: str | None) -> None:
        """The plugin's tests, started while the env is checked; conform takes that run."""
        from vllm_plugin_release.conform import registry
        from vllm_plugin_release.conform.checks import plugin_tests

        if "plugin_tests" in registry.applicable(self.spec):
            cfg = plugin_tests.settings_for(self.spec)
            suite = plugin_tests.Suite(self.inputs.plugin.root, self.opts.runner, cfg, module)
            plugin_tests.start_ahead(self.ahead, self.opts.cache, python, suite)

    def env(self) -> None:
        from vllm_plugin_release.stages.pairing_env import PairingContext, create_env

        try:
            record = create_env(
                PairingContext(
                    self.spec,
                    self.opts.cache,
                    self.opts.dist_root,
                    self.inputs.plugin,
                    self.inputs.tree,
                    site=self.opts.runner,
                    runtime_env=self.opts.runtime_env,
                    search=self.search,
                ),
                conduct_gate=False,  # the platform plugin's answer is the environment check's
                on_installed=self.tests_ahead,
            )
        except PythonUnavailable as exc:  # the wheels were cached (they do not depend on
            self.env_free(exc)  # where the interpreter lives): the run stops here, as at
            raise  # build-core, after the env-free checks
        # The in-env parts of conform run where the pairing environment lives.
        self.out.ran_in["env"] = self.out.ran_in["conform (in-env parts)"] = record.backend
        runtime = record.runtime
        self.out.facts["runtime"] = f"{runtime.name}: {runtime.status}" + (
            " (stand-in checked in an overlay, a test double)" if runtime.stand_in else ""
        )

    def conform(self) -> None:
        from vllm_plugin_release.conform.suite import conform_cached as run

        card = run(self.inputs.context(self.opts.runner, self.opts.dist_root, self.ahead))
        self.out.facts["verdict"] = card.verdict
        self.out.facts["scorecard"] = str(
            dist_dir(self.opts.dist_root, self.spec.name) / records.SCORECARD_MD
        )

    def manifest(self) -> None:
        from vllm_plugin_release.stages.manifest import build_for_spec

        made = build_for_spec(
            self.spec,
            signing_key=self.opts.signing_key,
            dist_root=self.opts.dist_root,
            cache=self.opts.cache,
        )
        self.out.facts["manifest"] = str(made.manifest_path)
        self.out.facts["pairing id"] = made.manifest.pairing_id
        self.out.facts["public key"] = str(made.public_key_path)

    def publish(self) -> None:
        from vllm_plugin_release.stages.publish import Options, publish_spec

        options = Options(
            index=self.opts.index,
            store=self.opts.store,
            signing_key=self.opts.signing_key,
            allow_uncertified=self.opts.allow_uncertified,
            dist_root=self.opts.dist_root,
        )
        result = publish_spec(self.spec, options, cache=self.opts.cache, ahead=self.ahead)
        if result.proven_in is not None:  # the install proof runs on the spec's runner too
            self.out.ran_in["publish (install proof)"] = result.proven_in
        wheels = ", ".join(f"{name} {status}" for name, status in result.wheels.items())
        self.out.facts["published"] = (
            f"{wheels} on {result.index}; manifest {result.store_status} in {result.store}"
        )

    def ledger(self) -> None:
        from vllm_plugin_release.flows.ledger import Verdict, record_verdict

        written = record_verdict(
            self.spec,
            dist_dir(self.opts.dist_root, self.spec.name),
            Verdict(self.opts.runner),
            cache=self.opts.cache,
            store=self.opts.store,
            signing=self.opts.signing_key,
        )
        self.out.facts["ledger"] = f"entry #{written.seq} (signed, chain verified)"


def graph(
    spec: Spec,
    opts: Options,
    out: Outcome,
    ahead: proc.Ahead | None = None,
    search: Search | None = None,
) -> Graph:
    """The release's stages in the line's order, with the extras that join "release";
    `ahead` None: a graph drawn, not walked; `search`: the interpreter, looked for ahead."""
    s = _Stages(spec, opts, out, proc.Ahead() if ahead is None else ahead, search)
    # What each stage has cached, for the drawing (`--graph`); the walk never asks.
    probe = Probes(spec, opts.cache, opts.dist_root, opts.runner, opts.plugin_source)
    builds = BUILDS
    stages = [
        Stage("build-env", s.build_env, ahead=True, about="the build environment, from the lock"),
        Stage("lock", s.lock_check, about="the lock against the core's requirements"),
        Stage("build-core", s.build_core, ("lock", "build-env"), cached=probe.build_core),
        # build-plugin and build-guard need only the core's build: side by side
        Stage("build-plugin", s.build_plugin, ("build-core",), cached=probe.build_plugin),
        Stage("build-guard", s.build_guard, ("build-core",), cached=probe.build_guard),
        Stage(
            "env",
            s.env,
            builds,
            about="the pairing environment; plugin tests start ahead",
            cached=probe.env,
        ),
        Stage("conform", s.conform, ("env",), about="the scorecard", cached=probe.conform),
        Stage("manifest", s.manifest, ("conform",)),
    ]
    if opts.publish:
        stages += [
            Stage("twine-check", s.twine_check, builds, ahead=True, about="new wheels only"),
            Stage("publish", s.publish, ("manifest", "twine-check")),
            Stage("ledger", s.ledger, ("publish",)),
        ]
    return Graph(extended("release", stages, s.context))


def _env_free_checks(
    spec: Spec, opts: Options, out: Outcome, inputs: Inputs, blocked: PythonUnavailable | None
) -> None:
    """The checks that need no pairing environment, when the spec's Python cannot run here
    (`blocked`, or looked for now; nothing when it can). Their own failure is a warning:
    the error that stopped the run is the one reported."""
    from vllm_plugin_release.conform.suite import blocker, conform_env_free

    try:
        ctx = inputs.context(opts.runner, opts.dist_root)
        if blocked is None:
            blocked = blocker(ctx)
            if blocked is None:
                return
            progress.warn(str(blocked))  # beside the error that stops the run
        card = conform_env_free(ctx, blocked)
    except VprError as exc:
        progress.warn(f"the checks that need no pairing environment did not run: {exc}")
        return
    out.facts["verdict"] = f"{card.verdict} (only the checks that need no environment)"
    out.facts["scorecard"] = str(dist_dir(opts.dist_root, spec.name) / records.SCORECARD_MD)


def release(spec: Spec, opts: Options) -> Outcome:
    """Run the stages; a failing stage stops the run with its own exit code."""
    out = Outcome()
    done = Walk(seconds=out.stages)
    # One warm worker per pairing env for the run: started by env, reused by conform.
    with envrun.session():
        search = None
        if opts.runtime_env is None:  # the env stage's, found while the stages before it run
            from vllm_plugin_release.stages.wheelbuild import interpreter_ahead

            search = interpreter_ahead(spec)
        try:
            # This walk's work started ahead: what no stage took (the run stopped before it,
            # or reused a cached result) is stopped when the walk ends.
            with proc.Ahead() as ahead:
                g = graph(spec, opts, out, ahead, search)
                # build-env still running when the run stops: its installer is stopped
                walk(g, record=done, stop={"build-env": proc.stop_all})
        finally:
            _summary(spec, opts, out, done)
    return out


def _summary(spec: Spec, opts: Options, out: Outcome, done: Walk) -> None:
    dist = dist_dir(opts.dist_root, spec.name)
    failed = done.failed
    table = Table(title=f"release {spec.name}" + (f" (stopped at {failed})" if failed else ""))
    table.add_column("stage")
    table.add_column("seconds", justify="right")
    for name, seconds in out.stages.items():
        mark = " (failed)" if name == failed else " (stopped)" if name in done.stopped else ""
        table.add_row(name + mark, f"{seconds:.1f}")
    progress.console.print(table)
    order = {key: n for n, key in enumerate(FACTS)}
    for key, value in sorted(out.facts.items(), key=lambda kv: order.get(kv[0], len(FACTS))):
        progress.info(f"{key}: {value}")
    for line in next_steps(spec, opts, out, failed):
        progress.info(f"next: {line}")
    ci.report_scorecard(dist)  # GitHub Actions: job summary and an ::error:: per failed check
    if dist.exists():
        release = {
            "stages_seconds": out.stages,
            "failed_stage": failed,
            "ran_in": {k: None if v is None else v.to_json() for k, v in out.ran_in.items()},
        }
        kept = records.run_file(dist)  # bounded; the other sections as written
        write_json(dist / records.RUN, {**kept.raw, "release": release})


def next_steps(spec: Spec, opts: Options, out: Outcome, failed: str | None) -> list[str]:
    """What to look at next, from how the run ended (the last lines of `vpr release`)."""
    from vllm_plugin_release.conform.lib import hardwaresettings

    dist = dist_dir(opts.dist_root, spec.name)
    rerun = f"vpr release --spec {spec.path}" + (" --no-publish" if not opts.publish else "")
    if failed:
        return [
            f"the error above says why {failed} stopped; build and install logs are in "
            f"{opts.cache.root / 'logs'}/",
            f"after fixing it: {rerun} (finished stages reuse their cached results)",
        ]
    verdict = out.facts.get("verdict")
    steps = [f"open {dist / records.SCORECARD_HTML} (verdict {verdict}: why, and what is next)"]
    if verdict == "lab":
        steps.append(f"the failed checks are listed first in {dist / records.SCORECARD_MD}")
    elif verdict == "pilot":
        if (hw := hardwaresettings.declared(spec)) is not None and hw.device_class:
            steps.append(
                "verdict fleet needs the hardware part, on the hardware runner: "
                f"nox -s conform-hardware -- --spec {spec.path}"
            )
        else:
            steps.append("pilot is this spec's highest verdict: it has no [conformance.hardware]")
    if "manifest" in out.facts:
        key = out.facts.get("public key", "KEY.pub")
        steps.append(f"check the signed manifest: vpr manifest verify {dist} --key {key}")
    return steps
