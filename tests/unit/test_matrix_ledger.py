"""The version matrix's columns in the signed pairing ledger (kind matrix): the real
`vpr matrix assemble --store` records each column once, signed and chained, with its
outcome, counts, first breaking changes and bisected range; a re-run records nothing;
`vpr manifest ledger` prints and filters them; a tampered or malformed entry is refused;
the records assembled in one place or gathered from CI jobs give the same matrix.json."""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.pairing import sign_store, store_key, vpr
from tests.sitestore import (
    BREAKING,
    NOT_RUN_REASON,
    PLUGIN,
    matrix_columns,
    record_matrix,
    small,
    write_bisect,
)
from vllm_plugin_release.core import columns as cols
from vllm_plugin_release.core import ledger, signed
from vllm_plugin_release.core.bisect import parse_report
from vllm_plugin_release.core.errors import GateFailed
from vllm_plugin_release.edges import keys, trust
from vllm_plugin_release.edges.store import DirStore
from vllm_plugin_release.edges.trust import TRUST_DIR
from vllm_plugin_release.flows import matrix as flow


@pytest.fixture
def recorded(tmp_path: Path) -> dict:
    key = store_key(tmp_path)
    store, _ = small(tmp_path, key)
    done = record_matrix(tmp_path, store, matrix_columns())
    return {"root": tmp_path, "store": store, "key": key, "done": done}


def _ledger_bytes(store: Path) -> bytes:
    return (store / ledger.LEDGER_FILE).read_bytes()


def _matrix_entries(r: dict) -> list[ledger.LedgerEntry]:
    entries = trust.read_ledger(DirStore(r["store"]), r["key"].public_key())
    return [e for e in entries if e.kind == ledger.MATRIX]


def test_each_column_is_one_signed_entry_with_its_outcome(recorded: dict) -> None:
    done = recorded["done"]
    assert done.returncode == 1, done.stderr  # the matrix regressed: its own gate
    assert "ledger: 3 matrix entries (#5..#7)" in done.stderr
    found = _matrix_entries(recorded)
    assert [e.core.version for e in found] == ["0.25.1", "0.26.0", "0.27.1"]
    assert [e.verdict for e in found] == ["pass", "regressed", "not-run"]
    assert {e.plugin for e in found} == {ledger.Party(**PLUGIN)}
    assert {(e.python, e.runner, e.pairing_id, e.manifest_sha256) for e in found} == {
        ("3.11", "cpu", None, None)
    }
    good, bad, lost = (e.column for e in found)
    assert good["role"] == "lowest" and good["against"] is None and good["bisect"] is None
    assert bad["against"] == "0.25.1" and bad["regressions"] == 1
    assert bad["breaking"] == [BREAKING, "removed:vllm.old_api"] and bad["breaking_total"] == 2
    assert bad["counts"] == {"passed": 1, "failed": 1, "error": 0, "skipped": 0, "deferred": 1}
    assert bad["bisect"] == {
        "mode": "git",
        "source": "https://github.com/vllm-project/vllm",
        "last_good": "d" * 40,
        "first_bad": "e" * 40,
        "subject": "[Core] Pass max_num_blocks to the block table",
    }
    assert (lost["exit_class"], lost["reason"]) == (3, NOT_RUN_REASON)
    # keyed by the column record's content, as the file holds it
    folder = recorded["root"] / "dist" / "ref" / cols.FOLDER
    record = cols.read_column(folder / "0.26.0.json")
    assert record is not None and bad["record_sha256"] == cols.record_sha256(record)
    # each line's own signature, checked line by line (not through the head's vouching)
    data = _ledger_bytes(recorded["store"])
    assert len(ledger.parse_ledger(data, recorded["key"].public_key(), "ledger")) == 7
    other, _ = keys.generate_keypair(recorded["root"] / "other" / "k.key")
    with pytest.raises(GateFailed, match=r"ledger:1: "):
        ledger.parse_ledger(data, keys.load_private_key(other).public_key(), "ledger")


def test_recording_the_same_records_again_writes_nothing(recorded: dict) -> None:
    root, store = recorded["root"], recorded["store"]
    before = (_ledger_bytes(store), (store / "head.json").read_bytes())
    again = record_matrix(root, store, matrix_columns())
    assert again.returncode == 1, again.stderr
    assert "ledger: 0 matrix entries (none)" in again.stderr
    assert "3 column(s) already recorded" in again.stderr
    assert (_ledger_bytes(store), (store / "head.json").read_bytes()) == before
    # a column run again with another result is a new verdict: one entry, the rest kept
    columns = matrix_columns()
    passed = {"passed": 3, "failed": 0, "error": 0, "skipped": 0, "deferred": 0}
    columns[2] = replace(
        columns[2], status="tested", exit_class=0, reason="", counts=passed, modules=4,
        outcomes={"t::a": "passed"},
    )  # fmt: skip
    (root / "dist" / "ref" / cols.FOLDER / "0.27.1.json").unlink()
    third = record_matrix(root, store, columns)
    assert "ledger: 1 matrix entry (#8..#8)" in third.stderr, third.stderr
    newest = _matrix_entries(recorded)[-1]
    assert (newest.core.version, newest.verdict, newest.column["against"]) == (
        "0.27.1", "pass", "0.26.0"
    )  # fmt: skip


def test_a_bisect_report_of_another_step_is_not_attached(tmp_path: Path) -> None:
    key = store_key(tmp_path)
    store, _ = small(tmp_path, key)
    write_bisect(tmp_path / "dist" / "ref", good="v0.24.0", bad="v0.26.0")
    done = record_matrix(tmp_path, store, matrix_columns(), bisect=False)
    assert done.returncode == 1, done.stderr
    regressed = [e for e in _matrix_entries({"store": store, "key": key}) if e.verdict != "pass"]
    assert regressed[0].column["bisect"] is None  # searched from 0.24.0, not from 0.25.1
    report = parse_report(json.loads((tmp_path / "dist" / "ref" / "bisect.json").read_text()))
    m = cols.assemble(matrix_columns())
    assert cols.bisect_range(report, m[1]) is None
    assert cols.bisect_range(report._replace(good="0.25.1"), m[1])["first_bad"] == "e" * 40
    assert cols.bisect_range(report._replace(good="0.25.1"), m[0]) is None  # passed: no step


def test_manifest_ledger_prints_and_filters_them(recorded: dict) -> None:
    root, store = recorded["root"], str(recorded["store"])

    def ledger_cli(*argv: str):
        return vpr("manifest", "ledger", "--store", store, *argv, cwd=root)

    every = ledger_cli()
    assert every.returncode == 0, every.stderr
    lines = [line for line in every.stdout.splitlines() if " matrix " in line]
    assert len(lines) == 3
    assert "#6 " in lines[1] and ": regressed (cpu, py3.11)" in lines[1]
    assert f"(against 0.25.1); breaking {BREAKING} +1" in lines[1]
    assert "#7 " in lines[2] and f"not-run (cpu, py3.11)  exit 3: {NOT_RUN_REASON}" in lines[2]
    kind = ledger_cli("--kind", "matrix")  # through the ledger's summary
    assert kind.returncode == 0 and kind.stdout.splitlines() == lines
    regressed = ledger_cli("--verdict", "regressed")
    assert regressed.stdout.splitlines() == [lines[1]]
    core = ledger_cli("--core", "0.27.1", "--kind", "matrix", "--json")
    (raw,) = json.loads(core.stdout)
    assert raw["kind"] == "matrix" and raw["column"]["outcome"] == "not-run"
    assert ledger_cli("--kind", "release").stdout.count(" matrix ") == 0
    table = ledger_cli("--kind", "matrix", "--matrix", "markdown").stdout
    assert "| 0.26.0 | regressed (#6) |" in table
    none = ledger_cli("--kind", "matrix", "--verdict", "fail")
    assert none.returncode == 1 and "no ledger entry matches" in none.stderr


def _payload(line: bytes) -> dict:
    return json.loads(base64.b64decode(json.loads(line)["payload"]))


def _with_payload(line: bytes, payload: dict) -> bytes:
    envelope = json.loads(line)
    envelope["payload"] = base64.b64encode(signed.payload_of(payload)).decode()
    return (json.dumps(envelope, separators=(",", ":"), sort_keys=True) + "\n").encode()


def test_a_tampered_matrix_entry_is_refused(recorded: dict) -> None:
    root, store, key = recorded["root"], recorded["store"], recorded["key"]
    path = store / ledger.LEDGER_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    payload = _payload(lines[5])
    payload["verdict"] = payload["column"]["outcome"] = "pass"  # the regression hidden
    path.write_bytes(b"".join([*lines[:5], _with_payload(lines[5], payload), *lines[6:]]))
    unvouched = vpr("manifest", "ledger", "--store", str(store), cwd=root)
    assert unvouched.returncode == 1 and "ledger.jsonl:6" in unvouched.stderr
    shutil.rmtree(root / ".vpr" / TRUST_DIR)  # a reader that has not seen the honest head
    sign_store(store, key, check=False)  # a head over it: the next line's link fails
    done = vpr("manifest", "ledger", "--store", str(store), cwd=root)
    assert done.returncode == 1 and "ledger.jsonl:7: the chain is broken" in done.stderr
    assert "Traceback" not in done.stderr
    kept = path.read_bytes()
    again = record_matrix(root, store, matrix_columns())  # never extended
    assert again.returncode == 1 and "ledger.jsonl:6: the signature does not verify" in again.stderr
    assert path.read_bytes() == kept
    site = vpr("manifest", "site", "--store", str(store), "--out", str(root / "site"),
               "--newest-from", "store", cwd=root)  # fmt: skip
    assert site.returncode == 1 and not (root / "site").exists()


def test_a_signed_entry_of_another_shape_is_bad_input(recorded: dict) -> None:
    root, store, key = recorded["root"], recorded["store"], recorded["key"]
    path = store / ledger.LEDGER_FILE
    lines = path.read_bytes().splitlines(keepends=True)
    payload = _payload(lines[6])
    del payload["column"]["counts"]
    path.write_bytes(b"".join([*lines[:6], signed.sign(signed.payload_of(payload),
                                                       ledger.PAYLOAD_TYPE, key)]))  # fmt: skip
    sign_store(store, key, check=False)
    done = vpr("manifest", "ledger", "--store", str(store), cwd=root)
    assert done.returncode == 2, done.stderr
    assert "ledger.jsonl:7: a signed entry that is not a ledger entry" in done.stderr
    assert "column: 'counts'" in done.stderr


def test_records_of_two_plugin_commits_are_refused(recorded: dict) -> None:
    root, store = recorded["root"], recorded["store"]
    before = _ledger_bytes(store)
    columns = matrix_columns()
    columns[0] = replace(columns[0], plugin={**PLUGIN, "commit": "f" * 40})
    done = record_matrix(root, store, columns)
    assert done.returncode == 2 and "different plugin commits" in done.stderr, done.stderr
    assert _ledger_bytes(store) == before


def test_one_column_alone_is_not_recorded(recorded: dict) -> None:
    root = recorded["root"]
    done = vpr("matrix", "run", "--spec", str(root / "buildspec" / "ref.toml"), "--only",
               "0.26.0", "--store", str(recorded["store"]), cwd=root)  # fmt: skip
    assert done.returncode == 2 and "no column before it" in done.stderr, done.stderr


def test_records_gathered_from_jobs_assemble_to_the_same_bytes(tmp_path: Path) -> None:
    """Each CI job leaves one record in its own dist; the last job gathers them (as
    download-artifact does) and assembles: the bytes of matrix.json are those of the
    columns assembled where they ran, and recording them in a ledger changes nothing."""
    columns = matrix_columns()
    here = flow.assemble("ref", "vllm", "https://pypi.org/simple", columns)
    for column in columns:
        cols.write_column(tmp_path / "jobs" / column.core / "dist" / "ref" / cols.FOLDER, column)
    gathered = tmp_path / "dist" / "ref" / cols.FOLDER
    gathered.mkdir(parents=True)
    for record in sorted((tmp_path / "jobs").glob("*/dist/ref/matrix/*.json"), reverse=True):
        shutil.copy(record, gathered / record.name)
    key = store_key(tmp_path)
    store, _ = small(tmp_path, key)
    done = record_matrix(tmp_path, store, [], bisect=False)  # the gathered records only
    assert done.returncode == 1, done.stderr
    made = (tmp_path / "dist" / "ref" / cols.REPORT_JSON).read_bytes()
    assert made == cols.render_json(here).encode()
    (tmp_path / "dist" / "ref" / cols.REPORT_JSON).unlink()
    plain = vpr("matrix", "assemble", "--spec", str(tmp_path / "buildspec" / "ref.toml"),
                cwd=tmp_path)  # fmt: skip
    assert plain.returncode == 1
    assert (tmp_path / "dist" / "ref" / cols.REPORT_JSON).read_bytes() == made
