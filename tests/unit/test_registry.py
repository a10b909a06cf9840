"""The check registry: one list drives the suite, the spec schema, --help and the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import REPO, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform import registry
from vllm_plugin_release.core.errors import BadInput


def test_docs_table_is_generated_from_the_registry() -> None:
    page = (REPO / "docs" / "conformance.md").read_text()
    block = re.search(r"<!-- checks:begin[^\n]*-->\n(.*?)<!-- checks:end -->", page, re.S)
    assert block, "docs/conformance.md lost its generated checks table"
    assert block.group(1) == registry.docs_table(), (
        "docs/conformance.md is stale: paste the output of `vpr check --list` between the markers"
    )


def test_every_table_of_the_registry_is_in_the_spec_schema() -> None:
    conformance = registry.spec_schema()["properties"]["conformance"]["properties"]
    for check in registry.CHECKS:
        for key, schema in check.tables.items():
            assert conformance[key] is schema
    assert set(conformance) == set(registry.tables())
    assert registry.SUITE == (
        "cadence",
        "isolation",
        "pinning",
        "scheduler",
        "workload",
        "api",
        "environment",
        "plugin_tests",
        "hardware_docs",
    )


def test_a_key_unknown_to_a_check_table_is_refused_at_load(tmp_path: Path) -> None:
    text = (REPO / "buildspec" / "reference.toml").read_text()
    assert "[conformance.cadence]" in text
    bad = text.replace("[conformance.cadence]", "[conformance.cadence]\nno_such_option = 1", 1)
    path = tmp_path / "bad.toml"
    path.write_text(bad)
    with pytest.raises(BadInput, match="no_such_option"):
        load_spec(path)
    ok = tmp_path / "ok.toml"
    ok.write_text(text)
    assert load_spec(ok).name == "reference"


def test_check_help_lists_every_check_and_refuses_an_unknown_one() -> None:
    shown = vpr("check", "--help").stdout
    for check in registry.CHECKS:
        assert check.name in shown and check.summary.split()[0] in shown
    bad = vpr("check", "no-such-check", check=False)
    assert bad.returncode == 2
    assert "unknown check 'no-such-check'" in bad.stderr
    assert "cadence, isolation, pinning" in bad.stderr and "Traceback" not in bad.stderr
