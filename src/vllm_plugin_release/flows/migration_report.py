"""The migration report of a bump, as Markdown (`vpr bump` prints it; `--report` writes it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm_plugin_release.flows.bump import COMMON_REQUIREMENTS

if TYPE_CHECKING:
    from vllm_plugin_release.flows.bump import BumpResult


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|")


def _req_section(title: str, diff: dict[str, Any]) -> list[str]:
    out = [f"### {title}", ""]
    if diff.get("status") == "not run":
        return [*out, f"not run: {diff['reason']}", ""]
    if not (diff["added"] or diff["removed"] or diff["changed"]):
        return [*out, f"no change ({diff['unchanged']} requirements)", ""]
    out += ["| change | requirement |", "|---|---|"]
    out += [f"| added | `{_md(r)}` |" for r in diff["added"]]
    out += [f"| removed | `{_md(r)}` |" for r in diff["removed"]]
    for c in diff["changed"]:
        before, after = "; ".join(c["from"]), "; ".join(c["to"])
        out.append(f"| re-pinned | `{_md(before)}` → `{_md(after)}` |")
    out += ["", f"{diff['unchanged']} unchanged.", ""]
    return out


def _coupling_section(c: dict[str, Any] | None) -> list[str]:
    """The core API the plugin uses: what breaks it, what to review, what cannot be told
    statically, and the approval on record."""
    out = ["", "### Core API the plugin uses", ""]
    if not c or c.get("status") != "run":
        return [*out, f"not run: {(c or {}).get('reason', 'no plugin')}"]
    review = c.get("review") or []
    unresolved = c.get("unresolved") or []
    out.append(
        f"{c['symbols']} core symbols used (imports, attributes, calls, subclasses, "
        f"overrides); {c['breaking']} breaking change(s) for the plugin"
        + (f"; {len(review)} to review" if review else "")
        + (f"; {len(unresolved)} not resolvable statically" if unresolved else "")
    )
    if c["changes"]:
        out += ["", "| breaking | what changed | plugin |", "|---|---|---|"]
        out += [_change_row(ch) for ch in c["changes"]]
    if review:
        out += ["", "To review (not breaking: the plugin still imports and runs):", "",
                "| review | what changed | plugin |", "|---|---|---|"]  # fmt: skip
        out += [_change_row(ch) for ch in review]
    if unresolved:
        out += ["", "<details><summary>Not resolvable statically "
                f"({len(unresolved)})</summary>", ""]  # fmt: skip
        for u in unresolved:
            if isinstance(u, dict):
                where = ", ".join(u.get("uses", [])[:2])
                out.append(f"- `{_md(u['symbol'])}`: {_md(u['reason'])}"
                           + (f" ({_md(where)})" if where else ""))  # fmt: skip
            else:
                out.append(f"- `{_md(u)}`")
        out += ["", "</details>"]
    approval = c.get("approval") or {}
    if approval.get("status") == "approved":
        out += ["", f"**Approved** by {_md(approval['by'])}: {_md(approval['why'])} "
                f"({len(approval['changes'])} change(s), recorded in the spec as "
                "`[core.api_approval]`)"]  # fmt: skip
    elif approval.get("status") == "missing":
        out += ["", f"**Not approved**: the bump stops until {len(approval['needed'])} "
                f"change(s) are approved on record: `{_md(approval['command'])}`"]  # fmt: skip
    return out


def _change_row(ch: dict[str, Any]) -> str:
    uses = ch["uses"]
    more = f" and {len(uses) - 3} more" if len(uses) > 3 else ""
    return f"| `{_md(ch['id'])}` | {_md(ch['detail'])} | {_md(', '.join(uses[:3]))}{more} |"


def render_markdown(result: BumpResult) -> str:
    r = result.report
    core = r["core"]
    out = [
        f"## Migration report: {core['name']} {core['from']} → {core['to']}",
        "",
        f"Spec: `{r['spec']['from']}` → `{r['spec']['to']}` "
        + ("(written)" if result.written else "(not written: --dry-run)"),
        "",
    ]
    out += _source_section(r["source"])
    out += _python_section(r.get("python"))
    out += _req_section(f"Runtime dependencies ({COMMON_REQUIREMENTS})", r["requirements"])
    out += _req_section("Build requirements ([build-system].requires)", r["build_requires"])
    out += _locks_section(r.get("locks", []))
    out += _coupling_section(r.get("api_coupling"))
    out += _api_section(r["api"])
    out += _tests_section(r["plugin_tests"], core)
    out += _bisect_section(r.get("bisect"))
    if r["comments_to_review"]:
        out += ["", f"### Comments that still name {core['from']} (review by hand)", ""]
        out += [f"- line {c['line']}: `{_md(c['text'])}`" for c in r["comments_to_review"]]
    return "\n".join(out) + "\n"


def _python_section(move: dict[str, Any] | None) -> list[str]:
    if not move:
        return []
    floor = f"Requires-Python `{move['requires']}`" if move["requires"] else "no Requires-Python"
    out = ["### Python", ""]
    if move["from"] == move["to"]:
        out.append(f"{floor}: the spec's Python {move['from']} stays.")
    else:
        out.append(
            f"**The Python floor moved past the spec's {move['from']}** ({floor}): the bumped "
            f"spec pairs on {move['to']} ({_md(move['why'])}); `[build] python` and the lock "
            "files named for it move with it, the locks below are resolved for it."
        )
    out += [f"- review: {_md(item)}" for item in move.get("review", [])]
    return [*out, ""]


def _source_section(src: dict[str, Any]) -> list[str]:
    if src["kind"] == "sdist":
        out = [
            f"Source: `{src['filename']}` sha256 `{src['sha256']}` from {src['index']} "
            "(verified on download)"
        ]
    else:
        out = [f"Source: {src['url']} tag `{src['tag']}` commit `{src['commit']}` (verified)"]
    return [
        *out,
        "",
        f"SOURCE_DATE_EPOCH: {src['source_date_epoch']} ({src['source_date_epoch_utc']} UTC, "
        f"{src['source_date_epoch_origin']})",
        "",
    ]


def _locks_section(locks: list[dict[str, Any]]) -> list[str]:
    out = ["### Locks", ""]
    for lock in locks:
        line = f"- `{lock['file']}` ({lock['name']}): {lock['status']}"
        pins = lock.get("pins")
        if pins:
            line += (
                f"; {len(pins['changed'])} re-pinned, {len(pins['added'])} added, "
                f"{len(pins['removed'])} removed"
            )
        out.append(line)
        for name, change in (pins or {}).get("changed", {}).items():
            out.append(f"  - {name} {change['from']} → {change['to']}")
    return out


def _api_section(api: dict[str, Any]) -> list[str]:
    out = ["", "### Served API", ""]
    if api["status"] != "run":
        return [*out, f"{api['status']}: {api['reason']}"]
    out.append(f"{api['breaking']} breaking, {api['additive']} additive change(s)")
    for c in api["changes"]:
        if c["breaking"]:
            out.append(f"- BREAKING {c['kind']} `{_md(c['location'])}`: {_md(c['detail'])}")
    return out


def _tests_section(tests: dict[str, Any], core: dict[str, Any]) -> list[str]:
    out = ["", "### Plugin tests", ""]
    if tests["status"] != "run":
        return [*out, f"{tests['status']}: {tests['reason']}"]
    out.append(
        f"{len(tests['regressions'])} regression(s) on {core['to']} "
        f"(passed on {core['from']}); {len(tests['fixed'])} fixed"
    )
    return [*out, *(f"- regressed: `{t}`" for t in tests["regressions"])]


def _bisect_section(bisected: dict[str, Any] | None) -> list[str]:
    if bisected and bisected.get("status") == "run":
        from vllm_plugin_release.core.bisect import parse_report
        from vllm_plugin_release.core.bisect import render_markdown as render_bisect

        try:
            report = parse_report(bisected)
        except ValueError as exc:
            return ["", "### Bisection", "", f"error: the report cannot be read ({exc})"]
        return ["", render_bisect(report).rstrip("\n")]
    if bisected and bisected.get("status") == "error":
        return ["", "### Bisection", "", f"error: {bisected['reason']}"]
    return []
