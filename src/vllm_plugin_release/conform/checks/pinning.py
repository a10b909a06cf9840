"""The `pinning` check: how the plugin's installer builds vLLM core (version, target device,
from source, hashes), judged against the spec and `[conformance.pinning]`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import CheckDef, CheckResult, Context, Evidence
from vllm_plugin_release.conform.lib.installscan import (
    InputFile,
    PinningOptions,
    PinningReport,
    input_files,
    pinning_options,
    plugin_root_for,
    scan,
)
from vllm_plugin_release.core.lockfile import same_version

LEVELS = ("ignore", "warn", "fail")
PINNING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Build pinning check: how the plugin's installer builds vLLM core.",
    "additionalProperties": False,
    "properties": {
        "files": {
            "type": "array",
            "description": "More installer inputs to read, relative to the plugin source: "
            'a path, or {path = "...", kind = "shell|dockerfile|requirements|pyproject"}. '
            "[plugin] installer and overrides are always read.",
            "items": {
                "oneOf": [
                    {"type": "string", "minLength": 1},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["path"],
                        "properties": {
                            "path": {"type": "string", "minLength": 1},
                            "kind": {"enum": ["shell", "dockerfile", "requirements", "pyproject"]},
                        },
                    },
                ]
            },
        },
        "build_args": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "default": {},
            "description": "Build arguments the installer Dockerfile is read with (like "
            "`docker build --build-arg`): they replace ARG defaults, so the `if` branches "
            "they select are the ones followed.",
        },
        "unhashed_fetch": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for an input downloaded at install time without a hash "
            "check (curl/wget without sha256sum -c, URL requirements, git refs that are "
            "not commits).",
        },
        "editable_install": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for an editable install (-e).",
        },
        "unpinned": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for a dependency without an exact pin (== or ===).",
        },
        "require_from_source": {
            "type": "boolean",
            "default": True,
            "description": "Fail unless the installer builds vLLM core from source "
            "(--no-binary vllm, an sdist or a git checkout).",
        },
    },
}

TABLES: dict[str, dict[str, Any]] = {"pinning": PINNING_SCHEMA}
NAME = "pinning"
SHOWN = 5  # disagreeing core pins named one by one; the rest counted


@dataclass
class _Findings:
    """What the check found: failures, warnings and the evidence behind them."""

    fails: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)

    def see(self, note: str, where: dict[str, Any], value: Any = None) -> None:
        """Evidence from the plugin, at the file and line `where` names (if any)."""
        self.evidence.append(Evidence(note, where.get("file"), where.get("line"), value, "plugin"))


def _loc(item: dict[str, Any]) -> str:
    return f"{item.get('file')}:{item.get('line')}" if item.get("line") else str(item.get("file"))


def check(spec: Spec, plugin_root: Path | str | None = None) -> CheckResult:
    """The `pinning` check for `spec`, reading installer inputs under `plugin_root`."""
    options = pinning_options(spec)
    root = plugin_root_for(spec, plugin_root)
    core_name = spec.core.name
    want = spec.core.version
    want_target = spec.core.target_device
    threshold = {
        "core_version": want,
        "target_device": want_target,
        "require_from_source": options.require_from_source,
        "unhashed_fetch": options.unhashed_fetch,
        "editable_install": options.editable_install,
        "unpinned": options.unpinned,
    }
    files = input_files(spec, options.files)
    unreadable = _unreadable(spec, root, files, threshold)
    if unreadable is not None:
        return unreadable
    report = scan(root, files, core_name, options.build_args)
    found = _Findings()
    _judge_missing(report, found)
    _judge_incomplete(report, found)
    no_installer = any(m.get("named_by") == "[plugin] installer" for m in report.missing)
    _judge_core_pin(report, found, core_name, want, no_installer)
    _judge_target_device(report, found, want_target, no_installer)
    _judge_from_source(report, found, core_name, options)
    _judge_hygiene(report, found, options)
    for note in report.notes:
        found.see(note, {})
    status, summary = _verdict(found, core_name, report.core_pin, want, want_target)
    details = report.to_json()
    details["failures"] = found.fails
    details["warnings"] = found.warns
    return CheckResult(NAME, status, summary, found.evidence, threshold, details)


def _unreadable(
    spec: Spec, root: Path, files: list[InputFile], threshold: dict[str, Any]
) -> CheckResult | None:
    """A failing result when there is nothing to read; None when the check can go on."""
    if not files:
        summary = (
            "no installer to read: set [plugin] installer (or [conformance.pinning] files) in "
            "the spec"
        )
        seen = Evidence(note="the spec names no installer file", file=str(spec.path))
    elif not root.is_dir():
        summary = f"plugin source folder {root} does not exist; fetch the plugin first"
        seen = Evidence(note="plugin source folder missing", file=str(root))
    else:
        return None
    return CheckResult(NAME, "fail", summary, [seen], threshold)


def _judge_missing(report: PinningReport, found: _Findings) -> None:
    """Files named by the spec fail when missing; files named by the installer warn."""
    for item in report.missing:
        named = item.get("named_by") or f"referenced by {item.get('referenced_by')}"
        if item.get("error"):
            named += f"; {item['error']}"
        msg = f"{item['file']} is missing ({named})"
        found.see(f"file missing: {msg}", item)
        if item.get("named_by"):
            found.fails.append(f"{msg}: fix the path in the spec or the plugin source")
        else:
            found.warns.append(
                f"{msg}: the installer names a file that is not in the plugin source"
            )


def _judge_incomplete(report: PinningReport, found: _Findings) -> None:
    """A script the analysis could not follow to its end is not vouched for: fail."""
    for where in report.incomplete:
        found.see(f"analysis incomplete: {where}", {})
        found.fails.append(
            f"{where}: simplify the installer (fewer nested loops, branches and sourced "
            "scripts) so that it can be read to its end"
        )


def _judge_core_pin(
    report: PinningReport, found: _Findings, core_name: str, want: str, no_installer: bool
) -> None:
    """The core pin: present, exact, the spec's version, only one."""
    pin = report.core_pin
    if pin is None:
        if not no_installer:
            found.fails.append(
                f"the installer never installs {core_name}: no pinned core found in "
                f"{', '.join(report.files_read) or 'the files read'}"
            )
        return
    found.see(f"core requirement {pin['requirement']} ({pin['via']})", pin, pin["version"])
    if not pin["exact"] or pin["version"] is None:
        found.fails.append(
            f"{core_name} is not pinned exactly at {_loc(pin)} ({pin['requirement']}); "
            f"pin it to =={want}"
        )
    elif not same_version(pin["version"], want):
        found.fails.append(
            f"installer pins {core_name} {pin['version']} ({_loc(pin)}) but the spec pairs "
            f"core {want} ([core] version); bump one so they agree"
        )
    twice: dict[str, None] = {}  # each message once, in order
    for other in report.core_pins:
        if (
            other["exact"]
            and other["version"]
            and not same_version(other["version"], pin["version"] or "")
        ):
            twice[
                f"the installer pins {core_name} twice: {pin['version']} ({_loc(pin)}) "
                f"and {other['version']} ({_loc(other)})"
            ] = None
    found.fails += list(twice)[:SHOWN]
    if len(twice) > SHOWN:
        found.fails.append(f"... and {len(twice) - SHOWN} more pins of {core_name} that disagree")
    _judge_core_refs(report, found, pin)


def _judge_core_refs(report: PinningReport, found: _Findings, pin: dict[str, Any]) -> None:
    """vLLM files fetched by the installer must be those of the pinned version."""
    for ref in report.core_refs:
        if pin["version"] and not same_version(ref["version"], pin["version"]):
            found.fails.append(
                f"{_loc(ref)} fetches {ref['url']} (vLLM {ref['version']}) while the core "
                f"pin is {pin['version']}; fetch the files of the pinned version"
            )
        found.see(f"installer fetches vLLM {ref['version']} files", ref, ref["url"])


def _judge_target_device(
    report: PinningReport, found: _Findings, want_target: str, no_installer: bool
) -> None:
    """VLLM_TARGET_DEVICE: set to the spec's target and in effect for the core install."""
    td = report.target_device
    if td is None:
        if not no_installer:  # without the installer its absence already fails
            found.fails.append(
                f"VLLM_TARGET_DEVICE is never set for the core install; set "
                f"VLLM_TARGET_DEVICE={want_target} on the install command"
            )
        return
    found.see("VLLM_TARGET_DEVICE", td, td["value"])
    if td["value"] != want_target:
        found.fails.append(
            f"VLLM_TARGET_DEVICE={td['value']} at {_loc(td)}; the spec builds "
            f"target {want_target!r}"
        )
    elif not td.get("effective"):
        found.fails.append(
            f"VLLM_TARGET_DEVICE={td['value']} at {_loc(td)} is {td.get('note')}; "
            "export it or put it on the install command"
        )


def _judge_from_source(
    report: PinningReport, found: _Findings, core_name: str, options: PinningOptions
) -> None:
    fs = report.from_source
    pin = report.core_pin
    if fs.get("value"):
        found.see(f"core built from source ({fs['how']})", fs)
    elif options.require_from_source and pin is not None:
        found.fails.append(
            f"{core_name} is not built from source at {_loc(pin)}: add "
            f"--no-binary {core_name} (the published wheel is a CUDA build)"
        )


def _judge_hygiene(report: PinningReport, found: _Findings, options: PinningOptions) -> None:
    """Unhashed fetches, editable installs, unpinned dependencies: at their configured level."""
    for level, items, what in (
        (options.unhashed_fetch, report.unhashed_fetches, "fetched without a hash"),
        (options.editable_install, report.editable_installs, "editable install"),
        (options.unpinned, report.unpinned, "unpinned dependency"),
    ):
        for item in items:
            label = item.get("url") or item.get("target") or item.get("requirement")
            found.see(f"{what}: {label}", item, item.get("note") or item.get("role"))
        if items and level != "ignore":
            shown = ", ".join(
                f"{i.get('url') or i.get('target') or i.get('requirement')} ({_loc(i)})"
                for i in items[:4]
            ) + (f" and {len(items) - 4} more" if len(items) > 4 else "")
            (found.fails if level == "fail" else found.warns).append(
                f"{what} ({len(items)}): {shown}"
            )


def _verdict(
    found: _Findings, core_name: str, pin: dict[str, Any] | None, want: str, want_target: str
) -> tuple[str, str]:
    """(status, summary): fail on any failure, warn on any warning, else pass."""
    fails, warns = found.fails, found.warns
    if fails:
        return "fail", "; ".join(fails) + (f"; also {'; '.join(warns)}" if warns else "")
    if warns:
        return "warn", (
            f"{core_name} {pin['version'] if pin else '?'} pinned and built from source "
            f"for {want_target}; " + "; ".join(warns)
        )
    return "pass", (
        f"{core_name} pinned to {pin['version'] if pin else '?'} (spec {want}), "
        f"VLLM_TARGET_DEVICE={want_target}, built from source; no unhashed fetches, "
        "editable installs or unpinned dependencies"
    )


def run(ctx: Context) -> CheckResult:
    return check(ctx.spec, ctx.plugin_root)


CHECK = CheckDef(
    "pinning",
    "how the plugin's installer builds vLLM: version, target device, hashes",
    run,
    TABLES,
    ("plugin_root",),
)
