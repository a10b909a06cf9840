"""The guard's answers (snapshot, check) are parsed once at the edge into typed records;
certified.json is written from them with the bytes it always had."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import ledger_manifest
from vllm_plugin_release.core import guardstate as gs
from vllm_plugin_release.core.buildrecord import RecordProblem
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges import guard

SNAPSHOT: dict[str, Any] = {
    "dists": {
        "torch": {"version": "2.13.0+cpu", "record": "1" * 64},
        "vllm": {"version": "0.26.0", "record": "2" * 64},
        "odd": {"version": "1.0", "record": None},
    },
    "files": {"vllm": {"vllm/__init__.py": [12, 1700000000000000000], "vllm/x.py": [-1, -1]}},
}


def _manifest() -> Any:
    return ledger_manifest("ab" * 32, ("0.26.0", None), ("ref-plugin", "c" * 40), "pilot", "1.0.0")


def _old_record(snapshot: dict[str, Any], manifest: Any) -> dict[str, Any]:
    """certified.json as certified_record built it before it was typed."""
    dists = snapshot.get("dists") or {}
    return {
        "kind": gs.CERTIFIED_KIND,
        "pairing_id": manifest.pairing_id,
        "manifest_sha256": "f" * 64,
        "recover": "vpr install abab --store /s --python-env /e",
        "roles": gs.roles(manifest, dists),
        "dists": dists,
        "files": snapshot.get("files") or {},
    }


@pytest.mark.parametrize("snapshot", [SNAPSHOT, {"dists": {}}, {"dists": {}, "files": None}])
def test_certified_json_keeps_its_bytes(snapshot: dict[str, Any]) -> None:
    manifest = _manifest()
    record = gs.certified_record(
        manifest,
        "f" * 64,
        gs.parse_snapshot(snapshot),
        "vpr install abab --store /s --python-env /e",
    )
    old = _old_record(snapshot, manifest)
    assert json.dumps(record.to_json(), sort_keys=True) == json.dumps(old, sort_keys=True)


def _mutated(path: str, value: object) -> dict[str, Any]:
    data = copy.deepcopy(SNAPSHOT)
    node = data
    *keys, last = path.split("|")
    for key in keys:
        node = node[key]
    node[last] = value
    return data


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ([], "'dists' is a list"),
        ({"files": {}}, "'dists' is missing"),
        (_mutated("dists|vllm", "0.26.0"), "'dists.vllm'"),
        (_mutated("dists|vllm|version", 26), "'dists.vllm'"),
        (_mutated("dists|vllm|record", 7), "'dists.vllm'"),
        (_mutated("files", ["vllm"]), "'files' is a list"),
        (_mutated("files|vllm|vllm/x.py", [1]), "'files.vllm'"),
        (_mutated("files|vllm|vllm/x.py", [1, "2"]), "'files.vllm'"),
        (_mutated("files|vllm|vllm/x.py", [True, 2]), "'files.vllm'"),
    ],
)
def test_a_hostile_snapshot_is_refused_naming_the_key(answer: object, named: str) -> None:
    with pytest.raises(RecordProblem, match=named.replace("|", r"\|").replace(".", r"\.")):
        gs.parse_snapshot(answer)


CHECK = {
    "ok": False,
    "pairing_id": "ab" * 32,
    "findings": [{"kind": "files", "name": "vllm", "text": "core vllm: 1 file(s) changed"}],
    "recover": "vpr install ...",
}


def test_a_check_answer_is_typed() -> None:
    assert gs.parse_check(CHECK) == gs.GuardCheck(
        False, (gs.Finding("files", "vllm", "core vllm: 1 file(s) changed"),)
    )


@pytest.mark.parametrize(
    ("answer", "named"),
    [
        ("ok", "'findings' is 'ok'"),
        ({**CHECK, "findings": None}, "'findings' is missing"),
        ({**CHECK, "ok": "yes"}, "'ok' is 'yes'"),
        ({**CHECK, "findings": ["files vllm"]}, r"'findings\[0\]' is 'files vllm'"),
        ({**CHECK, "findings": [{"kind": "files", "name": None, "text": "t"}]}, "findings"),
    ],
)
def test_a_hostile_check_answer_is_refused_naming_the_key(answer: object, named: str) -> None:
    with pytest.raises(RecordProblem, match=named):
        gs.parse_check(answer)


def _guard_python(tmp_path: Path, answer: object, code: int = 0) -> Path:
    """A python whose `-m vpr_guard ...` answers `answer` with exit status `code`."""
    import sys

    script = tmp_path / "python"
    text = json.dumps(json.dumps(answer))
    script.write_text(f"#!{sys.executable}\nimport sys\nprint({text})\nsys.exit({code})\n")
    script.chmod(0o755)
    return script


def test_the_edge_reads_a_good_snapshot_and_refuses_a_bad_one(tmp_path: Path) -> None:
    good = guard.snapshot(_guard_python(tmp_path, SNAPSHOT), {"core": "vllm"})
    assert good.files["vllm"]["vllm/x.py"] == (-1, -1)
    bad = _guard_python(tmp_path, _mutated("dists|vllm|version", None))
    with pytest.raises(
        GateFailed, match=r"snapshot is not what vpr install expects: 'dists\.vllm'"
    ):
        guard.snapshot(bad, {"core": "vllm"})
    with pytest.raises(GateFailed, match="exit 3"):
        guard.snapshot(_guard_python(tmp_path, SNAPSHOT, 3), {"core": "vllm"})


def test_the_edge_refuses_a_check_that_says_nothing(tmp_path: Path) -> None:
    assert guard.check(_guard_python(tmp_path, CHECK, 1), tmp_path).ok is False
    with pytest.raises(GateFailed, match="check is not what vpr install expects: 'ok' is missing"):
        guard.check(_guard_python(tmp_path, {"findings": []}, 0), tmp_path)
