"""The environment probe's answer is parsed once, at the edge: a typed InstalledDist per
name, or exit 2 naming the python, the distribution and the key."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import envrun
from vllm_plugin_release.edges.envrun import InstalledDist

SHA = "a" * 64


def _answer() -> dict[str, Any]:
    return {
        "p": {
            "version": "1.0",
            "record": {"p/__init__.py": "sha256=x"},
            "bad": [["p/x.py", "modified"]],
            "entry_points": {"vllm.platform_plugins": {"p": "p:register"}},
            "direct_url": {"url": "file:///w.whl", "archive_info": {"hash": f"sha256={SHA}"}},
            "location": "/venv/lib/python3.11/site-packages",
        },
        "absent": None,
    }


def test_a_good_answer_is_typed() -> None:
    found = envrun.parse_dists(_answer(), ["p", "absent"], "/venv/bin/python")
    assert found["absent"] is None
    assert found["p"] == InstalledDist(
        version="1.0",
        location="/venv/lib/python3.11/site-packages",
        record={"p/__init__.py": "sha256=x"},
        bad=(("p/x.py", "modified"),),
        entry_points={"vllm.platform_plugins": {"p": "p:register"}},
        archive_hashes={"sha256": SHA},
    )


def test_archive_hashes_prefer_the_hashes_object() -> None:
    answer = _answer()
    answer["p"]["direct_url"] = {
        "archive_info": {"hashes": {"sha256": "b" * 64}, "hash": f"sha256={SHA}"}
    }
    assert envrun.parse_dists(answer, ["p", "absent"], "py")["p"].archive_hashes == {
        "sha256": "b" * 64
    }


def _set(path: str, value: object) -> dict[str, Any]:
    answer = _answer()
    node = answer
    *keys, last = path.split(".")
    for key in keys:
        node = node[key]
    node[last] = value
    return answer


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        (["p"], "the distributions = a list"),
        ({"p": None}, "the distributions"),
        (_set("p", "1.0"), "'p' = '1.0'"),
        (_set("p.version", 1.0), "'p'.version = 1.0, expected text"),
        (_set("p.location", None), "'p'.location = missing"),
        (_set("p.record", ["p/__init__.py"]), "'p'.record = a list"),
        (_set("p.record", {"p/__init__.py": None}), "'p'.record"),
        (_set("p.bad", [["p/x.py"]]), "'p'.bad"),
        (_set("p.entry_points", {"g": ["p"]}), "'p'.entry_points"),
        (_set("p.direct_url", "file:///w.whl"), "'p'.direct_url"),
        (_set("p.direct_url", {"archive_info": {"hashes": {"sha256": 1}}}), "'p'.direct_url"),
    ],
)
def test_a_hostile_answer_is_refused_naming_the_key(answer: object, named: str) -> None:
    with pytest.raises(BadInput, match="--python py: the environment probe answered") as err:
        envrun.parse_dists(answer, ["p", "absent"], "py")
    assert named in str(err.value)


def _fake_python(tmp_path: Path, answer: object) -> Path:
    """An executable that answers the probe with `answer`, whatever it is asked."""
    script = tmp_path / "python"
    script.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(answer))})\n")
    script.chmod(0o755)
    return script


def test_the_probe_refuses_an_answer_that_would_have_crashed_check_env(tmp_path: Path) -> None:
    python = _fake_python(tmp_path, _set("p.version", None))
    with pytest.raises(BadInput, match=r"'p'\.version = missing"):
        envrun.probe_environment(python, ["p", "absent"])


def test_the_installed_listing_is_checked_too(tmp_path: Path) -> None:
    good = _fake_python(tmp_path, {"dists": _answer(), "installed": {"p": "1.0"}})
    found, installed = envrun.probe_with_installed(good, ["p", "absent"])
    assert found["p"] is not None and found["p"].version == "1.0" and installed == {"p": "1.0"}
    bad = _fake_python(tmp_path, {"dists": _answer(), "installed": {"p": None}})
    with pytest.raises(BadInput, match="'installed' = a dict, expected names and versions"):
        envrun.probe_with_installed(bad, ["p", "absent"])
