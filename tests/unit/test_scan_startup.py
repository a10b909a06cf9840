"""`vpr scan-core` start-up loads only what the scan needs (the target: end to end
<= 1.5x `rg -w -i`, where interpreter start-up and imports are most of the gap)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Modules a scan never uses: the rich console (--json prints plain JSON), the API
# contract machinery, schema validation, TOML editing, HTTP clients.
NOT_NEEDED = (
    "rich",
    "vllm_plugin_release.conform.checks.api",
    "vllm_plugin_release.conform.lib.apicontract",
    "vllm_plugin_release.conform.lib.apidiff",
    "jsonschema",
    "tomlkit",
    "httpx",
)

PROBE = """
import json, sys
from vllm_plugin_release.cli import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {"rich", "jsonschema", "tomlkit",
    "httpx"} or m.startswith("vllm_plugin_release."))
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def _loaded(tree: Path, *args: str) -> tuple[dict, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "scan-core", str(tree), *args],
        capture_output=True,
        text=True,
        check=False,
    )
    return json.loads(done.stderr.strip().splitlines()[-1]), done.stdout


def test_scan_core_json_loads_nothing_it_does_not_use(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text("import os\n")
    (tmp_path / "bad.py").write_text("import ttnn\n")
    probe, stdout = _loaded(tmp_path, "--symbols", "ttnn", "--json")
    assert probe["code"] == 1  # the scan ran and found the import
    assert json.loads(stdout)["hits"]
    loaded = set(probe["loaded"])
    for name in NOT_NEEDED:
        assert not any(m == name or m.startswith(name + ".") for m in loaded), name


def test_the_probe_sees_rich_when_the_text_report_needs_it(tmp_path: Path) -> None:
    # Known-bad for the probe: the text report prints through rich, and the probe (a
    # fresh interpreter: this process has loaded rich long ago) says so.
    (tmp_path / "bad.py").write_text("import ttnn\n")
    probe, _ = _loaded(tmp_path, "--symbols", "ttnn")
    assert probe["code"] == 1
    assert "rich" in probe["loaded"], probe["loaded"]


def test_scan_core_exits_without_teardown_and_its_whole_output_written(tmp_path: Path) -> None:
    # `python -m vllm_plugin_release scan-core` (the command line of its own process) ends
    # with os._exit once the report is written: the report is whole (a long one, beyond
    # any pipe buffer) and the exit code is the verdict's.
    for i in range(300):
        (tmp_path / f"m{i}.py").write_text("import ttnn\nx = ttnn.open_device()\n")
    # and the edges: upper case at the very end of a file (a hit), inside identifiers (none)
    (tmp_path / "edge.py").write_text("class AttnNvfp4QuantPattern: pass\nxttnn = 1\nTTNN")
    cmd = [sys.executable, "-m", "vllm_plugin_release", "scan-core", str(tmp_path)]
    done = subprocess.run(
        [*cmd, "--symbols", "ttnn", "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert len(report["hits"]) == 601 and report["status"] == "fail"
    assert [(h["line"], h["column"]) for h in report["hits"] if h["path"] == "edge.py"] == [(3, 1)]
    # the same report as the scan in this process (its time aside)
    from vllm_plugin_release.conform.lib.symbols import scan_path

    here = scan_path(tmp_path, ["ttnn"]).to_json()
    assert {**report, "seconds": 0} == {**here, "seconds": 0}


def test_main_called_with_a_command_line_returns(tmp_path: Path) -> None:
    # main(argv) from a caller (tests, the conformance suite) returns its code: only the
    # process's own command line ends the process early.
    from vllm_plugin_release.cli import main

    (tmp_path / "ok.py").write_text("import os\n")
    assert main(["scan-core", str(tmp_path), "--symbols", "ttnn", "--json"]) == 0
