"""The compatibility site (pure): `build` makes compat.json's model from a store's verified
entries and ledger, `render` its static pages. No file or clock is read: one store, one site."""

from __future__ import annotations

import hashlib
import html
import json
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.core.columns import column_order
from vllm_plugin_release.core.storeindex import (
    VERDICT_ORDER,
    VERDICTS,
    IndexEntry,
    PluginRef,
    python_of,
    superseded,
    version_ranks,
)

if TYPE_CHECKING:
    from vllm_plugin_release.core.ledger import LedgerEntry
    from vllm_plugin_release.core.manifestmodel import Approval, Manifest

KIND = "vllm-plugin-release/compat"
SCHEMA_VERSION = 1
SITES = ("cpu", "hardware")
PAGES = "pairings"
PLUGIN_PAGES = "plugins"
_PAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_LAG = re.compile(r"\blag (\d+) minor, (\d+) days\b")


@dataclass(frozen=True)
class Stored:
    """One index entry and its manifest as verified (`manifest` None: `problem` says why)."""

    entry: IndexEntry
    manifest: Manifest | None
    problem: str | None


class Cell(NamedTuple):
    """One site's verdict for a pairing; `signed_by` None: not run there (never a pass)."""

    verdict: str | None
    lag_days: int | None
    signed_by: str | None
    verified: bool | None
    time: str | None


NOT_RUN = Cell(None, None, None, None, None)


class Sites(NamedTuple):
    """A pairing's cell per site, in `SITES`' order (its fields are `SITES`)."""

    cpu: Cell
    hardware: Cell


class Signature(NamedTuple):
    verified: bool
    problem: str | None


class HistoryLine(NamedTuple):
    seq: int
    kind: str
    time: str | None
    runner: str | None
    verdict: str | None
    manifest_sha256: str | None
    lag_days: int | None


class CompatPairing(NamedTuple):
    """One pairing of compat.json (a NamedTuple: a store holds many)."""

    entry: IndexEntry
    page: str
    core_name: str
    python: str
    signature: Signature
    sites: Sites
    api_approval: Approval | None
    guard: bool
    install: str
    history: tuple[HistoryLine, ...]

    @property
    def pairing_id(self) -> str:
        return self.entry.pairing_id

    @property
    def core_version(self) -> str:
        return self.entry.core.version

    @property
    def plugin(self) -> PluginRef:
        return self.entry.plugin

    def to_json(self) -> dict[str, Any]:
        entry, plugin, approval = self.entry, self.entry.plugin, self.api_approval
        cpu, hardware = self.sites
        return {
            "pairing_id": entry.pairing_id,
            "page": self.page,
            "name": entry.name,
            "core": {"name": self.core_name, "version": entry.core.version},
            "plugin": {"name": plugin.name, "version": plugin.version, "commit": plugin.commit},
            "python": self.python,
            "runtime": entry.raw.get("runtime"),  # as the entry has it
            "manifest_sha256": entry.manifest_sha256,
            "signature": {"verified": self.signature.verified, "problem": self.signature.problem},
            "sites": {"cpu": cpu._asdict(), "hardware": hardware._asdict()},
            "api_approval": None if approval is None else approval.as_json(),
            "guard": self.guard,
            "install": self.install,
            "history": [h._asdict() for h in self.history],
        }


class Behind(NamedTuple):
    """A plugin whose pairings do not cover the newest core, and its newest pairing."""

    plugin: str
    newest_core: str
    pairing_id: str
    page: str


@dataclass(frozen=True)
class NewestCore:
    """The newest core release (`source`: see SOURCES), the pairings that cover it and the
    plugins that do not."""

    version: str
    source: str
    covered_by: tuple[str, ...]
    not_covered: tuple[Behind, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "source": self.source,
            "covered_by": list(self.covered_by),
            "not_covered": [b._asdict() for b in self.not_covered],
        }


def _lag_days(entry: LedgerEntry | None, manifest: Manifest | None = None) -> int | None:
    lag = entry.lag if entry is not None else None
    if lag is not None and lag.days is not None:
        return lag.days
    cadence = manifest.conformance.checks.get("cadence") if manifest is not None else None
    found = _LAG.search(cadence.summary) if cadence is not None else None
    return int(found.group(2)) if found else None


def _cell(site: str, stored: Stored, releases: list[LedgerEntry]) -> Cell:
    """The verdict of `site` for one pairing: the newest signed ledger release entry of that
    runner, else the manifest's own verdict when its runner is `site`, else not run."""
    newest = next((e for e in reversed(releases) if e.runner == site), None)
    manifest = stored.manifest
    if newest is not None:
        lag = _lag_days(newest, manifest)
        return Cell(newest.verdict, lag, f"ledger entry #{newest.seq}", True, newest.time)
    if manifest is not None:
        runner, verdict = manifest.conformance.runner, manifest.verdict
    else:  # the index's word only: shown, and marked not verified
        runner, verdict = stored.entry.runner, stored.entry.verdict
    if runner != site:
        return NOT_RUN
    lag = _lag_days(None, manifest)
    return Cell(verdict, lag, "manifest", manifest is not None, stored.entry.certified_at)


def _pairing(stored: Stored, entries: list[LedgerEntry], store: str, key: str) -> CompatPairing:
    """One pairing's data; `entries`: the ledger's entries for it, in ledger order."""
    entry, manifest = stored.entry, stored.manifest
    pid = entry.pairing_id
    problem = stored.problem
    if manifest is not None and problem is None:
        problem = superseded(entries, pid, entry.manifest_sha256)
    releases = [e for e in entries if e.kind == "release"]
    return CompatPairing(
        entry=entry,
        page=f"{PAGES}/{pid}.html",
        core_name=entry.core.name or "vllm",
        python=python_of(entry),
        signature=Signature(problem is None, problem),
        sites=Sites(*(_cell(site, stored, releases) for site in SITES)),
        api_approval=None if manifest is None else manifest.api_approval,
        guard=manifest is not None and manifest.guard is not None,
        install=shlex.join(["vpr", "install", pid[:16], "--store", store, "--key", key]),
        history=tuple(
            HistoryLine(e.seq, e.kind, e.time, e.runner, e.verdict, e.manifest_sha256, _lag_days(e))
            for e in entries
        ),
    )


def _newest_core(
    pairings: list[CompatPairing], ledger: list[LedgerEntry], given: str | None, source: str
) -> NewestCore | None:
    versions = [p.core_version for p in pairings]
    versions += [  # a matrix column's core is a release too (core main's, REF@COMMIT, is not)
        str(e.core.version)
        for e in ledger
        if e.kind in ("release", "matrix") and e.core.version and "@" not in e.core.version
    ]
    if given:
        versions.append(given)
    if not versions:
        return None
    rank = version_ranks(versions)
    newest = given or max(versions, key=rank.__getitem__)
    by_plugin: dict[str, list[CompatPairing]] = {}
    for p in pairings:
        by_plugin.setdefault(p.plugin.name, []).append(p)
    behind = []
    for name, own in sorted(by_plugin.items()):
        if any(p.core_version == newest for p in own):
            continue
        latest = max(own, key=lambda p: (rank[p.core_version], p.pairing_id))
        behind.append(Behind(name, latest.core_version, latest.pairing_id, latest.page))
    covering = sorted(p.pairing_id for p in pairings if p.core_version == newest)
    return NewestCore(newest, source if given else "store", tuple(covering), tuple(behind))


class HeadStamp(NamedTuple):
    version: int
    time: str


@dataclass(frozen=True)
class Publisher:
    """Who the site speaks for: `store`/`key`, what the install lines name (the public store
    URL, the publisher's key file); `head` None: the store has no signed head."""

    store: str
    key: str
    keyid: str
    head: HeadStamp | None


class Certified(NamedTuple):
    """A published pairing of the plugin on a core: its id, page, best verdict and the
    plugin commit it pairs (not always the matrix's)."""

    pairing_id: str
    page: str
    verdict: str | None
    commit: str | None


class MatrixCell(NamedTuple):
    """One core column of a plugin's version matrix: the newest signed ledger entry of kind matrix
    for that core and plugin commit (`column`: its column object, shape checked when read)."""

    core: str
    seq: int
    time: str | None
    python: str | None
    column: dict[str, Any]
    certified: tuple[Certified, ...]

    @property
    def outcome(self) -> str:
        return str(self.column["outcome"])

    def to_json(self) -> dict[str, Any]:
        return {**self._asdict(), "certified": [c._asdict() for c in self.certified]}


class PluginRun(NamedTuple):
    """One plugin commit across the cores, its columns oldest first."""

    commit: str | None
    version: str | None
    columns: tuple[MatrixCell, ...]
    first_breaking: str | None
    newest_seq: int

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "version": self.version,
            "first_breaking": self.first_breaking,
            "columns": [c.to_json() for c in self.columns],
        }


class PluginMatrix(NamedTuple):
    """A plugin across every core its matrix entries name: a run per commit, newest first."""

    name: str
    page: str
    runs: tuple[PluginRun, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "page": self.page, "runs": [r.to_json() for r in self.runs]}


def plugin_page(name: str) -> str:
    """The page of a plugin: its name where that is a safe file name, else a digest of it."""
    if _PAGE_NAME.match(name) and name not in (".", ".."):
        return f"{PLUGIN_PAGES}/{name}.html"
    return f"{PLUGIN_PAGES}/plugin-{hashlib.sha256(name.encode()).hexdigest()[:16]}.html"


def _best(p: CompatPairing) -> str | None:
    verdicts = [c.verdict for c in p.sites if c.signed_by is not None]
    return min(verdicts, key=lambda v: VERDICT_ORDER.get(v, 9)) if verdicts else None


def plugin_matrices(
    ledger: list[LedgerEntry], pairings: list[CompatPairing]
) -> tuple[PluginMatrix, ...]:
    """Per plugin and commit, the newest matrix entry of each core column, with the published
    pairings of the plugin on that core."""
    newest: dict[tuple[str, str | None], dict[str, LedgerEntry]] = {}
    for e in ledger:
        if e.kind == "matrix" and e.column is not None:
            run = (str(e.plugin.name or "unnamed plugin"), e.plugin.commit)
            newest.setdefault(run, {})[str(e.core.version)] = e  # later entries win
    certified: dict[tuple[str, str], list[Certified]] = {}
    for p in pairings:
        at = (p.plugin.name, p.core_version)
        pair = Certified(p.pairing_id, p.page, _best(p), p.plugin.commit)
        certified.setdefault(at, []).append(pair)
    by_name: dict[str, list[PluginRun]] = {}
    for (name, commit), cores in newest.items():
        cells = tuple(
            MatrixCell(
                core,
                e.seq,
                e.time,
                e.python,
                dict(e.column.raw) if e.column else {},
                tuple(certified.get((name, core), ())),
            )
            for core, e in sorted(cores.items(), key=lambda kv: column_order(kv[0]))
        )
        first = next((c.core for c in cells if c.outcome == "regressed"), None)
        version = max(cores.values(), key=lambda e: e.seq).plugin.version
        last = max(e.seq for e in cores.values())
        by_name.setdefault(name, []).append(PluginRun(commit, version, cells, first, last))
    return tuple(
        PluginMatrix(name, plugin_page(name), tuple(sorted(runs, key=lambda r: -r.newest_seq)))
        for name, runs in sorted(by_name.items())
    )


@dataclass(frozen=True)
class Compat:
    """compat.json: `to_json` is the object written."""

    store: str
    keyid: str
    head: HeadStamp | None
    cores: tuple[str, ...]
    newest_core: NewestCore | None
    pairings: tuple[CompatPairing, ...]
    plugins: tuple[PluginMatrix, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "schema_version": SCHEMA_VERSION,
            "store": self.store,
            "keyid": self.keyid,
            "head": None if self.head is None else self.head._asdict(),
            "verdicts": VERDICTS,
            "sites": list(SITES),
            "cores": list(self.cores),
            "newest_core": None if self.newest_core is None else self.newest_core.to_json(),
            "pairings": [p.to_json() for p in self.pairings],
            "plugins": [m.to_json() for m in self.plugins],
        }


def build(
    stored: list[Stored],
    ledger: list[LedgerEntry],
    publisher: Publisher,
    *,
    newest_core: str | None = None,
    newest_source: str = "given",
) -> Compat:
    """compat.json: every pairing (newest core first, then plugin, best verdict)."""
    store, key = publisher.store, publisher.key
    by_pairing: dict[str, list[LedgerEntry]] = {}
    for e in ledger:
        by_pairing.setdefault(str(e.pairing_id), []).append(e)
    pairings = [_pairing(s, by_pairing.get(s.entry.pairing_id, []), store, key) for s in stored]
    rank = version_ranks(p.core_version for p in pairings)
    pairings.sort(
        key=lambda p: (
            -rank[p.core_version],
            p.plugin.name,
            str(p.plugin.commit),
            str(p.python),
            min(VERDICT_ORDER.get(c.verdict, 9) for c in p.sites),
            p.pairing_id,
        )
    )
    cores = sorted(rank, key=rank.__getitem__, reverse=True)
    return Compat(
        store=store,
        keyid=publisher.keyid,
        head=publisher.head,
        cores=tuple(cores),
        newest_core=_newest_core(pairings, ledger, newest_core, newest_source),
        pairings=tuple(pairings),
        plugins=plugin_matrices(ledger, pairings),
    )


STYLE = (
    "*{box-sizing:border-box}"
    "body{font:16px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1a1a1a;"
    "background:#fff;margin:0 auto;padding:12px;max-width:1100px}"
    "h1{font-size:1.45rem;margin:.4em 0}h2{font-size:1.15rem;margin-top:1.6em}"
    "table{border-collapse:collapse;width:100%;table-layout:fixed;margin:.5em 0}"
    "caption{text-align:left;font-weight:600;padding:.3em 0}"
    "th,td{border:1px solid #aaa;padding:6px;vertical-align:top;text-align:left;"
    "overflow-wrap:anywhere}"
    "thead th{background:#e9e9e9}tbody th[scope=rowgroup]{background:#dde6f3}"
    "th[scope=row]{font-weight:400}"
    ".v{font-weight:700;text-transform:uppercase;letter-spacing:.02em}"
    ".fleet{background:#c8f0c8}.pilot{background:#fff2b3}.lab{background:#f5c2c2}"
    ".none{background:#f3f3f3;color:#333}"
    ".bad{color:#8b0000;font-weight:700}.small{font-size:.85em;color:#333}"
    ".banner{border:2px solid #555;padding:10px;margin:.6em 0;font-size:1.05rem}"
    "code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.88em;"
    "overflow-wrap:anywhere;word-break:break-all}"
    "pre{white-space:pre-wrap;word-break:break-all;background:#f5f5f5;border:1px solid #ccc;"
    "padding:8px}"
    "ul{padding-left:1.2em}li{margin:.15em 0}td ul{padding-left:1em;margin:.3em 0}"
    ".pass{background:#c8f0c8}.fail{background:#fff2b3}.regressed{background:#f5c2c2}"
    ".not-run{background:#e4e4e4}"
    "@media (max-width:600px){body{padding:8px;font-size:15px}th,td{padding:4px}"
    "table{font-size:.9em}.v{letter-spacing:0}}"
)
VERDICT_CLASSES = ("fleet", "pilot", "lab")
SOURCES = {  # where the newest core release came from (`NewestCore.source`)
    "index": "the newest on the core's index",
    "given": "given to the site",
    "store": "the newest the store names",
}


def e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: list[str]) -> bytes:
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en"><head><meta charset="utf-8">',
                '<meta name="viewport" content="width=device-width, initial-scale=1">',
                f"<title>{e(title)}</title>",
                f"<style>{STYLE}</style>",
                "</head><body>",
                *body,
                "</body></html>",
            ]
        )
        + "\n"
    ).encode()


def _thead(*columns: str) -> str:
    return "<thead><tr>" + "".join(f'<th scope="col">{c}</th>' for c in columns) + "</tr></thead>"


def _table(caption: str, head: tuple[str, ...], rows: list[str], cols: str = "") -> list[str]:
    """A captioned table; with a colgroup, the caption, colgroup and head on lines of their own."""
    top, thead = f"<table><caption>{caption}</caption>", _thead(*head) + "<tbody>"
    return [*([top, cols, thead] if cols else [top + thead]), *rows, "</tbody></table>"]


def _cols(*widths: int) -> str:
    """A colgroup: each column's width in percent (0: the rest)."""
    cols = "".join(f'<col style="width:{w}%">' if w else "<col>" for w in widths)
    return f"<colgroup>{cols}</colgroup>"


def _css(verdict: str | None) -> str:
    return verdict if verdict in VERDICT_CLASSES else "none"


def _cell_html(cell: Cell) -> str:
    verdict = cell.verdict
    if cell.signed_by is None:
        return '<td class="none">not run</td>'
    parts = [f'<span class="v">{e(verdict or "none")}</span>']
    lag = cell.lag_days
    parts.append(f"lag {e(lag)} days" if lag is not None else "lag unknown")
    if cell.verified:
        parts.append(f"signature verified ({e(cell.signed_by)})")
    else:
        parts.append(f'<span class="bad">signature NOT verified ({e(cell.signed_by)})</span>')
    return f'<td class="{_css(verdict)}">' + "<br>".join(parts) + "</td>"


def _row(p: CompatPairing) -> str:
    head = (
        f'<a href="{e(p.page)}">{e(p.plugin.name)} {e(p.plugin.version)}</a>'
        f'<br><span class="small">{e(_commit(p.plugin.commit))} · py{e(p.python)} · id '
        f"{e(p.pairing_id[:12])}</span>"
    )
    if not p.signature.verified:
        head += '<br><span class="bad">signature NOT verified: do not install</span>'
    if p.api_approval is not None:
        head += '<br><span class="small">breaking core API change approved</span>'
    cells = "".join(_cell_html(cell) for cell in p.sites)
    return f'<tr><th scope="row">{head}</th>{cells}</tr>'


def _matrix(compat: Compat) -> list[str]:
    out = [
        '<table id="matrix">',
        "<caption>vLLM core versions × plugins × site: verdict, release lag, signature</caption>",
        _cols(40, 30, 30),
        _thead("core and plugin", *(f"{site} site" for site in SITES)),
    ]
    by_core: dict[str, list[CompatPairing]] = {}
    for p in compat.pairings:
        by_core.setdefault(p.core_version, []).append(p)
    for core in compat.cores:
        rows = by_core.get(core, [])
        out.append(
            f'<tbody><tr><th scope="rowgroup" colspan="3">vLLM {e(core)} '
            f'<span class="small">({len(rows)} pairing{"s" if len(rows) != 1 else ""})</span>'
            "</th></tr>"
        )
        out += [_row(p) for p in rows]
        out.append("</tbody>")
    out.append("</table>")
    return out


def _newest(compat: Compat) -> list[str]:
    newest = compat.newest_core
    if newest is None:
        return []
    source = SOURCES.get(newest.source, SOURCES["store"])
    out = [
        '<h2 id="newest">Newest core release</h2>',
        f"<p>vLLM <strong>{e(newest.version)}</strong> ({e(source)}): "
        f"{len(newest.covered_by)} pairing(s) cover it.</p>",
    ]
    if not newest.not_covered:
        return [*out, "<p>Every plugin in the store has a pairing with it.</p>"]
    out += [
        "<table><caption>Plugins whose pairings do not cover it yet</caption>",
        _thead("plugin", "newest core it is paired with") + "<tbody>",
    ]
    out += [
        f'<tr><th scope="row">{e(b.plugin)}</th><td><a href="{e(b.page)}">'
        f"{e(b.newest_core)}</a></td></tr>"
        for b in newest.not_covered
    ]
    return [*out, "</tbody></table>"]


def _legend() -> list[str]:
    out = ['<h2 id="legend">Reading the matrix</h2>', "<ul>"]
    out += [f'<li><span class="v">{e(v)}</span>: {e(t)}</li>' for v, t in VERDICTS.items()]
    out += [
        "<li><strong>not run</strong>: no verdict from that site yet (never a pass)</li>",
        "<li><strong>lag</strong>: days since the first core release the plugin has not "
        "adopted (the cadence check)</li>",
        "<li><strong>signature</strong>: the manifest's DSSE signature, or the signed ledger "
        "entry the verdict comes from, checked with the publisher's key</li>",
        "</ul>",
        '<p>Machine-readable: <a href="compat.json">compat.json</a>.</p>',
    ]
    return out


def _plugins(compat: Compat) -> list[str]:
    if not compat.plugins:
        return []
    rows = [
        _run_row(
            f'<a href="{e(m.page)}">{e(m.name)}</a><br><span '
            f'class="small">{e(_commit(m.runs[0].commit))}</span>',
            m.runs[0],
        )
        for m in compat.plugins
    ]
    caption = "The plugin's tests on each vLLM core (<code>vpr matrix</code>), newest plugin commit"
    head = ("plugin", "core columns", "first breaking core")
    return [
        '<h2 id="plugins">Each plugin across every core</h2>',
        *_table(caption, head, rows, _cols(40, 30, 30)),
    ]


def index_page(compat: Compat) -> bytes:
    head = compat.head
    version, time = (None, None) if head is None else (head.version, head.time)
    count = len(compat.pairings)
    body = [
        "<h1>vLLM core × plugin compatibility</h1>",
        f'<p class="small">{count} pairing(s) over {len(compat.cores)} core version(s), read '
        f"from {e(compat.store)} through its signed head (version {e(version)}"
        f", {e(time)}), signatures checked with key {e(compat.keyid[:16])}.</p>",
        *_matrix(compat),
        *_plugins(compat),
        *_newest(compat),
        *_legend(),
    ]
    return _page("vLLM core × plugin compatibility", body)


def _checks(manifest: Manifest) -> list[str]:
    conformance = manifest.conformance
    checks = conformance.checks
    rows = []
    for name in sorted(checks):
        check = checks[name]
        evidence = "".join(f"<li>{e(note)}</li>" for note in check.evidence)
        more = f"<ul>{evidence}</ul>" if evidence else ""
        rows.append(
            f'<tr><th scope="row">{e(name)}</th><td><span class="v">{e(check.status)}'
            f"</span></td><td>{e(check.summary)}{more}</td></tr>"
        )
    head = ("check", "status", "summary and evidence")
    out = _table("Checks (from the signed manifest)", head, rows, _cols(24, 20, 0))
    deferred = conformance.deferred
    if deferred:
        out.append("<p>Deferred (not run here, never counted as a pass):</p><ul>")
        out += [f"<li>{e(d.check)}: {e(d.reason)}</li>" for d in deferred]
        out.append("</ul>")
    return out


def _sites_table(p: CompatPairing) -> list[str]:
    rows = []
    for site, c in zip(SITES, p.sites):
        verdict = c.verdict or "none" if c.signed_by else "not run"
        lag = f"{c.lag_days} days" if c.lag_days is not None else "unknown"
        signed = c.signed_by or "-"
        if c.signed_by and not c.verified:
            signed += " (NOT verified)"
        rows.append(
            f'<tr><th scope="row">{e(site)}</th><td class="{_css(c.verdict)}">'
            f'<span class="v">{e(verdict)}</span></td><td>{e(lag)}</td><td>{e(signed)}</td></tr>'
        )
    return _table("Verdict per site", ("site", "verdict", "lag", "signed by"), rows)


def _approval(p: CompatPairing) -> list[str]:
    a = p.api_approval
    out = ['<h2 id="api">Core API the plugin uses</h2>']
    if a is None:
        return [
            *out,
            "<p>No approval recorded: the bump to this core found no breaking change "
            "in the core API the plugin uses (or the pairing predates approvals).</p>",
        ]
    changes = "".join(f"<li><code>{e(c)}</code></li>" for c in a.changes)
    return [
        *out,
        f"<p>Breaking changes from vLLM {e(a.source)} to {e(a.to)} approved by "
        f"<strong>{e(a.by)}</strong>: {e(a.why)}</p>",
        f"<ul>{changes}</ul>",
    ]


def _wheels(manifest: Manifest) -> list[str]:
    rows = [
        f'<tr><th scope="row">{e(part.role)}</th><td>{e(part.wheel.filename)}</td>'
        f"<td><code>{e(part.wheel.sha256)}</code></td></tr>"
        for part in manifest.parts()
    ]
    return _table("Certified wheels", ("role", "file", "sha256"), rows, _cols(14, 36, 0))


def _history_html(p: CompatPairing) -> list[str]:
    if not p.history:
        return ["<p>The store's ledger holds no entry for this pairing.</p>"]
    rows = []
    for h in p.history:
        lag = f"{h.lag_days} days" if h.lag_days is not None else "-"
        rows.append(
            f'<tr><th scope="row">{e(h.seq)}</th><td>{e(h.time)}</td><td>{e(h.kind)}'
            f'</td><td>{e(h.runner)}</td><td><span class="v">{e(h.verdict)}</span></td>'
            f"<td>{e(lag)}</td><td><code>{e(str(h.manifest_sha256)[:16])}</code></td></tr>"
        )
    head = ("#", "time", "kind", "runner", "verdict", "lag", "manifest")
    return _table("Ledger entries of this pairing (signed, chained)", head, rows)


def pairing_page(p: CompatPairing, manifest: Manifest | None) -> bytes:
    title = f"{p.core_name} {p.core_version} + {p.plugin.name} {p.plugin.version}"
    verdict = manifest.verdict if manifest is not None else None
    signature = (
        "<p>Signature verified with the publisher's key: the manifest is the one its signed "
        f"statement names and the one the signed index names (sha256 "
        f"<code>{e(p.entry.manifest_sha256)}</code>).</p>"
        if p.signature.verified
        else f'<p class="bad">Signature NOT verified: {e(p.signature.problem)}</p>'
    )
    body = [
        '<p><a href="../index.html">compatibility matrix</a></p>',
        f"<h1>{e(title)}</h1>",
        f'<p class="small">pairing id <code>{e(p.pairing_id)}</code> · plugin commit '
        f"<code>{e(p.plugin.commit or 'none')}</code> · Python {e(p.python)}</p>",
        f'<div class="banner {_css(verdict)}"><span class="v">Verdict: '
        f"{e(verdict or 'none')}</span> (the signed manifest's)</div>",
        "<h2>Signature</h2>",
        signature,
        "<h2>Install</h2>",
        f"<pre><code>{e(p.install)}</code></pre>",
        "<p>Installs exactly the certified set with --require-hashes"
        + (
            ", with vpr-guard: vLLM then refuses to start in an environment that drifts from it"
            if p.guard
            else ""
        )
        + ".</p>",
        *_sites_table(p),
        *_approval(p),
        "<h2>Scorecard</h2>",
        *(_checks(manifest) if manifest else ["<p>No verified manifest to show.</p>"]),
        "<h2>Wheels</h2>",
        *(_wheels(manifest) if manifest else []),
        "<h2>Ledger history</h2>",
        *_history_html(p),
    ]
    return _page(title, body)


EXIT_CLASSES = {1: "a gate failed", 2: "bad input", 3: "an outside failure"}
OUTCOME_TEXT = {
    "pass": "every test that ran passed and every plugin module imports",
    "fail": "tests fail or modules do not import, as on the column before (not new here)",
    "regressed": "a test or module that passed on the column before fails here",
    "not-run": "the column could not be built, installed or tested (never a pass)",
}


def _commit(commit: str | None) -> str:
    return f"@{commit[:12]}" if commit else "no commit"


def _span(run: PluginRun) -> str:
    cores = [c.core for c in run.columns]
    if len(cores) == 1:
        return f"vLLM {cores[0]}"
    return f"vLLM {cores[0]} … {cores[-1]} ({len(cores)} columns)"


def _tally(run: PluginRun) -> str:
    seen: dict[str, int] = {}
    for c in run.columns:
        seen[c.outcome] = seen.get(c.outcome, 0) + 1
    return ", ".join(f"{n} {_outcome_word(o)}" for o, n in seen.items())


def _outcome_word(outcome: str) -> str:
    return "not run" if outcome == "not-run" else outcome


def _core_cell(c: MatrixCell) -> str:
    col = c.column
    python = f"Python {c.python}" if c.python else "no Python"
    parts = [
        f"vLLM {e(c.core)}",
        f'<span class="small">{e(col["role"])} · {e(python)} · ledger entry #{e(c.seq)}</span>',
    ]
    for p in c.certified:
        parts.append(
            f'<span class="small">published pairing {e(_commit(p.commit))}: <a '
            f'href="../{e(p.page)}">{e(p.verdict or "none")}</a></span>'
        )
    return '<th scope="row">' + "<br>".join(parts) + "</th>"


def _result_cell(c: MatrixCell) -> str:
    col, outcome = c.column, c.outcome
    parts = [f'<span class="v">{e(_outcome_word(outcome))}</span>']
    if outcome == "not-run":
        why = EXIT_CLASSES.get(col["exit_class"], "stopped")
        parts.append(f"exit {e(col['exit_class'])} ({e(why)}): {e(col['reason'])}")
        if not c.python:
            parts.append(f'<span class="small">{e(col["python_why"])}</span>')
        return '<td class="not-run">' + "<br>".join(parts) + "</td>"
    n = col["counts"]
    parts.append(
        f"{e(n['passed'])} passed, {e(n['failed'] + n['error'])} failed, "
        f"{e(n['deferred'])} deferred"
    )
    if col["imports_failing"]:
        parts.append(f"{e(col['imports_failing'])} of {e(col['modules'])} modules do not import")
    if outcome == "regressed":
        lost = []
        if col["regressions"]:
            lost.append(f"{col['regressions']} test(s)")
        if col["import_regressions"]:
            lost.append(f"{col['import_regressions']} module(s)")
        parts.append(f"regressed against {e(col['against'])}: {e(' and '.join(lost))}")
    elif col["against"]:
        parts.append(f'<span class="small">compared with {e(col["against"])}</span>')
    return f'<td class="{e(outcome)}">' + "<br>".join(parts) + "</td>"


def _broke_cell(c: MatrixCell) -> str:
    col = c.column
    parts = []
    if col["breaking"]:
        items = "".join(f"<li><code>{e(b)}</code></li>" for b in col["breaking"])
        more = col["breaking_total"] - len(col["breaking"])
        extra = f"<li>and {e(more)} more</li>" if more > 0 else ""
        parts.append(f"breaking core API changes ({e(col['breaking_total'])}):")
        parts.append(f"<ul>{items}{extra}</ul>")
    bisect = col["bisect"]
    if bisect is not None:
        kind = "commit" if bisect["mode"] == "git" else "version"
        subject = f" {e(bisect['subject'])}" if bisect["subject"] else ""
        parts.append(
            f"bisected: first bad {kind} <code>{e(bisect['first_bad'][:12])}</code>{subject} "
            f"(last good <code>{e(bisect['last_good'][:12])}</code>)"
        )
    elif c.outcome == "regressed":
        parts.append("not bisected")
    if not parts:
        none = "not tested here" if c.outcome == "not-run" else "no breaking change reported"
        parts.append(none)
    blocks = (p if p.startswith("<ul>") else f"<div>{p}</div>" for p in parts)
    return '<td class="what">' + "".join(blocks) + "</td>"


def _run_table(m: PluginMatrix, run: PluginRun) -> list[str]:
    out = [
        '<table id="matrix">',
        f"<caption>{e(m.name)} {e(_commit(run.commit))} on each vLLM core, oldest first</caption>",
        _cols(28, 33, 39),
        _thead("core", "plugin tests", "what broke") + "<tbody>",
    ]
    for c in run.columns:
        out.append(f"<tr>{_core_cell(c)}{_result_cell(c)}{_broke_cell(c)}</tr>")
    return [*out, "</tbody></table>"]


def _first_banner(run: PluginRun) -> str:
    if run.first_breaking is not None:
        c = next(c for c in run.columns if c.core == run.first_breaking)
        return (
            f'<div class="banner regressed"><strong>First breaking core: vLLM '
            f"{e(run.first_breaking)}</strong> (its tests regressed against "
            f"{e(c.column['against'])})</div>"
        )
    return (
        f'<div class="banner pass"><strong>No core breaks it</strong> '
        f"in {e(_span(run))} ({e(_tally(run))})</div>"
    )


def _newest_line(compat: Compat, run: PluginRun) -> list[str]:
    newest = compat.newest_core
    if newest is None:
        return []
    cell = next((c for c in run.columns if c.core == newest.version), None)
    where = SOURCES.get(newest.source, SOURCES["store"])
    said = (
        f"{_outcome_word(cell.outcome)} (ledger entry #{cell.seq})"
        if cell is not None
        else "not in this plugin's matrix yet"
    )
    return [f"<p>Newest vLLM release {e(newest.version)} ({e(where)}): {e(said)}.</p>"]


def _older(m: PluginMatrix) -> list[str]:
    if len(m.runs) < 2:
        return []
    rows = [_run_row(e(_commit(run.commit)), run) for run in m.runs[1:]]
    head = ("plugin commit", "core columns", "first breaking core")
    return [
        '<h2 id="older">Earlier plugin commits</h2>',
        *_table("Each earlier commit's matrix, newest first", head, rows),
    ]


def _run_row(head: str, run: PluginRun) -> str:
    """A row of a plugin commit's matrix: `head`, its columns and its first breaking core."""
    first = f"vLLM {run.first_breaking}" if run.first_breaking else "none"
    return (
        f'<tr><th scope="row">{head}</th><td>{e(_span(run))}<br>'
        f'<span class="small">{e(_tally(run))}</span></td><td>{e(first)}</td></tr>'
    )


def plugin_matrix_page(compat: Compat, m: PluginMatrix) -> bytes:
    run = m.runs[0]
    title = f"{m.name} across vLLM cores"
    legend = "".join(
        f'<li><span class="v">{e(_outcome_word(o))}</span>: {e(t)}</li>'
        for o, t in OUTCOME_TEXT.items()
    )
    body = [
        '<p><a href="../index.html">compatibility matrix</a></p>',
        f"<h1>{e(title)}</h1>",
        f'<p class="small">plugin commit <code>{e(run.commit or "none")}</code> · version '
        f"{e(run.version or 'unknown')} · from the store's signed ledger (kind matrix, "
        f"checked with key {e(compat.keyid[:16])})</p>",
        _first_banner(run),
        *_newest_line(compat, run),
        *_run_table(m, run),
        '<h2 id="reading">Reading the table</h2>',
        f"<ul>{legend}<li><strong>what broke</strong>: the core API changes the plugin "
        "uses that changed against the column before (those a failure confirms first), and "
        "the commit or version a bisection found for a regressed column</li></ul>",
        *_older(m),
    ]
    return _page(title, body)


def compat_bytes(compat: Compat) -> bytes:
    """One JSON line, keys sorted (the encoder's fast path: a fleet store's is megabytes)."""
    text = json.dumps(compat.to_json(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode()


def render(compat: Compat, manifests: dict[str, Manifest | None]) -> dict[str, bytes]:
    """Every file of the site: relative path -> bytes."""
    files = {"index.html": index_page(compat), "compat.json": compat_bytes(compat)}
    for p in compat.pairings:
        files[p.page] = pairing_page(p, manifests.get(p.pairing_id))
    for m in compat.plugins:
        files[m.page] = plugin_matrix_page(compat, m)
    return files
