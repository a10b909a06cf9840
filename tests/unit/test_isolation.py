"""Core isolation: vendor symbols on identifier boundaries, classified by kind (the real vLLM
tree and wheel: tests/integration/test_isolation_real_tree.py)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from tests.support import VLLM_SHA, spec_head
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.cli import main
from vllm_plugin_release.conform.checks.isolation import (
    ISOLATION_SCHEMA,
    check,
    config_from_table,
)
from vllm_plugin_release.conform.lib.symbols import (
    TT_SYMBOLS,
    Matcher,
    parse_symbols,
    scan_path,
    scan_tree,
    scan_wheel,
    split_words,
)
from vllm_plugin_release.core.errors import BadInput


def matches(text: str, *symbols: str) -> list[tuple[str, str]]:
    """(symbol, matched text) for every verified hit of `symbols` in `text`."""
    syms = parse_symbols(symbols or TT_SYMBOLS)
    m = Matcher(syms)
    data = text.encode()
    spans = m.verify(data, m.candidates(data.lower()))
    return [(syms[i].name, data[s:e].decode()) for i, s, e in spans]


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content, encoding="utf-8")
    return root


def kinds(report) -> dict[tuple[str, int], str]:
    return {(h.path, h.line): h.kind for h in report.hits}


# ---------------------------------------------------------------------------
# Matching on identifier boundaries


def test_split_words() -> None:
    assert split_words("TTPlatform") == ("tt", "platform")
    assert split_words("AttnNvfp4QuantPattern") == ("attn", "nvfp4", "quant", "pattern")
    assert split_words("vllm_tt_plugin") == ("vllm", "tt", "plugin")
    assert split_words("tt-metal") == ("tt", "metal")
    assert split_words("TT_VISIBLE_DEVICES") == ("tt", "visible", "devices")
    assert split_words("ttnnOps") == ("ttnn", "ops")


@pytest.mark.parametrize(
    "text",
    [
        "class AttnNvfp4QuantPattern:",
        "MlaAttnNvfp4QuantPattern(x)",
        "ATTNN = 1",
        "ttnns = []",
        "ttnn2 = None",
        "CUDA_VISIBLE_DEVICES",
        "MESH_DEVICE_COUNT = 2",
        "def create_mesh_device(): ...",
        "ATTPlatform",
        "vllm_ttx_plugin",
    ],
)
def test_no_match_inside_identifiers(text: str) -> None:
    assert matches(text) == []


@pytest.mark.parametrize(
    ("text", "symbol", "found"),
    [
        ("import ttnn", "ttnn", "ttnn"),
        ("ttnn.open_device(0)", "ttnn", "ttnn"),
        ("if is_ttnn_available():", "ttnn", "ttnn"),
        ("TTNNOps.run()", "ttnn", "TTNN"),
        ('os.environ["TTNN_CACHE"]', "ttnn", "TTNN"),
        ("class TTPlatform(Platform):", "TTPlatform", "TTPlatform"),
        ("tt_platform = None", "TTPlatform", "tt_platform"),
        ("MyTTPlatform()", "TTPlatform", "TTPlatform"),
        ('os.environ.get("TT_VISIBLE_DEVICES")', "TT_VISIBLE_DEVICES", "TT_VISIBLE_DEVICES"),
        ("export MESH_DEVICE=N300", "MESH_DEVICE", "MESH_DEVICE"),
        ('getenv("MESH_DEVICE")', "MESH_DEVICE", "MESH_DEVICE"),
        ("echo $MESH_DEVICE", "MESH_DEVICE", "MESH_DEVICE"),
        ("TT_METAL_HOME=/opt", "tt_metal", "TT_METAL"),
        ("github.com/tenstorrent/tt-metal", "tt_metal", "tt-metal"),
        ("TtMetalDevice()", "tt_metal", "TtMetal"),
        ("Tenstorrent's cards", "tenstorrent", "Tenstorrent"),
        ("TENSTORRENT", "tenstorrent", "TENSTORRENT"),
        ("pip install vllm-tt-plugin", "vllm_tt_plugin", "vllm-tt-plugin"),
        ("from vllm_tt_plugin.platform import x", "vllm_tt_plugin", "vllm_tt_plugin"),
    ],
)
def test_matches_on_word_boundaries(text: str, symbol: str, found: str) -> None:
    assert (symbol, found) in matches(text)


def test_ascend_is_not_ascending() -> None:
    assert matches("sorted(x, ascending=True)", "ascend") == []
    assert matches("descending ascendant", "ascend") == []
    assert matches("class AscendPlatform:", "ascend") == [("ascend", "Ascend")]
    assert matches("import vllm_ascend", "ascend") == [("ascend", "ascend")]


def test_hits_at_the_edges_of_a_file() -> None:
    """A symbol at the very start or end of a file, or glued to a capital at its end: the
    boundaries read no byte outside the file (nor wrap round to its last one)."""
    assert matches("TT_VISIBLE_DEVICES = x", "TT_VISIBLE_DEVICES") == [
        ("TT_VISIBLE_DEVICES", "TT_VISIBLE_DEVICES")
    ]
    assert matches("import ttnn", "ttnn") == [("ttnn", "ttnn")]
    assert matches("TTNNX", "ttnn") == []  # one word TTNNX: no hump before the X
    assert matches("vllm_ascend", "vllm_ascend", "ascend") == [("vllm_ascend", "vllm_ascend")]
    # a candidate refused does not end the search: the hits after it are found
    assert matches("ascending=True; import vllm_ascend", "ascend") == [("ascend", "ascend")]
    assert matches("MY_TT_VISIBLE_DEVICES or TT_VISIBLE_DEVICES", "TT_VISIBLE_DEVICES") == [
        ("TT_VISIBLE_DEVICES", "TT_VISIBLE_DEVICES")
    ]


def test_spellings_of_one_symbol_are_deduplicated() -> None:
    names = [s.name for s in parse_symbols(["tt_metal", "tt-metal", "TtMetal"])]
    assert names == ["tt_metal"]
    assert matches("tt-metal and tt_metal", "tt_metal", "tt-metal") == [
        ("tt_metal", "tt-metal"),
        ("tt_metal", "tt_metal"),
    ]


def test_prefilter_finds_every_overlapping_spelling() -> None:
    """The Rust aho-corasick pass reports what a plain find loop reports."""
    import random

    syms = parse_symbols([*TT_SYMBOLS, "tt", "nn_tt", "ttnn_ttnn"])
    matcher = Matcher(syms)
    patterns = [sp.encode() for s in syms for sp in s.spellings()]

    def plain(data: bytes) -> list[tuple[int, int, int]]:
        out = []
        for index, pattern in enumerate(patterns):
            start = data.find(pattern)
            while start >= 0:
                out.append((index, start, start + len(pattern)))
                start = data.find(pattern, start + 1)
        return sorted(out)

    rng = random.Random(7)
    pieces = ["tt", "nn", "_", "-", "metal", "a", "T", " ", "ttnn", "platform", "."]
    for _ in range(300):
        data = "".join(rng.choice(pieces) for _ in range(30)).encode().lower()
        fast = sorted(matcher._ac.find_matches_as_indexes(data, overlapping=True))
        assert fast == plain(data), data


# ---------------------------------------------------------------------------
# Classification by kind

PY = '''\
"""Docstring that mentions Tenstorrent hardware."""
import os
import ttnn
from vllm_tt_plugin.platform import TTPlatform
import importlib

# a comment about tt-metal
DEV = os.environ.get("TT_VISIBLE_DEVICES", "0")


class Runner:
    """Runs on a MESH_DEVICE."""

    def go(self):
        device = ttnn.open_device(0)
        mod = importlib.import_module("vllm_tt_plugin")
        return device, mod
'''


def test_python_kinds(tmp_path: Path) -> None:
    write(tmp_path, {"vllm/runner.py": PY})
    report = scan_tree(tmp_path, TT_SYMBOLS)
    got = {(h.line, h.symbol): h.kind for h in report.hits}
    assert got == {
        (1, "tenstorrent"): "comment",
        (3, "ttnn"): "import",
        (4, "vllm_tt_plugin"): "import",
        (4, "TTPlatform"): "import",
        (7, "tt_metal"): "comment",
        (8, "TT_VISIBLE_DEVICES"): "string",
        (12, "MESH_DEVICE"): "comment",
        (15, "ttnn"): "code",
        (16, "vllm_tt_plugin"): "import",
    }
    hit = next(h for h in report.hits if h.line == 15)
    assert (hit.path, hit.column, hit.text) == ("vllm/runner.py", 18, "ttnn")
    assert report.status == "fail"
    assert report.counts == {"import": 4, "code": 1, "string": 1, "comment": 3, "docs": 0}


def test_env_var_string_only_warns(tmp_path: Path) -> None:
    write(tmp_path, {"vllm/envs.py": 'import os\nX = os.environ.get("TT_VISIBLE_DEVICES")\n'})
    report = scan_tree(tmp_path, TT_SYMBOLS)
    assert [(h.kind, h.severity) for h in report.hits] == [("string", "warn")]
    assert report.status == "warn"
    assert not report.failed


def test_python_that_does_not_tokenize_falls_back_to_lexing(tmp_path: Path) -> None:
    src = 'print "py2"\nimport ttnn\nx = "ttnn"  # ttnn\n  )\n'
    write(tmp_path, {"old.py": src})
    got = [(h.line, h.kind) for h in scan_tree(tmp_path, ["ttnn"]).hits]
    assert got == [(2, "import"), (3, "string"), (3, "comment")]


def test_cpp_cuda_kinds(tmp_path: Path) -> None:
    src = (
        '#include "ttnn/device.hpp"\n'
        "// ttnn comment\n"
        "/* block\n   tenstorrent */\n"
        'auto d = ttnn::open_device("TT_VISIBLE_DEVICES");\n'
        "char c = 'x'; int ttnn_count = 0;\n"
    )
    write(tmp_path, {"csrc/k.cu": src})
    got = [(h.line, h.symbol, h.kind) for h in scan_tree(tmp_path, TT_SYMBOLS).hits]
    assert got == [
        (1, "ttnn", "import"),
        (2, "ttnn", "comment"),
        (4, "tenstorrent", "comment"),
        (5, "ttnn", "code"),
        (5, "TT_VISIBLE_DEVICES", "string"),
        (6, "ttnn", "code"),
    ]


def test_rust_cmake_shell_requirements_docs(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "rust/src/lib.rs": "use ttnn::Device;\nfn f<'a>(x: &'a str) { ttnn_call(); }\n",
            "CMakeLists.txt": (
                "# tt-metal support\n"
                "find_package(\n  TTNN REQUIRED)\n"
                'set(NAME "tenstorrent")\n'
                "add_library(x ${TTNN_SRC})\n"
            ),
            "tools/run.sh": (
                "#!/bin/bash\n"
                "source tt_metal/env.sh\n"
                "export TT_VISIBLE_DEVICES=0  # TT_VISIBLE_DEVICES\n"
                'echo "tenstorrent $#"\n'
            ),
            "tools/runme": "#!/usr/bin/env python3\nimport ttnn\n",
            "requirements/tt.txt": "# tenstorrent\nttnn==0.1\n",
            "docs/hw.md": "Tenstorrent support lives in vllm-tt-plugin.\n",
        },
    )
    report = scan_tree(tmp_path, TT_SYMBOLS)
    got: dict[tuple[str, int, str], str] = {}
    for h in report.hits:  # the first hit of a symbol on a line
        got.setdefault((h.path, h.line, h.symbol), h.kind)
    assert got == {
        ("rust/src/lib.rs", 1, "ttnn"): "import",
        ("rust/src/lib.rs", 2, "ttnn"): "code",
        ("CMakeLists.txt", 1, "tt_metal"): "comment",
        ("CMakeLists.txt", 3, "ttnn"): "import",
        ("CMakeLists.txt", 4, "tenstorrent"): "string",
        ("CMakeLists.txt", 5, "ttnn"): "code",
        ("tools/run.sh", 2, "tt_metal"): "import",
        ("tools/run.sh", 3, "TT_VISIBLE_DEVICES"): "code",
        ("tools/run.sh", 4, "tenstorrent"): "string",
        ("tools/runme", 2, "ttnn"): "import",
        ("requirements/tt.txt", 1, "tenstorrent"): "comment",
        ("requirements/tt.txt", 2, "ttnn"): "import",
        ("docs/hw.md", 1, "tenstorrent"): "docs",
        ("docs/hw.md", 1, "vllm_tt_plugin"): "docs",
    }
    # the trailing shell comment on line 3 is its own hit
    assert [h.kind for h in report.hits if h.path == "tools/run.sh" and h.line == 3] == [
        "code",
        "comment",
    ]


def test_non_ascii_columns(tmp_path: Path) -> None:
    write(tmp_path, {"vllm/a.py": 'S = "héllo → ttnn"\nx = 1  # ünïcode ttnn\n'})
    hits = scan_tree(tmp_path, ["ttnn"]).hits
    assert [(h.line, h.column, h.kind) for h in hits] == [(1, 14, "string"), (2, 18, "comment")]


# ---------------------------------------------------------------------------
# Bad input, skipped files, allowlist


def test_missing_tree_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="core tree not found"):
        scan_tree(tmp_path / "nope", TT_SYMBOLS)
    assert main(["scan-core", str(tmp_path / "nope"), "--symbols", "ttnn"]) == 2


def test_bad_symbols_are_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan-core", str(tmp_path), "--symbols", "tt nn"]) == 2
    assert main(["scan-core", str(tmp_path), "--symbols", ", ,"]) == 2
    assert "not a symbol" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # neither --spec nor --symbols: argparse, exit 2
        main(["scan-core", str(tmp_path)])
    assert exc.value.code == 2


def test_binary_and_undecodable_files_are_skipped_and_counted(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "a.png": b"\x89PNG\x00\x00 import ttnn \x00",
            "b.txt": "caf\xe9 ttnn".encode("latin-1"),
            "c.py": "import os\n",
        },
    )
    report = scan_tree(tmp_path, ["ttnn"])
    assert report.hits == []
    assert report.files_scanned == 1
    assert report.skipped_counts == {"binary": 1, "undecodable": 1}
    # a tree's binaries are skipped unread (images, archives); undecodable text is noted
    assert {s.path: s.symbols for s in report.skipped} == {"a.png": (), "b.txt": ("ttnn",)}


def test_allowlist_downgrades_a_known_hit(tmp_path: Path) -> None:
    write(tmp_path, {"vllm/platforms/__init__.py": "import ttnn\n", "vllm/x.py": "import ttnn\n"})
    allow = [
        {"path": "vllm/platforms/*.py", "symbol": "ttnn", "reason": "plugin discovery"},
        {"path": "vllm/gone.py", "symbol": "*", "reason": "stale"},
    ]
    report = scan_tree(tmp_path, ["ttnn"], allow)
    by_path = {h.path: h for h in report.hits}
    assert by_path["vllm/platforms/__init__.py"].allowed
    assert by_path["vllm/platforms/__init__.py"].severity == "info"
    assert by_path["vllm/platforms/__init__.py"].reason == "plugin discovery"
    assert not by_path["vllm/x.py"].allowed
    assert report.counts["import"] == 1 and report.allowed == 1
    assert [e.path for e in report.unused_allowlist] == ["vllm/gone.py"]
    (tmp_path / "vllm/x.py").unlink()
    assert scan_tree(tmp_path, ["ttnn"], allow).status == "pass"


# ---------------------------------------------------------------------------
# The spec keys


def test_schema_fragment_agrees_with_validation(tmp_path: Path) -> None:
    validator = Draft202012Validator(ISOLATION_SCHEMA)
    good = {
        "symbols": list(TT_SYMBOLS),
        "allowlist": [{"path": "vllm/a.py", "symbol": "ttnn", "reason": "known"}],
    }
    assert list(validator.iter_errors(good)) == []
    config = config_from_table(good)
    assert config.symbols == TT_SYMBOLS and config.allowlist[0].reason == "known"
    for bad in (
        {},
        {"symbols": []},
        {"symbols": ["tt nn"]},
        {"symbols": ["ttnn"], "extra": 1},
        {"symbols": ["ttnn"], "allowlist": [{"path": "a", "symbol": "ttnn"}]},
    ):
        assert list(validator.iter_errors(bad)), bad
    # the spec loader refuses such a table before the check reads it
    for bad in ({}, {"symbols": []}, {"symbols": ["tt nn"]}, {"symbols": ["ttnn"], "extra": 1}):
        with pytest.raises(BadInput):
            fake_spec(tmp_path, bad)


def test_config_errors_name_file_line_and_key(tmp_path: Path) -> None:
    spec = tmp_path / "tt.toml"
    spec.write_text(
        'name = "tt"\n\n[conformance.isolation]\nsymbols = ["ttnn"]\n'
        'allowlist = [{path = "a.py", symbol = "ttnm", reason = "x"}]\n'
    )
    data = {
        "symbols": ["ttnn"],
        "allowlist": [{"path": "a.py", "symbol": "ttnm", "reason": "x"}],
    }
    with pytest.raises(BadInput) as err:
        config_from_table(data, spec)
    assert f"{spec}:5:" in str(err.value)
    assert "allowlist[0].symbol 'ttnm' is not one of symbols" in str(err.value)
    with pytest.raises(BadInput, match=r"tt\.toml:4: conformance.isolation.symbols\[0\]"):
        config_from_table({"symbols": ["bad symbol!"]}, spec)


SPEC = spec_head("tt-test", sha=VLLM_SHA)


def test_cli_with_spec_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = write(
        tmp_path / "core",
        {"vllm/a.py": "import ttnn\n", "vllm/b.py": "# TTPlatform lives elsewhere\n"},
    )
    spec = tmp_path / "tt.toml"
    spec.write_text(
        SPEC + '\n[conformance.isolation]\nsymbols = ["ttnn", "TTPlatform"]\n'
        'allowlist = [{path = "vllm/a.py", symbol = "ttnn", reason = "test"}]\n'
    )
    assert main(["scan-core", str(tree), "--spec", str(spec), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"] == {"import": 0, "code": 0, "string": 0, "comment": 1, "docs": 0}
    assert out["allowed"] == 1
    hit = {h["path"]: h for h in out["hits"]}["vllm/b.py"]
    assert {k: hit[k] for k in ("path", "line", "symbol", "kind", "text")} == {
        "path": "vllm/b.py",
        "line": 1,
        "symbol": "TTPlatform",
        "kind": "comment",
        "text": "TTPlatform",
    }
    no_table = tmp_path / "plain.toml"
    no_table.write_text(SPEC)
    assert main(["scan-core", str(tree), "--spec", str(no_table)]) == 2
    assert "no [conformance.isolation] table" in capsys.readouterr().err


def test_cli_text_output_and_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"vllm/a.py": "import ttnn\n"})
    assert main(["scan-core", str(tmp_path), "--symbols", "ttnn,tt_metal"]) == 1
    out = capsys.readouterr().out
    assert "vllm/a.py:1  import  ttnn  ttnn" in out
    assert "FAIL" in out


# ---------------------------------------------------------------------------
# Wheels


def make_wheel(path: Path, members: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in members.items():
            zf.writestr(name, content)
    return path


def test_wheel_members_are_scanned(tmp_path: Path) -> None:
    wheel = make_wheel(
        tmp_path / "vllm-0.0.1-py3-none-any.whl",
        {
            "vllm/__init__.py": "import os\n",
            "vllm/platforms/tt.py": "from ttnn import open_device\n",
            "vllm/_C.so": b"\x7fELF\x00\x00ttnn\x00",
            "vllm-0.0.1.dist-info/METADATA": (
                "Name: vllm\nRequires-Dist: ttnn>=0.1\n\nTenstorrent\n"
            ),
            "vllm-0.0.1.dist-info/entry_points.txt": "[vllm.platform_plugins]\n"
            "tt = vllm_tt_plugin:register\n",
        },
    )
    report = scan_wheel(wheel, TT_SYMBOLS)
    assert report.source == "wheel"
    assert kinds(report) == {
        ("vllm/platforms/tt.py", 1): "import",
        ("vllm-0.0.1.dist-info/METADATA", 2): "import",
        ("vllm-0.0.1.dist-info/METADATA", 4): "docs",
        ("vllm-0.0.1.dist-info/entry_points.txt", 2): "import",
    }
    assert report.skipped_counts == {"binary": 1}
    # a wheel's binary members are searched for the symbols' bytes, and named
    assert [(s.path, s.symbols) for s in report.skipped] == [("vllm/_C.so", ("ttnn",))]
    assert scan_path(wheel, TT_SYMBOLS).status == "fail"
    assert main(["scan-core", str(wheel), "--symbols", "ttnn"]) == 1


def test_not_a_wheel_is_bad_input(tmp_path: Path) -> None:
    junk = tmp_path / "x.whl"
    junk.write_text("not a zip")
    with pytest.raises(BadInput, match="not a wheel"):
        scan_wheel(junk, ["ttnn"])
    assert main(["scan-core", str(junk), "--symbols", "ttnn"]) == 2


# ---------------------------------------------------------------------------
# The conformance check


def fake_spec(tmp_path: Path, isolation: dict | None):
    """A spec loaded as `vpr` loads one, with `[conformance.isolation]` when given."""
    text = spec_head("tt-test", sha=VLLM_SHA)
    if isolation is not None:
        text += "\n[conformance.isolation]\n" + "".join(
            f"{key} = {json.dumps(value)}\n" for key, value in isolation.items()
        )
    path = tmp_path / "tt.toml"
    path.write_text(text)
    return load_spec(path)


def test_check_statuses(tmp_path: Path) -> None:
    tree = write(tmp_path / "core", {"vllm/a.py": "x = 1\n"})
    spec = fake_spec(tmp_path, {"symbols": list(TT_SYMBOLS)})
    result = check(spec, tree)
    assert (result.name, result.status) == ("isolation", "pass")

    write(tree, {"vllm/envs.py": 'V = "TT_VISIBLE_DEVICES"\n'})
    result = check(spec, tree)
    assert result.status == "warn"
    assert [(e.file, e.line, e.source) for e in result.evidence] == [
        ("vllm/envs.py", 1, "core-tree")
    ]

    wheel = make_wheel(tmp_path / "v.whl", {"vllm/tt.py": "import ttnn\n"})
    result = check(spec, tree, wheel)
    assert result.status == "fail"
    assert result.evidence[0].file == "vllm/tt.py" and result.evidence[0].source == "core-wheel"
    assert result.details["counts"]["import"] == 1
    assert set(result.details["scans"]) == {"core-tree", "core-wheel"}
    assert json.dumps(result.to_json())

    only = check(spec, tree, no_wheel="the core wheel failed to build")
    assert only.summary.endswith("(source tree only: no core wheel yet)")
    assert only.evidence[0].note.startswith("core wheel not scanned: the core wheel failed")
    assert "source tree only" not in check(spec, tree, wheel, no_wheel="ignored").summary

    assert check(fake_spec(tmp_path, None), tree).status == "deferred"
    with pytest.raises(BadInput, match="symbols"):  # refused when the spec is loaded
        fake_spec(tmp_path, {"symbols": []})


def test_check_result_does_not_depend_on_where_the_tree_is(tmp_path: Path) -> None:
    """No cache path or scan time in the result: the scorecard is the same for the same
    inputs wherever this run keeps them."""
    files = {"vllm/a.py": "x = 1\n", "vllm/envs.py": 'V = "TT_VISIBLE_DEVICES"\n'}
    one = write(tmp_path / "one" / "vllm-0.26.0", files)
    two = write(tmp_path / "elsewhere" / "deeper" / "vllm-0.26.0", files)
    spec = fake_spec(tmp_path, {"symbols": list(TT_SYMBOLS)})
    first, second = check(spec, one).to_json(), check(spec, two).to_json()
    assert first == second
    scan = first["details"]["scans"]["core-tree"]
    assert scan["path"] == "vllm-0.26.0" and "seconds" not in scan


# ---------------------------------------------------------------------------
# RECORD hashes are not code

# A real urlsafe-base64 sha256 that holds "XNpuR" (a CamelCase boundary before "Npu").
RECORD_LINE = "vllm/config.py,sha256=q0kXNpuR4xLw2cVb7yTfP0aQm1s8ZkEoJ3uHdGn5iYc,1234\n"


def _wheel(path: Path, record: str, extra: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("vllm/config.py", "x = 1\n")
        for name, text in (extra or {}).items():
            zf.writestr(name, text)
        zf.writestr("vllm-0.26.0.dist-info/RECORD", record)
    return path


def test_record_hashes_are_not_scanned(tmp_path: Path) -> None:
    assert matches(RECORD_LINE, "npu"), "the fixture must hold a hit for the bad case"
    report = scan_wheel(_wheel(tmp_path / "a.whl", RECORD_LINE), ["npu"])
    assert report.hits == [] and report.files_scanned == 2


def test_record_paths_are_still_scanned(tmp_path: Path) -> None:
    record = RECORD_LINE + "vllm/npu/ops.py,sha256=AAAA,10\n"
    wheel = _wheel(tmp_path / "b.whl", record, {"vllm/npu/ops.py": "y = 2\n"})
    hits = [(h.path, h.line) for h in scan_wheel(wheel, ["npu"]).hits]
    assert ("vllm-0.26.0.dist-info/RECORD", 2) in hits


def test_a_record_like_file_that_is_not_a_record_is_scanned(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "c.whl", "", {"vllm/RECORD.txt": RECORD_LINE})
    assert [h.path for h in scan_wheel(wheel, ["npu"]).hits] == ["vllm/RECORD.txt"]
