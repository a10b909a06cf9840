"""Manifest store: add/replace/idempotence, query, matrix, HTTP reads, concurrent and
killed writers (real processes)."""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import SRC, make_pairing, vpr
from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core.cache import key_of
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.edges import store as st
from vllm_plugin_release.stages import manifest as mf


@pytest.fixture(scope="module")
def base_manifest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    dist = tmp_path_factory.mktemp("dist") / "ref"
    pins = make_pairing(dist)
    return mf.build_manifest(pins, mf.read_records(dist))


def variant(
    m: dict[str, Any], *, commit: str | None = None, core: str | None = None, verdict: str = ""
) -> dict[str, Any]:
    out = copy.deepcopy(m)
    if commit:
        out["plugin"]["commit"] = commit
    if core:
        out["core"]["version"] = core
    if verdict:
        out["conformance"]["verdict"] = verdict
    out["pairing_inputs"] = doc.pairing_inputs(
        out["core"], out["plugin"], {"name": "tt-metal", "version": "0.60.0"}, "3.11"
    )
    out["pairing_id"] = key_of(out["pairing_inputs"])
    return out


def write(folder: Path, m: dict[str, Any], name: str | None = None) -> Path:
    path = folder / (name or f"{m['pairing_id'][:12]}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(doc.manifest_bytes(m))
    return path


def _check_store(root: Path) -> dict[str, Any]:
    """Every visible file is complete JSON; the index lists exactly the manifests present."""
    index = json.loads((root / "index.json").read_text())
    for path in (root / "pairings").iterdir():
        if path.name.startswith("."):
            continue
        json.loads(path.read_text())  # never half-written
    present = {p.stem for p in (root / "pairings").glob("*.json")}
    assert set(index["pairings"]) <= present
    return index


def test_add_idempotent_replace_and_conflict(tmp_path: Path, base_manifest: dict) -> None:
    store = st.DirStore(tmp_path / "store")
    m = variant(base_manifest, commit="1" * 40)
    path = write(tmp_path / "in", m)
    assert store.add(path).status == "added"
    assert store.add(path).status == "unchanged"
    before = (tmp_path / "store" / "index.json").read_bytes()
    assert store.add(path).status == "unchanged"
    assert (tmp_path / "store" / "index.json").read_bytes() == before

    fleet = copy.deepcopy(m)
    fleet["conformance"]["verdict"] = "fleet"
    fleet["conformance"]["checks"]["hardware"]["status"] = "pass"
    fleet["conformance"]["deferred"] = []
    result = store.add(write(tmp_path / "in", fleet, "fleet.json"))
    assert result.status == "replaced" and result.previous["verdict"] == "pilot"
    assert store.read_index()["pairings"][m["pairing_id"]]["verdict"] == "fleet"

    other_build = copy.deepcopy(m)
    other_build["core"]["wheel"]["sha256"] = "f" * 64
    with pytest.raises(GateFailed, match="already in the store"):
        store.add(write(tmp_path / "in", other_build, "other.json"))
    stored = tmp_path / "store" / "pairings" / f"{m['pairing_id']}.json"
    assert json.loads(stored.read_text())["conformance"]["verdict"] == "fleet"


def test_index_rebuilt_when_corrupt_and_newer_refused(tmp_path: Path, base_manifest: dict) -> None:
    root = tmp_path / "store"
    store = st.DirStore(root)
    a, b = variant(base_manifest, commit="a" * 40), variant(base_manifest, commit="b" * 40)
    store.add(write(tmp_path, a))
    (root / "index.json").write_text('{"pairings": ')  # truncated by some other tool
    with pytest.raises(BadInput, match="not valid JSON"):
        store.read_index()
    store.add(write(tmp_path, b))
    assert set(store.read_index()["pairings"]) == {a["pairing_id"], b["pairing_id"]}

    newer = json.loads((root / "index.json").read_text())
    newer["schema_version"] = 99
    (root / "index.json").write_text(json.dumps(newer))
    with pytest.raises(BadInput, match="newer than this vpr understands"):
        store.read_index()
    with pytest.raises(BadInput, match="newer"):
        store.add(write(tmp_path, a))
    q = vpr("manifest", "query", "--store", str(root), cwd=tmp_path)
    assert q.returncode == 2 and "newer" in q.stderr and "Traceback" not in q.stderr


def _fill(tmp_path: Path, base: dict) -> tuple[Path, list[dict]]:
    root = tmp_path / "store"
    store = st.DirStore(root)
    entries = [
        variant(base, commit="1" * 40, core="0.26.0", verdict="fleet"),
        variant(base, commit="2" * 40, core="0.26.0", verdict="pilot"),
        variant(base, commit="1" * 40, core="0.25.1", verdict="pilot"),
    ]
    for m in entries:
        store.add(write(tmp_path / "in", m))
    return root, entries


def test_query_and_matrix(tmp_path: Path, base_manifest: dict) -> None:
    root, _ = _fill(tmp_path, base_manifest)
    index = st.DirStore(root).read_index()
    assert [e["core"]["version"] for e in si.query(index)] == ["0.26.0", "0.26.0", "0.25.1"]
    assert len(si.query(index, core="0.26")) == 2
    assert len(si.query(index, core=">=0.25,<0.26")) == 1
    assert len(si.query(index, verdict="fleet")) == 1
    assert len(si.query(index, plugin="VPR_test.plugin")) == 3
    assert si.query(index, plugin="other") == []

    m = si.matrix(index)
    assert m.cores == ["0.26.0", "0.25.1"]
    assert m.plugins == ["vpr-test-plugin@111111111111", "vpr-test-plugin@222222222222"]
    md = si.render_markdown(m)
    assert "| 0.26.0 | fleet | pilot |" in md and "| 0.25.1 | pilot |" in md
    html = si.render_html(m)
    assert '<td class="fleet">fleet</td>' in html and html.startswith("<!DOCTYPE html>")

    q = vpr("manifest", "query", "--store", str(root), "--core", "0.26.0", "--json", cwd=tmp_path)
    assert q.returncode == 0, q.stderr
    assert {e["verdict"] for e in json.loads(q.stdout)} == {"fleet", "pilot"}
    none = vpr("manifest", "query", "--store", str(root), "--plugin", "nope", cwd=tmp_path)
    assert none.returncode == 1
    table = vpr("manifest", "query", "--store", str(root), cwd=tmp_path)
    assert table.returncode == 0 and "0.25.1" in table.stdout
    for fmt, needle in (("table", "0.25.1"), ("markdown", "| vLLM core |"), ("html", "<table>")):
        out = vpr("manifest", "matrix", "--store", str(root), "--format", fmt, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert needle in out.stdout
    target = tmp_path / "matrix.html"
    vpr("manifest", "matrix", "--store", str(root), "--format", "html", "-o", str(target),
        cwd=tmp_path)  # fmt: skip
    assert "<table>" in target.read_text()


def test_http_store_is_readable_and_read_only(tmp_path: Path, base_manifest: dict) -> None:
    root, _ = _fill(tmp_path, base_manifest)
    server = ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(root))
    )
    server.RequestHandlerClass.log_message = lambda *a: None  # type: ignore[method-assign]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        store = st.open_store(url)
        index = store.read_index()
        assert len(index["pairings"]) == 3
        entry = si.query(index, verdict="fleet")[0]
        assert store.read_manifest(entry)["pairing_id"] == entry["pairing_id"]
        q = vpr("manifest", "query", "--store", url, "--verdict", "pilot", "--json", cwd=tmp_path)
        assert q.returncode == 0, q.stderr
        assert len(json.loads(q.stdout)) == 2
        with pytest.raises(BadInput, match="read-only"):
            store.add(tmp_path / "whatever.json")
        missing = vpr("manifest", "query", "--store", url + "/nothing", cwd=tmp_path)
        assert missing.returncode == 2
    finally:
        server.shutdown()
        server.server_close()
    down = vpr("manifest", "query", "--store", url, cwd=tmp_path)
    assert down.returncode == 3 and "unreachable" in down.stderr


_WRITER = """
import sys, time
from pathlib import Path
from vllm_plugin_release.edges.store import DirStore
root, go, *files = sys.argv[1:]
while not Path(go).exists():
    time.sleep(0.001)
store = DirStore(Path(root))
for f in files:
    store.add(Path(f))
"""


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }


def test_concurrent_publishers_lose_nothing(tmp_path: Path, base_manifest: dict) -> None:
    root = tmp_path / "store"
    go = tmp_path / "go"
    shared = write(tmp_path / "in", variant(base_manifest, commit="e" * 40))
    procs, expected = [], {json.loads(shared.read_text())["pairing_id"]}
    for w in range(8):
        files = [shared]
        for i in range(4):
            m = variant(base_manifest, commit=f"{w:x}{i:x}".ljust(40, "0"))
            expected.add(m["pairing_id"])
            files.append(write(tmp_path / "in", m))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _WRITER, str(root), str(go), *map(str, files)],
                env=_env(),
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    index = _check_store(root)
    assert set(index["pairings"]) == expected
    assert not [p for p in root.rglob("*.tmp")]


_LOOPER = """
import sys
from pathlib import Path
from vllm_plugin_release.edges.store import DirStore
root, *files = sys.argv[1:]
store = DirStore(Path(root))
print("ready", flush=True)
while True:
    for f in files:
        store.add(Path(f))
"""


def test_killed_publisher_leaves_no_half_written_file(tmp_path: Path, base_manifest: dict) -> None:
    root = tmp_path / "store"
    files = []
    for i in range(6):
        m = variant(base_manifest, commit=f"{i:x}".ljust(40, "a"))
        # Alternate two verdicts so every add rewrites the manifest and the index.
        files += [write(tmp_path / "in", m), write(tmp_path / "in", m, f"{i}-again.json")]
        m2 = copy.deepcopy(m)
        m2["conformance"]["checks"]["cadence"]["summary"] = "x" * 50_000
        files.append(write(tmp_path / "in", m2, f"{i}-big.json"))
    rng = random.Random(7)
    for _ in range(8):
        proc = subprocess.Popen(
            [sys.executable, "-c", _LOOPER, str(root), *map(str, files)],
            env=_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if (root / "index.json").exists():
            _check_store(root)
    st.DirStore(root).add(files[0])  # the next writer cleans up a killed writer's temp file
    index = _check_store(root)
    assert not [p for p in root.rglob("*.tmp")]
    assert len(index["pairings"]) == len({p.stem for p in (root / "pairings").glob("*.json")})
