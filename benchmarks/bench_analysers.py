"""The plugin analysers on hostile inputs: each case at a size and
at four times it, side by side. Printed: how the time grows over how the input's bytes
grow (1.0: linear; a quadratic pass gives about 4 for 4x the input).

    python -m benchmarks analysers [--repeats N]

Cases: Markdown built to make a pattern rescan a line from each of many starts (the
hardware_docs and scheduler checks), installers whose loops, branches and lists
multiply the work (the pinning check), and a source archive nested N folders deep
(extraction: each member names its whole path, so its bytes grow as N^2). Target: 1.5 at
most. A case that reaches the installer analysis' work budget stops there: its time is
capped, whatever the input (shown as such).
"""

from __future__ import annotations

import atexit
import io
import shutil
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import console, median, timed
from vllm_plugin_release.conform.checks import hardware_docs as hardwaredocs
from vllm_plugin_release.conform.checks import scheduler as scheddocs
from vllm_plugin_release.conform.lib.installscan import InputFile, scan
from vllm_plugin_release.core.cache import remove_tree
from vllm_plugin_release.edges.fetch import extract

GROWTH = 1.5  # (time ratio) / (input bytes ratio): linear is about 1, quadratic about 4
Case = Callable[[int], tuple[Callable[[], object], int]]  # size -> (the run, input bytes)


def _doc(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def _docs(unit: str) -> Case:
    def case(size: int) -> tuple[Callable[[], object], int]:
        text = _doc(unit, size)
        return lambda: (
            hardwaredocs.read_doc("README.md", text, "MESH_DEVICE"),
            scheddocs.extract_statements(text, plugin_name="vllm-tt"),
        ), len(text.encode())

    return case


def _installer(make: Callable[[int], dict[str, str]]) -> Case:
    def case(n: int) -> tuple[Callable[[], object], int]:
        root = Path(tempfile.mkdtemp(prefix="bench-installer-"))
        atexit.register(shutil.rmtree, root, True)  # the case runs after this returns
        files = make(n)
        for name, text in files.items():
            (root / name).write_text(text)
        run = lambda: scan(root, [InputFile("install.sh", "shell", "installer", "bench")])  # noqa: E731
        return run, sum(len(t.encode()) for t in files.values())

    return case


def _deep(depth: int) -> tuple[Callable[[], object], int]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        path = "top"
        for _ in range(depth):
            path += "/d"
            info = tarfile.TarInfo(path)
            info.type = tarfile.DIRTYPE
            tf.addfile(info)
    data = buf.getvalue()

    def run() -> None:
        dest = Path(tempfile.mkdtemp(prefix="bench-deep-"))
        try:
            extract(io.BytesIO(data), dest / "x", label="deep")
        finally:
            remove_tree(dest, ignore_errors=True)

    return run, len(data)


CASES: dict[str, tuple[Case, int]] = {
    # name: (case at a size, the smaller size)
    "docs: a run of dots": (_docs("."), 32 * 1024),
    "docs: emphasis never closed": (_docs("*a "), 32 * 1024),
    "docs: initials": (_docs("A. "), 32 * 1024),
    "docs: brackets never closed": (_docs("[a "), 32 * 1024),
    "docs: one term, no verb": (_docs("prefill "), 32 * 1024),
    "installer: variables x branches (capped)": (
        _installer(
            lambda n: {
                "install.sh": "".join(f"V{i}=x\n" for i in range(n))
                + "".join(f"if [ -f $X ]; then A{i}=1; fi\n" for i in range(n))
            }
        ),
        2000,  # past the work budget at both sizes: the time stays the same
    ),
    "installer: pyproject dependencies": (
        _installer(
            lambda n: {
                "install.sh": "pip install .\n",
                "pyproject.toml": "[project]\nname = 'x'\ndependencies = [\n"
                + "".join(f'  "pkg{i}==1",\n' for i in range(n))
                + "]\n",
            }
        ),
        2000,
    ),
    "installer: a requirement line of blanks": (
        _installer(
            lambda n: {"install.sh": "pip install -r r.txt\n", "r.txt": "a" + " " * n + "b\n"}
        ),
        20000,
    ),
    "archive: folders nested N deep": (_deep, 275),
}


def main(repeats: int = 3) -> dict[str, Any]:
    from rich.table import Table

    table = Table(title="plugin analysers: time growth over input growth (4x the input)")
    for column in ("case", "input bytes", "1x median s", "4x median s", "growth", "met"):
        table.add_column(column, justify="left" if column == "case" else "right")
    result: dict[str, Any] = {"cases": {}}
    for name, (case, size) in CASES.items():
        small_run, small_bytes = case(size)
        large_run, large_bytes = case(4 * size)
        small = median(timed(small_run, repeats))
        large = median(timed(large_run, repeats))
        growth = (large / small) / (large_bytes / small_bytes) if small > 0 else 0.0
        met = growth <= GROWTH
        result["cases"][name] = {
            "bytes": [small_bytes, large_bytes], "seconds": [small, large],
            "growth": growth, "met": met,
        }  # fmt: skip
        table.add_row(
            name, f"{small_bytes:,} / {large_bytes:,}", f"{small:.3f}", f"{large:.3f}",
            f"{growth:.2f}", "met" if met else f"MISSED (<= {GROWTH})",
        )  # fmt: skip
    console.print(table)
    result["ok"] = all(c["met"] for c in result["cases"].values())
    return result


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
