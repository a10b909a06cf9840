"""The ledger summary (`ledger/summary.json`, `ledger/summary/`): `vpr manifest ledger` with a
filter, and `--matrix`, read it instead of the whole ledger and print exactly what the
whole ledger gives; a summary that is tampered with, grown, missing, or made from another
state of the ledger is refused (exit 1 naming the file), a malformed one signed by a buggy
writer is bad input (exit 2), and a ledger written before summaries is read whole with a
note."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import ledger_manifest, sign_store, store_key
from vllm_plugin_release.cli import main
from vllm_plugin_release.core import ledger
from vllm_plugin_release.core import summary as ls
from vllm_plugin_release.core.storehead import file_record
from vllm_plugin_release.edges import trust
from vllm_plugin_release.edges.store import DirStore

CORES = ["0.25.1", "0.26.0", "0.26.0rc1", "0.27.0", "1.0"]
PLUGINS = ["demo-plugin", "Vendor_Plugin", "other.plugin"]
COMMITS = ["a" * 40, "ab" + "c" * 38, "abd" + "0" * 37, "f" * 40, None]
VERDICTS = ["fleet", "pilot", "lab", None]
FILTERS = [
    ["--core", "0.26.0"], ["--core", "1.0"], ["--core", "9.9"], ["--core", "abc"],
    ["--core", "ab"], ["--core", "a" * 40], ["--core", "a" * 13], ["--plugin", "demo-plugin"],
    ["--plugin", "vendor-plugin"], ["--plugin", "f"], ["--plugin", "abd000000000000"],
    ["--verdict", "lab"], ["--kind", "nightly"], ["--kind", "release", "--verdict", "fleet"],
    ["--core", "0.27.0", "--plugin", "other.plugin", "--verdict", "pilot"],
]  # fmt: skip
OUTPUTS = [[], ["--json"], ["--matrix", "markdown"], ["--matrix", "json"]]


def _entries(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        core = (rng.choice(CORES), rng.choice(COMMITS))
        plugin = (rng.choice(PLUGINS), rng.choice(COMMITS))
        manifest = ledger_manifest(f"{i:064x}", core, plugin, rng.choice(VERDICTS))
        lag = rng.choice([None, ledger.Lag(3, 0)])
        out.append(
            ledger.entry_from_manifest(
                manifest, manifest_sha256=f"{i:064x}", runner="cpu", time="2026-12-01T00:00:00Z",
                kind=rng.choice(ledger.KINDS), lag=lag,
            )
        )  # fmt: skip
    return out


def _lines(entries: list[ledger.Draft], key: Any) -> bytes:
    lines: list[bytes] = []
    for i, entry in enumerate(entries):
        lines.append(ledger.sign_line(ledger.chained(entry, lines[-1] if lines else None, i), key))
    return b"".join(lines)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """`store`: a ledger of 120 entries with its summary in chunks of 7; `plain`: the same
    ledger as one written before summaries (its head names no ledger summary)."""
    monkeypatch.setenv("VPR_CACHE_DIR", str(tmp_path / ".vpr"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ls, "LEDGER_CHUNK", 7)
    key = store_key(tmp_path)
    store, plain = tmp_path / "store", tmp_path / "plain"
    data = _lines(_entries(120), key)
    for root in (store, plain):
        (root / "ledger").mkdir(parents=True)
        (root / ledger.LEDGER_FILE).write_bytes(data)
    sign_store(store, key)  # a head over every file: the ledger summary made from the ledger
    sign_store(plain, key, check=False)  # as a head of before: the ledger only
    assert (store / ls.LEDGER_SUMMARY_FILE).is_file()
    assert not (plain / ls.LEDGER_SUMMARY_FILE).exists()
    return {"store": store, "plain": plain, "key": key}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _differences(world: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> list[Any]:
    """The runs whose exit code or output differ between the summary and the whole ledger."""
    found = []
    for filters in [[], *FILTERS]:
        for more in OUTPUTS:
            argv = ["manifest", "ledger", *filters, *more]
            got = _run(capsys, *argv, "--store", str(world["store"]))
            want = _run(capsys, *argv, "--store", str(world["plain"]))
            assert "Traceback" not in got[2]
            if filters or "--matrix" in more:  # (every entry listed: the whole ledger read)
                assert "no summary" not in got[2] and "no summary" in want[2], (filters, more)
            if got[:2] != want[:2]:
                found.append((filters, more))
    return found


def test_summary_and_whole_ledger_print_the_same(world, capsys) -> None:
    assert _differences(world, capsys) == []


def test_the_comparison_catches_a_summary_that_skips_a_chunk_it_needs(
    world, capsys, monkeypatch
) -> None:
    """Known bad: a chunk's commits compared whole, not as prefixes (`--core ab` then misses
    the chunks holding abc...): the comparison above must see it."""
    monkeypatch.setattr(ls, "_prefixed", lambda prefixes, text: text in prefixes)
    assert (["--core", "ab"], []) in _differences(world, capsys)


def test_a_filter_reads_only_the_chunks_that_can_hold_its_answer(world, monkeypatch) -> None:
    from vllm_plugin_release.edges import trust
    from vllm_plugin_release.edges.trust import Trusted

    read: list[str] = []
    real = trust.read_file
    monkeypatch.setattr(
        trust, "read_file", lambda t, rel, rec, hint: read.append(rel) or real(t, rel, rec, hint)
    )
    trusted = Trusted(DirStore(world["store"]), world["key"].public_key(), memory=None)
    found, count = trust.select(trusted, kind="nightly", core="1.0", plugin="f")
    root = json.loads((world["store"] / ls.LEDGER_SUMMARY_FILE).read_text())
    assert count == 120 and len(root["chunks"]) == 18
    assert found and len(read) < len(root["chunks"])
    holding = {ls.LEDGER.chunk_path(root["chunks"][(e.seq - 1) // 7]["sha256"]) for e in found}
    assert holding <= set(read)


def test_the_summary_is_written_with_each_entry_and_is_a_function_of_the_ledger(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(ls, "LEDGER_CHUNK", 2)
    key = store_key(tmp_path)
    store = DirStore(tmp_path / "store")
    for entry in _entries(5):
        trust.append(store, entry, key)
    root = json.loads((store.root / ls.LEDGER_SUMMARY_FILE).read_text())
    named = {ls.LEDGER.chunk_path(c["sha256"]) for c in root["chunks"]}
    named |= {ls.LEDGER.matrix_path(r["sha256"], f) for f, r in root["matrix"].items()}
    on_disk = {
        f"{ls.LEDGER_SUMMARY_DIR}/{p.name}" for p in (store.root / ls.LEDGER_SUMMARY_DIR).iterdir()
    }
    assert on_disk == named and root["entries"] == 5  # the chunks of before swept
    again = tmp_path / "again"
    shutil.copytree(store.root, again, ignore=shutil.ignore_patterns("summary*"))
    sign_store(again, key)
    for name in (ls.LEDGER_SUMMARY_FILE, ls.LEDGER_SUMMARY_DIR):
        assert _tree(again / name) == _tree(store.root / name)


def _tree(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def _chunk_file(store: Path, number: int = 0) -> Path:
    root = json.loads((store / ls.LEDGER_SUMMARY_FILE).read_text())
    return store / ls.LEDGER.chunk_path(root["chunks"][number]["sha256"])


def _refused(capsys, store: Path, *needles: str, argv: tuple[str, ...] = ()) -> str:
    argv = argv or ("--kind", "release")
    code, out, err = _run(capsys, "manifest", "ledger", *argv, "--store", str(store))
    assert code == 1, out + err
    assert "Traceback" not in err and out == ""
    for needle in needles:
        assert needle in err, err
    return err


def test_a_tampered_chunk_is_refused(world, capsys) -> None:
    path = _chunk_file(world["store"])
    data = path.read_bytes()
    swapped = data.replace(b'"manifest_sha256":"0', b'"manifest_sha256":"1', 1)
    path.write_bytes(swapped)  # the same size
    assert swapped != data and len(swapped) == len(data)
    _refused(capsys, world["store"], path.name, "summary vouches for")


def test_a_grown_chunk_is_refused_before_it_is_read_whole(world, capsys) -> None:
    path = _chunk_file(world["store"])
    path.write_bytes(path.read_bytes() + b" " * 10_000_000)
    _refused(capsys, world["store"], path.name, "larger than")


def test_a_missing_chunk_is_refused(world, capsys) -> None:
    path = _chunk_file(world["store"], 3)
    path.unlink()
    _refused(capsys, world["store"], path.name, "missing")


def test_a_tampered_matrix_is_refused(world, capsys) -> None:
    root = json.loads((world["store"] / ls.LEDGER_SUMMARY_FILE).read_text())
    path = world["store"] / ls.LEDGER.matrix_path(root["matrix"]["markdown"]["sha256"], "markdown")
    text = path.read_text()
    path.write_text(text.replace("pilot", "fleet"))  # the same size
    assert path.read_text() != text
    _refused(capsys, world["store"], path.name, argv=("--matrix", "markdown"))


@pytest.mark.parametrize("change", ["edit", "grow", "remove"])
def test_a_summary_json_the_head_does_not_vouch_for_is_refused(world, capsys, change) -> None:
    path = world["store"] / ls.LEDGER_SUMMARY_FILE
    if change == "edit":
        path.write_text(path.read_text().replace('"entries": 120', '"entries": 121'))
    elif change == "grow":
        path.write_bytes(path.read_bytes() + b"\n" * (1 << 20))
    else:
        path.unlink()
    _refused(capsys, world["store"], "summary.json")


def test_a_summary_of_another_state_is_refused(world, capsys) -> None:
    """Mix-and-match: a head signed (by a buggy or hostile writer) over today's ledger and
    the summary of the ledger before its last entry."""
    store = world["store"]
    old = (store / ls.LEDGER_SUMMARY_FILE).read_bytes()
    old_dir = store.parent / "old-summary"
    shutil.copytree(store / ls.LEDGER_SUMMARY_DIR, old_dir)
    trust.append(DirStore(store), _entries(1, seed=8)[0], world["key"])
    (store / ls.LEDGER_SUMMARY_FILE).write_bytes(old)
    shutil.copytree(old_dir, store / ls.LEDGER_SUMMARY_DIR, dirs_exist_ok=True)
    sign_store(store, world["key"], check=False)
    for argv in (("--kind", "release"), ("--matrix", "json")):
        _refused(capsys, store, "summary.json", "another state", argv=argv)


def test_a_chunk_entry_out_of_its_place_is_bad_input(world, capsys) -> None:
    """A writer's bug: entries of the right digest, but not numbered from the chunk's first
    seq (signed over by a buggy writer): exit 2 naming the chunk, no traceback."""
    store = world["store"]
    root = json.loads((store / ls.LEDGER_SUMMARY_FILE).read_text())
    rec = root["chunks"][1]
    path = _chunk_file(store, 1)
    entries = json.loads(path.read_text())
    entries[0], entries[1] = entries[1], entries[0]
    data = json.dumps(entries, sort_keys=True, separators=(",", ":")).encode()
    path.unlink()
    rec.update(file_record(data).to_json())
    (store / ls.LEDGER.chunk_path(rec["sha256"])).write_bytes(data)
    (store / ls.LEDGER_SUMMARY_FILE).write_text(json.dumps(root))
    sign_store(store, world["key"], check=False)
    code, out, err = _run(capsys, "manifest", "ledger", "--store", str(store), "--kind", "release")
    assert code == 2 and out == "" and "Traceback" not in err, err
    assert ls.LEDGER.chunk_path(rec["sha256"]).split("/")[-1] in err and "expected 8" in err


def test_a_ledger_written_before_summaries_is_read_whole_with_a_note(world, capsys) -> None:
    code, out, err = _run(
        capsys, "manifest", "ledger", "--store", str(world["plain"]), "--core", "1.0"
    )
    assert code == 0 and out
    assert "the ledger has no summary" in err and "sign-store" in err
