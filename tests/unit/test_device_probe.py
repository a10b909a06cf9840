"""The runtime probe's subprocess answer is checked once, at the edge (`runtime_found`):
the shape the import probe always prints becomes a `RuntimeFound` that writes the same
JSON; any other answer says the runtime is absent, and why (never a crash, never a pass)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.edges import device
from vllm_plugin_release.edges.device import DevicesFound, MeshFound, Probe, runtime_found

PY = Path(sys.executable)
IMPORTED = {"python": "/p", "status": "present", "file": None, "version": None, "distributions": {}}


def raw_answer(module: str) -> dict[str, Any]:
    """What the import probe prints, as the old code kept it (a plain dict)."""
    done = subprocess.run(
        [sys.executable, "-c", device._IMPORT_PROBE, module],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["json", "no_such_module_vpr"])
def test_the_answer_keeps_its_json_bytes(module: str) -> None:
    old = {"name": "rt", "module": module, **raw_answer(module)}
    found = device.import_runtime(PY, module, "rt")
    assert found.status == old["status"]
    assert json.dumps(found.to_json()) == json.dumps(old)


def test_the_whole_probe_writes_the_json_it_always_did() -> None:
    runtime = runtime_found(raw_answer("json"), None, "json", PY)
    found = Probe(runtime, DevicesFound("/dev/x*", ("/dev/x0",)), MeshFound("M", "N300", "N300"))
    assert json.dumps(found.to_json()) == json.dumps(
        {
            "ok": True,
            "runtime": {"name": None, "module": "json", **raw_answer("json")},
            "devices": {"glob": "/dev/x*", "found": ["/dev/x0"]},
            "mesh_device": {"variable": "M", "expected": "N300", "value": "N300"},
            "missing": [],
        }
    )


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ([1, 2], "not a JSON object but list"),
        ({"python": "/p", "status": "here"}, "'status' 'here'"),
        ({"python": "/p", "status": "present", "file": None}, "expected python, status, file"),
        (
            {**IMPORTED, "file": 3},
            "'file' or 'version'",
        ),
        ({**IMPORTED, "distributions": "stand-in-pkg"}, "'distributions' is not an object"),
        ({"python": "/p", "status": "absent", "error": ["x"]}, "'error' is not text"),
    ],
)
def test_an_answer_of_another_shape_is_an_absent_runtime_saying_why(
    answer: object, words: str
) -> None:
    found = runtime_found(answer, "rt", "ttnn", PY)
    assert found.status == "absent" and found.distributions is None
    assert found.error is not None and found.error.startswith("probe answered: ")
    assert words in found.error


def test_a_python_that_prints_a_list_is_refused_not_a_crash(tmp_path: Path) -> None:
    """The old code spread the answer into a dict: a list crashed the probe (TypeError)."""
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\necho '[\"present\"]'\n")
    python.chmod(0o755)
    found = device.import_runtime(python, "ttnn", "rt")
    assert (found.status, found.python) == ("absent", str(python))
    assert found.error == "probe answered: not a JSON object but list"
