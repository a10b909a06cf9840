"""An emptied, truncated or hand-edited stage record (dist/NAME or the stage cache) is bad
input naming the file and the command that re-creates it (exit 2), never a KeyError later."""

from __future__ import annotations

import json

import pytest

from vllm_plugin_release.core import records
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.stages.corememo import reuse

BAD = {
    "empty object": "{}",
    "truncated": '{"wheel": {"filename": "vllm-0.26.0-py3-none-any.whl", "sha',
    "wheel is a string": '{"wheel": "vllm.whl", "core": {}}',
    "no sha256": '{"wheel": {"filename": "vllm.whl"}, "core": {"name": "vllm"}}',
    "not utf-8": b"\xff\xfe{}".decode("latin-1"),
}


@pytest.mark.parametrize("body", list(BAD.values()), ids=list(BAD))
@pytest.mark.parametrize("name", [records.BUILD_CORE, records.BUILD_PLUGIN])
def test_dist_build_record_must_name_its_wheel(tmp_path, name, body):
    (tmp_path / name).write_text(body, encoding="latin-1")
    with pytest.raises(BadInput) as info:
        record = records.build_record(tmp_path, name, records.producer(name, "spec.toml"))
        records.verified_wheel(tmp_path, record, records.producer(name))
    said = f"{info.value} {info.value.hint}"
    assert str(tmp_path / name) in said
    assert records.PRODUCERS[name] in said
    assert info.value.exit_code == 2


def test_empty_env_record_names_vpr_env(tmp_path):
    (tmp_path / records.ENV).write_text("{}")
    with pytest.raises(BadInput) as info:
        records.read(tmp_path, records.ENV, "vpr env --spec spec.toml")
    assert str(tmp_path / records.ENV) in str(info.value)
    assert "vpr env --spec spec.toml" in (info.value.hint or "")


@pytest.mark.parametrize("body", list(BAD.values()), ids=list(BAD))
def test_cached_stage_record_is_refused_by_name(tmp_path, body):
    stage_dir = tmp_path / ".vpr" / "stages" / "build-core" / ("k" * 16)
    stage_dir.mkdir(parents=True)
    (stage_dir / records.BUILD_CORE).write_text(body, encoding="latin-1")
    dist = tmp_path / "dist" / "reference"
    dist.mkdir(parents=True)
    with pytest.raises(BadInput) as info:
        reuse(stage_dir, dist, records.BUILD_CORE, "build-core")
    said = f"{info.value} {info.value.hint}"
    assert str(stage_dir / records.BUILD_CORE) in said
    assert "vpr build-core" in said and f"rm -r {stage_dir}" in said
    assert list(dist.iterdir()) == []  # nothing delivered


def test_good_records_still_read(tmp_path):
    good = {"wheel": {"filename": "v.whl", "sha256": "0" * 64}, "core": {"name": "vllm"}}
    (tmp_path / records.BUILD_CORE).write_text(json.dumps(good))
    assert records.read(tmp_path, records.BUILD_CORE) == good
    (tmp_path / records.ENV).write_text(json.dumps({"runner": "cpu"}))
    assert records.read(tmp_path, records.ENV) == {"runner": "cpu"}
