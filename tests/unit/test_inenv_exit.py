"""The inenv scripts run as their own process (`python SCRIPT REQUEST OUT`) end with
os._exit once their answer is written: the interpreter's teardown after vLLM, torch and
ttnn are imported takes seconds, and
nothing is left to do. Seen from outside: an atexit hook never runs, the answer is whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_plugin_release.edges.envrun import stage_module

# Runs SCRIPT as __main__ the way `python SCRIPT REQUEST OUT` does, with an atexit hook
# that marks a normal interpreter exit.
WRAPPER = """
import atexit, os, runpy, sys
script, request, out, mark = sys.argv[1:]
atexit.register(lambda: open(mark, "w").write("torn down"))
sys.argv = [script, request, out]
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name="__main__")
"""

# A request each script refuses before importing vLLM (absent here), with its code.
# (workload and replay end through common.exit_now too, but import vLLM first.)
REFUSED = {
    "envcheck": ({}, 3),  # no "packages": its error answer
    "openapi": ([], 2),  # not a JSON object
}


def _run(tmp_path: Path, script: Path, request: object) -> tuple[int, dict, bool]:
    req, out, mark = tmp_path / "req.json", tmp_path / "out.json", tmp_path / "mark"
    req.write_text(json.dumps(request))
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(script), str(req), str(out), str(mark)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    answer = json.loads(out.read_text()) if out.is_file() else {"no answer": done.stderr}
    return done.returncode, answer, mark.exists()


@pytest.mark.parametrize("module", sorted(REFUSED))
def test_an_inenv_script_writes_its_answer_and_ends_without_teardown(
    tmp_path: Path, module: str
) -> None:
    script = stage_module(module, tmp_path)
    request, code = REFUSED[module]
    returncode, answer, torn_down = _run(tmp_path, script, request)
    assert returncode == code, answer
    assert "error" in answer, answer
    assert not torn_down, f"{module}: the interpreter tore down after its answer"


def test_the_wrapper_sees_a_teardown(tmp_path: Path) -> None:
    # Known-bad: a script that ends with sys.exit tears the interpreter down, and the
    # wrapper's hook says so (the check above can fail).
    script = tmp_path / "plain.py"
    script.write_text(
        "import json, sys\nopen(sys.argv[2], 'w').write(json.dumps({'error': 'x'}))\nsys.exit(2)\n"
    )
    assert _run(tmp_path, script, {}) == (2, {"error": "x"}, True)
