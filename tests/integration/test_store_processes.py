"""The store through real processes: the CLI's query and matrix over a directory and over
HTTP, and concurrent and killed writers (each a real process) that lose and corrupt nothing."""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import subprocess
import sys
import time
from functools import partial
from hashlib import sha256
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import (
    SRC,
    built_manifest,
    check_store,
    manifest_variant,
    store_key,
    vpr,
    write_manifest,
)
from tests.support import serve_in_thread
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import store as st


@pytest.fixture(scope="module")
def base_manifest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return built_manifest(tmp_path_factory.mktemp("dist") / "ref")


def _fill(tmp_path: Path, base: dict) -> tuple[Path, list[dict]]:
    root = tmp_path / "store"
    store = st.DirStore(root, signer=store_key(tmp_path))  # the CLI finds its .pub by default
    entries = [
        manifest_variant(base, commit="1" * 40, core="0.26.0", verdict="fleet"),
        manifest_variant(base, commit="2" * 40, core="0.26.0", verdict="pilot"),
        manifest_variant(base, commit="1" * 40, core="0.25.1", verdict="pilot"),
    ]
    for m in entries:
        store.add(write_manifest(tmp_path / "in", m))
    return root, entries


def test_query_and_matrix(tmp_path: Path, base_manifest: dict) -> None:
    root, _ = _fill(tmp_path, base_manifest)
    index = si.index_from((root / "index.json").read_bytes(), "index.json")
    assert [e.core.version for e in si.query(index)] == ["0.26.0", "0.26.0", "0.25.1"]
    assert len(si.query(index, core="0.26")) == 2
    assert len(si.query(index, core=">=0.25,<0.26")) == 1
    assert len(si.query(index, verdict="fleet")) == 1
    assert len(si.query(index, plugin="VPR_test.plugin")) == 3
    assert si.query(index, plugin="other") == []

    m = si.matrix(index)
    assert m.cores == ["0.26.0", "0.25.1"]
    assert m.plugins == ["vpr-test-plugin@111111111111", "vpr-test-plugin@222222222222"]
    md = si.render_markdown(m)
    assert "| 0.26.0 | fleet (py3.11) | pilot (py3.11) |" in md
    assert "| 0.25.1 | pilot (py3.11) |" in md
    html = si.render_html(m)
    assert '<td class="fleet">fleet (py3.11)</td>' in html and html.startswith("<!DOCTYPE html>")

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
    serve_in_thread(server)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        store = st.open_store(url)
        index = si.index_from(store.read_bytes("index.json"), store.where("index.json"))
        assert len(index.pairings) == 3
        entry = si.query(index, verdict="fleet")[0]
        assert json.loads(store.read_text(entry.manifest))["pairing_id"] == entry.pairing_id
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
    shared = write_manifest(tmp_path / "in", manifest_variant(base_manifest, commit="e" * 40))
    procs, expected = [], {json.loads(shared.read_text())["pairing_id"]}
    for w in range(8):
        files = [shared]
        for i in range(4):
            m = manifest_variant(base_manifest, commit=f"{w:x}{i:x}".ljust(40, "0"))
            expected.add(m["pairing_id"])
            files.append(write_manifest(tmp_path / "in", m))
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
    index = check_store(root)
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
        m = manifest_variant(base_manifest, commit=f"{i:x}".ljust(40, "a"))
        # Alternate two verdicts so every add rewrites the manifest and the index.
        files += [
            write_manifest(tmp_path / "in", m),
            write_manifest(tmp_path / "in", m, f"{i}-again.json"),
        ]
        m2 = copy.deepcopy(m)
        m2["conformance"]["checks"]["cadence"]["summary"] = "x" * 50_000
        files.append(write_manifest(tmp_path / "in", m2, f"{i}-big.json"))
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
            check_store(root)
    st.DirStore(root).add(files[0])  # the next writer cleans up a killed writer's temp file
    index = check_store(root)
    assert not [p for p in root.rglob("*.tmp")]
    summary = json.loads((root / "summary.json").read_text())  # made from this index.json
    assert summary["index"]["sha256"] == sha256((root / "index.json").read_bytes()).hexdigest()
    assert len(index["pairings"]) == len({p.stem for p in (root / "pairings").glob("*.json")})
