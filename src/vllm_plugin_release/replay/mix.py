"""Request mixes: the workload a fleet expects, generated the same way every time (one
seeded stream per distribution) or read from a trace file, and the workload features its
requests ask for (`features`), the same keys for every vendor."""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from vllm_plugin_release.buildspec.model import Spec, array, integer, number, string, table
from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:  # the spec loader's module loads jsonschema: only its types here
    from vllm_plugin_release.buildspec.load import FeatureOption, FeaturesTable

# vLLM's default `max_logprobs` (ModelConfig): a plan that asks for more sets the engine's.
VLLM_MAX_LOGPROBS = 20

_SHARE = {
    "type": "number",
    "minimum": 0,
    "maximum": 1,
    "description": "Share of the requests (0 to 1) that use it; 0 = asked of the plugin, not "
    "needed by the plan.",
}
_INT = {"type": "integer"}
_NUM = {"type": "number"}


class Feature(NamedTuple):
    """A catalogue entry: what it is, its options' schema, its level, its name, its label."""

    what: str
    options: dict[str, Any]
    level: str
    name: str
    detail: str


CATALOGUE: dict[str, Feature] = {
    "speculative": Feature(
        "Speculative decoding, configured for the engine (every request runs with it). "
        "`share` defaults to 1.",
        {
            "method": string(
                "vLLM's speculative method (`--speculative-config` method); "
                "ngram needs no draft model, so it is asked on any runner.",
                minLength=1,
                default="ngram",
            ),
            "num_tokens": integer("Speculative tokens per step.", minimum=1, default=4),
        },
        "engine",
        "speculative decoding",
        "{method}, {num_tokens} tokens",
    ),
    "logprobs": Feature(
        "Log probabilities of the sampled tokens.",
        {
            "top": integer(
                "Top-N alternatives per token (0: the sampled token only); above "
                f"{VLLM_MAX_LOGPROBS} the engine's max_logprobs is raised to it.",
                minimum=0,
                default=5,
            )
        },
        "request",
        "logprobs",
        "top {top}",
    ),
    "prompt_logprobs": Feature(
        "Log probabilities of the prompt tokens.",
        {"top": integer("Top-N per prompt token.", minimum=0, default=1)},
        "request",
        "prompt logprobs",
        "top {top}",
    ),
    "penalties": Feature(
        "Repetition penalties.",
        {
            "presence": {**_NUM, "minimum": -2, "maximum": 2, "default": 0.5},
            "frequency": {**_NUM, "minimum": -2, "maximum": 2, "default": 0.5},
            "repetition": {**_NUM, "exclusiveMinimum": 0, "maximum": 2, "default": 1.1},
        },
        "request",
        "penalties",
        "presence {presence}, frequency {frequency}, repetition {repetition}",
    ),
    "sampling": Feature(
        "Random sampling instead of greedy (requests without it are greedy).",
        {
            "temperature": {**_NUM, "exclusiveMinimum": 0, "default": 0.8},
            "top_p": {**_NUM, "exclusiveMinimum": 0, "maximum": 1, "default": 0.95},
            "top_k": integer("-1: off.", minimum=-1, default=50),
            "min_p": {**_NUM, "minimum": 0, "maximum": 1, "default": 0.0},
        },
        "request",
        "random sampling",
        "temperature {temperature}, top_p {top_p}, top_k {top_k}",  # min_p when set
    ),
    "seed": Feature(
        "A per-request seed.",
        {"value": {**_INT, "minimum": 0, "default": 1234}},
        "request",
        "seeds",
        "seed {value}",
    ),
    "token_masks": Feature(
        "Token-level masks and biases.",
        {
            "kind": {
                "enum": ["logit_bias", "allowed_token_ids", "bad_words"],
                "default": "logit_bias",
            }
        },
        "request",
        "token masks",
        "{kind}",
    ),
    "structured_output": Feature(
        "Structured output (a grammar mask on every step).",
        {
            "kind": {
                "enum": ["json", "regex", "choice", "grammar"],
                "default": "json",
                "description": "A JSON schema, a regex, a choice list or an EBNF grammar.",
            }
        },
        "request",
        "structured output",
        "{kind}",
    ),
    "logits_processors": Feature(
        "Custom logits processors (configured for the engine, used by these requests).",
        {
            "class": string(
                "The processor, module:Class, installed in the pairing "
                "environment; default a no-op vllm LogitsProcessor of the check.",
                pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
            )
        },
        "request",
        "custom logits processors",
        "",  # the class, or a no-op processor
    ),
    "multimodal": Feature(
        "Image inputs.",
        {
            "images": integer("Images per request.", minimum=1, default=1),
            "width": {**_INT, "minimum": 1, "default": 640},
            "height": {**_INT, "minimum": 1, "default": 480},
        },
        "request",
        "image inputs",
        "{images} image(s) {width}x{height}",
    ),
    "n": Feature(
        "Several completions per request (n > 1; sampled with temperature 1 unless the "
        "request also has a `sampling` variant).",
        {"value": {**_INT, "minimum": 2, "default": 2}},
        "request",
        "n > 1",
        "n = {value}",
    ),
}
FEATURE_KEYS: tuple[str, ...] = tuple(CATALOGUE)
ENGINE_LEVEL = frozenset(k for k, f in CATALOGUE.items() if f.level == "engine")


def _variant_schema(key: str) -> dict[str, Any]:
    options = CATALOGUE[key].options
    return {
        "type": "object",
        "description": CATALOGUE[key].what,
        "additionalProperties": False,
        "required": [] if key in ENGINE_LEVEL else ["share"],
        "properties": {
            "share": {**_SHARE, **({"default": 1} if key in ENGINE_LEVEL else {})},
            **options,
        },
    }


FEATURES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The workload features the requests use, with the share of requests for "
    "each (the `workload` check asks the plugin about every one; the replay marks the "
    "requests a slower path takes). Each key: one table, or an array of tables (variants "
    "of one key are exclusive: their shares add up to at most 1).",
    "additionalProperties": False,
    "properties": {
        key: {
            "description": CATALOGUE[key].what + " One table or an array of tables.",
            "anyOf": [
                _variant_schema(key),
                {"type": "array", "minItems": 1, "items": _variant_schema(key)},
            ],
        }
        for key in FEATURE_KEYS
    },
}

PLANS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Variant plans: each NAME holds `features` put over the base mix's, key by "
    "key (a key given replaces the base's). The `workload` check answers each plan, and "
    "the scorecard gives each its verdict.",
    "propertyNames": {"pattern": r"^[a-z][a-z0-9_-]{0,39}$"},
    "additionalProperties": {
        "type": "object",
        "additionalProperties": False,
        "required": ["features"],
        "properties": {
            "description": {"type": "string", "description": "What the plan is."},
            "features": FEATURES_SCHEMA,
        },
    },
}


class VariantJson(TypedDict):
    """A variant as replay.json and the workload evidence write it (`Variant.to_json`)."""

    id: str
    key: str
    share: float
    declared: bool
    needed: bool
    level: str
    options: dict[str, FeatureOption]


@dataclass(frozen=True)
class Variant:
    """One variant of a feature key, its options with every default written out."""

    key: str
    index: int  # position in the key's array (0 for a single table)
    share: float
    options: Mapping[str, FeatureOption] = field(default_factory=dict)
    declared: bool = True  # False: asked of the plugin with the defaults, not in the plan
    several: bool = False  # the key holds an array of variants

    @property
    def id(self) -> str:
        return f"{self.key}[{self.index}]" if self.several else self.key

    @property
    def needed(self) -> bool:
        return self.declared and self.share > 0

    @property
    def level(self) -> str:
        return CATALOGUE[self.key].level

    def label(self) -> str:
        """`logprobs (top 5)`: what the feature is and what the variant asks for."""
        feature, o = CATALOGUE[self.key], self.options
        detail = feature.detail.format(**o) or o.get("class") or "a no-op processor"
        if self.key == "sampling" and o["min_p"]:
            detail += f", min_p {o['min_p']}"
        index = f" #{self.index + 1}" if self.several else ""
        return f"{feature.name}{index} ({detail})"

    def to_json(self) -> VariantJson:
        return {
            "id": self.id,
            "key": self.key,
            "share": self.share,
            "declared": self.declared,
            "needed": self.needed,
            "level": self.level,
            "options": dict(self.options),
        }


def _defaults(key: str) -> dict[str, FeatureOption]:
    return {k: v["default"] for k, v in CATALOGUE[key].options.items() if "default" in v}


def parse(features: FeaturesTable | None) -> list[Variant]:
    """The declared variants of a (validated) features table, in catalogue order."""
    out: list[Variant] = []
    for key in FEATURE_KEYS:
        value = (features or {}).get(key)
        if value is None:
            continue
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            options = {**_defaults(key), **{k: v for k, v in item.items() if k != "share"}}
            share = float(item.get("share", 1.0 if key in ENGINE_LEVEL else 0.0))
            out.append(Variant(key, index, share, options, True, isinstance(value, list)))
    return out


def asked(declared: list[Variant]) -> list[Variant]:
    """Every catalogue key: the plan's variants, and the defaults (not needed) for the rest."""
    have = {v.key for v in declared}
    extra = [Variant(k, 0, 0.0, _defaults(k), False) for k in FEATURE_KEYS if k not in have]
    order = {k: i for i, k in enumerate(FEATURE_KEYS)}
    return sorted([*declared, *extra], key=lambda v: (order[v.key], v.index))


def assign(variants: Sequence[Variant], count: int, seed: int) -> list[tuple[int, ...]]:
    """Per request, the indices (into `variants`) of the variants it uses: per key, a seeded
    shuffle of the requests, the first round(share x count) to the key's first variant, the
    next to its second, and so on. Engine-level variants are not per request."""
    chosen: list[list[int]] = [[] for _ in range(count)]
    by_key: dict[str, list[int]] = {}
    for i, v in enumerate(variants):
        if v.level == "request" and v.share > 0:
            by_key.setdefault(v.key, []).append(i)
    for key, indices in by_key.items():
        order = list(range(count))
        random.Random(f"vpr-request-mix:{seed}:features:{key}").shuffle(order)
        at = 0
        for i in indices:
            take = round(variants[i].share * count)
            for request in order[at : at + take]:
                chosen[request].append(i)
            at += take
    return [tuple(sorted(c)) for c in chosen]


# What vLLM is given.

STRUCTURED = {
    "json": {
        "json": {
            "type": "object",
            "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
            "required": ["answer"],
        }
    },
    "regex": {"regex": "[A-Z][a-z]{2,10}"},
    "choice": {"choice": ["yes", "no", "maybe"]},
    "grammar": {"grammar": 'root ::= "yes" | "no"'},
}
TOKEN_MASKS = {
    "logit_bias": {"logit_bias": {"5": -100.0, "7": 2.0}},
    "allowed_token_ids": {"allowed_token_ids": [3, 4, 5, 6, 7, 8, 9, 10]},
    "bad_words": {"bad_words": ["t5"]},
}
# The probe's own processor (a no-op vLLM LogitsProcessor defined by inenv/workload.py).
PROBE_PROCESSOR = "probe"


class StructuredOutputs(TypedDict, total=False):
    """vLLM's `StructuredOutputsParams`, one of them."""

    json: Mapping[str, Any]  # a JSON Schema document
    regex: str
    choice: list[str]
    grammar: str


class SamplingKwargs(TypedDict, total=False):
    """`SamplingParams` keyword arguments (JSON-ready): the ones a variant sets."""

    temperature: float
    logprobs: int
    prompt_logprobs: int
    presence_penalty: float
    frequency_penalty: float
    repetition_penalty: float
    top_p: float
    top_k: int
    min_p: float
    seed: int
    logit_bias: dict[str, float]
    allowed_token_ids: list[int]
    bad_words: list[str]
    structured_outputs: StructuredOutputs
    n: int


class SpeculativeConfig(TypedDict):
    method: str
    num_speculative_tokens: int


class EngineKwargs(TypedDict, total=False):
    """`EngineArgs` keyword arguments (JSON-ready): the ones a variant needs."""

    speculative_config: SpeculativeConfig
    max_logprobs: int
    logits_processors: list[str]


def request_params(v: Variant) -> SamplingKwargs:
    """`SamplingParams` keyword arguments for a request with variant `v` (JSON-ready)."""
    o = v.options
    return {
        "speculative": lambda: {},
        "logprobs": lambda: {"logprobs": o["top"]},
        "prompt_logprobs": lambda: {"prompt_logprobs": o["top"]},
        "penalties": lambda: {
            "presence_penalty": o["presence"],
            "frequency_penalty": o["frequency"],
            "repetition_penalty": o["repetition"],
        },
        "sampling": lambda: {k: o[k] for k in ("temperature", "top_p", "top_k", "min_p")},
        "seed": lambda: {"seed": o["value"]},
        "token_masks": lambda: json.loads(json.dumps(TOKEN_MASKS[o["kind"]])),
        "structured_output": lambda: {"structured_outputs": STRUCTURED[o["kind"]]},
        "logits_processors": lambda: {},
        "multimodal": lambda: {},
        "n": lambda: {"n": o["value"]},
    }[v.key]()


def engine_kwargs(v: Variant) -> EngineKwargs:
    """`EngineArgs` keyword arguments the variant needs (JSON-ready); {} for most."""
    o = v.options
    if v.key == "speculative":
        return {
            "speculative_config": {"method": o["method"], "num_speculative_tokens": o["num_tokens"]}
        }
    if v.key in ("logprobs", "prompt_logprobs") and o["top"] > VLLM_MAX_LOGPROBS:
        return {"max_logprobs": o["top"]}
    if v.key == "logits_processors":
        return {"logits_processors": [o.get("class") or PROBE_PROCESSOR]}
    return {}


def combined_params(variants: Sequence[Variant]) -> SamplingKwargs:
    """The SamplingParams of a request that uses all of `variants`: greedy (temperature 0)
    unless it samples; n > 1 without a `sampling` variant samples at temperature 1 (vLLM
    refuses n > 1 with greedy sampling)."""
    params: SamplingKwargs = {"temperature": 0.0}
    for v in variants:
        params.update(request_params(v))
    if any(v.key == "n" for v in variants) and not any(v.key == "sampling" for v in variants):
        params["temperature"] = 1.0
    return params


@dataclass(frozen=True)
class FeatureMix:
    """The features of a mix: the variants and, per request, which of them it uses."""

    variants: tuple[Variant, ...]
    per_request: tuple[tuple[int, ...], ...]

    def combos(self) -> tuple[list[tuple[int, ...]], list[int]]:
        """The distinct combinations of variants (first-seen order) and each request's."""
        index: dict[tuple[int, ...], int] = {}
        of_request = []
        for combo in self.per_request:
            of_request.append(index.setdefault(combo, len(index)))
        return list(index), of_request

    def counts(self) -> dict[str, int]:
        """Requests per variant id."""
        out = {v.id: 0 for v in self.variants if v.level == "request"}
        for combo in self.per_request:
            for i in combo:
                out[self.variants[i].id] += 1
        return out

    def summary(self) -> dict[str, VariantUse]:
        """Per variant id: its share, the requests that use it, its options."""
        total = len(self.per_request) or 1
        counts = self.counts()
        return {
            v.id: VariantUse(
                v.share, counts.get(v.id, total if v.level == "engine" else 0), v.options
            )
            for v in self.variants
        }


class VariantUse(NamedTuple):
    """How a mix uses a variant: its share, the requests that do, its options."""

    share: float
    requests: int
    options: Mapping[str, FeatureOption]

    def to_json(self) -> dict[str, float | int | dict[str, FeatureOption]]:
        return {"share": self.share, "requests": self.requests, "options": dict(self.options)}


def feature_mix(features: FeaturesTable | None, count: int, seed: int) -> FeatureMix | None:
    """The declared features of a mix, assigned to its `count` requests (None: none)."""
    variants = parse(features)
    if not variants:
        return None
    return FeatureMix(tuple(variants), tuple(assign(variants, count, seed)))


# The mix itself.

TRACE_COLUMNS = ("arrival_time", "prompt_tokens", "output_tokens")

_DIST_DESCRIPTION = (
    'A token-count distribution: {dist = "fixed", value = N}, {dist = "uniform", '
    'min = N, max = M}, {dist = "lognormal", median = X, sigma = S, min = N, max = M}, '
    '{dist = "empirical", values = [..]} or {dist = "empirical"} (sampled from the '
    'trace\'s column), or {dist = "trace"} (row by row from the trace).'
)


def _dist_schema(what: str) -> dict[str, Any]:
    return table(
        f"{what}. {_DIST_DESCRIPTION}",
        {
            "dist": {
                "enum": ["fixed", "uniform", "lognormal", "empirical", "trace"],
                "description": "Distribution kind.",
            },
            "value": integer("fixed: the value.", minimum=1),
            "min": integer("Lower bound (inclusive).", minimum=1),
            "max": integer("Upper bound (inclusive).", minimum=1),
            "median": number("lognormal: median (exp of the log-mean).", exclusiveMinimum=0),
            "sigma": number("lognormal: standard deviation of the log.", minimum=0),
            "values": array(
                "empirical: the values to sample from (with replacement).",
                {"type": "integer", "minimum": 1},
                minItems=1,
            ),
        },
        ["dist"],
    )


REQUEST_MIX_SCHEMA = table(
    "The request mix the fleet expects (the pilot plan), used by the scheduler "
    "replay and the live mixed-load test. Same seed, same mix, every time.",
    {
        "file": string(
            "A TOML or JSON file (relative to the project root) holding this "
            "table instead; keys given here override the file's."
        ),
        "requests": integer("Number of requests; default: every row of `trace`.", minimum=1),
        "seed": integer("Random seed (default 0).", minimum=0),
        "trace": string(
            "A recorded trace (CSV with header arrival_time,prompt_tokens,"
            "output_tokens, or JSON Lines with those keys), relative to the project root."
        ),
        "arrival": table(
            'Arrival process: {process = "poisson", rate = R} (requests per '
            'second), {process = "bursts", size = N, interval = S} (N requests at once every '
            'S seconds), {process = "trace"} (the trace\'s arrival times) or '
            '{process = "at_once"} (all requests at time 0).',
            {
                "process": {
                    "enum": ["poisson", "bursts", "trace", "at_once"],
                    "description": "Arrival process kind.",
                },
                "rate": number("poisson: mean arrivals per second.", exclusiveMinimum=0),
                "size": integer("bursts: burst size.", minimum=1),
                "interval": number("bursts: seconds between bursts.", exclusiveMinimum=0),
            },
            ["process"],
        ),
        "prompt_tokens": _dist_schema("Prompt length distribution"),
        "output_tokens": _dist_schema("Output length distribution"),
        "features": FEATURES_SCHEMA,
        "plans": PLANS_SCHEMA,
    },
)


@dataclass(frozen=True)
class TraceRow:
    arrival_time: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class RequestMix:
    """One request per index: arrival time (s, from 0), prompt and output token counts."""

    arrival: tuple[float, ...]
    prompt: tuple[int, ...]
    output: tuple[int, ...]
    seed: int
    description: dict[str, Any] = field(default_factory=dict)
    # The workload features the requests use (`features`), None when the mix declares none.
    features: FeatureMix | None = None

    def __len__(self) -> int:
        return len(self.arrival)

    def digest(self) -> str:
        """sha256 of the mix itself: equal digests, identical workloads."""
        parts: list[Any] = [self.arrival, self.prompt, self.output]
        if self.features is not None:  # a mix without features keeps its digest
            parts.append([[v.to_json() for v in self.features.variants], self.features.per_request])
        text = json.dumps(parts, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def summary(self) -> dict[str, Any]:
        def stats(values: Sequence[int]) -> dict[str, Any]:
            if not values:
                return {}
            ordered = sorted(values)
            return {
                "min": ordered[0],
                "median": ordered[len(ordered) // 2],
                "mean": round(sum(ordered) / len(ordered), 3),
                "max": ordered[-1],
                "total": sum(ordered),
            }

        out = {
            **self.description,
            "requests": len(self),
            "seed": self.seed,
            "duration_s": round(max(self.arrival, default=0.0), 6),
            "prompt_tokens": stats(self.prompt),
            "output_tokens": stats(self.output),
            "sha256": self.digest(),
        }
        if self.features is not None:
            out["features"] = {k: u.to_json() for k, u in self.features.summary().items()}
        return out

    def limit(self, count: int) -> RequestMix:
        """The first `count` requests (by index)."""
        features = self.features
        if features is not None:
            features = FeatureMix(features.variants, features.per_request[:count])
        return RequestMix(
            self.arrival[:count],
            self.prompt[:count],
            self.output[:count],
            self.seed,
            {**self.description, "limited_to": count},
            features,
        )


@dataclass(frozen=True)
class Origin:
    """Where a table came from, to name file, line and key in errors."""

    file: str
    text: str | None = None
    prefix: tuple[str, ...] = ("conformance", "request_mix")

    def where(self, key: str) -> str:
        line = None
        if self.text is not None:
            from vllm_plugin_release.buildspec.model import locate

            line = locate(self.text, (*self.prefix, *key.split(".")))
        table = ".".join(self.prefix)
        place = f"{self.file}:{line}" if line else self.file
        return f"{place}: [{table}] {key}" if table else f"{place}: {key}"


def load_table(table: dict[str, Any], root: Path, origin: Origin) -> tuple[dict[str, Any], Origin]:
    """Merge the file named by `file` (if any) under `table`; return (table, origin)."""
    if "file" not in table:
        return dict(table), origin
    path = Path(table["file"])
    path = path if path.is_absolute() else root / path
    hint = "give a TOML or JSON file relative to the project root"
    try:
        text = bounded.read_text(path, bounded.MAX_DOCUMENT, "request-mix file")
    except BadInput as exc:
        raise BadInput(f"{origin.where('file')}: {exc.message}", hint=hint) from None
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import tomlkit

            data = tomlkit.parse(text).unwrap()
    except Exception as exc:  # json and tomlkit parse errors, said with the file name
        raise BadInput(f"{path}: not valid {path.suffix.lstrip('.') or 'TOML'}: {exc}") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a table of request-mix keys")
    # Accept the keys at the top level or under [request_mix] / [conformance.request_mix].
    for key in ("conformance", "request_mix"):
        if isinstance(data.get(key), dict):
            data = data[key]
    if "file" in data:
        raise BadInput(f"{path}: a request-mix file cannot name another file")
    merged = {**data, **{k: v for k, v in table.items() if k != "file"}}
    return merged, Origin(str(path), None if path.suffix == ".json" else text, ())


def check_table(
    schema: dict[str, Any],
    table: dict[str, Any],
    origin: Origin,
    title: str,
    *,
    pattern_message: str | None = None,
) -> None:
    """Check `table` against `schema`; one BadInput naming file, line and key of each error."""
    from jsonschema import Draft202012Validator

    from vllm_plugin_release.buildspec.load import schema_errors

    lines = []
    for error in schema_errors(Draft202012Validator(schema), table):
        path = ".".join(str(p) for p in error.absolute_path) or "(table)"
        if error.validator == "additionalProperties":
            allowed = sorted(error.schema.get("properties", {}))
            extra = sorted(set(error.instance) - set(allowed))
            message = f"unknown key {extra[0]!r}; expected one of: {', '.join(allowed)}"
        elif error.validator == "pattern" and pattern_message:
            message = f"{error.instance!r} {pattern_message}"
        else:
            message = error.message
        lines.append(f"{origin.where(path)}: {message}")
    if lines:
        raise BadInput(f"{title}:\n  " + "\n  ".join(lines))


def validate_table(table: dict[str, Any], origin: Origin) -> None:
    """`table` against REQUEST_MIX_SCHEMA and the exclusive variants' shares (BadInput)."""
    from vllm_plugin_release.buildspec.load import share_problems

    check_table(REQUEST_MIX_SCHEMA, table, origin, "invalid request mix")
    found = share_problems(table.get("features"), table.get("plans"))
    if found:
        lines = [f"{origin.where('.'.join(key))}: {message}" for key, message in found]
        raise BadInput("invalid request mix:\n  " + "\n  ".join(lines))


class PlanTable(NamedTuple):
    """A plan of a request mix: the base mix (name None) or a variant plan over it."""

    name: str | None
    description: str  # the plan's own (`plans.NAME.description`), "" without one
    features: FeaturesTable


def spec_plans(spec: Spec) -> tuple[PlanTable, ...]:
    """The base mix and its plans, by name; the mix's `file` read and checked here."""
    raw = dict(spec.conformance("request_mix") or {})
    if not raw:
        return ()
    table, origin = load_table(raw, spec.root, spec_origin(spec))
    if "file" in raw:
        validate_table(table, origin)
    plans, base = table.get("plans") or {}, table.get("features") or {}
    return (
        PlanTable(None, "", dict(base)),
        *(
            PlanTable(
                name,
                str(plans[name].get("description", "")),
                {**base, **(plans[name].get("features") or {})},  # key by key
            )
            for name in sorted(plans)
        ),
    )


def read_trace(path: Path) -> list[TraceRow]:
    """Rows of a CSV (with header) or JSON Lines trace; BadInput names the bad line."""
    text = bounded.read_text(path, bounded.MAX_INDEX, "trace file")
    rows: list[TraceRow] = []
    if path.suffix in (".jsonl", ".ndjson", ".json"):
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"{path}:{number}: not a JSON object ({exc.msg})") from None
            if not isinstance(record, dict):
                raise BadInput(f"{path}:{number}: expected a JSON object per line")
            rows.append(_row(path, number, record))
    else:
        lines = text.splitlines()
        reader = csv.reader(lines)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise BadInput(f"{path}: empty trace file") from None
        missing = [c for c in TRACE_COLUMNS if c not in header]
        if missing:
            raise BadInput(
                f"{path}:1: header lacks {', '.join(missing)}",
                hint=f"the first line must name the columns: {','.join(TRACE_COLUMNS)}",
            )
        hint = "every row needs arrival_time,prompt_tokens,output_tokens"
        rows += [_row(path, n, record) for n, record in csv_rows(path, reader, header, hint)]
    if not rows:
        raise BadInput(f"{path}: trace has no requests")
    return rows


def csv_rows(
    path: Path, reader: Iterator[list[str]], header: list[str], hint: str | None = None
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, {column: field}) of each non-blank row under the header; BadInput
    (with `hint`) for a row whose fields do not match the header's."""
    for line, fields in enumerate(reader, start=2):
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise BadInput(
                f"{path}:{line}: {len(fields)} fields, header has {len(header)}", hint=hint
            )
        yield line, dict(zip(header, fields))


def _row(path: Path, number: int, record: dict[str, Any]) -> TraceRow:
    def number_of(key: str, kind: Callable[[str], float | int]) -> Any:
        if key not in record:
            raise BadInput(f"{path}:{number}: missing {key}")
        raw = record[key]
        try:
            if isinstance(raw, bool):
                raise ValueError
            value = kind(str(raw).strip()) if isinstance(raw, str) else kind(raw)
            if isinstance(raw, float) and kind is int and raw != int(raw):
                raise ValueError
        except (ValueError, TypeError):
            expected = "a whole number" if kind is int else "a number of seconds"
            raise BadInput(f"{path}:{number}: {key} = {raw!r} is not {expected}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise BadInput(f"{path}:{number}: {key} = {raw!r} is not finite")
        return value

    arrival = float(number_of("arrival_time", float))
    prompt = int(number_of("prompt_tokens", int))
    output = int(number_of("output_tokens", int))
    if arrival < 0:
        raise BadInput(f"{path}:{number}: arrival_time {arrival} is negative")
    if prompt < 1 or output < 1:
        raise BadInput(f"{path}:{number}: prompt_tokens and output_tokens must be >= 1")
    return TraceRow(arrival, prompt, output)


def _rng(seed: int, stream: str) -> random.Random:
    return random.Random(f"vpr-request-mix:{seed}:{stream}")


def _lengths(
    spec: dict[str, Any],
    count: int,
    rng: random.Random,
    column: list[int] | None,
    key: str,
    origin: Origin,
) -> list[int]:
    kind = spec["dist"]
    low = int(spec.get("min", 1))
    high = spec.get("max")
    if high is not None and int(high) < low:
        raise BadInput(f"{origin.where(key)}: max {high} is below min {low}")

    def clamp(value: int) -> int:
        value = max(low, value)
        return min(int(high), value) if high is not None else value

    if kind == "fixed":
        if "value" not in spec:
            raise BadInput(f'{origin.where(key)}: dist = "fixed" needs value = N')
        return [int(spec["value"])] * count
    if kind == "uniform":
        if "max" not in spec:
            raise BadInput(f'{origin.where(key)}: dist = "uniform" needs min and max')
        return [rng.randint(low, int(high)) for _ in range(count)]  # type: ignore[arg-type]
    if kind == "lognormal":
        if "median" not in spec or "sigma" not in spec:
            raise BadInput(f'{origin.where(key)}: dist = "lognormal" needs median and sigma')
        mu = math.log(float(spec["median"]))
        sigma = float(spec["sigma"])
        return [clamp(round(rng.lognormvariate(mu, sigma))) for _ in range(count)]
    if kind == "empirical":
        values = spec.get("values") or column
        if not values:
            raise BadInput(
                f'{origin.where(key)}: dist = "empirical" needs values = [...] or a trace'
            )
        return [clamp(int(rng.choice(values))) for _ in range(count)]
    # "trace": row by row
    if column is None:
        raise BadInput(f'{origin.where(key)}: dist = "trace" needs a trace file')
    return [int(v) for v in column[:count]]


_TRACE_DEFAULTS = {
    "arrival": {"process": "trace"},
    "prompt_tokens": {"dist": "trace"},
    "output_tokens": {"dist": "trace"},
}


def _distributions(
    table: dict[str, Any], rows: list[TraceRow] | None, origin: Origin
) -> list[dict[str, Any]]:
    """The arrival process and the prompt and output length distributions (trace by default)."""
    specs = []
    for key, default in _TRACE_DEFAULTS.items():
        value = table.get(key) or (default if rows is not None else None)
        if value is None:
            raise BadInput(
                f"{origin.where(key)}: missing (required when no trace file is given)",
                hint='e.g. arrival = {process = "poisson", rate = 2.0}',
            )
        specs.append(value)
    return specs


def _request_count(
    table: dict[str, Any], rows: list[TraceRow] | None, uses_rows: bool, origin: Origin
) -> int:
    """`requests`, else the trace's length; no more than the trace holds when it is used."""
    if "requests" in table:
        count = int(table["requests"])
        if uses_rows and rows is not None and count > len(rows):
            raise BadInput(
                f"{origin.where('requests')}: {count} requests but the trace has only "
                f"{len(rows)} rows",
                hint='lower `requests` or sample lengths with dist = "empirical"',
            )
        return count
    if rows is not None:
        return len(rows)
    raise BadInput(f"{origin.where('requests')}: missing (how many requests to send)")


def generate(
    table: dict[str, Any],
    root: Path,
    origin: Origin | str = "buildspec",
    *,
    validated: bool = False,
) -> RequestMix:
    """The mix, the same for a seed; checked here unless with the spec (a `file`'s keys always)."""
    if isinstance(origin, str):
        origin = Origin(origin)
    from_file = "file" in table
    table, origin = load_table(table, root, origin)
    if from_file or not validated:
        validate_table(table, origin)
    seed = int(table.get("seed", 0))
    rows: list[TraceRow] | None = None
    if "trace" in table:
        trace_path = Path(table["trace"])
        rows = read_trace(trace_path if trace_path.is_absolute() else root / trace_path)
    arrival_spec, prompt_spec, output_spec = _distributions(table, rows, origin)
    uses_rows = arrival_spec["process"] == "trace" or "trace" in (
        prompt_spec["dist"],
        output_spec["dist"],
    )
    count = _request_count(table, rows, uses_rows, origin)
    arrivals = _arrivals(arrival_spec, count, _rng(seed, "arrival"), rows, origin)
    prompt, output = (
        _lengths(spec, count, _rng(seed, key.split("_")[0]), column, key, origin)
        for key, spec, column in (
            ("prompt_tokens", prompt_spec, [r.prompt_tokens for r in rows] if rows else None),
            ("output_tokens", output_spec, [r.output_tokens for r in rows] if rows else None),
        )
    )
    description = {
        "arrival": dict(arrival_spec),
        "prompt_dist": dict(prompt_spec),
        "output_dist": dict(output_spec),
    }
    if "trace" in table:
        description["trace"] = str(table["trace"])
    features = feature_mix(table.get("features"), count, seed)
    return RequestMix(tuple(arrivals), tuple(prompt), tuple(output), seed, description, features)


def _arrivals(
    spec: dict[str, Any],
    count: int,
    rng: random.Random,
    rows: list[TraceRow] | None,
    origin: Origin,
) -> list[float]:
    process = spec["process"]
    if process == "poisson":
        if "rate" not in spec:
            raise BadInput(f'{origin.where("arrival")}: process = "poisson" needs rate')
        rate = float(spec["rate"])
        gaps = [rng.expovariate(rate) if index else 0.0 for index in range(count)]
        return [round(clock, 6) for clock in itertools.accumulate(gaps)]
    if process == "bursts":
        if "size" not in spec or "interval" not in spec:
            raise BadInput(f'{origin.where("arrival")}: process = "bursts" needs size and interval')
        size, interval = int(spec["size"]), float(spec["interval"])
        return [round((index // size) * interval, 6) for index in range(count)]
    if process == "at_once":
        return [0.0] * count
    if rows is None:
        raise BadInput(f'{origin.where("arrival")}: process = "trace" needs a trace file')
    start = min(r.arrival_time for r in rows[:count])
    return [round(r.arrival_time - start, 6) for r in rows[:count]]


def from_spec(spec: Spec) -> RequestMix:
    """The mix of a loaded `Spec` (its `[conformance.request_mix]` table)."""
    table = spec.conformance("request_mix")
    if table is None:
        raise BadInput(
            f"{spec.path}: no [conformance.request_mix] table",
            hint="add one: requests, seed, arrival, prompt_tokens, output_tokens (or a trace)",
        )
    return generate(table, spec.root, spec_origin(spec), validated=True)


def spec_origin(spec: Spec, prefix: tuple[str, ...] = ("conformance", "request_mix")) -> Origin:
    """An Origin for a table of a loaded spec (its text read again for line numbers)."""
    try:
        text: str | None = Path(spec.path).read_text(encoding="utf-8")
    except OSError:
        text = None
    return Origin(str(spec.path), text, prefix)
