"""The `cadence` check: how far the plugin trails vLLM core releases, in minor releases and
days (`[conformance.cadence]`); it reads the core's releases from the network."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import (
    CheckDef,
    CheckResult,
    Context,
    Evidence,
    from_findings,
)
from vllm_plugin_release.conform.lib import installscan
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.git import tag_refs, tag_refs_of

DEFAULT_TAG_PATTERN = (
    r"(?i)vllm[-_/]?v?(?P<core>\d+\.\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)"
)


CADENCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Upstream cadence check: how far the plugin trails vLLM core releases.",
    "additionalProperties": False,
    "properties": {
        "max_minor_lag": {
            "type": "integer",
            "minimum": 0,
            "default": 1,
            "description": "Most minor release series (major.minor) the plugin may trail the "
            "latest core release by.",
        },
        "max_days_lag": {
            "type": "integer",
            "minimum": 0,
            "description": "Most days since the first core release the plugin has not adopted "
            "(unset: no limit).",
        },
        "on_violation": {
            "enum": ["fail", "warn"],
            "default": "fail",
            "description": "Status when the lag exceeds the policy: fail (gates the pairing) or "
            "warn (reported, for a pairing that deliberately stays on a pinned core).",
        },
        "include_prereleases": {
            "type": "boolean",
            "default": False,
            "description": "Count core pre-releases (rc, beta, dev) as releases; by default "
            "they are reported separately.",
        },
        "core_from": {
            "enum": ["index", "git"],
            "default": "index",
            "description": '"index": core releases from the package index (simple API); '
            '"git": from the tags of core_repo.',
        },
        "core_index": {
            "type": "string",
            "description": "Simple-API index for core releases; default: the [core.source] "
            "index, else https://pypi.org/simple.",
        },
        "core_repo": {
            "type": "string",
            "description": "Core git repository (path or URL) for core_from = git; default: "
            "the [core.source] url when it is a git source.",
        },
        "tag_pattern": {
            "type": "string",
            "description": "Regular expression with a named group `core` that finds the core "
            "version in a plugin tag name (default matches compat/vllm-0.24.0, vllm-v0.24.0, "
            "and a whole tag v0.24.0 or v0.24.0rc1, the vllm-project plugins' form, when "
            "that version is a core release).",
        },
    },
}

TABLES: dict[str, dict[str, Any]] = {"cadence": CADENCE_SCHEMA}


NAME = "cadence"
# The vllm-project plugins tag their releases with the core version they target, the
# whole tag `v0.25.1` or `v0.25.1rc1`. A plugin's own version looks the same (`v0.1.0`),
# so with the default pattern such a tag counts only when its version is a core release.
RELEASE_TAG_PATTERN = r"^v(?P<core>\d+\.\d+\.\d+(?:rc\d+)?)$"
PYPI_SIMPLE = "https://pypi.org/simple"
UNKNOWN_TARGET = (
    "cannot tell which core version the plugin targets: no exact installer pin and no plugin "
    "tag names one (latest tag: {}); pin the core in the installer or tag releases with the "
    "core version they target (vX.Y.Z, vX.Y.ZrcN or compat/vllm-X.Y.Z)"
)


class CoreRelease(NamedTuple):
    version: Version
    date: datetime | None


class PluginTag(NamedTuple):
    name: str
    date: datetime | None
    commit: str | None = None


def _aware(value: datetime | date | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        return parse_time(value)
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return datetime(value.year, value.month, value.day, tzinfo=timezone.utc)


def parse_time(text: str) -> datetime | None:
    """ISO 8601 (PyPI's `2025-07-08T04:49:01.722356Z`, git's iso-strict) as aware datetime."""
    text = text.strip()
    if not text:
        return None
    text = re.sub(r"Z$", "+00:00", text)
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)  # fromisoformat takes at most 6 digits
    m = re.match(r"^(.*?\.)(\d{1,5})([+-]\d\d:\d\d)?$", text)
    if m:  # pad 1-5 fractional digits (Python 3.10 takes only 3 or 6)
        text = m.group(1) + m.group(2).ljust(6, "0") + (m.group(3) or "")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _day(value: datetime | None) -> str | None:
    return value.date().isoformat() if value else None


def _days(start: datetime, end: datetime) -> int:
    """Calendar days from `start` to `end`, both taken in UTC."""
    utc = timezone.utc
    return (end.astimezone(utc).date() - start.astimezone(utc).date()).days


def _dated(release: CoreRelease) -> dict[str, str | None]:
    return {"version": str(release.version), "date": _day(release.date)}


def _series(version: Version) -> tuple[int, int]:
    release = (*version.release, 0)
    return release[0], release[1]


def _is_final(version: Version) -> bool:
    return not (version.is_prerelease or version.is_devrelease)


def core_version_in_tag(name: str, pattern: str = DEFAULT_TAG_PATTERN) -> Version | None:
    """The core version a plugin tag names (`compat/vllm-0.24.0` -> 0.24.0), or None."""
    m = re.search(pattern, name)
    if not m:
        return None
    try:
        return Version(m.group("core"))
    except (InvalidVersion, IndexError):
        return None


def _normalize_releases(releases: list[Any]) -> list[CoreRelease]:
    """One release per version, dated by its earliest date, in version order."""
    by_version: dict[Version, datetime | None] = {}
    for item in releases:
        version = item[0] if isinstance(item[0], Version) else Version(str(item[0]))
        when = _aware(item[1] if len(item) > 1 else None)
        old = by_version.get(version, when)
        by_version[version] = min(d for d in (old, when) if d) if (old or when) else None
    return sorted((CoreRelease(v, d) for v, d in by_version.items()), key=lambda r: r.version)


def _normalize_tags(tags: list[Any]) -> list[PluginTag]:
    out = [
        PluginTag(str(t[0]), _aware(t[1]) if len(t) > 1 else None, t[2] if len(t) > 2 else None)
        for t in tags
    ]
    floor = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(out, key=lambda t: (t.date or floor, t.name))


class _Lag(NamedTuple):
    minor: int
    days: int | None
    targeted_release: CoreRelease | None


def tag_core(name: str, pattern: str | None, releases: set[Version]) -> Version | None:
    """The core version a tag names: by `pattern` when the spec sets one; else by the
    default pattern, or a whole `vX.Y.Z[rcN]` tag whose version is a core release."""
    version = core_version_in_tag(name, pattern or DEFAULT_TAG_PATTERN)
    if version is None and not pattern:
        version = core_version_in_tag(name, RELEASE_TAG_PATTERN)
        version = version if version in releases else None
    return version


def _plugin_latest(
    tags: list[PluginTag],
    pattern: str | None,
    latest: CoreRelease,
    releases: set[Version],
    details: dict[str, Any],
    evidence: list[Evidence],
) -> tuple[PluginTag | None, tuple[PluginTag, Version] | None]:
    """The plugin's latest tag, and its latest tag that names a core version."""
    named = [(t, v) for t in tags if (v := tag_core(t.name, pattern, releases)) is not None]
    last = tags[-1] if tags else None
    details["plugin_latest_tag"] = None
    if last:
        details["plugin_latest_tag"] = {
            "name": last.name,
            "date": _day(last.date),
            "commit": last.commit,
            "names_core": str(tag_core(last.name, pattern, releases) or "") or None,
        }
        evidence.append(Evidence(note="latest plugin tag", value=last.name, source=_day(last.date)))
        if last.date and latest.date:
            details["plugin_tag_age_vs_core_days"] = max(0, (latest.date - last.date).days)
    if named:
        tag, version = named[-1]
        details["plugin_latest_compat_tag"] = {
            "name": tag.name,
            "date": _day(tag.date),
            "core": str(version),
        }
    return last, named[-1] if named else None


def _targeted(
    pin: Version | None, named: tuple[PluginTag, Version] | None, evidence: list[Evidence]
) -> tuple[Version, str] | None:
    """The core version the plugin targets and how we know: installer pin, else compat tag."""
    if pin is not None:
        note = "core version the installer pins"
        evidence.append(Evidence(note=note, value=str(pin), source="installer"))
        return pin, "installer pin"
    if named is not None:
        note = "core version named by the latest compat tag"
        evidence.append(Evidence(note=note, value=str(named[1]), source=named[0].name))
        return named[1], f"tag {named[0].name}"
    return None


def _lag(
    pool: list[CoreRelease],
    releases: list[CoreRelease],
    targeted: Version,
    latest: CoreRelease,
    now: datetime,
    details: dict[str, Any],
) -> _Lag:
    """How far `targeted` trails `latest`: minor series and days."""
    newer_series = sorted(
        {
            _series(r.version)
            for r in pool
            if _series(r.version) > _series(targeted) and r.version <= latest.version
        }
    )
    details["lag_minor"] = len(newer_series)
    details["newer_series"] = [f"{a}.{b}" for a, b in newer_series]
    details["newer_in_targeted_series"] = [
        str(r.version)
        for r in pool
        if _series(r.version) == _series(targeted) and r.version > targeted
    ]
    lag_days: int | None = 0
    if newer_series:
        first_series = [r for r in pool if _series(r.version) == newer_series[0]]
        dates = [r.date for r in first_series if r.date]
        # Calendar days (UTC), not 24-hour spans: the same all the certification day.
        lag_days = max(0, _days(min(dates), now)) if dates else None
        details["first_unadopted"] = _dated(min(first_series, key=lambda r: r.version))
    details["lag_days"] = lag_days
    targeted_release = next((r for r in releases if r.version == targeted), None)
    if targeted_release is None:
        details["targeted_note"] = f"{targeted} is not a known core release"
    elif targeted_release.date and latest.date:
        details["core_gap_days"] = max(0, (latest.date - targeted_release.date).days)
    return _Lag(len(newer_series), lag_days, targeted_release)


def _findings(
    target: tuple[Version, str],
    latest: CoreRelease,
    lag: _Lag,
    max_minor: int,
    max_days: Any,
    details: dict[str, Any],
) -> tuple[list[str], list[str]]:
    """(fails, warns) of the lag against the policy."""
    targeted, how = target
    fails: list[str] = []
    warns: list[str] = []
    if lag.minor > max_minor:
        fails.append(
            f"plugin targets core {targeted} ({how}), {lag.minor} minor release"
            f"{'s' if lag.minor != 1 else ''} behind {latest.version} "
            f"({', '.join(details['newer_series'])}); policy allows {max_minor}"
        )
    if max_days is not None:
        if lag.days is None:
            warns.append("release dates unknown: the day lag could not be measured")
        elif lag.days > int(max_days):
            fails.append(
                f"plugin has trailed core {details['first_unadopted']['version']} for "
                f"{lag.days} days; policy allows {max_days}"
            )
    if lag.targeted_release is None and targeted > latest.version:
        warns.append(
            f"plugin targets {targeted}, newer than the latest counted release {latest.version}"
        )
    return fails, warns


def _core_latest(
    pool: list[CoreRelease], releases: list[CoreRelease], details: dict[str, Any]
) -> tuple[CoreRelease, list[CoreRelease], list[Evidence]]:
    """The latest counted core release, the newer pre-releases (reported, not counted)."""
    latest = max(pool, key=lambda r: r.version)
    newer_pre = [r for r in releases if not _is_final(r.version) and r.version > latest.version]
    details["core_latest"] = _dated(latest)
    details["core_prereleases"] = [_dated(r) for r in newer_pre]
    source = "core " + (_day(latest.date) or "(no date)")
    evidence = [Evidence(note="latest core release", value=str(latest.version), source=source)]
    evidence += [
        Evidence(
            note="core pre-release (reported, not counted)",
            value=str(r.version),
            source=_day(r.date),
        )
        for r in newer_pre
    ]
    return latest, newer_pre, evidence


def assess_cadence(
    core_releases: list[Any],
    plugin_tags: list[Any],
    installer_pin: Version | str | None,
    policy: dict[str, Any] | None = None,
    *,
    now: datetime | None = None,
) -> CheckResult:
    """The cadence verdict from plain data (no I/O); `installer_pin`: the exact core pin."""
    policy = dict(policy or {})
    max_minor = int(policy.get("max_minor_lag", 1))
    max_days = policy.get("max_days_lag")
    include_pre = bool(policy.get("include_prereleases", False))
    now = _aware(now) or datetime.now(timezone.utc)
    threshold: dict[str, Any] = {
        "max_minor_lag": max_minor,
        "max_days_lag": max_days,
        "include_prereleases": include_pre,
    }
    releases = _normalize_releases(core_releases)
    pool = releases if include_pre else [r for r in releases if _is_final(r.version)]
    # The UTC day, not the time: the scorecard is the same all day (the day is in its key).
    details: dict[str, Any] = {"as_of": now.date().isoformat()}
    if not pool:
        summary = (
            "no core releases found"
            + (" (only pre-releases)" if releases else "")
            + "; check [conformance.cadence] core_from / core_index / core_repo"
        )
        return CheckResult(NAME, "fail", summary, threshold=threshold, details=details)
    latest, newer_pre, evidence = _core_latest(pool, releases, details)
    tags, pattern = _normalize_tags(plugin_tags), policy.get("tag_pattern") or None
    known = {r.version for r in releases}
    latest_tag, named = _plugin_latest(tags, pattern, latest, known, details, evidence)
    pin = Version(str(installer_pin)) if installer_pin is not None else None
    target = _targeted(pin, named, evidence)
    if target is None:
        details["targeted"] = None
        summary = UNKNOWN_TARGET.format(latest_tag.name if latest_tag else "none")
        return CheckResult(NAME, "fail", summary, evidence, threshold, details)
    if pin is not None and named is not None and named[1] != pin:
        details["tag_vs_installer"] = (
            f"latest compat tag {named[0].name} names {named[1]}, the installer pins {pin}"
        )
    details["targeted"] = {"version": str(target[0]), "from": target[1]}
    lag = _lag(pool, releases, target[0], latest, now, details)
    fails, warns = _findings(target, latest, lag, max_minor, max_days, details)
    tail = (
        f"core latest {latest.version} ({_day(latest.date) or 'no date'}); plugin targets "
        f"{target[0]} ({target[1]}); lag {lag.minor} minor, "
        f"{lag.days if lag.days is not None else '?'} days"
    )
    if newer_pre:
        tail += f"; pre-releases not counted: {', '.join(str(r.version) for r in newer_pre)}"
    if fails and policy.get("on_violation", "fail") == "warn":
        warns, fails = fails + warns, []
        tail += "; on_violation = warn"
    return from_findings(
        NAME, (fails, warns), tail, evidence=evidence, threshold=threshold, details=details
    )


def _version_of_file(filename: str) -> Version | None:
    try:
        if filename.endswith(".whl"):
            return parse_wheel_filename(filename)[1]
        return parse_sdist_filename(filename)[1]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def core_releases_from_index(index: str, project: str) -> list[CoreRelease]:
    """Releases of `project` on a simple-API index, dated by first upload (not yanked)."""
    from vllm_plugin_release.edges.fetch import index_files

    return _normalize_releases(
        [
            (version, parse_time(f.upload_time) if f.upload_time else None)
            for f in index_files(index, project)
            if not f.yanked and (version := _version_of_file(f.filename)) is not None
        ]
    )


def plugin_tags_from_git(repo_path: Path | str) -> list[PluginTag]:
    """Tags of a local repository with creator dates and the commit each one points to."""
    return _normalize_tags(
        [
            (name, parse_time(when), peeled if kind == "tag" and peeled else obj)
            for name, when, kind, obj, peeled in tag_refs(Path(repo_path))
        ]
    )


def core_releases_from_git(repo: Path | str) -> list[CoreRelease]:
    """Core releases from version tags (v0.26.0, 0.26.0) of a repository (path or URL)."""
    out = []
    for name, when, *_ in tag_refs_of(str(repo)):
        m = re.fullmatch(r"v?(\d+(?:\.\d+)+\S*)", name)
        if m:
            with contextlib.suppress(InvalidVersion):
                out.append((Version(m.group(1)), parse_time(when)))
    return _normalize_releases(out)


def _installer_pin(spec: Spec, root: Path | None) -> tuple[Version | None, list[str]]:
    """The exact core pin in the plugin's installer (via the pinning parser), and notes."""
    if root is None or spec.plugin is None or not spec.plugin.installer:
        return None, ["no installer to read ([plugin] installer unset or no plugin source)"]
    options = installscan.pinning_options(spec)
    files = installscan.input_files(spec, options.files)
    report = installscan.scan(root, files, spec.core.name, options.build_args)
    notes = [
        f"{m['file']} is missing ({m.get('named_by') or 'referenced'})" for m in report.missing
    ]
    pin = report.core_pin
    if pin and pin.get("exact") and pin.get("version"):
        try:
            return Version(pin["version"]), notes
        except InvalidVersion:
            notes.append(f"installer pin {pin['version']!r} is not a version")
    elif pin:
        notes.append(f"installer core requirement {pin['requirement']} is not an exact pin")
    else:
        notes.append("the installer pins no core version")
    return None, notes


def _check_tag_pattern(spec: Spec, policy: dict[str, Any]) -> None:
    """A tag_pattern must compile and name a group `core`."""
    if not policy.get("tag_pattern"):
        return
    try:
        compiled = re.compile(policy["tag_pattern"])
    except re.error as exc:
        raise BadInput(
            f"{spec.path}: [conformance.cadence] tag_pattern is not a regular expression ({exc})",
            hint="fix tag_pattern",
        ) from None
    if "core" not in compiled.groupindex:
        raise BadInput(
            f"{spec.path}: [conformance.cadence] tag_pattern has no named group `core`",
            hint=r"e.g. tag_pattern = 'vllm-(?P<core>\d+\.\d+\.\d+)'",
        )


def _read_core_releases(
    spec: Spec, policy: dict[str, Any], sources: dict[str, Any]
) -> list[CoreRelease]:
    """Core releases from the index or git tags, as the policy says; the source noted."""
    source = spec.core.source
    if policy.get("core_from", "index") == "git":
        repo = policy.get("core_repo") or getattr(source, "url", None)
        if not repo:
            raise BadInput(
                f'{spec.path}: [conformance.cadence] core_from = "git" needs '
                "core_repo (or a git [core.source])",
                hint="set core_repo",
            )
        sources["core"] = f"git tags of {repo}"
        return core_releases_from_git(repo)
    index = policy.get("core_index") or getattr(source, "index", None) or PYPI_SIMPLE
    sources["core"] = f"{index.rstrip('/')}/{spec.core.name}/"
    return core_releases_from_index(index, spec.core.name)


def _read_plugin(
    spec: Spec,
    plugin_root: Path | str | None,
    notes: list[str],
    sources: dict[str, Any],
    tags: bool,
) -> tuple[Path | None, list[Any]]:
    """The plugin's source folder, and its git tags when `tags` (none for a folder of ours)."""
    root: Path | None = None
    try:
        root = installscan.plugin_root_for(spec, plugin_root)
    except BadInput:
        notes.append("no plugin source given: plugin tags and installer pin not read")
    if root is not None and not root.exists():
        notes.append(f"plugin source {root} does not exist")
        root = None
    found: list[Any] = []
    if tags and spec.plugin is not None and spec.plugin.source.kind == "path":
        notes.append("plugin source is a folder of this repository: no plugin tags read")
    elif tags and root is not None:
        try:
            found = plugin_tags_from_git(root)
            sources["plugin_tags"] = f"git tags of {root}"
        except BadInput as exc:
            notes.append(f"plugin tags not read: {exc.message}")
    return root, found


def check(
    spec: Spec,
    plugin_root: Path | str | None,
    *,
    core_releases: list[Any] | None = None,
    plugin_tags: list[Any] | None = None,
    read_installer: bool = True,
    now: datetime | None = None,
) -> CheckResult:
    """The `cadence` check, reading every input not given (`read_installer`: the core pin)."""
    policy = spec.conformance(NAME) or {}
    _check_tag_pattern(spec, policy)
    notes: list[str] = []
    sources: dict[str, Any] = {}
    if core_releases is None:
        core_releases = _read_core_releases(spec, policy, sources)
    root, tags = _read_plugin(spec, plugin_root, notes, sources, plugin_tags is None)
    installer_pin: Version | None = None
    if read_installer:
        installer_pin, pin_notes = _installer_pin(spec, root)
        notes.extend(pin_notes)
    found = plugin_tags if plugin_tags is not None else tags
    result = assess_cadence(core_releases, found, installer_pin, policy, now=now)
    details = {**result.details, "sources": sources, "notes": notes, "spec_core": spec.core.version}
    evidence = [*result.evidence, *(Evidence(note=n, source="cadence") for n in notes)]
    return dataclasses.replace(result, evidence=evidence, details=details)


def run(ctx: Context) -> CheckResult:
    return check(ctx.spec, ctx.plugin_root)


CHECK = CheckDef(
    "cadence",
    "how far the plugin trails vLLM releases (minor releases and days behind)",
    run,
    TABLES,
    ("plugin_root",),
    needs=("network",),
)
