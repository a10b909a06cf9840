"""The `isolation` check: no vendor symbols (`[conformance.isolation]`) in vLLM core's
verified source tree or its built wheel."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import CheckDef, CheckResult, Context, Evidence
from vllm_plugin_release.conform.lib.symbols import (
    FAIL_KINDS,
    KINDS,
    SYMBOL_RE,
    WARN_KINDS,
    AllowEntry,
    Hit,
    ScanReport,
    Symbol,
    parse_symbols,
    scan_tree,
    scan_wheel,
    split_words,
)
from vllm_plugin_release.core.errors import BadInput

# JSON Schema (draft 2020-12) of `[conformance.isolation]`.
ISOLATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Core isolation: vendor symbols that must be absent from vLLM core "
    "(source tree and wheel).",
    "additionalProperties": False,
    "required": ["symbols"],
    "properties": {
        "symbols": {
            "type": "array",
            "description": "Vendor symbols, matched case-insensitively on identifier "
            "boundaries (`ttnn`, `tt_metal`, `TTPlatform`); ALL_CAPS names with "
            "underscores (`MESH_DEVICE`) match the whole token only.",
            "minItems": 1,
            "items": {
                "type": "string",
                "pattern": SYMBOL_RE.pattern,
                "description": "Letters, digits and `_ . - /`, at most 5 words.",
            },
        },
        "allowlist": {
            "type": "array",
            "description": "Known hits downgraded to info, each with its reason.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "symbol", "reason"],
                "properties": {
                    "path": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Path in the core tree or wheel (posix, glob "
                        "allowed), e.g. vllm/platforms/__init__.py.",
                    },
                    "symbol": {
                        "type": "string",
                        "minLength": 1,
                        "description": "One of `symbols`, or `*` for any.",
                    },
                    "reason": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Why this hit is acceptable.",
                    },
                },
            },
        },
    },
}

TABLES: dict[str, dict[str, Any]] = {"isolation": ISOLATION_SCHEMA}
NAME = "isolation"
MAX_EVIDENCE = 200


@dataclass(frozen=True)
class IsolationConfig:
    symbols: tuple[str, ...]
    allowlist: tuple[AllowEntry, ...] = ()


def _line_of(file: Path | None, keys: tuple[str, ...]) -> str:
    if file is None:
        return "spec"
    try:
        from vllm_plugin_release.buildspec.model import locate

        line = locate(file.read_text(encoding="utf-8"), keys)
    except (OSError, UnicodeDecodeError):
        line = None
    return f"{file}:{line}" if line else str(file)


_HINT = (
    '[conformance.isolation] takes symbols = ["ttnn", ...] and optionally '
    'allowlist = [{path = "...", symbol = "...", reason = "..."}]'
)


def _bad(file: Path | None, keys: tuple[str, ...], message: str) -> BadInput:
    return BadInput(f"{_line_of(file, ('conformance', 'isolation', *keys))}: {message}", hint=_HINT)


def config_from_table(data: Mapping[str, Any], file: Path | None = None) -> IsolationConfig:
    """A table of the right shape -> IsolationConfig, checking what the schema cannot state."""
    names = list(data["symbols"])
    for i, name in enumerate(names):
        try:
            Symbol.parse(name)
        except ValueError as exc:
            raise _bad(file, ("symbols",), f"conformance.isolation.symbols[{i}]: {exc}") from None
    symbols = parse_symbols(names)
    entries = []
    for i, item in enumerate(data.get("allowlist", [])):
        if item["symbol"] != "*" and not any(
            split_words(item["symbol"]) == s.words for s in symbols
        ):
            raise _bad(
                file,
                ("allowlist",),
                f"conformance.isolation.allowlist[{i}].symbol {item['symbol']!r} is not one of "
                f"symbols ({', '.join(s.name for s in symbols)}) nor '*'",
            )
        entries.append(AllowEntry(item["path"].strip(), item["symbol"], item["reason"].strip()))
    return IsolationConfig(symbols=tuple(names), allowlist=tuple(entries))


def config_from_spec(spec: Spec) -> IsolationConfig | None:
    """The isolation config of a loaded Spec; None when `[conformance.isolation]` is absent."""
    tables = spec.raw.get("conformance") or {}  # the table is read here only
    if "isolation" not in tables:
        return None
    return config_from_table(dict(tables["isolation"] or {}), spec.path)


def check(
    spec: Spec, source_tree: Path, wheel: Path | None = None, no_wheel: str | None = None
) -> CheckResult:
    """`isolation`: fail on import/code hits, warn on string literals, pass otherwise.
    `no_wheel`: why there is no core wheel to scan (the tree is scanned alone)."""
    config = config_from_spec(spec)
    if config is None:
        return CheckResult(
            NAME,
            "deferred",
            f"no vendor symbols configured: add [conformance.isolation] symbols = [...] to "
            f"{spec.path}",
        )
    reports = [("core-tree", scan_tree(source_tree, config.symbols, config.allowlist))]
    if wheel is not None:
        reports.append(("core-wheel", scan_wheel(wheel, config.symbols, config.allowlist)))
    hits = [(source, h) for source, r in reports for h in r.hits]
    counts = {kind: sum(1 for _, h in hits if h.kind == kind and not h.allowed) for kind in KINDS}
    failing = sum(counts[k] for k in FAIL_KINDS)
    warning = sum(counts[k] for k in WARN_KINDS)
    status: Literal["pass", "warn", "fail"] = "fail" if failing else "warn" if warning else "pass"
    order = {"fail": 0, "warn": 1, "info": 2}
    ranked = sorted(hits, key=lambda sh: (order[sh[1].severity], sh[0], sh[1].path, sh[1].line))
    summary = _summary(status, counts, failing, reports)
    evidence = _evidence(ranked[:MAX_EVIDENCE])
    if wheel is None and no_wheel:
        summary += " (source tree only: no core wheel yet)"
        evidence.insert(
            0,
            Evidence(
                note=f"core wheel not scanned: {no_wheel}; the verified core sdist's source "
                "tree was scanned alone",
                source="core-wheel",
            ),
        )
    return CheckResult(
        name=NAME,
        status=status,
        summary=summary,
        evidence=evidence,
        threshold={"fail_kinds": list(FAIL_KINDS), "warn_kinds": list(WARN_KINDS)},
        details={
            "symbols": list(config.symbols),
            "counts": counts,
            "allowed": sum(1 for _, h in hits if h.allowed),
            "evidence_omitted": max(0, len(ranked) - MAX_EVIDENCE),
            "scans": {source: _scan_details(r) for source, r in reports},
            "unused_allowlist": _unused_allowlist(config, reports),
        },
    )


def _summary(
    status: str, counts: dict[str, int], failing: int, reports: list[tuple[str, ScanReport]]
) -> str:
    scanned = " + ".join(
        f"{r.files_scanned} {'files' if r.source == 'tree' else 'wheel members'}"
        for _, r in reports
    )
    by_kind = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    if status == "fail":
        return f"vendor symbols in core: {failing} failing hit(s) ({by_kind}); {scanned} scanned"
    if status == "warn":
        return f"vendor symbols in core string literals: {by_kind}; {scanned} scanned"
    extra = f" ({by_kind})" if by_kind else ""
    return f"no vendor symbol in core code{extra}; {scanned} scanned"


def _evidence(ranked: list[tuple[str, Hit]]) -> list[Evidence]:
    return [
        Evidence(
            note=f"{h.severity}: {h.kind} {h.symbol!r}: {h.text}"
            + (f" (allowed: {h.reason})" if h.allowed else ""),
            file=h.path,
            line=h.line,
            value=h.context,
            source=source,
        )
        for source, h in ranked
    ]


def _scan_details(report: ScanReport) -> dict[str, Any]:
    """What was scanned, for the scorecard: the tree's or the wheel's name (not where this run
    keeps it) and no timings, so the same inputs give the same bytes."""
    return {
        "path": Path(report.root).name,
        "counts": report.counts,
        "files_scanned": report.files_scanned,
        "skipped": report.skipped_counts,
        "skipped_with_symbols": [s.to_json() for s in report.skipped if s.symbols],
    }


def _unused_allowlist(
    config: IsolationConfig, reports: list[tuple[str, ScanReport]]
) -> list[dict[str, str]]:
    """Allowlist entries that no scan used (an entry used by the tree or the wheel is used)."""
    unused = {
        (e.path, e.symbol, e.reason)
        for e in config.allowlist
        if all(e in r.unused_allowlist for _, r in reports)
    }
    return [{"path": p, "symbol": s, "reason": why} for p, s, why in sorted(unused)]


def run(ctx: Context) -> CheckResult:
    return check(ctx.spec, ctx.core_tree, *ctx.built_core_wheel())


CHECK = CheckDef(
    "isolation",
    "no vendor symbols in the vLLM core source tree or wheel",
    run,
    TABLES,
    ("core_tree", "core_wheel"),
)
