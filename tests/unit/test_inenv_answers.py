"""A garbled or hostile in-environment answer (the plugin's code runs beside the job) is a
clear BadInput naming the job and the key, never a KeyError, TypeError or AttributeError.

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
from vllm_plugin_release.core.errors import BadInput
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
    from vllm_plugin_release.conform.checks.workload import check as workload

    spec = load_spec(REFERENCE_SPEC)
    env = SimpleNamespace(
        runtime=None, python=Path(sys.executable), runtime_present=True, platform_class=None
    )
    ctx = SimpleNamespace(spec=spec, plugin_root=REFERENCE_SPEC.parent.parent, env=env)
    combos = "one a combination asked"
    good = {"platform": "p.P", "hooks": {}, "base": {"hook": "returned"}, "combos": combos}
    answers("workload", {**good, "probes": {"p0": {"engine": "refused"}}})
    with pytest.raises(BadInput, match=r"inenv workload: .*'probes\.p0\.engine' is 'refused'"):
        workload.run(ctx)
    answers("workload", {**good, "probes": {}, "base": {"changes": [{"field": "x"}]}})
    with pytest.raises(BadInput, match=r"'base\.changes\[0\]\.from' is missing") as err:
        workload.run(ctx)
    assert "vpr check workload" in str(err.value.hint)
    answers("workload", {**good, "probes": {}, "combos": []})
    with pytest.raises(BadInput, match=r"'combos' is a list"):
        workload.run(ctx)
