"""`hardware_docs`: a spec whose hardware expectations contradict the plugin's own docs is a
finding in the scorecard (bad input); agreement passes with file:line evidence;
docs that say nothing pass with an info note. The docs are tests/plugins/hardware_docs/."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.required import tt_checkout
from tests.support import REPO, spec_head
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import registry
from vllm_plugin_release.conform.checks import hardware_docs as hardwaredocs
from vllm_plugin_release.conform.lib import doctext
from vllm_plugin_release.conform.lib.hardwaresettings import settings
from vllm_plugin_release.core.errors import BadInput

DOCS = REPO / "tests" / "plugins" / "hardware_docs"
MESH = """
[conformance.hardware]
device_class = "quad"
parallelism = "mesh"
mesh_variable = "ACME_MESH"
mesh_device = "{mesh}"
device_glob = "{glob}"
"""
TP = """
[conformance.hardware]
device_class = "z8"
parallelism = "tp"
device_glob = "{glob}"
serve_args = ["--tensor-parallel-size", "2"]
"""


def hw_spec(tmp_path: Path, table: str, **values: str) -> Spec:
    path = tmp_path / "hw.toml"
    path.write_text(spec_head("hw") + table.format(**values))
    return load_spec(path)


def mesh_spec(tmp_path: Path, mesh: str = "QUAD", glob: str = "/dev/acme/*") -> Spec:
    return hw_spec(tmp_path, MESH, mesh=mesh, glob=glob)


def tp_spec(tmp_path: Path, glob: str = "/dev/zaccel*") -> Spec:
    return hw_spec(tmp_path, TP, glob=glob)


def test_a_mesh_plugin_whose_docs_agree_passes_with_file_and_line(tmp_path: Path) -> None:
    result = hardwaredocs.check(mesh_spec(tmp_path), DOCS / "mesh_plugin")
    assert result.status == "pass", result.summary
    notes = {(e.file, e.line): e.note for e in result.evidence}
    assert "not exposed through vLLM" in notes[("README.md", 18)]
    assert notes[("README.md", 10)] == "agrees: the docs set ACME_MESH=QUAD"
    assert "fits device_glob /dev/acme/*" in notes[("README.md", 14)]
    assert result.details["docs"] == ["README.md", "docs/tuning.md"]  # relative paths only


def test_a_mesh_spec_against_docs_that_use_tp_fails_naming_the_lines(tmp_path: Path) -> None:
    result = hardwaredocs.check(mesh_spec(tmp_path), DOCS / "tp_plugin")
    assert result.status == "fail"
    assert 'parallelism = "mesh"' in result.summary
    for where in ("README.md:7", "docs/features.md:5", "examples/offline.py:8"):
        assert where in result.summary, where
    # and the mesh variable is nowhere in those docs; the devices do not fit the glob
    assert "the docs never name ACME_MESH" in result.details["warnings"][0]
    assert "/dev/zaccel0" in result.details["warnings"][1]


def test_a_tp_spec_against_docs_that_refuse_tp_fails(tmp_path: Path) -> None:
    result = hardwaredocs.check(tp_spec(tmp_path, glob="/dev/acme/*"), DOCS / "mesh_plugin")
    assert result.status == "fail"
    assert 'parallelism = "tp"' in result.summary and "README.md:18" in result.summary


def test_a_tp_plugin_whose_docs_agree_passes(tmp_path: Path) -> None:
    """`Pipeline Parallel: ⛔` is no contradiction for a plugin that shards with -tp."""
    result = hardwaredocs.check(tp_spec(tmp_path), DOCS / "tp_plugin")
    assert result.status == "pass", result.summary
    lines = {(e.file, e.line) for e in result.evidence}
    assert {("README.md", 7), ("docs/features.md", 5)} <= lines


def test_mesh_value_and_device_glob_not_in_the_docs_warn(tmp_path: Path) -> None:
    result = hardwaredocs.check(
        mesh_spec(tmp_path, mesh="OCTO", glob="/dev/other/*"), DOCS / "mesh_plugin"
    )
    assert result.status == "warn"
    mesh, devices = result.details["warnings"]
    assert "never to the spec's mesh_device OCTO" in mesh and "README.md:10" in mesh
    assert "but device_glob is /dev/other/*" in devices and "/dev/shm" not in devices


def test_docs_that_say_nothing_or_no_docs_pass_with_an_info_note(tmp_path: Path) -> None:
    quiet = tmp_path / "quiet"
    (quiet / "docs").mkdir(parents=True)
    (quiet / "README.md").write_text("# quiet\n\nA plugin. It runs `vllm serve`.\n")
    result = hardwaredocs.check(tp_spec(tmp_path), quiet)
    assert result.status == "pass" and "nothing to compare" in result.summary
    assert "(info)" in result.evidence[0].note
    empty = tmp_path / "empty"
    empty.mkdir()
    result = hardwaredocs.check(tp_spec(tmp_path), empty)
    assert result.status == "pass" and result.summary.startswith("no docs found")


def test_placeholders_count_and_size_one_does_not(tmp_path: Path) -> None:
    seen = hardwaredocs.read_doc(
        "x.md",
        "```\nvllm serve m --tensor-parallel-size 1\nvllm serve m -tp $TP\n"
        "vllm serve m --tensor-parallel-size <TP-size>\n```\n"
        "Pass -tp instead of a mesh.\n",
        None,
    )
    assert [(s.kind, s.line) for s in seen] == [("tp-use", 3), ("tp-use", 4)]
    # a comparison is not a use; a table row about another option is not a statement
    seen = hardwaredocs.read_doc(
        "y.md",
        "| option | type | required | note |\n|---|---|---|---|\n"
        "| --tp-size | int | No | Tensor parallel size per rank. |\n\n"
        "The layer is not supported when `tensor_parallel_size == 1` holds.\n",
        None,
    )
    assert seen == []


def test_the_docs_read_stay_inside_the_checkout(tmp_path: Path) -> None:
    root = tmp_path / "plugin"
    shutil.copytree(DOCS / "mesh_plugin", root)
    outside = tmp_path / "outside.md"
    outside.write_text("vllm serve m -tp 8\n")
    (root / "docs" / "escape.md").symlink_to(outside)
    (root / ".github").mkdir()
    (root / ".github" / "hidden.md").write_text("vllm serve m -tp 8\n")
    big = root / "docs" / "big.md"
    big.write_text("x\n" * doctext.MAX_BYTES + "vllm serve m -tp 8\n")  # past the bound
    result = hardwaredocs.check(mesh_spec(tmp_path), root)
    assert result.status == "pass", result.summary
    assert "docs/escape.md" not in result.details["docs"]


def test_a_docs_glob_out_of_the_checkout_is_refused_at_load(tmp_path: Path) -> None:
    table = MESH + 'docs = ["../elsewhere/*.md"]\n'
    with pytest.raises(BadInput, match="docs"):
        hw_spec(tmp_path, table, mesh="QUAD", glob="/dev/acme/*")
    spec = hw_spec(tmp_path, MESH + 'docs = ["docs/*.md"]\n', mesh="QUAD", glob="/dev/acme/*")
    assert settings(spec).docs == ("docs/*.md",)
    result = hardwaredocs.check(spec, DOCS / "mesh_plugin")
    assert result.details["docs"] == ["docs/tuning.md"]
    assert result.status == "warn"  # the mesh variable is named only in the README


def test_the_check_runs_only_for_specs_with_a_hardware_part() -> None:
    tt = load_spec(REPO / "buildspec" / "tt.toml")
    reference = load_spec(REPO / "buildspec" / "reference.toml")
    assert "hardware_docs" in registry.applicable(tt)
    assert "hardware_docs" not in registry.applicable(reference)
    assert registry.applicable(reference) == tuple(
        n for n in registry.SUITE if n != "hardware_docs"
    )


@tt_checkout()
def test_the_tt_spec_agrees_with_the_tt_plugin_docs() -> None:
    spec = load_spec(REPO / "buildspec" / "tt.toml")
    result = hardwaredocs.check(spec, Path(os.environ["VPR_TT_PLUGIN_CHECKOUT"]))
    assert result.status == "pass", result.summary
    assert any("not exposed through vLLM" in e.note for e in result.evidence)
