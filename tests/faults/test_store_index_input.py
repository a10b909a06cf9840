"""A damaged entry in a manifest store's index.json is bad input naming the file and the
entry (exit 2) in `manifest query` and `manifest matrix`, never a traceback; a store version
that is not PEP 440 is not blamed on the user's `--core`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_plugin_release.cli import main
from vllm_plugin_release.core.storeindex import INDEX_KIND


def _entry(pid: str, core_version: str = "0.26.0") -> dict:
    return {
        "pairing_id": pid,
        "name": "reference",
        "core": {"name": "vllm", "version": core_version, "wheel": "v.whl", "sha256": "1" * 64},
        "plugin": {
            "name": "vllm-reference-plugin",
            "version": "0.1.0",
            "commit": None,
            "wheel": "p.whl",
            "sha256": "2" * 64,
        },
        "verdict": "lab",
        "python": "3.11",
    }


def _store(tmp_path: Path, pairings: dict) -> Path:
    store = tmp_path / "store"
    (store / "pairings").mkdir(parents=True)
    index = {"schema_version": 1, "kind": INDEX_KIND, "pairings": pairings}
    (store / "index.json").write_text(json.dumps(index))
    return store


DAMAGED = {
    "core is a number": {"core": 5},
    "entry is a list": [],
    "no plugin": {k: v for k, v in _entry("b" * 64).items() if k != "plugin"},
    "version is a number": {**_entry("b" * 64), "core": {**_entry("b")["core"], "version": 26}},
    "verdict is an object": {**_entry("b" * 64), "verdict": {}},
}


@pytest.mark.parametrize("entry", list(DAMAGED.values()), ids=list(DAMAGED))
@pytest.mark.parametrize(
    "command", [["query"], ["query", "--core", ">=0.1"], ["matrix", "--format", "markdown"]]
)
def test_damaged_index_entry_is_bad_input(tmp_path, capsys, entry, command):
    store = _store(tmp_path, {"a" * 64: _entry("a" * 64), "b" * 64: entry})
    code = main(["manifest", *command, "--store", str(store)])
    said = "".join(capsys.readouterr())
    assert code == 2, said
    assert "index.json" in said and "b" * 16 in said


def test_non_pep440_store_version_is_not_blamed_on_core(tmp_path, capsys):
    store = _store(tmp_path, {"a" * 64: _entry("a" * 64), "b" * 64: _entry("b" * 64, "weird")})
    code = main(["manifest", "query", "--store", str(store), "--core", ">=0.1", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "--core" not in out.out + out.err
    assert [e["pairing_id"] for e in json.loads(out.out)] == ["a" * 64]


def test_bad_core_specifier_is_still_blamed_on_core(tmp_path, capsys):
    store = _store(tmp_path, {"a" * 64: _entry("a" * 64)})
    code = main(["manifest", "query", "--store", str(store), "--core", ">=x.y"])
    assert code == 2
    assert "--core >=x.y" in "".join(capsys.readouterr())
