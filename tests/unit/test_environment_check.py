"""The `environment` check summarises env.json without what only this run knows."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import REFERENCE_SPEC
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform import Context, Sources
from vllm_plugin_release.conform.checks import environment
from vllm_plugin_release.core.cache import Cache


def _context(tmp_path: Path, overlay: str) -> Context:
    dist = tmp_path / "dist"
    dist.mkdir(parents=True, exist_ok=True)
    runtime = {
        "name": "reference-runtime",
        "status": "absent",
        "reason": "stand-in only",
        "stand_in": {
            "path": "plugin/reference/runtime",
            "wheel_sha256": "ab" * 32,
            "python": overlay,
        },
    }
    record = {"runner": "cpu", "python": "/x/bin/python", "runtime": runtime, "checks": []}
    (dist / "env.json").write_text(json.dumps(record))

    def unused() -> Path:
        raise AssertionError("the environment check needs no sources")

    return Context(
        load_spec(REFERENCE_SPEC), "cpu", Cache(tmp_path / "c"), dist, Sources(unused, unused)
    )


def test_result_has_no_path_of_this_run(tmp_path: Path) -> None:
    one = environment.run(
        _context(tmp_path / "a", "/tmp/a/.vpr/envs/x/stand-in-overlay/bin/python")
    )
    two = environment.run(
        _context(tmp_path / "b", "/srv/b/.vpr/envs/y/stand-in-overlay/bin/python")
    )
    assert one.to_json() == two.to_json()
    stand_in = one.details["runtime"]["stand_in"]
    assert stand_in == {"path": "plugin/reference/runtime", "wheel_sha256": "ab" * 32}
    assert one.status == "pass" and "reference-runtime: absent" in one.summary
