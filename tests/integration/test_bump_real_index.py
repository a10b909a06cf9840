"""bump against the real PyPI index: the reference spec, moved back to 0.25.1, bumps forward
to exactly itself."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, REPO, git, vpr
from vllm_plugin_release.buildspec.load import load_spec


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen("https://pypi.org/simple/vllm/", timeout=10) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def pypi() -> None:
    if os.environ.get("VPR_OFFLINE") or not _pypi_reachable():
        pytest.skip("pypi.org is not reachable")


def test_real_bump_0_25_1_to_0_26_0(pypi: None, tmp_path: Path, cache_root: Path) -> None:
    """The committed reference spec, moved back to 0.25.1, bumps forward to exactly itself."""
    text = REFERENCE_SPEC.read_text()
    committed = load_spec(REFERENCE_SPEC)
    assert committed.core.version == "0.26.0"
    (tmp_path / "buildspec").mkdir()
    # bump reads the core API the plugin uses (the coupling diff): the spec's plugin path
    shutil.copytree(REPO / "plugin" / "reference", tmp_path / "plugin" / "reference")
    old = (
        text.replace('version = "0.26.0"', 'version = "0.25.1"')
        .replace('"vllm-0.26.0.tar.gz"', '"vllm-0.25.1.tar.gz"')
        .replace(
            committed.core.source.sha256,
            "ddbdec3f1c0f21afa70b7eb6ddf3faa29d26b1302ee4b5d5e00ec3af41b0c2e4",
        )
    )
    spec = tmp_path / "buildspec" / "reference.toml"
    spec.write_text(old)
    git("init", "-q", "-b", "main", cwd=tmp_path)  # an in-repo plugin is read from its commit
    git("add", ".", cwd=tmp_path)
    git("commit", "-q", "-m", "project", cwd=tmp_path, date="2026-08-01T12:00:00+00:00")
    done = vpr(
        "bump",
        "--spec",
        str(spec),
        "--core",
        "0.26.0",
        "--dry-run",
        "--json",
        "--cache-dir",
        str(cache_root),
        cwd=tmp_path,
    )
    doc = json.loads(done.stdout)
    assert doc["source"]["sha256"] == committed.core.source.sha256
    assert doc["source"]["source_date_epoch"] == committed.core.source_date_epoch
    assert doc["requirements"]["removed"] == ["diskcache==5.6.3"]
    assert spec.read_text() == old
    listing = json.loads(vpr("upstream", "--spec", str(spec), "--json", cwd=tmp_path).stdout)
    assert listing["releases"][0]["version"] == "0.26.0"
