"""The compatibility site as files (pure): `index.html` (the matrix), one page per pairing
(its scorecard from the signed manifest, its ledger history, the `vpr install` line), one
page per plugin across every core (the ledger's matrix entries) and `compat.json`, from
`sitemodel.build`'s typed model (`Compat`).

Static and self-contained: no script, no outside asset (the style is in each page), every
value from the store escaped. Accessible: tables with captions, `scope` on every header,
the verdict as a word (the colour only repeats it). One column of cells per site, so the
matrix fits a 390 px phone as well as a wide screen; long names wrap.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core.sitemodel import SITES
from vllm_plugin_release.core.storeindex import VERDICTS

if TYPE_CHECKING:
    from vllm_plugin_release.core.manifestmodel import Manifest
    from vllm_plugin_release.core.sitemodel import (
        Cell,
        Compat,
        CompatPairing,
        MatrixCell,
        PluginMatrix,
        PluginRun,
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
SOURCES = {  # where the newest core release came from (`sitemodel.NewestCore.source`)
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


def _css(verdict: str | None) -> str:
    return verdict if verdict in VERDICT_CLASSES else "none"


def _plugin_label(p: CompatPairing) -> str:
    commit = p.plugin.commit
    return f"@{commit[:12]}" if commit else "no commit"


def _cell(cell: Cell) -> str:
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
        f'<br><span class="small">{e(_plugin_label(p))} · py{e(p.python)} · id '
        f"{e(p.pairing_id[:12])}</span>"
    )
    if not p.signature.verified:
        head += '<br><span class="bad">signature NOT verified: do not install</span>'
    if p.api_approval is not None:
        head += '<br><span class="small">breaking core API change approved</span>'
    cells = "".join(_cell(cell) for cell in p.sites)
    return f'<tr><th scope="row">{head}</th>{cells}</tr>'


def _matrix(compat: Compat) -> list[str]:
    out = [
        '<table id="matrix">',
        "<caption>vLLM core versions × plugins × site: verdict, release lag, signature</caption>",
        '<colgroup><col style="width:40%"><col style="width:30%"><col style="width:30%">'
        "</colgroup>",
        '<thead><tr><th scope="col">core and plugin</th>'
        + "".join(f'<th scope="col">{e(site)} site</th>' for site in SITES)
        + "</tr></thead>",
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
        '<thead><tr><th scope="col">plugin</th><th scope="col">newest core it is paired '
        "with</th></tr></thead><tbody>",
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
    """The plugins with a matrix across every core: newest plugin commit's columns, the
    first core that breaks it, each linked to its page."""
    if not compat.plugins:
        return []
    out = [
        '<h2 id="plugins">Each plugin across every core</h2>',
        "<table><caption>The plugin's tests on each vLLM core (<code>vpr matrix</code>), "
        "newest plugin commit</caption>",
        '<colgroup><col style="width:40%"><col style="width:30%"><col style="width:30%">'
        "</colgroup>",
        '<thead><tr><th scope="col">plugin</th><th scope="col">core columns</th>'
        '<th scope="col">first breaking core</th></tr></thead><tbody>',
    ]
    for m in compat.plugins:
        run = m.runs[0]
        first = f"vLLM {run.first_breaking}" if run.first_breaking else "none"
        out.append(
            f'<tr><th scope="row"><a href="{e(m.page)}">{e(m.name)}</a><br><span '
            f'class="small">{e(_commit(run.commit))}</span></th><td>{e(_span(run))}<br>'
            f'<span class="small">{e(_tally(run))}</span></td><td>{e(first)}</td></tr>'
        )
    return [*out, "</tbody></table>"]


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


# ---------------------------------------------------------------------------
# One pairing


def _checks(manifest: Manifest) -> list[str]:
    conformance = manifest.conformance
    checks = conformance.checks
    out = [
        "<table><caption>Checks (from the signed manifest)</caption>",
        '<colgroup><col style="width:24%"><col style="width:20%"><col></colgroup>',
        '<thead><tr><th scope="col">check</th><th scope="col">status</th>'
        '<th scope="col">summary and evidence</th></tr></thead><tbody>',
    ]
    for name in sorted(checks):
        check = checks[name]
        evidence = "".join(f"<li>{e(note)}</li>" for note in check.evidence)
        more = f"<ul>{evidence}</ul>" if evidence else ""
        out.append(
            f'<tr><th scope="row">{e(name)}</th><td><span class="v">{e(check.status)}'
            f"</span></td><td>{e(check.summary)}{more}</td></tr>"
        )
    out.append("</tbody></table>")
    deferred = conformance.deferred
    if deferred:
        out.append("<p>Deferred (not run here, never counted as a pass):</p><ul>")
        out += [f"<li>{e(d.check)}: {e(d.reason)}</li>" for d in deferred]
        out.append("</ul>")
    return out


def _sites_table(p: CompatPairing) -> list[str]:
    out = [
        "<table><caption>Verdict per site</caption><thead><tr>"
        '<th scope="col">site</th><th scope="col">verdict</th><th scope="col">lag</th>'
        '<th scope="col">signed by</th></tr></thead><tbody>'
    ]
    for site, c in zip(SITES, p.sites):
        verdict = c.verdict or "none" if c.signed_by else "not run"
        lag = f"{c.lag_days} days" if c.lag_days is not None else "unknown"
        signed = c.signed_by or "-"
        if c.signed_by and not c.verified:
            signed += " (NOT verified)"
        out.append(
            f'<tr><th scope="row">{e(site)}</th><td class="{_css(c.verdict)}">'
            f'<span class="v">{e(verdict)}</span></td><td>{e(lag)}</td><td>{e(signed)}</td></tr>'
        )
    return [*out, "</tbody></table>"]


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
    out = [
        "<table><caption>Certified wheels</caption>",
        '<colgroup><col style="width:14%"><col style="width:36%"><col></colgroup>',
        '<thead><tr><th scope="col">role</th><th scope="col">file</th>'
        '<th scope="col">sha256</th></tr></thead><tbody>',
    ]
    for part in manifest.parts():
        out.append(
            f'<tr><th scope="row">{e(part.role)}</th><td>{e(part.wheel.filename)}</td>'
            f"<td><code>{e(part.wheel.sha256)}</code></td></tr>"
        )
    return [*out, "</tbody></table>"]


def _history(p: CompatPairing) -> list[str]:
    if not p.history:
        return ["<p>The store's ledger holds no entry for this pairing.</p>"]
    out = [
        "<table><caption>Ledger entries of this pairing (signed, chained)</caption><thead><tr>"
        + "".join(
            f'<th scope="col">{h}</th>'
            for h in ("#", "time", "kind", "runner", "verdict", "lag", "manifest")
        )
        + "</tr></thead><tbody>"
    ]
    for h in p.history:
        lag = f"{h.lag_days} days" if h.lag_days is not None else "-"
        out.append(
            f'<tr><th scope="row">{e(h.seq)}</th><td>{e(h.time)}</td><td>{e(h.kind)}'
            f'</td><td>{e(h.runner)}</td><td><span class="v">{e(h.verdict)}</span></td>'
            f"<td>{e(lag)}</td><td><code>{e(str(h.manifest_sha256)[:16])}</code></td></tr>"
        )
    return [*out, "</tbody></table>"]


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
        *_history(p),
    ]
    return _page(title, body)


# ---------------------------------------------------------------------------
# One plugin across every core (the ledger's matrix entries)

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
        '<colgroup><col style="width:28%"><col style="width:33%"><col style="width:39%">'
        "</colgroup>",
        '<thead><tr><th scope="col">core</th><th scope="col">plugin tests</th>'
        '<th scope="col">what broke</th></tr></thead><tbody>',
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
    out = [
        '<h2 id="older">Earlier plugin commits</h2>',
        "<table><caption>Each earlier commit's matrix, newest first</caption><thead><tr>"
        '<th scope="col">plugin commit</th><th scope="col">core columns</th>'
        '<th scope="col">first breaking core</th></tr></thead><tbody>',
    ]
    for run in m.runs[1:]:
        first = f"vLLM {run.first_breaking}" if run.first_breaking else "none"
        out.append(
            f'<tr><th scope="row">{e(_commit(run.commit))}</th><td>{e(_span(run))}<br>'
            f'<span class="small">{e(_tally(run))}</span></td><td>{e(first)}</td></tr>'
        )
    return [*out, "</tbody></table>"]


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
