"""The check registry: one list drives the suite, the spec schema, --help and the docs."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tests.support import REPO, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform import CheckDef, registry
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


CONFORM = REPO / "src" / "vllm_plugin_release" / "conform"
# The edges that reach the network (a package index, a git remote, a download).
NETWORK_EDGES = ("vllm_plugin_release.edges.fetch", "vllm_plugin_release.edges.git")


def test_every_check_is_a_module_of_one_shape() -> None:
    for check in registry.CHECKS:
        path = CONFORM / "checks" / f"{check.name}.py"
        module = importlib.import_module(f"vllm_plugin_release.conform.checks.{check.name}")
        assert module.CHECK is check, f"{path}: its CHECK is not the registry's entry"
        assert check.tables is module.TABLES, f"{path}: TABLES is not its tables"
        if check.run is not None:
            assert check.run is module.run
    modules = {p.stem for p in (CONFORM / "checks").glob("*.py") if p.stem != "__init__"}
    assert modules == {c.name for c in registry.CHECKS}, "a check module the registry lacks"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_a_check_that_reaches_the_network_says_so() -> None:
    for check in registry.CHECKS:
        imports = _imports(CONFORM / "checks" / f"{check.name}.py")
        reaches = any(m == e or m.startswith(e + ".") for m in imports for e in NETWORK_EDGES)
        assert reaches == ("network" in check.needs), (
            f"conform/checks/{check.name}.py: needs {check.needs} but it "
            + ("imports" if reaches else "does not import")
            + " a network edge"
        )
    assert registry.BY_NAME["cadence"].needs == ("network",)


def test_needs_are_known_and_in_step_with_the_env_input() -> None:
    assert CheckDef("x", "s", None, inputs=("env",), needs=("env", "device")).needs
    with pytest.raises(ValueError, match="unknown needs \\['gpu'\\]"):
        CheckDef("x", "s", None, needs=("gpu",))
    with pytest.raises(ValueError, match="needs 'env' exactly when it reads the env"):
        CheckDef("x", "s", None, inputs=("env",))
    with pytest.raises(ValueError, match="needs 'env' exactly when it reads the env"):
        CheckDef("x", "s", None, needs=("env",))
    shown = registry.help_lines()
    assert "cadence" in shown and "[needs: network]" in shown
    assert "| network |" in registry.docs_table()
