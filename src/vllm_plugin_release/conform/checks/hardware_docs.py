"""The `hardware_docs` check: the spec's hardware expectations (`[conformance.hardware]`)
against what the plugin's own docs show (pure: the docs are read as text)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.conform import CheckDef, CheckResult, Evidence, from_findings
from vllm_plugin_release.conform.lib.doctext import (
    MARKDOWN,
    MAX_TOTAL_BYTES,
    doc_texts,
    split_sentences,
    text_blocks,
)
from vllm_plugin_release.conform.lib.hardwaresettings import (
    DOCS_DEFAULT,
    HARDWARE_SCHEMA,
    HardwareSettings,
    configured,
    settings,
)

if TYPE_CHECKING:
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.conform import Context


TABLES: dict[str, dict[str, Any]] = {"hardware": HARDWARE_SCHEMA}
NAME = "hardware_docs"
SHOWN = 3  # locations quoted per finding

# `-tp 4`, `--tensor-parallel-size=8`, `--pipeline_parallel_size $PP` (a value follows).
_FLAG = re.compile(
    r"(?<![\w-])(--tensor[-_]parallel[-_]size|-tp|--pipeline[-_]parallel[-_]size|-pp)"
    r"(?:=|[ \t]+)(\d+|\$\{?\w+\}?|<[^>\s]{1,40}>|\{\w+\}|\"[^\"]*\"|'[^']*')(?![\w-])"
)
# `tensor_parallel_size=args.tp`, `"tensor_parallel_size": 1`, `tensor_parallel_size: 8`
_KWARG = re.compile(r"\b(?:tensor|pipeline)_parallel_size[\"']?\s*[=:](?!=)\s*([^\s,)}\]=]+)")
_SUBJECT = re.compile(r"\b(?:tensor|pipeline)[- _]parallel(?:ism)?\b", re.IGNORECASE)
_NOT_WORDS = (
    r"not (?:yet |currently )?(?:supported|exposed|available|allowed|possible)\b"
    r"|unsupported\b|(?:is|are) rejected\b|rejects?\b|refuse[sd]?\b|cannot be used\b"
)
# A line or sentence that says so: the subject, then (in the same clause) the negation.
_NOT = re.compile(rf"{_SUBJECT.pattern}[^;|]{{0,100}}?\b(?:{_NOT_WORDS})", re.IGNORECASE)
_YES = re.compile(
    r"\bsupports? (?:tensor|pipeline)[- ]parallel"
    r"|\b(?:tensor|pipeline)[- ]parallel(?:ism)? (?:is|are) (?:fully )?supported\b",
    re.IGNORECASE,
)
# A feature table's status cell (`| Tensor Parallel | ✅ |`).
_CELL_NO = re.compile(rf"^(?:⛔|❌|✗|🚫|no\b|{_NOT_WORDS})", re.IGNORECASE)
_CELL_YES = re.compile(r"^(?:✅|✔|yes\b|supported\b)", re.IGNORECASE)
_DEVICE = re.compile(r"(?<![\w.])/dev/[A-Za-z0-9_.*?\[\]/-]*[A-Za-z0-9*\]]")
# Device paths every Linux machine has: not the accelerator's.
_COMMON_DEVICES = re.compile(
    r"^/dev/(?:shm|null|zero|full|std(?:in|out|err)|fd|tty|pts|u?random|hugepages|mqueue|log)"
)


@dataclass(frozen=True)
class Seen:
    """One thing the docs show: `kind` is tp-use, tp-yes, tp-no (`value`: "tensor" or
    "pipeline", what the line is about), mesh or device (`value`: the value, the path)."""

    kind: str
    file: str
    line: int
    text: str
    value: str | None = None

    def evidence(self, note: str) -> Evidence:
        return Evidence(note=note, file=self.file, line=self.line, value=self.text[:240])


def _usage(value: str) -> bool:
    """A parallel size in use: a literal above 1, or a placeholder/variable."""
    value = value.strip("\"'")
    return not (value.isdigit() and int(value) <= 1)


def _about(text: str) -> str:
    """What a flag or sentence is about: "tensor" parallelism unless only pipeline."""
    lower = text.lower()
    return "tensor" if "tensor" in lower or "-tp" in lower else "pipeline"


def _prose(text: str) -> list[tuple[str, int, str]]:
    """(block kind, first line, sentence) of Markdown outside code; a table row is one."""
    out: list[tuple[str, int, str]] = []
    for kind, parts in text_blocks(text):
        lines = parts[:1] if kind in ("table", "heading") else split_sentences(parts)
        out += [(kind, line, sentence) for line, sentence in lines]
    return out


def _statement(kind: str, sentence: str) -> str | None:
    """tp-no, tp-yes or None: what a sentence or table row says about parallelism."""
    if kind == "table":
        feature, *cells = sentence.split("; ")
        if len(feature) > 60 or not _SUBJECT.search(feature):
            return None  # a row about something else that mentions parallelism
        if any(_CELL_NO.match(c) for c in cells):
            return "tp-no"
        return "tp-yes" if any(_CELL_YES.match(c) for c in cells) else None
    if _FLAG.search(sentence):
        return None  # a command line: read per line above
    if _NOT.search(sentence):
        return "tp-no"
    return "tp-yes" if _YES.search(sentence) else None


def read_doc(rel: str, text: str, mesh_variable: str | None) -> list[Seen]:
    """What one doc shows (pure): flag and keyword uses per line, statements per sentence."""
    seen: list[Seen] = []
    mesh = (
        re.compile(rf"\b{re.escape(mesh_variable)}\b(?:\s*[=:]\s*(\"[^\"]*\"|'[^']*'|[^\s;`\\]+))?")
        if mesh_variable
        else None
    )
    for number, line in enumerate(text.splitlines(), start=1):
        uses = [(m.group(1), m.group(2)) for m in _FLAG.finditer(line)] + [
            (m.group(0), m.group(1)) for m in _KWARG.finditer(line)
        ]
        used = [_about(flag) for flag, value in uses if _usage(value)]
        if used:
            kind = "tp-no" if re.search(_NOT_WORDS, line, re.IGNORECASE) else "tp-use"
            seen.append(Seen(kind, rel, number, line.strip(), min(used)))
        for m in mesh.finditer(line) if mesh else ():
            value = (m.group(1) or "").strip("\"'") or None
            seen.append(Seen("mesh", rel, number, line.strip(), value))
        for m in _DEVICE.finditer(line):
            if not _COMMON_DEVICES.match(m.group(0)):
                seen.append(Seen("device", rel, number, line.strip(), m.group(0)))
    if Path(rel).suffix.lower() in MARKDOWN:
        for kind, number, sentence in _prose(text):
            said = _statement(kind, sentence) if _SUBJECT.search(sentence) else None
            if said:
                seen.append(Seen(said, rel, number, sentence, _about(sentence)))
    return seen


def read_docs(root: Path, hw: HardwareSettings) -> tuple[list[str], list[Seen], list[str]]:
    """(files read, what they show, files left unread once MAX_TOTAL_BYTES were read)."""
    left: list[str] = []
    texts = doc_texts(root, list(hw.docs or DOCS_DEFAULT), left)
    seen = [s for rel, text in texts for s in read_doc(rel, text, hw.mesh_variable)]
    return [rel for rel, _ in texts], seen, left


def _at(items: list[Seen]) -> str:
    where = ", ".join(f"{s.file}:{s.line}" for s in items[:SHOWN])
    more = len(items) - SHOWN
    return where + (f" and {more} more" if more > 0 else "")


def _matches(node: str, glob: str) -> bool:
    """A documented device path (a node, a pattern, or its folder) fits the spec's glob."""
    folder = glob.rsplit("/", 1)[0]
    return (
        fnmatch.fnmatchcase(node, glob)
        or fnmatch.fnmatchcase(glob, node)
        or node.rstrip("/") == folder
        or fnmatch.fnmatchcase(node, folder)
    )


def _parallelism(
    hw: HardwareSettings, by: dict[str, list[Seen]]
) -> tuple[list[str], list[Evidence]]:
    """Contradictions about -tp (fails) and the agreeing lines (evidence)."""
    fails: list[str] = []
    uses, yes, no = by["tp-use"], by["tp-yes"], by["tp-no"]
    if hw.parallelism == "mesh":  # neither -tp nor -pp goes through vLLM
        against, agree = uses + yes, no
        if against:
            fails.append(
                f'the spec says parallelism = "mesh" (GPU rank flags refused, `vllm serve -tp 2` '
                f"must be rejected) but the docs use or support tensor parallelism: "
                f"{_at(against)}"
            )
        why = 'contradicts parallelism = "mesh"'
        agrees = "agrees: tensor/pipeline parallelism not exposed through vLLM"
    else:  # the plugin shards with vLLM's -tp: pipeline parallelism may be unsupported
        tensor = [s for s in uses + yes + no if s.value == "tensor"]
        against = [s for s in tensor if s.kind == "tp-no"]
        agree = [s for s in tensor if s.kind != "tp-no"]
        if against:
            fails.append(
                'the spec says parallelism = "tp" (vLLM\'s -tp) but the docs say tensor '
                f"parallelism is not supported: {_at(against)}"
            )
        why = 'contradicts parallelism = "tp"'
        agrees = "agrees: the docs use or support -tp/--tensor-parallel-size"
    evidence = [s.evidence(why) for s in against[:SHOWN]]
    return fails, evidence + [s.evidence(agrees) for s in agree[:SHOWN]]


def _mesh(hw: HardwareSettings, mesh: list[Seen]) -> tuple[list[str], list[Evidence]]:
    var = hw.mesh_variable
    if not var:
        return [], []
    if not mesh:
        return [f"the docs never name {var}, the spec's mesh_variable"], []
    values = sorted({s.value.upper() for s in mesh if s.value})
    want = (hw.mesh_device or "").upper()
    if want and values and want not in values:
        return [
            f"the docs set {var} to {', '.join(values)} ({_at([s for s in mesh if s.value])}), "
            f"never to the spec's mesh_device {hw.mesh_device}"
        ], [mesh[0].evidence(f"{var} in the docs")]
    hit = next((s for s in mesh if s.value and s.value.upper() == want), mesh[0])
    return [], [
        hit.evidence(f"agrees: the docs set {var}" + (f"={hit.value}" if hit.value else ""))
    ]


def _devices(hw: HardwareSettings, devices: list[Seen]) -> tuple[list[str], list[Evidence]]:
    if not devices:
        return [], []
    nodes = sorted({s.value or "" for s in devices})
    if not hw.device_glob:
        note = f"device_glob is not set; the docs show {', '.join(nodes)} (info)"
        return [], [devices[0].evidence(note)]
    fits = [s for s in devices if _matches(s.value or "", hw.device_glob)]
    if fits:
        return [], [fits[0].evidence(f"agrees: {fits[0].value} fits device_glob {hw.device_glob}")]
    return [
        f"the docs show device nodes {', '.join(nodes)} ({_at(devices)}) but device_glob is "
        f"{hw.device_glob}"
    ], [devices[0].evidence("device nodes in the docs")]


def compare(hw: HardwareSettings, files: list[str], seen: list[Seen]) -> CheckResult:
    """The verdict from what the docs show (pure)."""
    by: dict[str, list[Seen]] = {k: [] for k in ("tp-use", "tp-yes", "tp-no", "mesh", "device")}
    for s in sorted(seen, key=lambda s: (s.file, s.line)):
        by[s.kind].append(s)
    threshold = {"contradiction": "fail", "mesh variable, value or device not in the docs": "warn"}
    details = {"docs": files, "seen": {k: len(v) for k, v in by.items()}}
    where = ", ".join(hw.docs or DOCS_DEFAULT)
    if not files:
        note = f"no docs found ({where}): nothing to compare (info)"
        return CheckResult(
            NAME, "pass", note, [Evidence(note=note, source="plugin")], threshold, details
        )
    fails, evidence = _parallelism(hw, by)
    warns, more = _mesh(hw, by["mesh"])
    evidence += more
    device_warns, more = _devices(hw, by["device"])
    warns += device_warns
    evidence += more
    tail = f'parallelism = "{hw.parallelism}"; {len(files)} doc file(s) read'
    if not evidence and not fails and not warns:
        note = "the docs say nothing about tensor parallelism, a mesh or device nodes (info)"
        evidence.append(Evidence(note=note, source="plugin"))
        tail += f"; {note}: nothing to compare"
    return from_findings(
        NAME, (fails, warns), tail, evidence=evidence, threshold=threshold, details=details
    )


def check(spec: Spec, plugin_root: Path) -> CheckResult:
    if not configured(spec):
        return CheckResult(
            NAME, "pass", "no [conformance.hardware] in the spec: no hardware expectations"
        )
    hw = settings(spec)
    files, seen, left = read_docs(plugin_root, hw)
    result = compare(hw, files, seen)
    if left:
        note = (
            f"the docs hold more than {MAX_TOTAL_BYTES // 1024 // 1024} MiB: analysed the "
            f"first {len(files)} file(s); not read: {', '.join(left[:SHOWN])}"
            + (f" and {len(left) - SHOWN} more" if len(left) > SHOWN else "")
        )
        result.evidence.append(Evidence(note=note, source="plugin"))
        result.details["not_read"] = left
    return result


def run(ctx: Context) -> CheckResult:
    return check(ctx.spec, ctx.plugin_root)


CHECK = CheckDef(
    "hardware_docs",
    "the spec's hardware expectations (parallelism, mesh variable, device nodes) against "
    "the plugin's docs [specs with a hardware part]",
    run,
    TABLES,
    ("plugin_root",),
    applies=configured,  # only a spec with a hardware part has expectations to compare
)
