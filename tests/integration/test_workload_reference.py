"""The `workload` check against the real reference plugin, in its real pairing environment
(vLLM 0.26.0+empty; the stand-in runtime's overlay makes the plugin's platform vLLM's
current one), and the replay's slow-path marks.

Every answer comes from the plugin's own code: speculative decoding is refused by its
`check_and_update_config`, prompt logprobs by its `validate_request`, logprobs go to the
host sampler by its `needs_host_sampler`, image inputs are deferred. The silently dropped
feature, and a validate_request that ends the job (no answer, SIGSEGV, garbage, a hang),
are deliberate bad mutations of a copy of the plugin, put first on the environment's path
by the test or released as a pairing of their own (the shipped plugin is not changed)."""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, REPO, git, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform import CheckResult, Context, Sources, registry
from vllm_plugin_release.conform.checks import workload
from vllm_plugin_release.conform.checks import workload as workload_check
from vllm_plugin_release.conform.suite import run_check
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.edges import envrun
from vllm_plugin_release.replay import config, mix, runner

PLUGIN = REPO / "plugin" / "reference"
PLATFORM = PLUGIN / "src" / "vllm_reference_plugin" / "platform.py"

PLANS = """
[conformance.request_mix.plans.speculative]
description = "served with n-gram speculative decoding"
[conformance.request_mix.plans.speculative.features]
speculative = { method = "ngram", num_tokens = 4 }

[conformance.request_mix.plans.prompts]
[conformance.request_mix.plans.prompts.features]
prompt_logprobs = { share = 0.1 }

[conformance.request_mix.plans.images]
[conformance.request_mix.plans.images.features]
multimodal = { share = 0.1, images = 2 }
"""


def _spec(folder: Path, *, plans: str = PLANS, price: float = 0.0) -> Path:
    """buildspec/reference.toml with a mix of 60 requests, the plans, a slow-path price."""
    text = REFERENCE_SPEC.read_text().replace("requests = 400", "requests = 60")
    text = text.replace(
        "cost_model = { a = 0.004, b = 0.00002, c = 0.0005 }",
        f'cost_model = {{ a = 0.004, b = 0.00002, c = 0.0005, paths = {{ "host sampler" = {price} }} }}',  # noqa: E501
    )
    text = text.replace("[conformance.workload]", plans + "\n[conformance.workload]")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text("")
    path = folder / "reference.toml"
    path.write_text(text)
    return path


def _context(spec: Path, session_dist: Path, cache_root: Path) -> Context:
    return Context(
        load_spec(spec),
        "cpu",
        Cache(cache_root),
        session_dist / "reference",
        Sources(plugin_root=lambda: PLUGIN, core_tree=lambda: PLUGIN),
    )


def _line(text: str) -> int:
    return next(i for i, line in enumerate(PLATFORM.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def answered(
    reference_env: dict, session_dist: Path, cache_root: Path, tmp_path_factory
) -> CheckResult:
    spec = _spec(tmp_path_factory.mktemp("workload"))
    return workload.run(_context(spec, session_dist, cache_root))


def _rows(result: CheckResult, plan: str | None = None) -> dict[str, dict]:
    rows = result.details["features"] if plan is None else result.details["plans"][plan]["features"]
    return {r["feature"]: r for r in rows}


def test_each_answer_comes_from_the_plugins_code(answered: CheckResult) -> None:
    assert answered.details["platform"] == "vllm_reference_plugin.platform.ReferencePlatform"
    rows = _rows(answered)
    refused = rows["speculative"]
    assert (refused["outcome"], refused["by"], refused["needed"]) == ("refused", "plugin", False)
    raised = _line('raise ReferenceConfigError("reference platform: " + ')
    assert refused["where"] == f"vllm_reference_plugin/platform.py:{raised}"
    prompt = rows["prompt_logprobs"]
    assert prompt["outcome"] == "refused" and "in validate_request" in prompt["message"]
    assert prompt["where"].startswith("vllm_reference_plugin/platform.py:")
    logprobs = rows["logprobs"]
    assert (logprobs["outcome"], logprobs["path"]) == ("slow_path", "host sampler")
    decided = _line("p.logprobs is not None")
    assert logprobs["where"] == f"vllm_reference_plugin/platform.py:{decided}"
    assert rows["sampling"]["outcome"] == "supported" and rows["sampling"]["needed"]
    assert rows["multimodal"]["outcome"] == "deferred"
    # the base plan needs nothing refused: a warning for the slow path, with its share
    assert answered.status == "warn"
    paths = answered.details["paths"]
    on_host = paths["host sampler"]["requests"]
    assert 0 < on_host < 60 and on_host + paths["default"]["requests"] == 60
    assert "of requests leave the device sampler for the host sampler" in answered.summary
    # no machine path anywhere in what the scorecard keeps
    kept = repr(answered.to_json())
    assert str(Path.home()) not in kept and "/tmp/" not in kept and "site-packages" not in kept


def test_each_plan_gets_its_own_answer(answered: CheckResult) -> None:
    plans = answered.details["plans"]
    assert plans["speculative"]["status"] == "fail"
    assert plans["speculative"]["blockers"][0].startswith("needs speculative decoding")
    assert "vllm_reference_plugin/platform.py:" in plans["speculative"]["blockers"][0]
    assert plans["prompts"]["status"] == "fail"
    assert plans["images"]["status"] == "deferred"


def _mutated(folder: Path) -> Path:
    """A copy of the reference plugin whose platform drops speculative decoding and the
    requests' logprobs silently instead of refusing: the known-bad."""
    src = folder / "src"
    shutil.copytree(PLUGIN / "src", src)
    platform = src / "vllm_reference_plugin" / "platform.py"
    text = platform.read_text()
    refuse = 'problems.append("speculative decoding is not supported (drop --speculative-config)")'
    assert refuse in text
    text = text.replace(refuse, "vllm_config.speculative_config = None  # silently dropped")
    check = '        if getattr(params, "prompt_logprobs", None) is not None:'
    assert check in text
    text = text.replace(check, "        params.logprobs = None  # silently dropped\n" + check)
    platform.write_text(text)
    return src


def test_a_silently_dropped_feature_fails_the_check(
    reference_env: dict, session_dist: Path, cache_root: Path, tmp_path: Path
) -> None:
    src = _mutated(tmp_path / "mutated")
    ctx = _context(_spec(tmp_path / "spec", plans=""), session_dist, cache_root)
    result = workload.run(ctx, sys_path=(str(src),))
    rows = _rows(result)
    assert result.status == "fail"
    dropped = rows["speculative"]
    assert dropped["outcome"] == "changed" and not dropped["needed"]  # a failure all the same
    mutated = (src / "vllm_reference_plugin" / "platform.py").read_text().splitlines()
    assert "silently dropped" in mutated[int(dropped["where"].rpartition(":")[2]) - 1]
    assert rows["logprobs"]["outcome"] == "changed"
    assert "logprobs 5 -> None" in rows["logprobs"]["message"]


def test_the_replay_marks_and_prices_the_slow_path(reference_env: dict, tmp_path: Path) -> None:
    python = Path(reference_env["python"])
    reports = {}
    for price in (0.0, 0.05):
        spec = load_spec(_spec(tmp_path / str(price), plans="", price=price))
        cfg = config.from_spec(spec)
        assert cfg.cost.paths == {"host sampler": price}
        outcome = runner.replay(python, mix.from_spec(spec), cfg, name="reference")
        reports[price] = outcome.report
    free, priced = reports[0.0], reports[0.05]
    marks = free["paths"]["per_path"]["host sampler"]
    assert marks == priced["paths"]["per_path"]["host sampler"]  # the same requests
    assert 0 < marks["requests"] < 60 and len(marks["indices"]) == marks["requests"]
    # the price is the plugin side's only: its simulated time grows, upstream's does not
    assert priced["plugin"]["makespan_s"] > free["plugin"]["makespan_s"]
    assert priced["upstream"]["makespan_s"] == free["upstream"]["makespan_s"]


# How the copy of the plugin's validate_request ends the job when a request asks for
# logprobs (the base mix asks it: 10% of requests), after saying so on stderr.
DEATHS = {
    "exit0": ("os._exit(0)", "exited 0, without an answer"),
    "segv": ("os.kill(os.getpid(), signal.SIGSEGV)", "was killed by SIGSEGV, without an answer"),
    "garbage": (
        'open(sys.argv[2], "w").write("}{ not an answer"); os._exit(0)',
        "its answer is unreadable",
    ),
    "hang": ("time.sleep(3600)", "did not finish within 60 s"),
}
SAID = "reference platform: validate_request ends the job on logprobs"


def _dying(folder: Path, death: str) -> Path:
    """A copy of the reference plugin whose validate_request ends the job it runs in
    (`death`, a statement) for a request with logprobs: the known-bad of a dead check."""
    src = folder / "src"
    shutil.copytree(PLUGIN / "src", src)
    platform = src / "vllm_reference_plugin" / "platform.py"
    text = platform.read_text()
    check = '        if getattr(params, "prompt_logprobs", None) is not None:'
    assert check in text
    dies = (
        '        if getattr(params, "logprobs", None) is not None:\n'
        "            import os, signal, sys, time\n"
        f"            print({SAID!r}, file=sys.stderr, flush=True)\n"
        f"            {death}\n"
    )
    platform.write_text(text.replace(check, dies + check))
    return src


@pytest.mark.parametrize("how", DEATHS)
def test_a_plugin_that_kills_the_workload_job_fails_the_check(
    how: str,
    reference_env: dict,
    session_dist: Path,
    cache_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job the plugin's code ends (no answer, a signal, garbage where the answer goes, a
    hang past the job's time) is the check's failure with the job's last output, never a
    deferral: a deferred check lets the pairing through as pilot. The garbage and SIGSEGV
    cases run in the warm worker, as `vpr release` runs the check (there torch's crash
    handler prints a native stack after what the plugin said); the others in an
    interpreter of their own."""
    death, headline = DEATHS[how]
    src = _dying(tmp_path / "dying", death)
    monkeypatch.setattr(workload, "TIMEOUT_S", 60.0)  # the hang's: the job is killed then
    dying = functools.partial(workload.run, sys_path=(str(src),))
    monkeypatch.setitem(registry.BY_NAME, "workload", replace(workload_check.CHECK, run=dying))
    ctx = _context(_spec(tmp_path / "spec", plans=""), session_dist, cache_root)
    warm = how in ("garbage", "segv")
    with envrun.warm(reference_env["python"]) if warm else contextlib.nullcontext():
        result = run_check(ctx, "workload")
    assert result.status == "fail", result.summary
    assert headline in result.summary and "(last output: " in result.summary
    notes = [e.note for e in result.evidence]
    assert f"output: {SAID}" in notes and headline in notes[0]
    assert "vpr-inenv-" not in repr(result.to_json())  # the job's folder is not named


def test_a_release_whose_plugin_kills_the_workload_job_is_lab(
    core_build: dict, cache_root: Path, tmp_path: Path
) -> None:
    """`vpr release` of the pairing with that plugin (its validate_request ends the job on
    logprobs): the workload check fails with the job's last output, the verdict is lab and
    the release exits 1, where it was pilot with the check deferred."""
    proj = tmp_path / "proj"
    shutil.copytree(PLUGIN, proj / "plugin" / "reference")
    shutil.rmtree(proj / "plugin" / "reference" / "src")
    _dying(proj / "plugin" / "reference", DEATHS["exit0"][0])
    shutil.copytree(REPO / "buildspec" / "contracts", proj / "buildspec" / "contracts")
    shutil.copytree(REPO / "constraints", proj / "constraints")
    spec = proj / "buildspec" / "reference.toml"
    shutil.copy(REFERENCE_SPEC, spec)
    (proj / "pyproject.toml").write_text("[project]\nname = 'dying'\n")
    for args in (("init", "-q", "-b", "main"), ("add", "."), ("commit", "-q", "-m", "dying")):
        git(*args, cwd=proj, date="2026-08-01T12:00:00+00:00")  # a path plugin: from git
    dist = tmp_path / "dist"
    common = ("--spec", str(spec), "--cache-dir", str(cache_root), "--dist", str(dist))
    done = vpr("release", *common, "--no-publish", check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    card = json.loads((dist / "reference" / "scorecard.json").read_text())
    assert card["verdict"] == "lab", card["checks"]["workload"]
    checked = card["checks"]["workload"]
    assert checked["status"] == "fail"
    assert DEATHS["exit0"][1] in checked["summary"] and SAID in checked["summary"]
    assert {e["note"] for e in checked["evidence"]} >= {f"output: {SAID}"}
    others = {n: c["status"] for n, c in card["checks"].items() if n != "workload"}
    assert "fail" not in others.values(), others  # the one finding is the dead job
