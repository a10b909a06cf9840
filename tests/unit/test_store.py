"""Manifest store: add/replace/idempotence, conflicts, a corrupt or newer index (the CLI's
query and matrix, HTTP reads and concurrent or killed writers:
tests/integration/test_store_processes.py)."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import (
    built_manifest,
    manifest_variant,
    sign_store,
    store_key,
    typed,
    vpr,
    write_manifest,
)
from vllm_plugin_release.core import lockfile
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.edges import store as st
from vllm_plugin_release.flows import install


@pytest.fixture(scope="module")
def base_manifest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return built_manifest(tmp_path_factory.mktemp("dist") / "ref")


def test_add_idempotent_replace_and_conflict(tmp_path: Path, base_manifest: dict) -> None:
    store = st.DirStore(tmp_path / "store")
    m = manifest_variant(base_manifest, commit="1" * 40)
    path = write_manifest(tmp_path / "in", m)
    assert store.add(path).status == "added"
    assert store.add(path).status == "unchanged"
    before = (tmp_path / "store" / "index.json").read_bytes()
    assert store.add(path).status == "unchanged"
    assert (tmp_path / "store" / "index.json").read_bytes() == before

    fleet = copy.deepcopy(m)
    fleet["conformance"]["verdict"] = "fleet"
    fleet["conformance"]["checks"]["hardware"]["status"] = "pass"
    fleet["conformance"]["deferred"] = []
    result = store.add(write_manifest(tmp_path / "in", fleet, "fleet.json"))
    assert result.status == "replaced" and result.previous.verdict == "pilot"
    assert _index(store).pairings[m["pairing_id"]].verdict == "fleet"

    other_build = copy.deepcopy(m)
    other_build["core"]["wheel"]["sha256"] = "f" * 64
    with pytest.raises(GateFailed, match="already in the store"):
        store.add(write_manifest(tmp_path / "in", other_build, "other.json"))
    stored = tmp_path / "store" / "pairings" / f"{m['pairing_id']}.json"
    assert json.loads(stored.read_text())["conformance"]["verdict"] == "fleet"


def test_index_rebuilt_when_corrupt_and_newer_refused(tmp_path: Path, base_manifest: dict) -> None:
    root = tmp_path / "store"
    store = st.DirStore(root)
    a, b = (
        manifest_variant(base_manifest, commit="a" * 40),
        manifest_variant(base_manifest, commit="b" * 40),
    )
    store.add(write_manifest(tmp_path, a))
    (root / "index.json").write_text('{"pairings": ')  # truncated by some other tool
    with pytest.raises(BadInput, match="not valid JSON"):
        _index(store)
    store.add(write_manifest(tmp_path, b))
    assert set(_index(store).pairings) == {a["pairing_id"], b["pairing_id"]}

    newer = json.loads((root / "index.json").read_text())
    newer["schema_version"] = 99
    (root / "index.json").write_text(json.dumps(newer))
    with pytest.raises(BadInput, match="newer than this vpr understands"):
        _index(store)
    with pytest.raises(BadInput, match="newer"):
        store.add(write_manifest(tmp_path, a))
    sign_store(root, store_key(tmp_path))  # as its publisher would: the head vouches for it
    q = vpr("manifest", "query", "--store", str(root), cwd=tmp_path)
    assert q.returncode == 2 and "newer" in q.stderr and "Traceback" not in q.stderr


def _index(store: st.DirStore) -> si.StoreIndex:
    """The index.json the store wrote, checked as every reader checks it."""
    return si.index_from((store.root / "index.json").read_bytes(), store.where("index.json"))


def _extras(tmp_path: Path, m: dict, time: str, **kw: Any) -> st.Extras:
    return st.Extras(index=si.PublishedAt("local"), time=time, **kw)


def test_history_keeps_cpu_then_hardware_newest_first(tmp_path: Path, base_manifest: dict) -> None:
    store = st.DirStore(tmp_path / "store")
    cpu = manifest_variant(base_manifest, commit="3" * 40)
    path = write_manifest(tmp_path / "in", cpu)
    store.add(path, None, _extras(tmp_path, cpu, "2026-12-01T01:00:00Z"))
    # the same bytes again (a re-run): no second history line
    store.add(path, None, _extras(tmp_path, cpu, "2026-12-01T01:30:00Z"))
    hw = copy.deepcopy(cpu)
    hw["conformance"].update(verdict="fleet", runner="hardware", deferred=[])
    hw["conformance"]["checks"]["hardware"]["status"] = "pass"
    added = store.add(
        write_manifest(tmp_path / "in", hw, "hw.json"),
        None,
        _extras(tmp_path, hw, "2026-12-02T09:00:00Z"),
    )
    assert added.status == "replaced"
    entry = _index(store).pairings[cpu["pairing_id"]].raw
    assert [(h["time"], h["runner"], h["verdict"]) for h in entry["history"]] == [
        ("2026-12-02T09:00:00Z", "hardware", "fleet"),
        ("2026-12-01T01:00:00Z", "cpu", "pilot"),
    ]
    assert entry["certified_at"] == "2026-12-02T09:00:00Z"
    assert entry["source_date"] == cpu["source_date"]
    # history comes from the run files: a rebuilt index keeps it
    (tmp_path / "store" / "index.json").unlink()
    store.add(path, None, None)
    assert _index(store).pairings[cpu["pairing_id"]].runs == 2


def test_a_remote_publish_names_its_index_for_each_wheel(
    tmp_path: Path, base_manifest: dict
) -> None:
    # index.json's wheels[].index_url: the simple API the newest run published to (null
    # for the run's own local pypiserver). It was always null: read from a history line,
    # which names no index.
    store = st.DirStore(tmp_path / "store")
    m = manifest_variant(base_manifest, commit="4" * 40)
    path = write_manifest(tmp_path / "in", m)
    remote = si.PublishedAt("remote", "https://pypi.example.org/simple/")
    store.add(path, None, st.Extras(index=remote, time="2026-12-01T01:00:00Z"))
    entry = _index(store).pairings[m["pairing_id"]].raw
    assert [w["index_url"] for w in entry["wheels"]] == ["https://pypi.example.org/simple/"] * 2
    # a later local run of other bytes is the newest: its wheels are on no index that lasts
    hw = copy.deepcopy(m)
    hw["conformance"].update(verdict="fleet", runner="hardware", deferred=[])
    hw["conformance"]["checks"]["hardware"]["status"] = "pass"
    later = st.Extras(index=si.PublishedAt("local"), time="2026-12-02T01:00:00Z")
    store.add(write_manifest(tmp_path / "in", hw, "hw.json"), None, later)
    entry = _index(store).pairings[m["pairing_id"]].raw
    assert [w["index_url"] for w in entry["wheels"]] == [None, None]


def test_wheels_and_lock_are_stored_and_checked(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "ref"
    m = built_manifest(dist)
    lock = b"idna==3.20 \\\n    --hash=sha256:" + b"0" * 64 + b"\n"
    m["environment"]["lock_sha256"] = hashlib.sha256(lock).hexdigest()
    path = write_manifest(dist, m, "manifest.json")
    wheels = tuple(dist / m[r]["wheel"]["filename"] for r in ("core", "plugin"))
    store = st.DirStore(tmp_path / "store")
    # a lock that is not the one the manifest signs is refused before anything is written
    with pytest.raises(GateFailed, match="lock_sha256"):
        store.add(path, None, st.Extras(lock=lock + b"# edited\n", wheels=wheels))
    assert not (tmp_path / "store" / "index.json").exists()
    store.add(path, None, st.Extras(lock=lock, wheels=wheels, index=si.PublishedAt("local")))
    entry = _index(store).pairings[m["pairing_id"]].raw
    assert (tmp_path / "store" / entry["requirements"]["path"]).read_bytes() == lock
    for w in entry["wheels"]:
        stored = tmp_path / "store" / w["store_path"]
        assert hashlib.sha256(stored.read_bytes()).hexdigest() == w["sha256"]
        assert w["index_url"] is None  # the local pypiserver is gone after the run
    page = (tmp_path / "store" / "wheels" / "index.html").read_text()
    assert all(f"{w['filename']}#sha256={w['sha256']}" in page for w in entry["wheels"])
    # another file under a stored wheel's name is refused, the store unchanged
    other = tmp_path / "other"
    other.mkdir()
    clash = other / wheels[1].name
    clash.write_bytes(b"not the certified wheel")
    before = (tmp_path / "store" / "index.json").read_bytes()
    with pytest.raises(GateFailed, match="already in the store"):
        store.add(path, None, st.Extras(wheels=(clash,)))
    assert (tmp_path / "store" / "index.json").read_bytes() == before


def _many(base: dict, n: int, plugins: int = 1) -> si.StoreIndex:
    index = si.empty_index()
    for i in range(n):
        m = manifest_variant(base, commit=f"{i % plugins:040x}", core=f"0.{20 + i // plugins}.0")
        m["plugin"]["name"] = f"vllm-very-long-vendor-platform-plugin-{i % plugins}"
        index.pairings[m["pairing_id"]] = si.entry_for(typed(m), "0" * 64, True)
    return index


def test_query_and_matrix_fit_80_columns_without_cutting_names(base_manifest: dict) -> None:
    index = _many(base_manifest, 12, plugins=9)
    entries = si.query(index)
    text = si.query_text(entries, "/a/store/with/a/rather/long/path/name/" * 3)
    assert max(map(len, text.splitlines())) <= 80
    assert "vllm-very-long-vendor-platform-plugin-8 0.1.0" in text
    assert "…" not in text
    m = si.matrix(index)
    table = si.matrix_text(m)
    assert max(map(len, table.splitlines())) <= 80
    assert table.count("vLLM core") >= 2  # nine plugin columns: split into several tables
    for column in m.plugins:
        assert column in table  # the legend names every column in full
    assert "py3.11" in table and "tt-metal" in table and "pilot:" in table
    assert "pairings/<pairing id>.json" in table  # where each manifest is
    big = si.matrix_text(si.matrix(_many(base_manifest, 50, plugins=2)))
    assert "50 pairings (ids:" in big and max(map(len, big.splitlines())) <= 80
    data = si.matrix_json(m)
    assert len(data["plugins"]) == 9 and data["plugins"][0]["key"] == "A"
    md = si.render_markdown(m)
    assert "(py3.11)" in md and "Verdicts:" in md and "tt-metal" in md


def test_query_and_matrix_json_from_the_cli(tmp_path: Path, base_manifest: dict) -> None:
    store = st.DirStore(tmp_path / "store", signer=store_key(tmp_path))
    m = manifest_variant(base_manifest, commit="4" * 40)
    store.add(write_manifest(tmp_path, m))
    q = vpr("manifest", "query", "--store", str(tmp_path / "store"), "--json", cwd=tmp_path)
    assert json.loads(q.stdout)[0]["pairing_id"] == m["pairing_id"]
    t = vpr("manifest", "matrix", "--store", str(tmp_path / "store"), "--json", cwd=tmp_path)
    assert json.loads(t.stdout)["cells"][0]["pairings"][0]["pairing_id"] == m["pairing_id"]
    text = vpr("manifest", "query", "--store", str(tmp_path / "store"), cwd=tmp_path).stdout
    assert max(map(len, text.splitlines())) <= 80 and m["pairing_id"][:16] in text


def test_lock_drift_reports_missing_different_and_extra() -> None:
    pins = {"Torch": "2.13.0+cpu", "idna": "3.20", "vllm": "0.26.0+empty"}
    same = {"torch": "2.13.0+cpu", "IDNA": "3.20", "vllm": "0.26.0+empty", "pip": "25.0"}
    d = lockfile.drift(pins, same)
    assert d.lines() == [] and d.compared == 3 and d.seeds == ["pip"]
    bad = lockfile.drift(pins, {"torch": "2.12.0", "vllm": "0.26.0+empty", "six": "1.17.0"})
    assert bad.lines() == [
        "pin idna: missing (lock 3.20)",
        "pin torch: installed 2.12.0, lock 2.13.0+cpu",
        "extra six 1.17.0: installed but not in the lock",
    ]


def test_install_picks_one_pairing_or_says_why(base_manifest: dict) -> None:
    index = _many(base_manifest, 3)
    pid = next(iter(index.pairings))
    assert install.pick(index, pid[:10], None, None).pairing_id == pid
    with pytest.raises(BadInput, match="8 to 64 hexadecimal"):
        install.pick(index, "abc", None, None)
    with pytest.raises(BadInput, match="no store entries match"):
        install.pick(index, "f" * 12, None, None)
    with pytest.raises(BadInput, match="--core VERSION and --plugin NAME"):
        install.pick(index, None, "0.26.0", None)
    best = install.pick(index, None, ">=0.20", "vllm-very-long-vendor-platform-plugin-0")
    assert best.core.version == "0.22.0"  # newest core first
    with pytest.raises(GateFailed, match="no pairing"):
        install.pick(index, None, "9.9.9", "vllm-very-long-vendor-platform-plugin-0")
    text = install.requirements_text(typed(base_manifest), "a==1 \\\n    --hash=sha256:00\n")
    assert text.splitlines()[-2].startswith("vllm==0.26.0+empty --hash=sha256:")


def test_the_store_reads_what_it_is_handed_bounded(
    tmp_path: Path, base_manifest: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm_plugin_release.core import bounded

    store = st.DirStore(tmp_path / "store")
    path = write_manifest(tmp_path / "in", manifest_variant(base_manifest, commit="2" * 40))
    monkeypatch.setattr(bounded, "MAX_DOCUMENT", path.stat().st_size - 1)
    with pytest.raises(BadInput, match="larger than"):  # was read whole
        store.add(path)
    assert not (tmp_path / "store" / "index.json").exists()  # nothing written
    monkeypatch.undo()
    path.write_bytes(b'{"schema_version": 3, "kind": "\xff"}')
    with pytest.raises(BadInput, match="malformed JSON in manifest"):
        store.add(path)


def test_a_stored_wheels_sidecar_is_read_bounded(tmp_path: Path) -> None:
    sidecar = tmp_path / "w.whl.sha256"
    sidecar.write_text("a" * 64 + "\n")
    assert st._sidecar(sidecar) == "a" * 64
    sidecar.write_text("a" * 64 + " " * 4096)  # the same digest, padded past the bound
    assert st._sidecar(sidecar) == ""  # matches no wheel: was read whole and stripped
    assert st._sidecar(tmp_path / "absent.sha256") == ""


def test_an_entry_kept_from_before_without_wheels_or_a_manifest_path(
    tmp_path: Path, base_manifest: dict
) -> None:
    """An entry kept from the previous index (its manifest from a newer schema_version)
    that names no wheels and no manifest path no longer stops the next publish (it raised
    KeyError: 'wheels')."""
    root = tmp_path / "store"
    store = st.DirStore(root)
    a, b = (manifest_variant(base_manifest, commit=c * 40) for c in "cd")
    store.add(write_manifest(tmp_path, a))
    index = json.loads((root / "index.json").read_text())
    del index["pairings"][a["pairing_id"]]["wheels"]
    del index["pairings"][a["pairing_id"]]["manifest"]
    (root / "index.json").write_text(json.dumps(index))
    newer = root / "pairings" / f"{a['pairing_id']}.json"
    newer.write_text(json.dumps({**json.loads(newer.read_text()), "schema_version": 99}))
    assert store.add(write_manifest(tmp_path, b)).status == "added"
    kept = _index(store).pairings[a["pairing_id"]]
    assert kept.raw == index["pairings"][a["pairing_id"]] and kept.stored_wheels == ()


def test_a_malformed_run_record_is_left_out_of_the_history() -> None:
    good = {
        "kind": si.RUN_KIND,
        "time": "2026-12-01T00:00:00Z",
        "runner": "cpu",
        "verdict": "pilot",
        "manifest_sha256": "0" * 64,
        "index": {"kind": "local"},
    }
    run = si.parse_run(good)
    assert run is not None and run.index == si.PublishedAt("local")
    assert si.run_file_name(run) == "20261201T000000Z-cpu-000000000000.json"
    for bad in ({**good, "time": 5}, {**good, "runner": 3}, {**good, "kind": "x"}, [good]):
        assert si.parse_run(bad) is None
