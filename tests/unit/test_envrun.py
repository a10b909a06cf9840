"""inenv modules run in the pairing env with nothing else of ours on its path."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import envrun

SRC = Path(envrun.__file__).resolve().parents[2]


@dataclass(frozen=True)
class Probe:
    """A test's job (`envrun.InEnvJob`) for a made-up or real inenv module: its request as
    given, its answer the JSON object as read."""

    module: str
    request: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return self.request

    def parse_answer(self, answer: Any) -> Any:
        return answer


PROBE = """
import json, sys
try:
    import vllm_plugin_release  # noqa: F401
    ours = True
except ImportError:
    ours = False
with open(sys.argv[2], "w") as out:
    json.dump({"ours_importable": ours, "path": sys.path}, out)
"""


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv without this package (what a pairing env looks like to us)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


@pytest.fixture
def probe_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    folder = tmp_path / "inenv"
    folder.mkdir()
    (folder / "probe.py").write_text(PROBE)
    monkeypatch.setattr(envrun, "INENV", folder)
    return "probe"


def test_stage_copies_the_one_module_under_a_unique_name(tmp_path: Path) -> None:
    script = envrun.stage_module("envcheck", tmp_path)
    assert script.name == "vpr_inenv_envcheck.py"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vpr_inenv_envcheck.py"]
    for bad in ("no_such_module", "../cli/__init__", "a.b"):
        with pytest.raises(BadInput):
            envrun.stage_module(bad, tmp_path)


def test_a_script_is_staged_with_the_inenv_modules_it_imports(tmp_path: Path) -> None:
    """The replay steps its schedulers with `inenv/steploop.py` and marks slow paths with
    `inenv/workload.py`, whose exit protocol it shares: each is staged beside the script,
    and found there with nothing of ours installed (-S: no site-packages)."""
    script = envrun.stage_module("replay", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "vpr_inenv_replay.py",
        "vpr_inenv_steploop.py",
        "vpr_inenv_workload.py",
    ]
    for probe, origin in (
        ("import vpr_inenv_replay as r; print(r.forked.__module__)", "vpr_inenv_replay"),
        ("import vpr_inenv_replay as r; print(r.step_loop.__module__)", "vpr_inenv_steploop"),
        ("import vpr_inenv_replay as r; print(r.BadRequest.__module__)", "vpr_inenv_workload"),
    ):
        done = subprocess.run(
            [sys.executable, "-S", "-c", probe],
            cwd=script.parent, capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert done.stdout.strip() == origin


def test_nothing_of_ours_reaches_the_environment(
    bare_python: Path, probe_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The caller's PYTHONPATH (here: our source folder) must not leak in either.
    monkeypatch.setenv("PYTHONPATH", str(SRC))
    result = envrun.run_in_env(bare_python, Probe(probe_module, {}))
    assert result["ours_importable"] is False
    assert not any(str(SRC) == entry for entry in result["path"])


def test_the_probe_can_see_a_leak_when_one_is_made(bare_python: Path, probe_module: str) -> None:
    # Known-bad: an explicit PYTHONPATH to our source folder makes the package importable,
    # so the check above would catch the old behaviour.
    result = envrun.run_in_env(bare_python, Probe(probe_module, {}), env={"PYTHONPATH": str(SRC)})
    assert result["ours_importable"] is True
