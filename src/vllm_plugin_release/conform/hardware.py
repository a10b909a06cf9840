"""The hardware runner's part of conformance (`nox -s conform-hardware`).

* `vpr hardware-plan` lists the specs that have a hardware part (`[conformance.hardware]`
  with a `device_class`) and the runner label each needs, for CI's job matrix.
* `vpr hardware-probe` detects the vendor runtime and the device: for Tenstorrent,
  `ttnn` importable (and not a stand-in), a device node under `/dev/tenstorrent/`,
  and `MESH_DEVICE` set (to the spec's mesh when it names one). Anything missing:
  exit 3, naming each missing piece. Nothing is reported as present unless it was
  observed.
* `vpr hardware-live` runs what only the hardware can show, in the hardware pairing
  environment (`vpr env --runner hardware`): a probe that `vllm serve ... -tp 2` is
  rejected with a clear error (the TT plugin takes its mesh from `MESH_DEVICE`, never
  from GPU rank flags), and the live mixed-load test against a `vllm serve` it starts
  with the spec's model and settings. Both results become the `hardware` check of the
  scorecard written by `vpr conform --runner hardware`, and the verdict is recomputed:
  `fleet` needs that check passed. Exit 0 only with verdict `fleet`.

Spec keys, `[conformance.hardware]`:
  device_class = "n300"          runner label (n150, n300, t3k, galaxy, p150, ...)
  mesh_device = "N300"           MESH_DEVICE value (default from device_class)
  model = "meta-llama/Llama-3.1-8B-Instruct"
  serve_args = ["--max-model-len", "8192"]   never -tp/-pp: the mesh comes from MESH_DEVICE
  device_glob = "/dev/tenstorrent/*"         (the default when the runtime module is ttnn)
  startup_timeout = 3600         seconds for `vllm serve` to answer /health
  probe_timeout = 900            seconds for the `-tp 2` start to fail
  max_requests = 64              load test bounds
  duration_s = 600
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomllib

from vllm_plugin_release.cli.build import add_dirs, add_plugin_source, add_spec_argument
from vllm_plugin_release.conform.result import CheckResult, Evidence
from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import atomic_write_text, write_json
from vllm_plugin_release.core.errors import EXIT_GATE, EXIT_OK, BadInput, OutsideFailure

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.spec.model import Spec

PROBE_RECORD = "hardware-probe.json"
RECORD = "hardware.json"
CHECK = "hardware"
# MESH_DEVICE values of the TT device classes (runner labels).
MESH_DEVICES = {
    "n150": "N150",
    "n300": "N300",
    "t3k": "T3K",
    "galaxy": "TG",
    "p150": "P150",
    "p300": "P300",
}
DEFAULT_DEVICE_GLOBS = {"ttnn": "/dev/tenstorrent/*"}
RANK_FLAGS = (
    "-tp",
    "--tensor-parallel-size",
    "-pp",
    "--pipeline-parallel-size",
    "-dp",
    "--data-parallel-size",
)
# A clear rejection of `-tp 2`: an error line that names what was rejected (a line that
# only echoes the arguments, e.g. "non-default args: {'tensor_parallel_size': 2}", is not).
REJECTION_SUBJECT = re.compile(
    r"tensor[-_ ]parallel|\B-tp\b|MESH_DEVICE|pipeline[-_ ]parallel", re.IGNORECASE
)
REJECTION_WORDS = re.compile(
    r"error|reject|not supported|unsupported|invalid|must|cannot|can't|instead", re.IGNORECASE
)
LABEL = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _positive(description: str, default: int) -> dict[str, Any]:
    return {"type": "number", "exclusiveMinimum": 0, "default": default, "description": description}


HARDWARE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The hardware runner's part (`nox -s conform-hardware`): which runner, "
    "which mesh, which model `vllm serve` starts for the live load test.",
    "additionalProperties": False,
    "properties": {
        "device_class": {
            "type": "string",
            "pattern": LABEL.pattern,
            "description": "Runner label of the device class (n150, n300, t3k, galaxy, p150); "
            "CI runs the hardware job on [self-hosted, tenstorrent, device_class].",
        },
        "mesh_device": {
            "type": "string",
            "description": "MESH_DEVICE for the runtime (default from device_class: N150, N300, "
            "T3K, TG, P150). The mesh is never given as -tp/-pp.",
        },
        "model": {"type": "string", "description": "Model `vllm serve` starts for the live test."},
        "serve_args": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Extra `vllm serve` arguments; GPU rank flags (-tp, -pp, -dp) are "
            "refused.",
        },
        "device_glob": {
            "type": "string",
            "description": "Device nodes that prove a device is visible (default for ttnn: "
            "/dev/tenstorrent/*).",
        },
        "startup_timeout": _positive("Seconds `vllm serve` may take to answer /health.", 3600),
        "probe_timeout": _positive("Seconds the `-tp 2` start may take to fail.", 900),
        "max_requests": {
            "type": "integer",
            "minimum": 1,
            "default": 64,
            "description": "Live load test: at most this many requests.",
        },
        "duration_s": _positive("Live load test: at most this many seconds.", 600),
    },
}


@dataclass(frozen=True)
class HardwareSettings:
    device_class: str | None
    mesh_device: str | None
    model: str | None
    serve_args: tuple[str, ...]
    device_glob: str | None
    startup_timeout: float
    probe_timeout: float
    max_requests: int
    duration_s: float


def _where(spec: Spec, key: str | None = None) -> str:
    """`FILE:LINE: [conformance.hardware] KEY` for an error message."""
    from vllm_plugin_release.spec.model import locate

    path = ("conformance", "hardware", *((key,) if key else ()))
    try:
        line = locate(Path(spec.path).read_text(encoding="utf-8"), path)
    except OSError:
        line = None
    at = f"{spec.path}:{line}" if line else str(spec.path)
    return f"{at}: [conformance.hardware]" + (f" {key}" if key else "")


def settings(spec: Spec) -> HardwareSettings:
    """`[conformance.hardware]`, checked; every error names the file, the line and the key."""
    table = spec.conformance.get("hardware", {})
    if not isinstance(table, dict):
        raise BadInput(f"{_where(spec)} must be a table")
    known = set(HARDWARE_SCHEMA["properties"])
    for key in table:
        if key not in known:
            raise BadInput(
                f"{_where(spec, key)}: unknown key; expected one of {', '.join(sorted(known))}"
            )
    for key in ("device_class", "mesh_device", "model", "device_glob"):
        if key in table and not isinstance(table[key], str):
            raise BadInput(f"{_where(spec, key)} must be a string")
    device_class = table.get("device_class")
    if device_class is not None and not LABEL.match(device_class):
        raise BadInput(
            f"{_where(spec, 'device_class')} = {device_class!r}: expected a runner label "
            "such as n300"
        )
    serve_args = table.get("serve_args", [])
    if not isinstance(serve_args, list) or not all(isinstance(a, str) for a in serve_args):
        raise BadInput(f"{_where(spec, 'serve_args')} must be a list of strings")
    for arg in serve_args:
        flag = arg.split("=", 1)[0]
        if flag in RANK_FLAGS:
            raise BadInput(
                f"{_where(spec, 'serve_args')} has {arg!r}: the TT plugin takes its mesh from "
                "MESH_DEVICE and rejects GPU rank flags",
                hint="remove it; set mesh_device (or device_class) instead",
            )
    numbers: dict[str, float] = {}
    for key, default in (
        ("startup_timeout", 3600),
        ("probe_timeout", 900),
        ("max_requests", 64),
        ("duration_s", 600),
    ):
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise BadInput(f"{_where(spec, key)} must be a positive number, got {value!r}")
        numbers[key] = value
    mesh = table.get("mesh_device") or (MESH_DEVICES.get(device_class) if device_class else None)
    module = spec.runtime.get("module")
    return HardwareSettings(
        device_class=device_class,
        mesh_device=mesh,
        model=table.get("model"),
        serve_args=tuple(serve_args),
        device_glob=table.get("device_glob") or DEFAULT_DEVICE_GLOBS.get(module or ""),
        startup_timeout=float(numbers["startup_timeout"]),
        probe_timeout=float(numbers["probe_timeout"]),
        max_requests=int(numbers["max_requests"]),
        duration_s=float(numbers["duration_s"]),
    )


# ---------------------------------------------------------------------------
# The plan (CI's matrix)


def _changed(files: list[Path], since: str, root: Path) -> set[Path]:
    done = subprocess.run(
        ["git", "diff", "--name-only", since, "HEAD", "--", "buildspec", "constraints"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise OutsideFailure(
            f"git diff {since}..HEAD failed: {done.stderr.strip()[-300:]}",
            hint="fetch the history (actions/checkout fetch-depth: 0)",
        )
    changed = {(root / line).resolve() for line in done.stdout.split()}
    if any(p.parent.name == "constraints" for p in changed):
        return {f.resolve() for f in files}  # a lock changed: every spec may use it
    return {f.resolve() for f in files} & changed


def plan(spec_files: list[Path], since: str | None = None) -> dict[str, Any]:
    from vllm_plugin_release.spec.model import load

    files = spec_files or sorted(Path("buildspec").glob("*.toml"))
    if since and set(since) != {"0"}:
        keep = _changed(files, since, Path.cwd())
        files = [f for f in files if f.resolve() in keep]
    include, skipped = [], []
    for file in files:
        spec = load(file)
        hw = settings(spec)
        if not hw.device_class:
            skipped.append({"spec": str(file), "reason": "no [conformance.hardware] device_class"})
            continue
        include.append(
            {
                "spec": str(file),
                "name": spec.name,
                "device_class": hw.device_class,
                "mesh_device": hw.mesh_device or "",
            }
        )
    return {"include": include, "skipped": skipped}


# ---------------------------------------------------------------------------
# The probe

_IMPORT_PROBE = """
import importlib, json, sys
name = sys.argv[1]
out = {"python": sys.executable}
try:
    module = importlib.import_module(name)
except BaseException as exc:
    out["status"] = "absent"
    out["error"] = f"{type(exc).__name__}: {exc}"[:500]
else:
    out["status"] = "present"
    out["file"] = getattr(module, "__file__", None)
    out["version"] = str(getattr(module, "__version__", "") or "") or None
    try:
        from importlib.metadata import packages_distributions, version
        dists = packages_distributions().get(name.split(".")[0], [])
        out["distributions"] = {d: version(d) for d in dists}
    except Exception as exc:
        out["distributions"] = {}
print(json.dumps(out))
"""


@dataclass
class Probe:
    runtime: dict[str, Any]
    devices: dict[str, Any]
    mesh: dict[str, Any]
    missing: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "runtime": self.runtime,
            "devices": self.devices,
            "mesh_device": self.mesh,
            "missing": self.missing,
        }


def _stand_in_name(spec: Spec) -> str | None:
    stand_in = spec.runtime.get("stand_in")
    if not stand_in:
        return None
    try:
        data = tomllib.loads((spec.resolve(stand_in) / "pyproject.toml").read_text())
        return str(data["project"]["name"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return None


def import_runtime(python: Path, module: str, timeout: float = 300) -> dict[str, Any]:
    """Import `module` in `python` (a subprocess) and say what happened."""
    try:
        done = subprocess.run(
            [str(python), "-c", _IMPORT_PROBE, module],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return {"python": str(python), "status": "absent", "error": "python not found"}
    except subprocess.TimeoutExpired:
        return {"python": str(python), "status": "absent", "error": f"import took > {timeout} s"}
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr or done.stdout).strip()[-300:]
        return {"python": str(python), "status": "absent", "error": f"probe failed: {tail}"}


def probe(
    spec: Spec, python: Path, hw: HardwareSettings, environ: dict[str, str] | None = None
) -> Probe:
    """Observe the runtime, the device and MESH_DEVICE; list what is missing."""
    environ = dict(os.environ if environ is None else environ)
    module = spec.runtime.get("module")
    if not spec.runtime or not module:
        raise BadInput(
            f"{spec.path}: [runtime] module is not set; the hardware part needs the vendor "
            "runtime's import name (e.g. ttnn)"
        )
    missing: list[str] = []
    runtime = {"name": spec.runtime.get("name"), "module": module, **import_runtime(python, module)}
    stand_in = _stand_in_name(spec)
    if runtime["status"] == "present" and stand_in and stand_in in runtime.get("distributions", {}):
        runtime["status"] = "stand-in"
        missing.append(
            f"runtime {module!r} in {python} is the stand-in {stand_in} (a test double), "
            "not the vendor runtime"
        )
    elif runtime["status"] != "present":
        missing.append(
            f"runtime module {module!r} is not importable in {python} "
            f"({runtime.get('error', 'absent')})"
        )
    if hw.device_glob:
        nodes = sorted(glob.glob(hw.device_glob))
        devices = {"glob": hw.device_glob, "found": nodes}
        if not nodes:
            missing.append(f"no device visible: nothing matches {hw.device_glob}")
    else:
        devices = {"glob": None, "found": []}
        missing.append(
            "no device check configured: set [conformance.hardware] device_glob "
            f"(the device nodes of runtime {module!r})"
        )
    mesh: dict[str, Any] = {"expected": hw.mesh_device, "value": environ.get("MESH_DEVICE")}
    if module == "ttnn" or hw.mesh_device:
        if not mesh["value"]:
            want = f" (expected {hw.mesh_device})" if hw.mesh_device else ""
            missing.append(f"MESH_DEVICE is not set{want}")
        elif hw.mesh_device and mesh["value"].upper() != hw.mesh_device.upper():
            missing.append(
                f"MESH_DEVICE={mesh['value']} but the spec's mesh is {hw.mesh_device} "
                f"([conformance.hardware] of {spec.path})"
            )
    return Probe(runtime=runtime, devices=devices, mesh=mesh, missing=missing)


def _env_record(dist: Path) -> dict[str, Any] | None:
    try:
        return json.loads((dist / "env.json").read_text())
    except (OSError, ValueError):
        return None


def probe_python(dist: Path, runtime_env: Path | None) -> Path:
    """Where to look for the runtime: --runtime-env, the hardware pairing env, else here."""
    if runtime_env is not None:
        return runtime_env / "bin" / "python"
    env = _env_record(dist)
    if env and env.get("runner") == "hardware" and env.get("python"):
        return Path(env["python"])
    return Path(sys.executable)


def _missing_error(found: Probe) -> OutsideFailure:
    return OutsideFailure(
        "hardware runner: not on a working hardware runner; missing:\n  - "
        + "\n  - ".join(found.missing),
        hint="run on the self-hosted hardware runner (runtime installed, device attached, "
        "MESH_DEVICE set); nothing was reported as passed",
    )


# ---------------------------------------------------------------------------
# Serving: the -tp 2 probe and the live load test


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server started in its own session (its process group), politely first."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


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


def start_server(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def classify_rejection(returncode: int | None, came_up: bool, output: str) -> dict[str, Any]:
    """The `-tp 2` probe's outcome from what was observed (pure)."""
    if came_up:
        return {"status": "accepted", "detail": "the server came up with -tp 2 (not rejected)"}
    if returncode is None:
        return {"status": "no-answer", "detail": "neither failed nor came up before the timeout"}
    if returncode == 0:
        return {"status": "accepted", "detail": "vllm serve -tp 2 exited 0"}
    lines = [
        line.strip()
        for line in output.splitlines()
        if REJECTION_SUBJECT.search(line)
        and REJECTION_WORDS.search(line)
        and "non-default args" not in line
    ]
    if lines:
        return {
            "status": "rejected",
            "detail": f"exit {returncode}: {lines[-1][:300]}",
            "exit_code": returncode,
        }
    return {
        "status": "unclear",
        "detail": f"exit {returncode}, but no error mentions tensor parallelism or MESH_DEVICE",
        "exit_code": returncode,
    }


def tp_probe(vllm: Path, hw: HardwareSettings, env: dict[str, str], log: Path) -> dict[str, Any]:
    """Start `vllm serve MODEL -tp 2`: the plugin must refuse it with a clear error."""
    port = free_port()
    argv = serve_command(vllm, hw, port, ("-tp", "2"))
    proc = start_server(argv, env, log)
    came_up = False
    deadline = time.monotonic() + hw.probe_timeout
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if _healthy(port):
                came_up = True
                break
            time.sleep(2)
    finally:
        code = proc.poll()
        _stop(proc)
    result = classify_rejection(code, came_up, _tail(log, 200))
    return {"argv": argv[1:], "log": str(log), **result}


def live_test(
    spec: Spec, vllm: Path, hw: HardwareSettings, env: dict[str, str], dist: Path
) -> dict[str, Any]:
    """Start `vllm serve` with the spec's model, run the mixed-load test, stop the server."""
    from vllm_plugin_release.replay import loadtest, mix

    request_mix = mix.from_spec(spec)
    port = free_port()
    log = dist / "hardware-serve.log"
    argv = serve_command(vllm, hw, port)
    proc = start_server(argv, env, log)
    started = time.monotonic()
    try:
        while not _healthy(port):
            if proc.poll() is not None:
                return {
                    "status": "fail",
                    "detail": f"vllm serve exited {proc.returncode} before answering /health",
                    "log_tail": _tail(log),
                    "log": str(log),
                }
            if time.monotonic() - started > hw.startup_timeout:
                return {
                    "status": "fail",
                    "detail": f"vllm serve did not answer /health within {hw.startup_timeout} s",
                    "log_tail": _tail(log),
                    "log": str(log),
                }
            time.sleep(5)
        startup = round(time.monotonic() - started, 1)
        options = loadtest.LoadOptions(
            model=None, max_requests=hw.max_requests, duration_s=hw.duration_s
        )
        out = dist / "loadtest.json"
        try:
            result = loadtest.run(f"http://127.0.0.1:{port}", request_mix, options, out=out)
        except OutsideFailure as exc:
            return {"status": "fail", "detail": exc.message, "file": str(out), "log": str(log)}
        s = result["summary"]
        complete = s["requests"]["completed"] == s["requests"]["planned"]
        return {
            "status": "pass" if complete else "fail",
            "detail": f"{s['requests']['completed']}/{s['requests']['planned']} requests "
            f"completed, TTFT p50 {s['ttft_s']['p50']} s, ITL p99 {s['itl_s']['p99']} s, "
            f"startup {startup} s",
            "summary": s,
            "file": str(out),
            "log": str(log),
        }
    finally:
        _stop(proc)


# ---------------------------------------------------------------------------
# Into the scorecard


def hardware_check(
    found: Probe | None, tp: dict[str, Any] | None, live: dict[str, Any] | None
) -> CheckResult:
    """The `hardware` check: pass only when everything was observed working."""
    evidence: list[Evidence] = []
    if found is None or not found.ok:
        reason = "; ".join(found.missing) if found else "the hardware probe did not run"
        return CheckResult(
            CHECK,
            "deferred",
            f"hardware part not run: {reason}",
            [Evidence(note=m, source="hardware-probe") for m in (found.missing if found else [])],
        )
    rt = found.runtime
    evidence.append(
        Evidence(
            note=f"runtime {rt['module']} {rt.get('version') or ''} imported from "
            f"{rt.get('file')}; devices {', '.join(found.devices['found'])}; "
            f"MESH_DEVICE={found.mesh['value']}",
            source="hardware-probe",
        )
    )
    statuses = []
    if tp is None:
        statuses.append("deferred")
        evidence.append(Evidence(note="-tp 2 probe: not run", source="probe"))
    else:
        ok = tp["status"] == "rejected"
        statuses.append("pass" if ok else "fail")
        evidence.append(
            Evidence(note=f"-tp 2 probe: {tp['status']}: {tp['detail']}", source="probe")
        )
    if live is None:
        statuses.append("deferred")
        evidence.append(Evidence(note="live load test: not run", source="loadtest"))
    else:
        statuses.append(live["status"])
        evidence.append(
            Evidence(
                note=f"live load test: {live['status']}: {live['detail']}",
                file=live.get("file"),
                source="loadtest",
            )
        )
    status = "fail" if "fail" in statuses else ("deferred" if "deferred" in statuses else "pass")
    summary = {
        "pass": "runtime and device observed; -tp 2 rejected with a clear error; live load "
        "test completed",
        "fail": "observed on the hardware runner and failed: "
        + "; ".join(e.note for e in evidence[1:] if "pass:" not in e.note),
        "deferred": "hardware part incomplete: "
        + "; ".join(e.note for e in evidence[1:] if "not run" in e.note),
    }[status]
    return CheckResult(
        CHECK,
        status,  # type: ignore[arg-type]
        summary,
        evidence,
        threshold={"tp_probe": "rejected", "live": "all requests complete"},
        details={"probe": found.to_json(), "tp_probe": tp, "live": live},
    )


def _result(name: str, data: dict[str, Any]) -> CheckResult:
    return CheckResult(
        name,
        data["status"],
        data.get("summary", ""),
        [Evidence(**e) for e in data.get("evidence", [])],
        data.get("threshold", {}),
        data.get("details", {}),
    )


def collect(dist: Path, check: CheckResult) -> dict[str, Any]:
    """Add (or replace) the hardware check in dist/scorecard.*; recompute the verdict."""
    from vllm_plugin_release.conform.scorecard import scorecard, to_html, to_markdown

    path = dist / "scorecard.json"
    try:
        card = json.loads(path.read_text())
    except FileNotFoundError:
        raise BadInput(f"{path}: not found", hint="run `vpr conform --runner hardware` first")
    except ValueError as exc:
        raise BadInput(f"{path}: malformed JSON ({exc})")
    if card.get("runner") != "hardware":
        raise BadInput(
            f"{path}: written by the {card.get('runner')!r} runner",
            hint="run `vpr conform --runner hardware` first",
        )
    results = [_result(n, c) for n, c in card["checks"].items() if n != CHECK]
    new = scorecard([*results, check], runner="hardware", pairing=card["pairing"])
    write_json(path, new)
    atomic_write_text(dist / "scorecard.md", to_markdown(new))
    atomic_write_text(dist / "scorecard.html", to_html(new))
    return new


# ---------------------------------------------------------------------------
# CLI


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "hardware-plan",
        help="specs with a hardware part and the runner label each needs (CI matrix)",
    )
    p.add_argument(
        "--spec", action="append", default=[], help="a spec (repeatable; default: buildspec/*)"
    )
    p.add_argument(
        "--changed-since", default=None, metavar="REF", help="only specs changed since REF"
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--github-output", action="store_true", help="append matrix= and count= to $GITHUB_OUTPUT"
    )
    p.set_defaults(func=_plan)

    p = sub.add_parser(
        "hardware-probe",
        help="detect the vendor runtime, the device and MESH_DEVICE (exit 3 naming what is "
        "missing)",
    )
    add_spec_argument(p)
    add_dirs(p)
    add_plugin_source(p)
    p.add_argument(
        "--runtime-env",
        type=Path,
        default=None,
        metavar="PATH",
        help="the vendor runtime's Python environment (default: $VPR_RUNTIME_ENV, the "
        "hardware pairing env, else this Python)",
    )
    p.add_argument("--json", action="store_true", help="print the probe as JSON")
    p.set_defaults(func=_probe)

    p = sub.add_parser(
        "hardware-live",
        help="on the hardware runner: the -tp 2 rejection probe and the live load test "
        "against vllm serve; adds the hardware check to the scorecard",
    )
    add_spec_argument(p)
    add_dirs(p)
    add_plugin_source(p)
    p.set_defaults(func=_live)


def _plan(args: argparse.Namespace) -> int:
    specs = [Path(s) for s in args.spec if s]
    result = plan(specs, args.changed_since or None)
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        for entry in result["include"]:
            print(
                f"{entry['spec']}: runs-on [self-hosted, tenstorrent, {entry['device_class']}]"
                f" MESH_DEVICE={entry['mesh_device'] or '(not set)'}"
            )
        for entry in result["skipped"]:
            print(f"{entry['spec']}: no hardware part ({entry['reason']})")
    if args.github_output:
        from vllm_plugin_release.cli.bump import github_output

        github_output(
            {"matrix": {"include": result["include"]}, "count": str(len(result["include"]))}
        )
    return EXIT_OK


def _load(args: argparse.Namespace) -> tuple[Spec, Path, HardwareSettings]:
    from vllm_plugin_release.spec.model import load

    spec = load(args.spec)
    return spec, Path(args.dist) / spec.name, settings(spec)


def _probe(args: argparse.Namespace) -> int:
    spec, dist, hw = _load(args)
    found = probe(spec, probe_python(dist, args.runtime_env or _runtime_env_arg()), hw)
    write_json(dist / PROBE_RECORD, found.to_json())
    if args.json:
        sys.stdout.write(json.dumps(found.to_json(), indent=2) + "\n")
    if not found.ok:
        raise _missing_error(found)
    progress.info(
        f"hardware-probe: runtime {found.runtime['module']} present ({found.runtime['python']}),"
        f" {len(found.devices['found'])} device node(s), MESH_DEVICE={found.mesh['value']}"
    )
    return EXIT_OK


def _runtime_env_arg() -> Path | None:
    value = os.environ.get("VPR_RUNTIME_ENV")
    return Path(value) if value else None


def _live(args: argparse.Namespace) -> int:
    spec, dist, hw = _load(args)
    env = _env_record(dist)
    has_env = bool(env and env.get("runner") == "hardware")
    python = Path(env["python"]) if has_env else probe_python(dist, _runtime_env_arg())
    found = probe(spec, python, hw)
    write_json(dist / PROBE_RECORD, found.to_json())
    if not found.ok:
        with contextlib.suppress(BadInput):  # no hardware scorecard yet: nothing to correct
            card = collect(dist, hardware_check(found, None, None))
            progress.info(f"hardware-live: verdict {card['verdict']} (hardware part not run)")
        raise _missing_error(found)
    if not has_env:
        raise BadInput(
            f"{dist / 'env.json'}: no hardware pairing environment",
            hint=f"run `vpr env --spec {args.spec} --runner hardware` first",
        )
    vllm = python.parent / "vllm"
    if not vllm.exists():
        raise BadInput(f"{vllm}: not found; the pairing environment has no vllm command")
    serve_env = {**os.environ, "MESH_DEVICE": found.mesh["value"] or ""}
    serve_command(vllm, hw, 0)  # the model must be set before anything starts
    progress.info("hardware-live: vllm serve -tp 2 (must be rejected)")
    tp = tp_probe(vllm, hw, serve_env, dist / "hardware-tp-probe.log")
    progress.info(f"hardware-live: -tp 2 probe: {tp['status']}: {tp['detail']}")
    progress.info(f"hardware-live: vllm serve {hw.model} (MESH_DEVICE={found.mesh['value']})")
    live = live_test(spec, vllm, hw, serve_env, dist)
    progress.info(f"hardware-live: live load test: {live['status']}: {live['detail']}")
    check = hardware_check(found, tp, live)
    write_json(dist / RECORD, {"probe": found.to_json(), "tp_probe": tp, "live": live})
    card = collect(dist, check)
    progress.info(f"hardware-live: hardware check {check.status}; verdict {card['verdict']}")
    return EXIT_OK if card["verdict"] == "fleet" else EXIT_GATE
