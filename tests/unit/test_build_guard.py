"""`vpr build-guard`: vpr-guard's wheel from guard/ by its own PEP 517 backend, twice and
compared, cached by its source; a backend that stamps the time is refused as not
reproducible, and `pip wheel`'s way (the backend as any front end calls it) makes the
same bytes."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.support import REPO, spec_head
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.cache import Cache, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.edges import guard
from vllm_plugin_release.stages.build_guard import build_guard


def _spec(tmp_path: Path):
    path = tmp_path / "spec.toml"
    path.write_text(spec_head(name="guarded"))
    return load_spec(path)


def test_the_guard_wheel_is_reproducible_cached_and_registers_its_entry_point(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(guard.SOURCE_ENV, raising=False)
    spec, cache = _spec(tmp_path), Cache(tmp_path / "cache")
    first = build_guard(spec, cache=cache, dist_root=tmp_path / "dist")
    written = json.loads(first.record.read_text())
    assert first.data.reproducible is True and written["builds_compared"] == 2
    assert first.wheel == tmp_path / "dist" / "guarded" / "vpr_guard-1.0.0-py3-none-any.whl"
    assert first.data.entry_points == {
        "vllm.general_plugins": {"vpr_guard": "vpr_guard.plugin:check_at_startup"}
    }
    again = build_guard(spec, cache=cache, dist_root=tmp_path / "other")
    assert again.cached and again.data.wheel == first.data.wheel
    # the same bytes from a fresh build elsewhere (no cache), as pip would call the backend
    elsewhere = guard.build_wheel(guard.CHECKOUT, tmp_path / "fresh")
    assert sha256_file(elsewhere) == first.data.wheel.sha256
    with zipfile.ZipFile(first.wheel) as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        names = zf.namelist()
    assert "vpr_guard/plugin.py" in names and "vpr_guard-1.0.0.dist-info/RECORD" in names


def test_a_backend_that_stamps_the_time_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "guard"
    shutil.copytree(REPO / "guard", source)
    backend = source / "_build" / "vpr_guard_build.py"
    text = backend.read_text()
    backend.write_text(
        text.replace(
            '"Metadata-Version: 2.1\\n"',
            '"Metadata-Version: 2.1\\n" + f"Built: {__import__(\'time\').time_ns()}\\n"',
        )
    )
    assert backend.read_text() != text
    monkeypatch.setenv(guard.SOURCE_ENV, str(source))
    dist = tmp_path / "dist"
    with pytest.raises(GateFailed, match=r"not reproducible: two builds of vpr_guard-1\.0\.0"):
        build_guard(_spec(tmp_path), cache=Cache(tmp_path / "cache"), dist_root=dist)
    assert not (dist / "guarded").exists()  # nothing delivered


def test_no_guard_source_is_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(guard.SOURCE_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(BadInput, match="the guard's source"):
        guard.guard_source()
