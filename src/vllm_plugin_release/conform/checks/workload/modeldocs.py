"""The models a plugin's docs show it serving (a secondary signal of the `workload` check).

Pure: the plugin's docs are read as text (`doctext.doc_files`: README, docs/,
examples/ by default; text files in the checkout only, at most 400 files of 512 KiB), and
every Hugging Face model id shown where a model is named is collected with its file and
line: a `--model`/`--*-model-name` flag, a `model=`/`"model":` key, a huggingface.co
link, an argparse default on a `--model` line, or a cell of a table whose header has a
Model column. The spec's model (`[conformance.workload] model`, else
`[conformance.hardware] model`) not among them is a warning, with the nearest names.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

from vllm_plugin_release.conform.lib.doctext import doc_texts
from vllm_plugin_release.conform.lib.hardwaresettings import DOCS_DEFAULT

# A Hugging Face repo id: ORG/NAME (no path of more parts, no file extension of docs).
_ID = r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}"
_CONTEXTS = (
    # --model X, --model=X, --tt-model-name=X, --served-model-name X (quoted or not); a
    # flag starts after no word character or dash and is short (a run of dashes is not
    # scanned to its end from each dash of it)
    re.compile(rf"(?<![\w-])--[\w-]{{0,40}}model(?:[-_]name)?(?:=|[ \t]+)[\"']?({_ID})(?![\w/])"),
    # model="X", "model": "X", model_name: X
    re.compile(rf"\b[\"']?model(?:_name|_id)?[\"']?\s*[=:]\s*[\"']({_ID})[\"']"),
    # https://huggingface.co/ORG/NAME
    re.compile(rf"huggingface\.co/({_ID})(?![\w/])"),
)
# argparse: add_argument("--model", ..., default="X")
_DEFAULT = re.compile(rf"default\s*=\s*[\"']({_ID})[\"']")
_NOT_MODELS = re.compile(r"\.(?:md|py|sh|txt|json|toml|ya?ml|html?)$|^(?:docs|tests|src|examples)/")


@dataclass(frozen=True)
class Seen:
    model: str
    file: str
    line: int


def _table_models(lines: list[str], rel: str) -> list[Seen]:
    """Ids in the Model column of a Markdown table (its header names the column)."""
    seen: list[Seen] = []
    in_table = False
    column: int | None = None
    for number, line in enumerate(lines, start=1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|"):
            in_table = False
            continue
        if not in_table:  # the header row
            in_table = True
            names = [c.lower() for c in cells]
            column = next((i for i, c in enumerate(names) if c.strip("*_` ") == "model"), None)
            continue
        if column is not None and column < len(cells):
            seen += [
                Seen(m, rel, number)
                for m in re.findall(rf"(?<![\w/]){_ID}(?![\w/])", cells[column])
            ]
    return seen


def read_doc(rel: str, text: str) -> list[Seen]:
    """The model ids one doc shows (pure)."""
    lines = text.splitlines()
    seen: list[Seen] = []
    for number, line in enumerate(lines, start=1):
        for pattern in _CONTEXTS:
            seen += [Seen(m.group(1), rel, number) for m in pattern.finditer(line)]
        if "--model" in line:
            seen += [Seen(m.group(1), rel, number) for m in _DEFAULT.finditer(line)]
    seen += _table_models(lines, rel)
    return [s for s in seen if not _NOT_MODELS.search(s.model)]


def read_models(root: Path, patterns: list[str] | None = None) -> tuple[list[str], list[Seen]]:
    """(the doc files read, every model id seen), bounded like the other doc readers."""
    texts = doc_texts(root, list(patterns or DOCS_DEFAULT))
    return [rel for rel, _ in texts], [s for rel, text in texts for s in read_doc(rel, text)]


def table(seen: list[Seen]) -> list[dict[str, object]]:
    """One row per model id (first spelling kept), where the docs show it (3 places)."""
    rows: dict[str, dict[str, object]] = {}
    for s in sorted(seen, key=lambda s: (s.file, s.line)):
        row = rows.setdefault(s.model.lower(), {"model": s.model, "where": []})
        where = row["where"]
        assert isinstance(where, list)
        if len(where) < 3 and f"{s.file}:{s.line}" not in where:
            where.append(f"{s.file}:{s.line}")
    return sorted(rows.values(), key=lambda r: str(r["model"]).lower())


def coverage(model: str | None, rows: list[dict[str, object]]) -> dict[str, object]:
    """Whether the spec's model is in the docs' table: {model, listed, where | nearest}."""
    if not model:
        return {"model": None, "listed": None}
    by = {str(r["model"]).lower(): r for r in rows}
    hit = by.get(model.lower())
    if hit:
        return {"model": model, "listed": True, "where": hit["where"]}
    nearest = difflib.get_close_matches(model.lower(), list(by), n=3, cutoff=0.6)
    return {"model": model, "listed": False, "nearest": [str(by[n]["model"]) for n in nearest]}
