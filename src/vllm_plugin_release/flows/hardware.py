"""The hardware runner's part (`vpr hardware plan|probe|live|conform`): which specs need a
runner, what is there (nothing reported present unless observed), and the live checks that
make the scorecard's `hardware` check; `fleet` needs it passed."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.conform.checks.hardware import (
    PROBE_RECORD,
    RECORD,
    LiveOutcome,
    TpOutcome,
    classify_rejection,
    collect,
    hardware_check,
    hardware_record,
    live_result,
    mesh_text,
    missing_error,
    without_runtime,
)
from vllm_plugin_release.conform.lib.hardwaresettings import HardwareSettings, settings
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import write_json
from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK, BadInput, OutsideFailure
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.edges import proc
from vllm_plugin_release.edges.device import Probe, probe, runtime_env_from_environ
from vllm_plugin_release.edges.git import git, refuse_option
from vllm_plugin_release.flows.stagewalk import Context, Halt, extended, walk

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.core.envrecord import EnvRecord


# The plan (CI's matrix)


def _changed(files: list[Path], since: str, root: Path) -> set[Path]:
    refuse_option(since, "--since")
    done = git("diff", "--name-only", since, "HEAD", "--", "buildspec", "constraints", cwd=root)
    if done.returncode != 0:
        raise OutsideFailure(
            f"git diff {since}..HEAD failed: {done.stderr.strip()[-300:]}",
            hint="fetch the history (actions/checkout fetch-depth: 0)",
        )
    changed = {(root / line).resolve() for line in done.stdout.split()}
    if any(p.parent.name == "constraints" for p in changed):
        return {f.resolve() for f in files}  # a lock changed: every spec may use it
    return {f.resolve() for f in files} & changed


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """A spec with a hardware part: one job of the hardware matrix."""

    spec: str
    name: str
    device_class: str
    mesh_variable: str  # "" when the plugin reads no mesh variable
    mesh_device: str
    runner_labels: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """The job's entry of the matrix (`include`), as printed and handed to CI."""
        return {**dataclasses.asdict(self), "runner_labels": list(self.runner_labels)}


@dataclass(frozen=True, slots=True)
class HardwarePlan:
    """`vpr hardware plan`: the jobs to run, and the specs left out with why."""

    include: tuple[PlanEntry, ...]
    skipped: tuple[tuple[str, str], ...]  # (spec, reason)

    def to_json(self) -> dict[str, list[dict[str, object]]]:
        return {
            "include": [entry.to_json() for entry in self.include],
            "skipped": [{"spec": spec, "reason": why} for spec, why in self.skipped],
        }


def plan(spec_files: list[Path], since: str | None = None) -> HardwarePlan:
    from vllm_plugin_release.buildspec.load import load_spec

    files = spec_files or sorted(Path("buildspec").glob("*.toml"))
    if since and set(since) != {"0"}:
        keep = _changed(files, since, Path.cwd())
        files = [f for f in files if f.resolve() in keep]
    include: list[PlanEntry] = []
    skipped: list[tuple[str, str]] = []
    for file in files:
        spec = load_spec(file)
        hw = settings(spec)
        if not hw.device_class:
            skipped.append((str(file), "no [conformance.hardware] device_class"))
            continue
        include.append(
            PlanEntry(
                spec=str(file),
                name=spec.name,
                device_class=hw.device_class,
                mesh_variable=hw.mesh_variable or "",
                mesh_device=hw.mesh_device or "",
                runner_labels=tuple(hw.runner_labels),
            )
        )
    return HardwarePlan(tuple(include), tuple(skipped))


# The probe


def probe_python(dist: Path, runtime_env: Path | None) -> Path:
    """Where to look for the runtime: --runtime-env, the hardware pairing env, else here."""
    if runtime_env is not None:
        return runtime_env / "bin" / "python"
    env = records.env_record_at(dist)
    if env is not None and env.runner == "hardware":
        return env.python
    return Path(sys.executable)


def observe(spec: Spec, python: Path, hw: HardwareSettings, dist: Path) -> Probe:
    """Probe the runtime in `python`, the device and the mesh variable; record it in `dist`."""
    found = probe(spec, python, hw.device_glob, hw.mesh_device, mesh_variable=hw.mesh_variable)
    write_json(dist / PROBE_RECORD, found.to_json())
    return found


def require(found: Probe) -> None:
    """Exit 3 naming everything missing; else say what was found."""
    if not found.ok:
        raise missing_error(found)
    progress.info(
        f"hardware-probe: runtime {found.runtime.module} present ({found.runtime.python}),"
        f" {len(found.devices.found)} device node(s)" + mesh_text(found)
    )


# Serving: the -tp 2 probe and the live load test


def serve_command(vllm: Path, hw: HardwareSettings, port: int, extra: tuple[str, ...] = ()):
    if not hw.model:
        raise BadInput(
            "[conformance.hardware] model is not set; the live test serves that model",
            hint='add model = "..." to [conformance.hardware]',
        )
    return [
        str(vllm),
        "serve",
        hw.model,
        *extra,
        *hw.serve_args,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]


def tp_probe(vllm: Path, hw: HardwareSettings, env: dict[str, str], log: Path) -> TpOutcome:
    """Start `vllm serve MODEL -tp 2`: the plugin must refuse it with a clear error."""
    port = proc.free_port()
    argv = serve_command(vllm, hw, port, ("-tp", "2"))
    server = proc.start_server(argv, env, log)
    came_up = False
    deadline = time.monotonic() + hw.probe_timeout
    try:
        while time.monotonic() < deadline and server.poll() is None:
            if proc.server_healthy(port):
                came_up = True
                break
            time.sleep(2)
    finally:
        code = server.poll()
        proc.stop_server(server)
    result = classify_rejection(code, came_up, proc.log_tail(log, 200), hw.mesh_variable)
    return dataclasses.replace(result, argv=tuple(argv[1:]), log=str(log))


def live_test(
    spec: Spec, vllm: Path, hw: HardwareSettings, env: dict[str, str], dist: Path
) -> LiveOutcome:
    """Start `vllm serve` with the spec's model, run the mixed-load test, stop the server."""
    from vllm_plugin_release.replay import mix

    request_mix = mix.from_spec(spec)
    port = proc.free_port()
    log = dist / "hardware-proc.log"
    argv = serve_command(vllm, hw, port)
    server = proc.start_server(argv, env, log)
    started = time.monotonic()
    try:
        while not proc.server_healthy(port):
            if server.poll() is not None:
                detail = f"vllm serve exited {server.returncode} before answering /health"
                return LiveOutcome("fail", detail, log_tail=proc.log_tail(log), log=str(log))
            if time.monotonic() - started > hw.startup_timeout:
                detail = f"vllm serve did not answer /health within {hw.startup_timeout} s"
                return LiveOutcome("fail", detail, log_tail=proc.log_tail(log), log=str(log))
            time.sleep(5)
        startup = round(time.monotonic() - started, 1)
        return _load_test(port, request_mix, hw, dist, startup, log)
    finally:
        proc.stop_server(server)


def _load_test(
    port: int, request_mix: Any, hw: HardwareSettings, dist: Path, startup: float, log: Path
) -> LiveOutcome:
    """The mixed-load test against the server on `port`, summarised as the live result."""
    from vllm_plugin_release.replay import loadtest

    options = loadtest.LoadOptions(
        model=None, max_requests=hw.max_requests, duration_s=hw.duration_s
    )
    out = dist / records.LOADTEST
    try:
        result = loadtest.run(f"http://127.0.0.1:{port}", request_mix, options, out=out)
    except OutsideFailure as exc:
        return LiveOutcome("fail", exc.message, file=str(out), log=str(log))
    outcome = live_result(result.summary, startup)
    return dataclasses.replace(outcome, file=str(out), log=str(log))


def live(spec: Spec, dist: Path, hw: HardwareSettings, spec_arg: str | Path) -> int:
    """Probe again in the hardware pairing env, then the -tp 2 probe and the live load test into
    the scorecard. Exit 0 only with verdict `fleet`; `spec_arg` is for the hint when the env is
    missing."""
    env = records.env_record_at(dist)
    has_env = env is not None and env.runner == "hardware"
    python = env.python if env and has_env else probe_python(dist, runtime_env_from_environ())
    found = observe(spec, python, hw, dist)
    if not found.ok:
        with contextlib.suppress(BadInput):  # no hardware scorecard yet: nothing to correct
            card = collect(dist, hardware_check(found, None, None))
            progress.info(f"hardware-live: verdict {card.verdict} (hardware part not run)")
        raise missing_error(found)
    if not has_env:
        raise BadInput(
            f"{dist / records.ENV}: no hardware pairing environment",
            hint=f"run `vpr env --spec {spec_arg} --site hardware` first",
        )
    vllm = python.parent / "vllm"
    if not vllm.exists():
        raise BadInput(f"{vllm}: not found; the pairing environment has no vllm command")
    serve_env = dict(proc.inherited())
    if hw.mesh_variable:
        serve_env[hw.mesh_variable] = found.mesh.value or ""
    serve_command(vllm, hw, 0)  # the model must be set before anything starts
    if hw.parallelism == "mesh":
        progress.info("hardware-live: vllm serve -tp 2 (must be rejected)")
        tp = tp_probe(vllm, hw, serve_env, dist / "hardware-tp-probe.log")
    else:  # the plugin shards with -tp itself: nothing to reject
        tp = TpOutcome("not-applicable", 'not run: parallelism = "tp" in the spec')
    progress.info(f"hardware-live: -tp 2 probe: {tp.status}: {tp.detail}")
    progress.info(f"hardware-live: vllm serve {hw.model}{mesh_text(found)}")
    result = live_test(spec, vllm, hw, serve_env, dist)
    progress.info(f"hardware-live: live load test: {result.status}: {result.detail}")
    check = hardware_check(found, tp, result)
    write_json(dist / RECORD, hardware_record(found, tp, result))
    card = collect(dist, check)
    progress.info(f"hardware-live: hardware check {check.status}; verdict {card.verdict}")
    return EXIT_OK if card.verdict == "fleet" else EXIT_GATE


# The whole sequence on the hardware runner


@dataclass(frozen=True)
class Options:
    cache: Cache
    dist_root: Path
    plugin_source: Path | None = None
    runtime_env: Path | None = None  # default: $VPR_RUNTIME_ENV


class _Steps:
    """The sequence on the hardware runner, a method per stage."""

    def __init__(self, spec: Spec, opts: Options, spec_arg: str | Path) -> None:
        from vllm_plugin_release.flows.sources import Inputs

        self.spec = spec
        self.opts = opts
        self.spec_arg = spec_arg
        self.inputs = Inputs(spec, opts.cache, opts.plugin_source)
        self.dist = dist_dir(opts.dist_root, spec.name)
        self.hw = settings(spec)
        self.runtime_env = opts.runtime_env or runtime_env_from_environ()
        self.record: EnvRecord | None = None
        self.code = EXIT_OK

    def installs_runtime(self) -> bool:
        """The runtime is pinned in the pairing lock: the device and mesh variable are probed before
        any environment is made, then the runtime is installed by hash and probed in it."""
        from vllm_plugin_release.stages.requests import runtime_plan

        return (
            self.runtime_env is None
            and runtime_plan(self.spec, "hardware", None).status == "install"
        )

    def probe(self) -> None:
        if self.installs_runtime():
            found = observe(self.spec, Path(sys.executable), self.hw, self.dist)
            require(without_runtime(found, self.spec))
        else:
            require(
                observe(self.spec, probe_python(self.dist, self.runtime_env), self.hw, self.dist)
            )

    def env(self) -> None:
        from vllm_plugin_release.stages.pairing_env import PairingContext, create_env

        pairing = PairingContext(
            self.spec,
            self.opts.cache,
            self.opts.dist_root,
            self.inputs.plugin,
            self.inputs.tree,
            site="hardware",
            runtime_env=self.runtime_env,
        )
        self.record = create_env(pairing)

    def _python(self) -> Path:
        if self.record is None:  # the walk runs env before the stages that read it
            raise RuntimeError("the environment's record is read before env ran")
        return self.record.python

    def runtime_probe(self) -> None:
        require(observe(self.spec, self._python(), self.hw, self.dist))

    def conform(self) -> None:
        from vllm_plugin_release.conform.suite import conform_cached, verdict_line

        print(self._python())  # the environment's, once it passed every probe
        card = conform_cached(self.inputs.context("hardware", self.opts.dist_root))
        progress.info(verdict_line(card, self.dist))
        if card.verdict == "lab":
            self.code = EXIT_GATE
            raise Halt  # the live test is for a pairing that conforms

    def live(self) -> None:
        self.code = live(self.spec, self.dist, self.hw, self.spec_arg)

    def context(self) -> Context:
        return Context("hardware", self.spec, self.opts.cache, self.opts.dist_root)


def graph(steps: _Steps) -> Graph:
    """The hardware runner's stages and what each needs, with the extras that join
    "hardware"; runtime-probe only where the environment installs the runtime."""
    s = steps
    stages = [
        Stage("probe", s.probe, about="runtime, device and mesh variable, before any env"),
        Stage("env", s.env, ("probe",), about="the hardware pairing environment"),
    ]
    conform_needs: tuple[str, ...] = ("env",)
    if s.installs_runtime():
        stages.append(Stage("runtime-probe", s.runtime_probe, ("env",), about="in the env"))
        conform_needs = ("runtime-probe",)
    stages += [
        Stage("conform", s.conform, conform_needs, about="the scorecard; verdict lab stops here"),
        Stage("live", s.live, ("conform",), about="-tp 2 probe and the live load test"),
    ]
    return Graph(extended("hardware", stages, s.context))


def conform_hardware(spec: Spec, opts: Options, spec_arg: str | Path) -> int:
    """Probe, env, conform and live on the hardware site; stops at the first step that fails with
    its exit code (3: probe, 1: verdict `lab`), else `live`'s code."""
    steps = _Steps(spec, opts, spec_arg)
    walk(graph(steps))
    return steps.code
