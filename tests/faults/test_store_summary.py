"""The store summary (`summary.json`, `summary/`): `vpr manifest query` and `matrix` read it
instead of index.json and print exactly what the whole index gives; a summary that is
tampered with, cut, grown, missing, or made from another state of the store is refused
(exit 1 naming the file), and a store published before summaries reads from index.json
with a note."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import built_manifest, manifest_variant, sign_store, store_key, typed
from vllm_plugin_release.cli import main
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core import summary as ss
from vllm_plugin_release.core.storehead import file_record
from vllm_plugin_release.core.storeindex import core_matches

CORES = ["0.9.0", "0.10.0", "0.10.0rc1", "0.10.0+cpu", "0.10.0.post1", "1.0", "1.0.0",
         "0.26.0", "2.0.0.dev3", "0.26.1", "1!0.1", "0.11"]  # fmt: skip
PLUGINS = ["vpr-test-plugin", "Vendor_Plugin", "other.plugin"]
VERDICTS = ["fleet", "pilot", "lab", None]
QUERIES = [
    [], ["--core", "0.10.0"], ["--core", "1.0.0"], ["--core", "1.0"], ["--core", "0.10.0+cpu"],
    ["--core", ">=0.10"], ["--core", "<0.26,>0.9"], ["--core", "~=0.10.0"], ["--core", "==0.10.*"],
    ["--core", "!=1.0"], ["--core", "<=0.10.0"], ["--core", "==0.26.1"], ["--core", "9.9"],
    ["--plugin", "vendor-plugin"], ["--plugin", "OTHER_plugin"], ["--plugin", "nope"],
    ["--verdict", "lab"], ["--verdict", "fleet", "--core", ">=0.26"],
    ["--core", "0.26.0", "--plugin", "vpr_test_plugin", "--verdict", "pilot"],
]  # fmt: skip
MATRICES = [[], ["--format", "markdown"], ["--format", "html"], ["--json"]]


def _index(base: dict[str, Any], n: int, seed: int = 7) -> dict[str, Any]:
    """An index of `n` pairings over CORES x PLUGINS x VERDICTS, as a publisher writes it."""
    rng = random.Random(seed)
    index = si.empty_index()
    for i in range(n):
        m = manifest_variant(base, commit=f"{i:040x}", core=rng.choice(CORES))
        m["plugin"]["name"] = rng.choice(PLUGINS)
        m["conformance"]["verdict"] = rng.choice(VERDICTS)
        m["core"]["python"] = rng.choice(["3.11.7", "3.12.1"])
        m["pairing_id"] = f"{i:064x}"
        t = typed(m)
        runs = [si.run_record(t, f"{i:064x}", "2026-11-01T00:00:00Z", si.PublishedAt("local"))]
        extras = si.EntryExtras(tuple(runs[: i % 2]), {}, bool(i % 3))
        index.pairings[m["pairing_id"]] = si.entry_for(t, f"{i:064x}", bool(i % 2), extras)
    return index


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return built_manifest(tmp_path_factory.mktemp("dist") / "ref")


@pytest.fixture
def world(tmp_path: Path, base: dict, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """`store`: 150 pairings with a summary in chunks of 7; `plain`: the same store as one
    published before summaries (its head names no summary). The CLI finds the key."""
    monkeypatch.setenv("VPR_CACHE_DIR", str(tmp_path / ".vpr"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(ss, "CHUNK", 7)
    key = store_key(tmp_path)
    store, plain = tmp_path / "store", tmp_path / "plain"
    for root in (store, plain):
        root.mkdir()
        (root / "index.json").write_bytes(si.index_bytes(_index(base, 150)))
    sign_store(store, key)  # a head over every file: the summary made from index.json
    sign_store(plain, key, check=False)  # as a head of before: index.json only
    assert (store / "summary.json").is_file() and not (plain / "summary.json").exists()
    return {"store": store, "plain": plain, "key": key}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_summary_and_whole_index_print_the_same(world, capsys) -> None:
    runs = [("query", q) for q in QUERIES] + [("matrix", q) for q in MATRICES]
    for command, more in runs:
        got = _run(capsys, "manifest", command, "--store", str(world["store"]), *more)
        want = _run(capsys, "manifest", command, "--store", str(world["plain"]), *more)
        assert "no summary" not in got[2] and "no summary" in want[2]
        assert got[0] == want[0], (command, more, got[2])
        assert got[1] == want[1].replace(str(world["plain"]), str(world["store"])), more
        if more == ["--json"] and command == "query":
            assert len(json.loads(got[1])) == 150


def test_the_summary_is_a_function_of_the_index(world, tmp_path) -> None:
    """The same index gives the same bytes; summary/ holds only what summary.json names."""
    again = tmp_path / "again"
    shutil.copytree(world["store"], again)
    shutil.rmtree(again / "summary")
    (again / "summary").mkdir()
    (again / "summary" / "stale.json").write_text("{}")
    sign_store(again, world["key"])
    for name in ("summary.json", "summary"):
        assert _tree(again / name) == _tree(world["store"] / name)
    root = json.loads((again / "summary.json").read_text())
    named = {ss.STORE.chunk_path(c["sha256"]) for c in root["chunks"]}
    named |= {ss.STORE.matrix_path(r["sha256"], f) for f, r in root["matrix"].items()}
    assert {f"summary/{p.name}" for p in (again / "summary").iterdir()} == named


def _tree(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def _chunk_file(store: Path, number: int = 0) -> Path:
    root = json.loads((store / "summary.json").read_text())
    return store / ss.STORE.chunk_path(root["chunks"][number]["sha256"])


def _refused(capsys, store: Path, *needles: str, argv: tuple[str, ...] = ()) -> str:
    code, out, err = _run(capsys, "manifest", *(argv or ("query",)), "--store", str(store))
    assert code == 1, out + err
    assert "Traceback" not in err and out == ""
    for needle in needles:
        assert needle in err, err
    return err


def test_a_tampered_chunk_is_refused(world, capsys) -> None:
    path = _chunk_file(world["store"])
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"pilot"', b'"fleet"'))  # the same size
    assert path.read_bytes() != data and len(path.read_bytes()) == len(data)
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
    root = json.loads((world["store"] / "summary.json").read_text())
    path = world["store"] / ss.STORE.matrix_path(root["matrix"]["table"]["sha256"], "table")
    text = path.read_text()
    path.write_text(text.replace("pilot", "fleet"))  # the same size
    assert path.read_text() != text
    _refused(capsys, world["store"], path.name, argv=("matrix",))


@pytest.mark.parametrize("change", ["edit", "grow", "remove"])
def test_a_summary_json_the_head_does_not_vouch_for_is_refused(world, capsys, change) -> None:
    path = world["store"] / "summary.json"
    if change == "edit":
        path.write_text(path.read_text().replace('"pairings": 150', '"pairings": 151'))
    elif change == "grow":
        path.write_bytes(path.read_bytes() + b"\n" * (1 << 20))
    else:
        path.unlink()
    _refused(capsys, world["store"], "summary.json")


def test_a_summary_of_another_state_is_refused(world, capsys, base) -> None:
    """Mix-and-match: a head signed (by a buggy or hostile publisher) over today's index
    and the summary of another index."""
    store = world["store"]
    old = {p: (store / p).read_bytes() for p in ("summary.json",)}
    old_dir = store.parent / "old-summary"
    shutil.copytree(store / "summary", old_dir)
    (store / "index.json").write_bytes(si.index_bytes(_index(base, 150, seed=8)))
    sign_store(store, world["key"])  # today's summary
    (store / "summary.json").write_bytes(old["summary.json"])
    shutil.copytree(old_dir, store / "summary", dirs_exist_ok=True)
    sign_store(store, world["key"], check=False)
    for argv in (("query",), ("matrix",)):
        _refused(capsys, store, "summary.json", "another state", argv=argv)


MALFORMED = {
    "count": ("many", []),
    "sha256": ("0" * 63, ["--core", "2.0.0.dev3"]),  # the newest core: chunk 0
    "cores": (["1.0"], ["--core", "0.10.0"]),
    "plugins": (5, ["--plugin", "vendor-plugin"]),
    "verdicts": ("lab", ["--verdict", "lab"]),
}


@pytest.mark.parametrize("key", list(MALFORMED))
def test_a_malformed_summary_signed_by_a_buggy_publisher_is_bad_input(world, capsys, key):
    """A chunk's record is checked when a read uses it: exit 2 naming it, no traceback."""
    path = world["store"] / "summary.json"
    root = json.loads(path.read_text())
    value, more = MALFORMED[key]
    for chunk in root["chunks"]:
        chunk[key] = value
    path.write_text(json.dumps(root))
    sign_store(world["store"], world["key"], check=False)
    code, _, err = _run(capsys, "manifest", "query", "--store", str(world["store"]), *more)
    assert code == 2 and "summary.json" in err and "chunks[" in err, err
    code, out, err = _run(capsys, "manifest", "matrix", "--store", str(world["store"]))
    assert code == 0 and "vLLM core" in out, err  # the matrix reads no chunk


def test_a_chunk_entry_that_is_not_one_is_bad_input(world, capsys) -> None:
    """A chunk a buggy publisher wrote (summary.json naming it, the head over both): its
    entries are checked as index.json's are."""
    store = world["store"]
    root = json.loads((store / "summary.json").read_text())
    chunk = root["chunks"][0]
    entries = json.loads((store / ss.STORE.chunk_path(chunk["sha256"])).read_text())
    entries[0]["core"]["version"] = "weird"
    data = json.dumps(entries).encode()
    chunk.update(file_record(data).to_json())
    (store / ss.STORE.chunk_path(chunk["sha256"])).write_bytes(data)
    (store / "summary.json").write_text(json.dumps(root))
    sign_store(store, world["key"], check=False)
    code, _, err = _run(capsys, "manifest", "query", "--store", str(store))
    assert code == 2 and chunk["sha256"] in err and "'weird'" in err, err


def test_a_chunk_entry_nested_too_deep_is_bad_input(world, capsys) -> None:
    """Chunks are parsed without walking them whole; what a query prints is walked first."""
    store = world["store"]
    root = json.loads((store / "summary.json").read_text())
    chunk = root["chunks"][0]
    entries = json.loads((store / ss.STORE.chunk_path(chunk["sha256"])).read_text())
    deep: dict[str, Any] = {}
    for _ in range(80):
        deep = {"x": deep}
    entries[0]["runtime"] = {"name": "rt", "status": "ok", "more": deep}
    data = json.dumps(entries).encode()
    chunk.update(file_record(data).to_json())
    (store / ss.STORE.chunk_path(chunk["sha256"])).write_bytes(data)
    (store / "summary.json").write_text(json.dumps(root))
    sign_store(store, world["key"], check=False)
    code, out, err = _run(capsys, "manifest", "query", "--store", str(store), "--json")
    assert code == 2 and "deeper than 64" in err and entries[0]["pairing_id"][:16] in err, err
    assert out == ""


def test_chunks_for_keeps_every_chunk_that_holds_a_match() -> None:
    """The bisection on core versions only ever skips chunks without a match."""
    every = {*CORES, "0.10.0a1", "0.10.0+cpu.2", "0.10.1", "3.0", "0.9.0.post2", "1.0.0+x"}
    rank = si.version_ranks(every)
    versions = sorted(every, key=rank.__getitem__, reverse=True)
    entries = [
        {"core": {"version": v}, "plugin": {"name": "p"}, "verdict": "lab"}
        for v in versions
        for _ in range(2)
    ]
    wanted = [q[1] for q in QUERIES if q[:1] == ["--core"]]
    wanted += [">=0.10.0", "<1.0.0", "==1.0.0+x", ">0.10.0", "<0.10.0", "~=0.9", "0.10.0a1"]
    for size in (1, 2, 3, 5):
        chunks = [
            {"cores": [part[0]["core"]["version"], part[-1]["core"]["version"]],
             "plugins": ["p"], "verdicts": ["lab"]}
            for part in (entries[i : i + size] for i in range(0, len(entries), size))
        ]  # fmt: skip
        for core in wanted:
            kept = set(ss.chunks_for(_root_of(chunks), core=core))
            for number, start in enumerate(range(0, len(entries), size)):
                part = entries[start : start + size]
                if any(core_matches(e["core"]["version"], core) for e in part):
                    assert number in kept, (core, size, number)
        assert ss.chunks_for(_root_of(chunks), core="0.26.1") != list(range(len(chunks)))


def _root_of(chunks: list) -> ss.Root:
    """A summary.json holding only `chunks` (what `chunks_for` reads)."""
    nothing = ss.FileRecord("0" * 64, 0)
    return ss.Root(nothing, 0, dict.fromkeys(ss.FORMATS, nothing), chunks)


def test_an_old_store_reads_its_whole_index_with_a_note(world, capsys) -> None:
    code, out, err = _run(capsys, "manifest", "query", "--store", str(world["plain"]))
    assert code == 0 and "150 pairing(s)" in out
    assert "summary.json" in err and "vpr manifest sign-store" in err


def test_a_publish_writes_the_summary_with_the_index(tmp_path, base, monkeypatch) -> None:
    """Each publish: index.json, summary.json and the files it names, under one new head;
    the files of the summary before it are gone."""
    from tests.pairing import write_manifest
    from vllm_plugin_release.edges.store import DirStore, read_head

    key = store_key(tmp_path)
    store = DirStore(tmp_path / "store", signer=key)
    seen: list[set[str]] = []
    for i, verdict in itertools.product(range(3), ["pilot"]):
        m = manifest_variant(base, commit=f"{i + 1:040x}", verdict=verdict)
        store.add(write_manifest(tmp_path / "in", m))
        head = read_head(store.root, key.public_key(), "head")
        assert head is not None and {"index.json", "summary.json"} <= set(head.files)
        root = json.loads((store.root / "summary.json").read_text())
        assert root["index"] == head.files["index.json"].to_json() and root["pairings"] == i + 1
        seen.append({p.name for p in (store.root / "summary").iterdir()})
    assert not seen[0] & seen[2]  # nothing left of the first state's summary


def test_an_http_store_reads_its_summary_as_a_folder_does(world, capsys) -> None:
    """The same store served over HTTP prints the same (its summary read over HTTP)."""
    import functools
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    from tests.support import serve_in_thread

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(world["store"]))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    serve_in_thread(server)
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        for command, more in [("query", ["--core", "0.10.0"]), ("matrix", ["--json"])]:
            got = _run(capsys, "manifest", command, "--store", url, *more)
            want = _run(capsys, "manifest", command, "--store", str(world["store"]), *more)
            assert got[0] == want[0] == 0 and "no summary" not in got[2], got[2]
            # the text wraps to its width around the location, whose length differs
            words = want[1].replace(f"{world['store']}", url).split()
            assert got[1].split() == words, more
    finally:
        server.shutdown()
        server.server_close()
