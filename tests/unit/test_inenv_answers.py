"""A garbled or hostile in-environment answer (the plugin's code runs beside the job) is a
clear JobFailed naming the job and the key (the check that asked fails), never a KeyError,
TypeError or AttributeError.

Each job runs through the real `envrun.run_in_env`, with a stand-in inenv module that
writes the answer given; each test fails on the code before the answers were typed (it
crashed with a traceback there)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support import REFERENCE_SPEC
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.errors import JobFailed
from vllm_plugin_release.edges import envrun

STAND_IN = """
import json, sys
answer = json.loads({answer!r})
if answer.get("combos") == "one a combination asked":
    answer["combos"] = [{{}} for _ in json.load(open(sys.argv[1]))["combos"]]
with open(sys.argv[2], "w") as out:
    json.dump(answer, out)
"""


@pytest.fixture
def answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`answers(module, answer)`: inenv/<module>.py answers `answer`, whatever is asked."""
    folder = tmp_path / "inenv"
    folder.mkdir()
    for companion in ("common", "forking", "steploop", "workload"):
        (folder / f"{companion}.py").write_text("")
    monkeypatch.setattr(envrun, "INENV", folder)

    def answer(module: str, value: Any) -> None:
        (folder / f"{module}.py").write_text(STAND_IN.format(answer=json.dumps(value)))

    return answer


def test_a_garbled_workload_answer_names_the_probe_key(answers) -> None:
    from vllm_plugin_release.conform.checks import workload

    spec = load_spec(REFERENCE_SPEC)
    env = SimpleNamespace(
        runtime=None, python=Path(sys.executable), runtime_present=True, platform_class=None
    )
    ctx = SimpleNamespace(spec=spec, plugin_root=REFERENCE_SPEC.parent.parent, env=env)
    combos = "one a combination asked"
    good = {"platform": "p.P", "hooks": {}, "base": {"hook": "returned"}, "combos": combos}
    answers("workload", {**good, "probes": {"p0": {"engine": "refused"}}})
    with pytest.raises(JobFailed, match=r"inenv workload: .*'probes\.p0\.engine' is 'refused'"):
        workload.run(ctx)
    answers("workload", {**good, "probes": {}, "base": {"changes": [{"field": "x"}]}})
    with pytest.raises(JobFailed, match=r"'base\.changes\[0\]\.from' is missing") as err:
        workload.run(ctx)
    assert "vpr check workload" in str(err.value.hint)
    answers("workload", {**good, "probes": {}, "combos": []})
    with pytest.raises(JobFailed, match=r"'combos' is a list"):
        workload.run(ctx)


def test_a_capture_without_its_document_is_the_jobs_failure(answers) -> None:
    from tests.support import api_spec
    from vllm_plugin_release.conform.checks import api

    answers("openapi", {"vllm_version": "0.26.0", "platform": {"label": "x", "used": "plugin"}})
    with pytest.raises(JobFailed, match=r"inenv openapi: the answer: 'openapi' is missing"):
        api.check(api_spec(), Path(sys.executable), None)
    answers(
        "openapi", {"vllm_version": "0.26.0", "openapi": {"paths": {}}, "models": {}, "notes": 3}
    )
    with pytest.raises(JobFailed, match=r"'notes' is 3, expected a list of text"):
        api.check(api_spec(), Path(sys.executable), None)


def test_api_contract_where_general_plugins_crash_is_exit_2(
    answers, tmp_path: Path, capsys
) -> None:
    """`vpr api-contract` in an environment whose general plugin raises: no app was built,
    so there is no contract to write (it crashed with KeyError 'openapi')."""
    from vllm_plugin_release.cli import main

    crash = {"error": "ImportError: no ttnn", "frames": [], "entry_points": []}
    answers("openapi", {"vllm_version": "0.26.0", "general_plugins_crash": crash})
    out = tmp_path / "c.json"
    argv = ["api-contract", "--spec", str(REFERENCE_SPEC), "--out", str(out)]
    code = main([*argv, "--python", sys.executable, "--platform-class", "p:P"])
    assert code == 2 and not out.exists()
    assert "load_general_plugins() raises ImportError: no ttnn" in capsys.readouterr().err


def test_a_garbled_replay_answer_names_the_side_and_column(answers) -> None:
    from vllm_plugin_release.replay import config, mix, runner

    spec = load_spec(REFERENCE_SPEC)
    request_mix, cfg = mix.from_spec(spec), config.from_spec(spec)
    steps = {"start": [0.0], "end": [1.0], "prefill_tokens": [1], "decode_tokens": [0]}
    side = {"steps": steps, "tokens": []}
    answers("replay", {"results": {"plugin": side, "upstream": {"crashed": "boom"}}})
    with pytest.raises(JobFailed, match=r"'results\.plugin\.steps\.prefill_requests' is missing"):
        runner.replay(Path(sys.executable), request_mix, cfg, name="x")
    steps = {**steps, "prefill_requests": [1], "decode_requests": [0], "preemptions": [0]}
    tokens: list[list[Any]] = [[] for _ in range(len(request_mix))]
    tokens[2] = [7]  # a token at step 7 of 1
    side = {"steps": steps, "tokens": tokens}
    answers("replay", {"results": {"plugin": side, "upstream": {"crashed": "boom"}}})
    with pytest.raises(JobFailed, match=r"'results\.plugin\.tokens\[2\]' is a list, expected"):
        runner.replay(Path(sys.executable), request_mix, cfg, name="x")
    bad_steps = {**steps, "end": ["soon"]}
    answers("replay", {"results": {"plugin": {**side, "steps": bad_steps}, "upstream": side}})
    with pytest.raises(JobFailed, match=r"'results\.plugin\.steps\.end' is a list, expected"):
        runner.replay(Path(sys.executable), request_mix, cfg, name="x")
    answers("replay", {"results": {"plugin": {"crashed": "boom"}}})
    with pytest.raises(JobFailed, match=r"inenv replay: .*'results\.upstream' is missing"):
        runner.replay(Path(sys.executable), request_mix, cfg, name="x")


def test_a_garbled_envcheck_answer_names_the_check(answers) -> None:
    from vllm_plugin_release.stages.pairing_env import EnvCheckJob

    job = EnvCheckJob("0.26.0", ("p",), {}, None, "absent")
    answers("envcheck", {"checks": [{"name": 3, "status": "pass"}], "runtime_modules": []})
    with pytest.raises(JobFailed, match=r"inenv envcheck: the answer's 'checks\[0\]\.name' is 3"):
        envrun.run_in_env(sys.executable, job)
    check = {"name": "import vllm", "status": "pass", "detail": "vllm 0.26.0", "value": 1}
    answers("envcheck", {"checks": [check]})
    first = envrun.run_in_env(sys.executable, job)
    assert [c.to_json() for c in first.checks] == [check]
    assert first.runtime_modules == [] and first.plugin_modules == []


def test_a_recorded_bare_openapi_document_is_diffed(tmp_path: Path) -> None:
    """A recorded contract may be a bare OpenAPI document (no `captured_with`): the check
    without an environment reads it (it crashed with TypeError: list(None))."""
    from tests.pairing import write_spec
    from tests.unit.test_api import chat_contract
    from vllm_plugin_release.conform.checks.api import check_recorded

    spec = write_spec(tmp_path)
    contracts = tmp_path / "buildspec" / "contracts"
    contracts.mkdir(parents=True, exist_ok=True)
    doc = chat_contract()
    (contracts / "vllm-0.25.1-openai.json").write_text(json.dumps(doc))
    bare = {**doc["openapi"], "info": {"version": "0.26.0"}}
    (contracts / "vllm-0.26.0-openai.json").write_text(json.dumps(bare))
    result = check_recorded(load_spec(spec))
    assert result is not None and "vLLM 0.26.0 vs the vllm 1.0 contract" in result.summary
