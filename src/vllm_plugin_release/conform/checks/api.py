"""The `api` check: the served OpenAPI surface of the pairing against a client contract
(`[conformance.api]`), with the allow list of accepted breaking changes."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import CheckDef, CheckResult, Context, Evidence, Status
from vllm_plugin_release.conform.lib.apicontract import (
    DEFAULT_TASKS,
    DEFAULT_TIMEOUT,
    Capture,
    capture,
    contract_from_capture,
    load_contract,
    parse_capture,
    recorded_reader,
)
from vllm_plugin_release.conform.lib.apidiff import KINDS, Change, diff_contracts
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput

DEFAULT_CONTRACT = "buildspec/contracts/vllm-0.25.1-openai.json"


API_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "API compatibility check (`api`): the pairing's OpenAPI surface against a "
    "stored client contract.",
    "additionalProperties": False,
    "properties": {
        "contract": {
            "type": "string",
            "description": "Client contract (JSON, written by `vpr api-contract`, or an OpenAPI "
            "document), relative to the repository root. Default: the newest "
            "buildspec/contracts/vllm-X.Y.Z-openai.json older than [core] version (else "
            f"{DEFAULT_CONTRACT}).",
        },
        "tasks": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "description": 'vLLM supported tasks the app is built for, e.g. ["generate"].',
            "default": list(DEFAULT_TASKS),
        },
        "endpoint_plugins": {
            "type": "boolean",
            "description": "Attach the installed `vllm.endpoint_plugins` entry points.",
            "default": True,
        },
        "platform_class": {
            "type": "string",
            "description": "The plugin's Platform class (package.module:Class); default: the "
            "one its `vllm.platform_plugins` entry point activates, else vLLM's CpuPlatform "
            "as a labelled stand-in.",
        },
        "timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Seconds the in-env capture may take.",
            "default": DEFAULT_TIMEOUT,
        },
        "allow": {
            "type": "array",
            "description": "Known breaking changes accepted, each with a reason.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["location", "reason"],
                "properties": {
                    "kind": {
                        "enum": sorted(KINDS),
                        "description": "Change kind (any if omitted).",
                    },
                    "location": {
                        "type": "string",
                        "description": "Change location; shell-style wildcards (*, ?) allowed.",
                    },
                    "reason": {"type": "string", "pattern": r"\S", "description": "Why."},
                },
            },
            "default": [],
        },
    },
}

TABLES: dict[str, dict[str, Any]] = {"api": API_SCHEMA}


CONTRACTS = "buildspec/contracts"
_CONTRACT_NAME = re.compile(r"^vllm-(?P<version>[0-9][0-9A-Za-z.+!]*)-openai\.json$")
MAX_INFO_EVIDENCE = 300

# ---------------------------------------------------------------------------
# Spec keys and the allow list


@dataclass(frozen=True)
class Allow:
    location: str
    reason: str
    kind: str | None = None

    def matches(self, change: Change) -> bool:
        if self.kind and self.kind != change.kind:
            return False
        return fnmatch.fnmatchcase(change.location, self.location)


def default_contract(spec: Spec) -> str:
    """The stored contract of the newest core release before the spec's core, as its
    clients are the ones a new pairing must keep serving; DEFAULT_CONTRACT when none is."""
    try:
        core = Version(spec.core.version)
        names = sorted(p.name for p in spec.resolve(CONTRACTS).iterdir())
    except (InvalidVersion, OSError):
        return DEFAULT_CONTRACT
    older: list[tuple[Version, str]] = []
    for name in names:
        m = _CONTRACT_NAME.match(name)
        try:
            version = Version(m.group("version")) if m else None
        except InvalidVersion:
            version = None
        if version is not None and version < core:
            older.append((version, f"{CONTRACTS}/{name}"))
    return max(older)[1] if older else DEFAULT_CONTRACT


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """`[conformance.api]` with its defaults filled in (`api_config`)."""

    contract: str  # the contract file, relative to the spec
    tasks: tuple[str, ...]
    endpoint_plugins: bool
    platform_class: str | None
    timeout: float
    allow: tuple[Allow, ...]


def api_config(spec: Spec) -> ApiConfig:
    raw = spec.conformance("api") or {}
    return ApiConfig(
        contract=raw.get("contract") or default_contract(spec),
        tasks=tuple(raw.get("tasks", DEFAULT_TASKS)),
        endpoint_plugins=bool(raw.get("endpoint_plugins", True)),
        platform_class=raw.get("platform_class"),
        timeout=float(raw.get("timeout", DEFAULT_TIMEOUT)),
        allow=tuple(
            Allow(entry["location"], entry["reason"], entry.get("kind") or None)
            for entry in raw.get("allow", [])
        ),
    )


def split_allowed(
    changes: list[Change], allow: list[Allow]
) -> tuple[list[Change], list[tuple[Change, Allow]], list[Change]]:
    """(blocking breaking changes, accepted breaking changes with their entry, info)."""
    blocking: list[Change] = []
    accepted: list[tuple[Change, Allow]] = []
    info: list[Change] = []
    for c in changes:
        if not c.breaking:
            info.append(c)
            continue
        entry = next((a for a in allow if a.matches(c)), None)
        if entry is None:
            blocking.append(c)
        else:
            accepted.append((c, entry))
    return blocking, accepted, info


# ---------------------------------------------------------------------------
# The verdict


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class _Origins:
    """Where each change comes from, when endpoint plugins were attached (else unknown)."""

    core: dict[tuple[str, str, str], str] | None
    contract_file: str

    def origin(self, c: Change) -> str | None:
        if self.core is None:
            return None
        return self.core.get((c.kind, c.location, c.detail), "endpoint plugins")

    def entry(self, c: Change, reason: str = "") -> dict[str, Any]:
        out = c.to_json()
        if self.core is not None:
            out["origin"] = self.origin(c)
        if reason:
            out["accepted"] = reason
        return out

    def note(self, c: Change, reason: str = "") -> Evidence:
        text = c.line()
        if self.core is not None and self.origin(c) != "vLLM core":
            text += " [from endpoint plugins]"
        if reason:
            text += f" -- accepted: {reason}"
        return Evidence(
            note=text, file=self.contract_file, value=self.entry(c, reason), source="api"
        )


def evaluate(
    contract: dict[str, Any],
    captured: Capture,
    *,
    contract_file: str,
    allow: list[Allow] | None = None,
) -> CheckResult:
    """The `api` verdict for a capture against a contract (pure): fail on a breaking change
    `allow` does not accept; warn when all are accepted; pass with none."""
    new = contract_from_capture(captured)
    changes = diff_contracts(contract, new)
    blocking, accepted, info = split_allowed(changes, allow or [])
    core: dict[tuple[str, str, str], str] | None = None  # changes vLLM core makes on its own
    if captured.core_openapi is not None:
        core_only = diff_contracts(contract, {**new, "openapi": captured.core_openapi})
        core = {(c.kind, c.location, c.detail): "vLLM core" for c in core_only}
    origins = _Origins(core, contract_file)
    evidence = _capture_evidence(captured, new)
    evidence += [origins.note(c) for c in blocking]
    evidence += [origins.note(c, a.reason) for c, a in accepted]
    evidence += [origins.note(c) for c in info[:MAX_INFO_EVIDENCE]]
    if len(info) > MAX_INFO_EVIDENCE:
        evidence.append(
            Evidence(
                note=f"{len(info) - MAX_INFO_EVIDENCE} more additive changes in details.changes",
                source="api",
            )
        )
    versus = (
        f"vLLM {new['core']['version']} vs the {contract['core'].get('name', 'vllm')} "
        f"{contract['core']['version']} contract"
    )
    status, summary = _verdict(versus, captured, origins, blocking, accepted, info)
    return CheckResult(
        name="api",
        status=status,
        summary=summary,
        evidence=evidence,
        threshold={"breaking": 0, "contract": contract_file, "allowed": len(allow or [])},
        details={
            "contract": {"file": contract_file, "core": contract["core"]},
            "captured": {
                "vllm_version": new["core"]["version"],
                "tasks": captured.tasks,
                "counts": captured.counts.raw,
                "platform": captured.platform.raw,
                "endpoint_plugins": captured.endpoint_plugins.raw,
                "model_sources": captured.model_sources,
            },
            "breaking": len(blocking),
            "accepted": len(accepted),
            "additive": len(info),
            "changes": [
                *(origins.entry(c) for c in blocking),
                *(origins.entry(c, a.reason) for c, a in accepted),
                *(origins.entry(c) for c in info),
            ],
        },
    )


def _capture_evidence(captured: Capture, new: dict[str, Any]) -> list[Evidence]:
    """What was captured: the platform, the env's notes, endpoint plugins, the app."""
    platform, plugins, counts = captured.platform, captured.endpoint_plugins, captured.counts
    label = platform.label if "label" in platform.raw else "?"
    evidence = [Evidence(note=f"current platform: {label}", value=platform.used, source="env")]
    evidence += [
        Evidence(note=n, source="env")
        for n in captured.notes
        if not n.startswith("current platform:")
    ]
    if plugins.discovered:
        loader = plugins.loader if "loader" in plugins.raw else "not requested"
        text = (
            f"endpoint plugins: attached {plugins.attached or 'none'} of "
            f"{plugins.discovered} ({loader})"
        )
    else:
        text = "endpoint plugins: none installed (entry-point group vllm.endpoint_plugins)"
    evidence.append(Evidence(note=text, value=plugins.attached, source="plugin"))
    evidence.append(
        Evidence(
            note=f"vLLM {new['core']['version']} app for tasks {captured.tasks}: "
            f"{counts.paths} paths, {counts.schemas} component schemas, "
            f"{len(new['models'])} models (no engine, no model)",
            source="env",
        )
    )
    return evidence


def _verdict(
    versus: str,
    captured: Capture,
    origins: _Origins,
    blocking: list[Change],
    accepted: list[tuple[Change, Allow]],
    info: list[Change],
) -> tuple[Status, str]:
    contract_file = origins.contract_file
    status: Status
    if blocking:
        status = "fail"
        summary = f"{len(blocking)} breaking change(s) in {versus} ({contract_file})"
        if origins.core is not None:
            from_plugins = sum(origins.origin(c) != "vLLM core" for c in blocking)
            summary += f", {from_plugins} from endpoint plugins"
        summary += f"; {len(info)} additive"
    elif accepted:
        status = "warn"
        summary = (
            f"no unaccepted breaking change in {versus}; {len(accepted)} accepted by "
            f"[conformance.api] allow, {len(info)} additive"
        )
    else:
        status = "pass"
        summary = f"no breaking change in {versus}; {len(info)} additive"
    if captured.platform.used == "stand-in":
        summary += " (platform: CpuPlatform stand-in)"
    return status, summary


def check(spec: Spec, python: Path, platform_class: str | None) -> CheckResult:
    """The `api` check: build the pairing's app in its env and diff it against the contract."""
    cfg = api_config(spec)
    contract_path = spec.resolve(cfg.contract)
    contract = load_contract(contract_path)
    captured = capture(
        python,
        cfg.tasks,
        platform_class or cfg.platform_class,
        endpoint_plugins=cfg.endpoint_plugins,
        timeout=cfg.timeout,
    )
    if captured.crash is not None:
        return general_plugins_crash(captured, _rel(contract_path, spec.root))
    return evaluate(
        contract,
        captured,
        contract_file=_rel(contract_path, spec.root),
        allow=list(cfg.allow),
    )


def recorded_contract(spec: Spec) -> Path:
    """buildspec/contracts/vllm-VERSION-openai.json: the pinned core's recorded contract."""
    return spec.resolve(f"{CONTRACTS}/vllm-{spec.core.version}-openai.json")


def check_recorded(spec: Spec) -> CheckResult | None:
    """`api` with no pairing environment: the pinned core's recorded contract against the
    client contract, labelled as such; None when none of that core version is recorded."""
    recorded_path = recorded_contract(spec)
    if not recorded_path.is_file():
        return None
    cfg = api_config(spec)
    contract_path = spec.resolve(cfg.contract)
    recorded = load_contract(recorded_path)
    if recorded["core"]["version"] != spec.core.version:
        raise BadInput(
            f"{recorded_path}: records vLLM {recorded['core']['version']}, not the pinned "
            f"{spec.core.version}",
            hint="write it again with `vpr api-contract --spec FILE --out PATH`",
        )
    made = recorded.get("captured_with") or {}
    rel = _rel(recorded_path, spec.root)
    recorded_capture = {
        "vllm_version": recorded["core"]["version"],
        "openapi": recorded["openapi"],
        "models": recorded["models"],
        "tasks": made.get("tasks"),
        "model_sources": made.get("model_sources"),
        "platform": {"label": f"recorded with {made.get('platform') or '?'}", "used": "recorded"},
        "endpoint_plugins": {"attached": list(made.get("endpoint_plugins") or [])},
        "counts": {
            "paths": len(recorded["openapi"].get("paths") or {}),
            "schemas": len((recorded["openapi"].get("components") or {}).get("schemas") or {}),
        },
        "notes": [
            f"from the recorded contract {rel}, not captured in this pairing's environment "
            "(none can be made here): the plugin's platform and endpoint plugins are not in it"
        ],
    }
    captured = parse_capture(recorded_capture, recorded_reader(rel))
    result = evaluate(
        load_contract(contract_path),
        captured,
        contract_file=_rel(contract_path, spec.root),
        allow=list(cfg.allow),
    )
    return replace(
        result,
        summary=f"{result.summary} (from the recorded contract {rel}; no pairing environment)",
        details={**result.details, "recorded_contract": rel},
    )


def general_plugins_crash(captured: Capture, contract_file: str) -> CheckResult:
    """vLLM's load_general_plugins() raised in the pairing env, so `vllm serve` fails the same
    way wherever that holds: a finding about the plugin, not a deferral."""
    crash = captured.crash
    if crash is None:
        raise ValueError("general_plugins_crash: the capture holds no crash")
    eps = crash.entry_points
    where = f" (vllm.general_plugins: {', '.join(eps)})" if eps else ""
    summary = (
        f"vLLM {captured.vllm_version} load_general_plugins() raises "
        f"{crash.error}{where}: `vllm serve` fails before it serves; a general plugin "
        "must not need the vendor runtime when it is loaded"
    )
    evidence = [Evidence(note=f"traceback: {frame}", source="api") for frame in crash.frames]
    return CheckResult(
        "api",
        "fail",
        summary,
        evidence,
        threshold={"breaking": 0, "contract": contract_file},
        details={"general_plugins_crash": crash.raw},
    )


def vllm_unimportable(env: EnvRecord) -> CheckResult | None:
    """A finding (not a deferral) when the env found that vLLM does not import because of
    the plugin: no API to capture, and `vllm serve` fails the same way; None otherwise."""
    found = next(
        (c for c in env.checks if c.name == "import vllm" and c.status == "fail" and c.finding),
        None,
    )
    if found is None:
        return None
    return CheckResult(
        "api",
        "fail",
        f"vLLM does not import with the plugin installed ({found.detail}): `vllm serve` "
        "fails before it serves, so no API surface exists to compare",
        [Evidence(note=f"import vllm: {found.detail}", source="env")],
    )


def run(ctx: Context) -> CheckResult:
    return vllm_unimportable(ctx.env) or check(
        ctx.spec,
        ctx.env.python,
        # Same precedence as `vpr api-contract`: the spec's platform_class, then the env's.
        api_config(ctx.spec).platform_class or ctx.env.platform_class,
    )


CHECK = CheckDef(
    "api",
    "the served OpenAPI surface of the pairing against a client contract",
    run,
    TABLES,
    ("env",),
    needs=("env",),
    without_env=lambda ctx: check_recorded(ctx.spec),
)
