"""The `workload` check: the request mix's features asked of the plugin as vLLM asks at
start-up (its in-environment job, the judging, the models its docs show)."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from vllm_plugin_release.conform import CheckDef, CheckResult, Context, Evidence
from vllm_plugin_release.conform.lib import hardwaresettings
from vllm_plugin_release.conform.lib.doctext import doc_texts
from vllm_plugin_release.conform.lib.hardwaresettings import DOCS_DEFAULT
from vllm_plugin_release.core import jobanswer
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.replay import config as replay_config
from vllm_plugin_release.replay import mix as feat
from vllm_plugin_release.replay import mix as mixes
from vllm_plugin_release.replay.mix import REQUEST_MIX_SCHEMA

WORKLOAD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "How the `workload` check asks the plugin about the request mix's "
    "features: the plugin's slower paths (vendor policy, as data) and the model it is asked "
    "for. The features themselves are [conformance.request_mix] features.",
    "additionalProperties": False,
    "properties": {
        "slow_paths": {
            "type": "array",
            "description": "The plugin's slower paths, each decided per request by a function "
            "of the plugin: predicate(sampling_params, **args) -> True when the request takes "
            "it. The replay marks those requests and prices them ([conformance.replay] "
            "cost_model.paths).",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "predicate"],
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The path's name (e.g. host sampler).",
                    },
                    "instead_of": {
                        "type": "string",
                        "minLength": 1,
                        "description": "The path a request takes otherwise (e.g. device sampler).",
                    },
                    "predicate": {
                        "type": "string",
                        "pattern": r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
                        "description": "module:attr of the plugin's function (a static method "
                        "too: module:Class.method).",
                    },
                    "args": {
                        "type": "object",
                        "description": "Keyword arguments the predicate is called with.",
                    },
                    "engine_features": {
                        "type": "array",
                        "items": {"enum": list(feat.FEATURE_KEYS)},
                        "description": "Engine-level features that put every request on this "
                        "path when the plan uses them (the spec's statement of the plugin's "
                        "code; not asked of the plugin).",
                    },
                },
            },
        },
        "architecture": {
            "type": "string",
            "minLength": 1,
            "default": "LlamaForCausalLM",
            "description": "The HF architecture of the small local model config the engine "
            "is built for (no weights).",
        },
        "model_type": {
            "type": "string",
            "minLength": 1,
            "description": "Its HF model_type (default: [conformance.replay] model_type, "
            "else llama).",
        },
        "max_model_len": {
            "type": "integer",
            "minimum": 16,
            "description": "Default: [conformance.replay] max_model_len, else 4096.",
        },
        "model": {
            "type": "string",
            "minLength": 1,
            "description": "The model looked up in the plugin's docs (default: "
            "[conformance.hardware] model).",
        },
        "model_docs": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "pattern": r"^(?!/)(?!.*\.\.)"},
            "default": list(DOCS_DEFAULT),
            "description": "Globs (relative to the plugin's root) of the docs that show the "
            "models the plugin serves.",
        },
    },
}

TABLES: dict[str, dict[str, Any]] = {"request_mix": REQUEST_MIX_SCHEMA, "workload": WORKLOAD_SCHEMA}

# The in-environment job: its request, and its answer read key by key, so a garbled
# answer is a JobFailed naming the key, never a KeyError while judging.


JOB = "workload"


class ProbeModel(NamedTuple):
    """The tiny local model every probe's engine config is built on."""

    max_model_len: int
    architecture: str
    model_type: str


class Probe(NamedTuple):
    """One probe: its id, its EngineArgs and SamplingParams kwargs (None: base config, none)."""

    id: str
    engine: dict[str, Any] | None
    params: dict[str, Any] | None


class SlowPath(NamedTuple):
    """A slow path of `[conformance.workload] slow_paths`, as the environment asks it."""

    name: str
    predicate: str  # module:attr of the plugin
    args: dict[str, Any]


@dataclass(frozen=True)
class WorkloadAnswer:
    """What inenv/workload.py saw; its objects as written, checked where read."""

    platform: str | None
    vllm_version: str | None
    hooks: dict[str, Any] | None  # hook name -> where the platform defines it
    predicates: dict[str, Any] | None  # slow path name -> where its predicate is
    base: dict[str, Any]
    probes: dict[str, dict[str, Any]]
    combos: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class WorkloadJob:
    """The request of inenv/workload.py."""

    model: ProbeModel
    probes: tuple[Probe, ...]
    combos: tuple[dict[str, Any], ...]  # the distinct request combinations, in order
    slow_paths: tuple[SlowPath, ...]
    sys_path: tuple[str, ...] = ()  # folders put first on the environment's path

    module: ClassVar[str] = JOB

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model._asdict(),
            "probes": [p._asdict() for p in self.probes],
            "combos": list(self.combos),
            "slow_paths": [p._asdict() for p in self.slow_paths],
            "sys_path": list(self.sys_path),
        }

    def parse_answer(self, answer: Any) -> WorkloadAnswer:
        return parse_answer(answer, len(self.combos))


def parse_answer(answer: Any, combos: int) -> WorkloadAnswer:
    """The answer to `combos` combinations; JobFailed naming a key not as written."""
    data = _table(answer, "")
    hooks = _optional_table(data.get("hooks"), "hooks")
    for name, where in (hooks or {}).items():
        _where(where, f"hooks.{name}")
    probes = _table(data.get("probes"), "probes")
    for pid, probe in probes.items():
        _probe(probe, f"probes.{pid}")
    found = data.get("combos")
    if not isinstance(found, list) or len(found) != combos:
        raise jobanswer.problem(JOB, "combos", found, f"a list of {combos} objects")
    for i, combo in enumerate(found):
        _paths(_table(combo, f"combos[{i}]").get("paths"), f"combos[{i}].paths")
    return WorkloadAnswer(
        jobanswer.optional_text(data.get("platform"), JOB, "platform"),
        jobanswer.optional_text(data.get("vllm_version"), JOB, "vllm_version"),
        hooks,
        _optional_table(data.get("predicates"), "predicates"),
        _base(data.get("base")),
        probes,
        tuple(found),
    )


def _table(value: object, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise jobanswer.problem(JOB, key or "(the answer)", value, "an object")
    return value


def _optional_table(value: object, key: str) -> dict[str, Any] | None:
    return None if value is None else _table(value, key)


def _where(value: object, key: str) -> None:
    """Where code is: {file, line, name} (or None)."""
    where = _optional_table(value, key)
    if where is not None:
        jobanswer.text(where.get("file"), JOB, f"{key}.file")
        line = where.get("line")
        if line is not None:
            jobanswer.count(line, JOB, f"{key}.line")


def _error(value: object, key: str) -> None:
    """An exception as data: {type, message, by, where}."""
    error = _optional_table(value, key)
    if error is not None:
        for name in ("type", "message", "by"):
            jobanswer.optional_text(error.get(name), JOB, f"{key}.{name}")
        _where(error.get("where"), f"{key}.where")


def _changes(value: object, key: str) -> None:
    """The watched settings changed: [{field, from, to, where}] (absent: none)."""
    if value is None:
        return
    if not isinstance(value, list):
        raise jobanswer.problem(JOB, key, value, "a list of changes")
    for i, change in enumerate(value):
        item = _table(change, f"{key}[{i}]")
        jobanswer.text(item.get("field"), JOB, f"{key}[{i}].field")
        for name in ("from", "to"):
            if name not in item:
                raise jobanswer.problem(JOB, f"{key}[{i}].{name}", None, "the setting's value")
        _where(item.get("where"), f"{key}[{i}].where")


def _paths(value: object, key: str) -> None:
    """Slow path name -> {taken, where} or {error} (absent: not asked)."""
    for name, said in (_optional_table(value, key) or {}).items():
        if said is not None:
            _where(_table(said, f"{key}.{name}").get("where"), f"{key}.{name}.where")


def _probe(value: object, key: str) -> None:
    probe = _table(value, key)
    engine = _optional_table(probe.get("engine"), f"{key}.engine")
    if engine is not None:
        jobanswer.optional_text(engine.get("hook"), JOB, f"{key}.engine.hook")
        _error(engine.get("error"), f"{key}.engine.error")
        _changes(engine.get("changes"), f"{key}.engine.changes")
    request = _optional_table(probe.get("request"), f"{key}.request")
    if request is not None:
        _error(request.get("error"), f"{key}.request.error")
        _changes(request.get("changes"), f"{key}.request.changes")
    _paths(probe.get("paths"), f"{key}.paths")


def _base(value: object) -> dict[str, Any]:
    """The base config's probe: how the hook fared, what it changed, what vLLM said."""
    base = _table(value, "base")
    jobanswer.optional_text(base.get("hook"), JOB, "base.hook")
    for name in ("error", "after_hook"):
        _error(base.get(name), f"base.{name}")
    _changes(base.get("changes"), "base.changes")
    warnings = base.get("warnings")
    if warnings is not None and not isinstance(warnings, list):
        raise jobanswer.problem(JOB, "base.warnings", warnings, "a list of warnings")
    for i, warning in enumerate(warnings or []):
        text = _table(warning, f"base.warnings[{i}]").get("message")
        jobanswer.text(text, JOB, f"base.warnings[{i}].message")
    _optional_table(base.get("model_classes"), "base.model_classes")
    return base


# The judging: each feature variant of a plan gets one answer, a plan its status, its
# blockers and the share of its requests on each path.


OUTCOMES = ("supported", "refused", "changed", "slow_path", "deferred")

MULTIMODAL = (
    "not asked on this runner: image inputs need a multimodal model's processor files and "
    "weights (the probe's model is a small text-only config); they are asked where such a "
    "model is served"
)

# EngineArgs keyword -> the watched engine setting it sets (inenv/workload.ENGINE_WATCH).
ENGINE_FIELDS = {
    "speculative_config": "speculative_config",
    "max_logprobs": "model_config.max_logprobs",
    "logits_processors": "model_config.logits_processors",
}
# Settings a plugin may change for every config, and the feature each bears on.
RELATED = {
    "structured_outputs_config.": "structured_output",
    "model_config.max_logprobs": "logprobs",
    "speculative_config": "speculative",
    "model_config.logits_processors": "logits_processors",
}


@dataclass(frozen=True)
class Plan:
    """One plan: the base mix (name None) or a variant; its features and requests."""

    name: str | None
    description: str
    variants: tuple[feat.Variant, ...]  # every key asked: declared + defaults
    mix: feat.FeatureMix | None  # the declared variants, per request


@dataclass
class Answer:
    outcome: str
    message: str = ""
    by: str | None = None  # plugin | vllm | spec
    where: dict[str, Any] | None = None
    path: str | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Seen:
    """What the environment reported, shared by every plan's judging."""

    answer: WorkloadAnswer  # inenv/workload.py's answer, checked
    probe_of: dict[str, str]  # variant key (`variant_key`) -> probe id
    combos: Sequence[dict[str, Any]]  # the request combinations asked, in order
    slow_paths: list[dict[str, Any]]  # [conformance.workload] slow_paths

    @property
    def base(self) -> dict[str, Any]:
        return self.answer.base

    @property
    def package(self) -> str:
        return str(self.answer.platform or "").split(".")[0]

    def probe(self, v: feat.Variant) -> dict[str, Any]:
        return self.answer.probes.get(self.probe_of.get(variant_key(v), ""), {})


def variant_key(v: feat.Variant) -> str:
    return json.dumps([v.key, dict(v.options)], sort_keys=True)


def at(where: dict[str, Any] | None) -> str:
    return f"{where['file']}:{where['line']}" if where and where.get("line") else "?"


def error_text(error: dict[str, Any]) -> str:
    return f"{error.get('type')}: {error.get('message')}"


def change_text(change: dict[str, Any]) -> str:
    return f"{change['field']} {change['from']!r} -> {change['to']!r} ({at(change.get('where'))})"


def same_stop(engine: dict[str, Any], base: dict[str, Any]) -> bool:
    """The hook stopped where it stops for the base config too (not the feature's doing)."""
    if base.get("hook") != "raised" or engine.get("hook") != "raised":
        return False
    mine, theirs = engine.get("error") or {}, base.get("error") or {}
    return mine.get("where") == theirs.get("where") and mine.get("message") == theirs.get("message")


def judge(v: feat.Variant, seen: Seen) -> Answer:
    """One variant's answer."""
    if v.key == "multimodal":
        return Answer("deferred", MULTIMODAL)
    probe = seen.probe(v)
    changed: list[dict[str, Any]] = []
    engine = probe.get("engine")
    if engine is not None:
        early = _engine_answer(engine, seen.base)
        if early is not None:
            return early
        asked = {ENGINE_FIELDS[k] for k in feat.engine_kwargs(v) if k in ENGINE_FIELDS}
        changed = [c for c in engine.get("changes", []) if c["field"] in asked]
    request = probe.get("request")
    if request is not None and not request.get("accepted"):
        return _refused_request(request, changed)
    ours = changed + [c for c in (request or {}).get("changes", []) if _by(c, seen.package)]
    if ours:
        text = "; ".join(change_text(c) for c in ours)
        return Answer(
            "changed", f"accepted, then changed: {text}", "plugin", ours[0]["where"], changes=ours
        )
    if engine is None and request is None and v.level == "request":
        return Answer("deferred", "not asked: no engine config to ask it on (see the base config)")
    return _path_answer(v, probe, seen)


def _engine_answer(engine: dict[str, Any], base: dict[str, Any]) -> Answer | None:
    """The answer the engine config gives alone (refused, not askable), or None: go on."""
    hook = engine.get("hook")
    error = engine.get("error") or {}
    if hook == "not reached":
        text = "vLLM could not build this engine config here, before asking the platform"
        return Answer("deferred", f"{text}: {error_text(error)}", "vllm", error.get("where"))
    if hook == "raised" and not same_stop(engine, base):
        return Answer("refused", error_text(error), error.get("by"), error.get("where"))
    return None


def _refused_request(request: dict[str, Any], changed: list[dict[str, Any]]) -> Answer:
    error = request.get("error") or {}
    text = f"{error_text(error)} (in {request.get('stage')})"
    if error.get("by") == "vllm" and changed:  # vLLM refuses what the plugin changed
        text += ", after the plugin changed " + "; ".join(change_text(c) for c in changed)
        return Answer("refused", text, "plugin", changed[0]["where"], changes=changed)
    return Answer("refused", text, error.get("by"), error.get("where"))


def _by(change: dict[str, Any], package: str) -> bool:
    """A request setting changed by the plugin's code (vLLM's own normalising is not)."""
    where = change.get("where") or {}
    return not where or str(where.get("file", "")).split("/")[0] == package


def _path_answer(v: feat.Variant, probe: dict[str, Any], seen: Seen) -> Answer:
    decided = []
    for path in seen.slow_paths:
        if v.key in (path.get("engine_features") or ()):
            text = (
                f"every request, while the engine runs with it ([conformance.workload] "
                f"slow_paths {path['name']!r} engine_features: the spec's statement of the "
                "plugin's code, not asked of the plugin)"
            )
            return Answer("slow_path", text, "spec", path=path["name"])
        said = (probe.get("paths") or {}).get(path["name"]) or {}
        if "error" in said:
            text = f"{path['predicate']} raised {said['error']}: its path is not known"
            return Answer("deferred", text, "plugin")
        if said.get("taken"):
            text = f"{path['predicate']} sends it to the {path['name']}"
            return Answer("slow_path", text, "plugin", said.get("where"), path=path["name"])
        if said:
            decided.append((path, said))
    hooks = seen.answer.hooks or {}
    text = "accepted by check_and_update_config" + (
        " and validate_request" if v.level == "request" else ""
    )
    where = hooks.get("validate_request" if v.level == "request" else "check_and_update_config")
    for path, said in decided:
        text += f"; {path['predicate']} keeps it off the {path['name']}"
        where = said.get("where") or where
    return Answer("supported", text, "plugin", where)


@dataclass
class PlanResult:
    status: str
    rows: list[dict[str, Any]]
    paths: dict[str, Any]
    blockers: list[str]
    fails: list[str]
    warns: list[str]
    deferred: list[str]

    def summary(self) -> str:
        first = self.blockers or self.fails or self.deferred or self.warns
        return f"{self.status}: " + ("; ".join(first) if first else tally(self.rows))


def _row(v: feat.Variant, a: Answer, requests: int | None) -> dict[str, Any]:
    row = {
        "feature": v.id,
        "label": v.label(),
        "share": v.share,
        "needed": v.needed,
        "declared": v.declared,
        "outcome": a.outcome,
        "by": a.by,
        "where": at(a.where) if a.where else None,
        "message": a.message,
    }
    if requests is not None:
        row["requests"] = requests
    if a.path:
        row["path"] = a.path
    if a.changes:
        row["changes"] = a.changes
    return row


def request_paths(plan: Plan, seen: Seen) -> dict[str, Any]:
    """The share of the plan's requests on each path: the first slow path each takes (an
    engine-level feature the plan uses, named by a path's engine_features, takes all)."""
    if plan.mix is None or not seen.slow_paths:
        return {}
    used = {v.key for v in plan.mix.variants if v.needed}
    plan_combos, of_request = plan.mix.combos()
    per_combo: list[str] = []
    for combo in plan_combos:
        params = feat.combined_params([plan.mix.variants[i] for i in combo])
        said = seen.answer.combos[seen.combos.index(params)].get("paths") or {}
        name = next(
            (
                p["name"]
                for p in seen.slow_paths
                if used & set(p.get("engine_features") or ())
                or (said.get(p["name"]) or {}).get("taken")
            ),
            "default",
        )
        per_combo.append(name)
    total = len(of_request) or 1
    counts: dict[str, int] = {}
    for combo in of_request:
        counts[per_combo[combo]] = counts.get(per_combo[combo], 0) + 1
    out: dict[str, Any] = {}
    for p in seen.slow_paths:
        n = counts.get(p["name"], 0)
        out[p["name"]] = {
            "instead_of": p.get("instead_of"),
            "requests": n,
            "share": round(n / total, 4),
        }
    rest = counts.get("default", 0)
    out["default"] = {"requests": rest, "share": round(rest / total, 4)}
    return out


def judge_plan(plan: Plan, seen: Seen) -> PlanResult:
    """Every variant of `plan` answered, the paths' shares, and the plan's status."""
    counts = plan.mix.counts() if plan.mix is not None else {}
    every = len(plan.mix.per_request) if plan.mix is not None else None
    r = PlanResult("pass", [], {}, [], [], [], [])
    for v in plan.variants:
        a = judge(v, seen)
        requests = counts.get(v.id) if v.level == "request" else (every if v.needed else None)
        r.rows.append(_row(v, a, requests))
        said = f"{v.label()}: {a.outcome.replace('_', ' ')}" + (
            f" at {at(a.where)}" if a.where else ""
        )
        if a.outcome == "refused" and v.needed:
            r.blockers.append(
                f"needs {v.label()} for {share_text(v, requests)}, which the plugin refuses: "
                f"{a.message} ({at(a.where)})"
            )
            r.fails.append(f"{said}: needed by the plan ({share_text(v, requests)})")
        elif a.outcome == "changed":
            r.fails.append(f"{said}: {a.message}")
        elif a.outcome == "deferred" and v.needed:
            r.deferred.append(f"{v.label()}: {a.message}")
    related_notes(r.rows, seen.base)
    r.paths = request_paths(plan, seen)
    r.warns = [
        f"{pct(m['share'])} of requests {path_words(name, m)}"
        for name, m in r.paths.items()
        if name != "default" and m["requests"]
    ]
    r.status = "fail" if r.fails else "deferred" if r.deferred else "warn" if r.warns else "pass"
    return r


def share_text(v: feat.Variant, requests: int | None) -> str:
    if v.level == "engine":
        return "every request"
    return f"{pct(v.share)} of requests" + (f" ({requests})" if requests is not None else "")


def pct(share: float | None) -> str:
    return f"{(share or 0) * 100:.1f}%"


def path_words(name: str, mark: dict[str, Any]) -> str:
    if mark.get("instead_of"):
        return f"leave the {mark['instead_of']} for the {name}"
    return f"take the {name}"


def tally(rows: list[dict[str, Any]]) -> str:
    """`7 supported, 1 refused (speculative), 3 slow path (logprobs, ...)`."""
    parts = []
    for outcome in OUTCOMES:
        names = [r["feature"] for r in rows if r["outcome"] == outcome]
        if names:
            shown = "" if outcome == "supported" else f" ({', '.join(names)})"
            parts.append(f"{len(names)} {outcome.replace('_', ' ')}{shown}")
    return ", ".join(parts)


def related_notes(rows: list[dict[str, Any]], base: dict[str, Any]) -> None:
    """Note the settings the platform changes for every config on the feature each bears on."""
    for change in base.get("changes", []):
        key = next((k for p, k in RELATED.items() if change["field"].startswith(p)), None)
        for row in rows:
            if key and row["feature"].split("[")[0] == key:
                note = f"the platform sets {change_text(change)} for every engine config"
                row.setdefault("notes", []).append(note)


def base_stop(base: dict[str, Any]) -> tuple[str, str] | None:
    """(short, full) of what stops every config here and why; None when the base completed."""
    hook = base.get("hook")
    error = base.get("error") if hook != "returned" else base.get("after_hook")
    if not error:
        return None
    causes = [w["message"] for w in base.get("warnings", []) if "rror" in w["message"]]
    cause = causes[0].rpartition(": ")[2] if causes else error.get("message", "")
    who = "the platform hook stops" if hook == "raised" else "vLLM stops after the platform hook"
    if hook == "not reached":
        who = "vLLM stops before the platform hook"
    short = (
        f"{who} at {at(error.get('where'))} for every engine config here ({cause}): the rest "
        "is deferred to the hardware runner"
    )
    full = f"{who} here for every engine config at {at(error.get('where'))}: {error_text(error)}"
    if causes:
        full += f" ({causes[0]})"
    classes = ", ".join(f"{a} from {m}" for a, m in (base.get("model_classes") or {}).items())
    if classes:
        full += f"; the model class: {classes}"
    full += "; the features were asked up to that line, the rest needs the hardware runner's image"
    return short, full


# The models the plugin's docs show it serving (pure: the docs read as text).


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
class DocModel:
    model: str
    file: str
    line: int


def _table_models(lines: list[str], rel: str) -> list[DocModel]:
    """Ids in the Model column of a Markdown table (its header names the column)."""
    seen: list[DocModel] = []
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
                DocModel(m, rel, number)
                for m in re.findall(rf"(?<![\w/]){_ID}(?![\w/])", cells[column])
            ]
    return seen


def read_doc(rel: str, text: str) -> list[DocModel]:
    """The model ids one doc shows (pure)."""
    lines = text.splitlines()
    seen: list[DocModel] = []
    for number, line in enumerate(lines, start=1):
        for pattern in _CONTEXTS:
            seen += [DocModel(m.group(1), rel, number) for m in pattern.finditer(line)]
        if "--model" in line:
            seen += [DocModel(m.group(1), rel, number) for m in _DEFAULT.finditer(line)]
    seen += _table_models(lines, rel)
    return [s for s in seen if not _NOT_MODELS.search(s.model)]


def read_models(root: Path, patterns: list[str] | None = None) -> tuple[list[str], list[DocModel]]:
    """(the doc files read, every model id seen), bounded like the other doc readers."""
    texts = doc_texts(root, list(patterns or DOCS_DEFAULT))
    return [rel for rel, _ in texts], [s for rel, text in texts for s in read_doc(rel, text)]


def table(seen: list[DocModel]) -> list[dict[str, Any]]:
    """One row per model id (first spelling kept), where the docs show it (3 places)."""
    rows: dict[str, dict[str, Any]] = {}
    for s in sorted(seen, key=lambda s: (s.file, s.line)):
        where = rows.setdefault(s.model.lower(), {"model": s.model, "where": []})["where"]
        if len(where) < 3 and f"{s.file}:{s.line}" not in where:
            where.append(f"{s.file}:{s.line}")
    return sorted(rows.values(), key=lambda r: str(r["model"]).lower())


def coverage(model: str | None, rows: list[dict[str, Any]]) -> dict[str, object]:
    """Whether the spec's model is in the docs' table: {model, listed, where | nearest}."""
    if not model:
        return {"model": None, "listed": None}
    by = {str(r["model"]).lower(): r for r in rows}
    hit = by.get(model.lower())
    if hit:
        return {"model": model, "listed": True, "where": hit["where"]}
    nearest = difflib.get_close_matches(model.lower(), list(by), n=3, cutoff=0.6)
    return {"model": model, "listed": False, "nearest": [str(by[n]["model"]) for n in nearest]}


NAME = "workload"
TIMEOUT_S = 900.0


def plans(spec: Any) -> list[Plan]:
    """The base plan and the variant plans of the spec's request mix."""
    tables = mixes.spec_plans(spec)
    if not tables:
        return [Plan(None, "no request mix", tuple(feat.asked([])), None)]
    request_mix = mixes.from_spec(spec)
    count, seed = len(request_mix), request_mix.seed
    return [
        Plan(
            t.name,
            t.description or ("the request mix" if t.name is None else t.name),
            tuple(feat.asked(feat.parse(t.features))),
            feat.feature_mix(t.features, count, seed),
        )
        for t in tables
    ]


def build_request(
    spec: Any, all_plans: list[Plan], sys_path: tuple[str, ...] = ()
) -> tuple[WorkloadJob, dict[str, str]]:
    """The job (one probe per distinct variant, the distinct combos) and variant key -> probe id."""
    options = spec.conformance(NAME) or {}
    replay = replay_config.declared_model(spec)
    probes: list[Probe] = []
    ids: dict[str, str] = {}
    for plan in all_plans:
        for v in plan.variants:
            if variant_key(v) in ids or v.key == "multimodal":
                continue
            ids[variant_key(v)] = pid = f"p{len(ids)}"
            params = None if v.level == "engine" else feat.combined_params([v])
            probes.append(Probe(pid, feat.engine_kwargs(v) or None, params))
    combos: list[dict[str, Any]] = []
    for plan in all_plans:
        for combo in plan.mix.combos()[0] if plan.mix is not None else []:
            params = feat.combined_params([plan.mix.variants[i] for i in combo])
            if params not in combos:
                combos.append(params)
    model = ProbeModel(
        int(options.get("max_model_len") or replay.max_model_len),
        options.get("architecture", "LlamaForCausalLM"),
        options.get("model_type") or replay.model_type,
    )
    slow = tuple(
        SlowPath(p["name"], p["predicate"], dict(p.get("args") or {}))
        for p in options.get("slow_paths") or []
    )
    return WorkloadJob(model, tuple(probes), tuple(combos), slow, sys_path), ids


def model_coverage(spec: Any, plugin_root: Path) -> dict[str, Any]:
    """The models the plugin's docs show and whether the spec's model is among them."""
    options = spec.conformance(NAME) or {}
    hardware = hardwaresettings.declared(spec)
    model = options.get("model") or (hardware.model if hardware is not None else None)
    files, seen = read_models(plugin_root, options.get("model_docs"))
    rows = table(seen)
    return {"docs": files, "table": rows, **coverage(model, rows)}


def coverage_finding(cov: dict[str, Any]) -> tuple[str | None, Evidence]:
    """(a warning or None, the evidence) of the model coverage signal."""
    model, rows = cov.get("model"), cov.get("table") or []
    if not model:
        note = f"the plugin's docs show {len(rows)} model(s); the spec names no model to look up"
        return None, Evidence(note=note, source="plugin")
    if cov.get("listed"):
        file, _, line = cov["where"][0].rpartition(":")
        note = f"model {model} is in the plugin's docs ({len(rows)} models shown)"
        return None, Evidence(note=note, file=file, line=int(line), source="plugin")
    nearest = ", ".join(cov.get("nearest") or []) or "none close"
    warning = (
        f"the spec's model {model} is not among the {len(rows)} models the plugin's docs show "
        f"(nearest: {nearest})"
    )
    return warning, Evidence(note=warning, source="plugin")


def runtime_python(env: EnvRecord) -> tuple[Path, Path | None] | str:
    """(python, stand-in overlay or None) where the platform can activate; else why not."""
    runtime = env.runtime
    if env.runtime_present:
        return env.python, None
    stand_in = env.stand_in_python
    if stand_in is not None:
        return env.python, stand_in.parent.parent
    return (
        f"the plugin's platform activates only with its runtime ({runtime.name}), "
        f"{runtime.status} here: {runtime.reason}"
    )


def run(ctx: Context, *, sys_path: tuple[str, ...] = ()) -> CheckResult:
    """Ask the plugin in the pairing env (`sys_path`: put first, as `vpr replay --sys-path`)."""
    from vllm_plugin_release.edges.envrun import run_in_env

    where = runtime_python(ctx.env)
    all_plans = plans(ctx.spec)
    cov = model_coverage(ctx.spec, ctx.plugin_root)
    if isinstance(where, str):
        evidence = [Evidence(note=where, source="env")]
        return CheckResult(
            NAME, "deferred", f"not asked: {where}", evidence, details={"models": cov}
        )
    python, overlay = where
    job, ids = build_request(ctx.spec, all_plans, tuple(str(p) for p in sys_path))
    answer = run_in_env(python, job, overlay=overlay, timeout=TIMEOUT_S)
    slow_paths = (ctx.spec.conformance(NAME) or {}).get("slow_paths") or []
    seen = Seen(answer, ids, job.combos, slow_paths)
    return assess(seen, all_plans, ctx.env.platform_class, cov)


THRESHOLD = {
    "refused, needed by the plan": "fail",
    "changed or dropped": "fail",
    "needed, not askable here": "deferred",
    "slow path for some requests; the platform hook stops here; model not in the docs": "warn",
}


def assess(
    seen: Seen, all_plans: list[Plan], platform_class: str | None, cov: dict[str, Any]
) -> CheckResult:
    """The CheckResult from what the environment saw (pure)."""
    platform = seen.answer.platform
    if platform_class and platform != platform_class:
        why = (
            f"vLLM resolved {platform}, not the plugin's platform {platform_class}: nothing "
            "was asked of the plugin (see the environment check)"
        )
        return CheckResult(NAME, "deferred", why, [Evidence(note=why, source="env")])
    judged = {p.name: judge_plan(p, seen) for p in all_plans}
    base = judged[None]
    stop = base_stop(seen.base)
    warning, cov_evidence = coverage_finding(cov)
    warns = base.warns + ([stop[0]] if stop else []) + ([warning] if warning else [])
    status = base.status if base.status in ("fail", "deferred") else ("warn" if warns else "pass")
    evidence = _evidence(base, judged)
    evidence += [Evidence(note=stop[1], source="env")] if stop else []
    evidence.append(cov_evidence)
    details = {
        "platform": platform,
        "vllm_version": seen.answer.vllm_version,
        "hooks": seen.answer.hooks,
        "predicates": seen.answer.predicates,
        "features": base.rows,
        "paths": base.paths,
        "blockers": base.blockers,
        "failures": base.fails,
        "warnings": warns,
        "deferred": base.deferred + ([stop[1]] if stop else []),
        "plans": {
            p.name: {
                "description": p.description,
                "status": judged[p.name].status,
                "summary": judged[p.name].summary(),
                "blockers": judged[p.name].blockers,
                "features": judged[p.name].rows,
                "paths": judged[p.name].paths,
            }
            for p in all_plans
            if p.name is not None
        },
        "models": cov,
    }
    summary = _summary(platform, base, judged, warns)
    return CheckResult(NAME, status, summary, evidence, dict(THRESHOLD), details)  # type: ignore[arg-type]


def _summary(
    platform: str | None, base: PlanResult, judged: dict[str | None, PlanResult], warns: list[str]
) -> str:
    head = base.fails or base.deferred
    text = "; ".join(head) + ("; " if head else "")
    text += f"{len(base.rows)} features asked of {platform}: {tally(base.rows)}"
    if warns:
        text += "; " + "; ".join(warns)
    for name, r in judged.items():
        if name is not None:
            text += f"; plan {name}: {r.summary()}"
    return text


ORDER = {o: i for i, o in enumerate(("changed", "refused", "deferred", "slow_path", "supported"))}


def _evidence(base: PlanResult, judged: dict[str | None, PlanResult]) -> list[Evidence]:
    out = [
        Evidence(note=f"plan {name}: {b}", source="plugin")
        for name, r in judged.items()
        if name is not None
        for b in r.blockers
    ]
    for row in sorted(base.rows, key=lambda r: (ORDER[r["outcome"]], not r["needed"])):
        file, _, line = (row["where"] or "").rpartition(":")
        need = f"needed: {pct(row['share'])} of requests" if row["needed"] else "not needed"
        note = f"{row['label']}: {row['outcome'].replace('_', ' ')}: {row['message']} [{need}]"
        if row.get("notes"):
            note += "; " + "; ".join(row["notes"])
        line_no = int(line) if line.isdigit() else None
        out.append(Evidence(note, file or None, line_no, source=row["by"] or "plugin"))
    return out


CHECK = CheckDef(
    "workload",
    "the request mix's features (speculative decoding, sampling on the device or the "
    "host, structured output, ...) asked of the plugin as vLLM asks at startup; the "
    "models its docs show",
    run,
    TABLES,
    ("plugin_root", "env"),
    needs=("env", "runtime"),
)
