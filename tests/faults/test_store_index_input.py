"""A damaged entry in a manifest store's index.json is bad input naming the file and the
entry (exit 2) in `manifest query` and `manifest matrix`, never a traceback; a store version
that is not PEP 440 is not blamed on the user's `--core`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.pairing import sign_store, store_key, vpr
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
        "manifest_sha256": "3" * 64,
    }


def _store(tmp_path: Path, pairings: dict) -> Path:
    """A store whose index holds `pairings`, its head signed (a damaged index its own
    publisher signed: what is checked here is the index itself, not the signature)."""
    store = tmp_path / "store"
    (store / "pairings").mkdir(parents=True)
    (store / "index.json").write_text(_index_text(pairings))
    sign_store(store, store_key(tmp_path))
    return store


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI runs in process here: its cache (the key, the heads seen) in tmp_path."""
    monkeypatch.setenv("VPR_CACHE_DIR", str(tmp_path / ".vpr"))


DEEP_MARK = "deep: a value nested 990 levels deep"  # put in the index's text as written


def _index_text(pairings: dict) -> str:
    """The index file's text; DEEP_MARK becomes 990 nested lists (built as text: the json
    module itself would hit the recursion limit)."""
    text = json.dumps({"schema_version": 1, "kind": INDEX_KIND, "pairings": pairings})
    return text.replace(json.dumps(DEEP_MARK), "[" * 990 + '"0.26.0"' + "]" * 990)


B = "b" * 64
DAMAGED = {
    "core is a number": {"core": 5},
    "entry is a list": [],
    "no plugin": {k: v for k, v in _entry(B).items() if k != "plugin"},
    "version is a number": {**_entry(B), "core": {**_entry(B)["core"], "version": 26}},
    "verdict is an object": {**_entry(B), "verdict": {}},
    "runtime is text": {**_entry(B), "runtime": "tt-metal"},
    "runtime name is a list": {**_entry(B), "runtime": {"name": ["tt"], "status": "ok"}},
    "history is a number": {**_entry(B), "history": 5, "certified_at": "2026-12-01T00:00:00Z"},
    "core version is not a version": {
        **_entry(B),
        "core": {**_entry(B)["core"], "version": "not a version"},
    },
    "pairing_id is not its key": {**_entry(B), "pairing_id": "c" * 64},
}
DEEP = {**_entry(B), "notes": DEEP_MARK}  # a key readers do not know, printed by --json
COMMANDS = [
    ["query", "--core", ">=0.1", "--json"],
    ["query"],
    ["matrix", "--format", "markdown"],
]


@pytest.mark.parametrize("entry", list(DAMAGED.values()), ids=list(DAMAGED))
@pytest.mark.parametrize("command", COMMANDS)
def test_damaged_index_entry_is_bad_input(tmp_path, capsys, entry, command):
    store = _store(tmp_path, {"a" * 64: _entry("a" * 64), B: entry})
    code = main(["manifest", *command, "--store", str(store)])
    said = "".join(capsys.readouterr())
    assert code == 2, said
    assert "index.json" in said and "b" * 16 in said


def test_an_index_nested_too_deep_is_bad_input(tmp_path, capsys):
    store = _store(tmp_path, {"a" * 64: _entry("a" * 64), B: DEEP})
    code = main(["manifest", "query", "--store", str(store)])
    said = "".join(capsys.readouterr())
    assert code == 2, said
    assert "index.json" in said and "nested deeper than 64 levels" in said


@pytest.mark.parametrize("entry", [*DAMAGED.values(), DEEP], ids=[*DAMAGED, "nested 990 deep"])
def test_damaged_index_entry_unsigned_is_refused_without_a_traceback(tmp_path, entry):
    """The same entries in a store no writer signed: refused (its head does not vouch for
    them), never a traceback or a listing."""
    store = tmp_path / "store"
    (store / "pairings").mkdir(parents=True)
    (store / "index.json").write_text(_index_text({"a" * 64: _entry("a" * 64), B: entry}))
    store_key(tmp_path)
    for command in COMMANDS:
        done = vpr("manifest", *command, "--store", str(store), cwd=tmp_path)
        said = done.stdout + done.stderr
        assert done.returncode in (1, 2), said
        assert "Traceback" not in said
        assert "head.json" in said  # the index is not vouched for: refused before it is read


def test_a_key_that_is_not_a_pairing_id_is_bad_input(tmp_path, capsys):
    evil = "../../../escape"
    store = _store(tmp_path, {"a" * 64: _entry("a" * 64), evil: _entry(evil)})
    code = main(["manifest", "query", "--store", str(store)])
    said = "".join(capsys.readouterr())
    assert code == 2, said
    assert "index.json" in said and "not a pairing id" in said


def test_non_pep440_store_version_is_bad_input_naming_the_entry(tmp_path, capsys):
    store = _store(tmp_path, {"a" * 64: _entry("a" * 64), B: _entry(B, "weird")})
    code = main(["manifest", "query", "--store", str(store), "--core", ">=0.1", "--json"])
    said = "".join(capsys.readouterr())
    assert code == 2, said
    assert "--core" not in said  # the store's entry is blamed, not the user's argument
    assert "index.json" in said and "b" * 16 in said and "'weird'" in said


def test_bad_core_specifier_is_still_blamed_on_core(tmp_path, capsys):
    store = _store(tmp_path, {"a" * 64: _entry("a" * 64)})
    code = main(["manifest", "query", "--store", str(store), "--core", ">=x.y"])
    assert code == 2
    assert "--core >=x.y" in "".join(capsys.readouterr())
