"""scripts/dictcross.py: untyped records (dict[str, Any]) that cross a layer."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "dictcross.py"

# The count on src/ may only go down: lower it when a change types more records.
MOST = 0


def _tool():
    spec = importlib.util.spec_from_file_location("dictcross", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "vllm_plugin_release" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(text)
    return root


CORE = """
from typing import Any, NamedTuple
def loose(doc: dict[str, Any]) -> int: ...
def typed(n: int) -> int: ...
def _private(doc: dict[str, Any]) -> None: ...
class Record(NamedTuple):
    name: str
    raw: dict[str, Any]
    _memo: dict[str, Any]
    def to_json(self) -> dict[str, Any]: ...
    def lookup(self) -> dict[str, object]: ...
class Loose(NamedTuple):
    options: dict[str, Any]
"""


def test_a_loose_signature_used_by_another_layer_is_counted(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "core/a.py": CORE,
            "flows/b.py": "from vllm_plugin_release.core.a import loose, typed, Record\n",
            "flows/c.py": "from ..core import a\na.Loose\n",
        },
    )
    found = _tool().crossings(src)
    assert found == {
        "vllm_plugin_release.core.a:loose": {"vllm_plugin_release.flows.b"},
        "vllm_plugin_release.core.a:Record.lookup": {"vllm_plugin_release.flows.b"},
        "vllm_plugin_release.core.a:Loose": {"vllm_plugin_release.flows.c"},
    }


def test_the_same_layer_private_names_raw_and_to_json_are_not(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "core/a.py": CORE,
            "core/b.py": "from vllm_plugin_release.core.a import loose, Loose\n",
            "flows/c.py": "from vllm_plugin_release.core.a import typed, _private\n",
        },
    )
    assert _tool().crossings(src) == {}


def test_a_parser_with_a_typed_answer_is_listed_apart_and_one_without_is_counted(
    tmp_path: Path,
) -> None:
    src = _tree(
        tmp_path,
        {
            "core/a.py": CORE
            + "def parse(data: dict[str, Any]) -> Record: ...\n"
            + "def parse_loose(data: dict[str, Any]) -> dict[str, Any]: ...\n",
            "flows/b.py": "from vllm_plugin_release.core.a import parse, parse_loose\n",
        },
    )
    tool = _tool()
    counted, parsers, documents = tool.split(tool.crossings(src))
    assert (counted, parsers, documents) == (["core.a:parse_loose"], ["core.a:parse()"], [])


def test_the_command_prints_the_count_and_refuses_a_folder_without_the_package(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "no such package folder" in done.stderr


def test_src_has_no_more_crossings_than_last_counted() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(REPO / "src"), "--count"],
        capture_output=True,
        text=True,
        check=True,
    )
    count = int(done.stdout)
    assert count <= MOST, (
        f"{count} untyped signatures cross a layer (at most {MOST}): type the new one, "
        "see `python3 scripts/dictcross.py`"
    )
