"""Manifest store: add/replace/idempotence, conflicts, a corrupt or newer index (the CLI's
query and matrix, HTTP reads and concurrent or killed writers:
tests/integration/test_store_processes.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.pairing import (
    built_manifest,
    manifest_variant,
    vpr,
    write_manifest,
)
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.edges import store as st


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
    assert result.status == "replaced" and result.previous["verdict"] == "pilot"
    assert store.read_index()["pairings"][m["pairing_id"]]["verdict"] == "fleet"

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
        store.read_index()
    store.add(write_manifest(tmp_path, b))
    assert set(store.read_index()["pairings"]) == {a["pairing_id"], b["pairing_id"]}

    newer = json.loads((root / "index.json").read_text())
    newer["schema_version"] = 99
    (root / "index.json").write_text(json.dumps(newer))
    with pytest.raises(BadInput, match="newer than this vpr understands"):
        store.read_index()
    with pytest.raises(BadInput, match="newer"):
        store.add(write_manifest(tmp_path, a))
    q = vpr("manifest", "query", "--store", str(root), cwd=tmp_path)
    assert q.returncode == 2 and "newer" in q.stderr and "Traceback" not in q.stderr
