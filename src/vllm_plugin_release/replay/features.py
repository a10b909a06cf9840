"""The workload features a request mix declares (`[conformance.request_mix] features`): which
requests ask for what, drawn from the mix's seed, the same keys for every vendor."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict

from vllm_plugin_release.buildspec.schema import integer, string

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
    """A catalogue entry: what the key is, its variant's options (JSON Schema properties),
    its level (per request or for the engine), what a person calls it and how a variant's
    options read (`Variant.label`)."""

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


# Variants.


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
    """Every key of the catalogue: the plan's variants, and for a key it does not declare
    one variant with the defaults (share 0, not needed), so the plugin's answer is known."""
    have = {v.key for v in declared}
    extra = [Variant(k, 0, 0.0, _defaults(k), False) for k in FEATURE_KEYS if k not in have]
    order = {k: i for i, k in enumerate(FEATURE_KEYS)}
    return sorted([*declared, *extra], key=lambda v: (order[v.key], v.index))


def merged(base: FeaturesTable | None, plan: FeaturesTable | None) -> FeaturesTable:
    """A plan's features over the base mix's, key by key."""
    return {**(base or {}), **(plan or {})}


# Which requests get which variant.


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
    """How a mix uses a variant: its share, the requests that do (all of them for an
    engine-level variant), its options (the mix summary's `features` entry)."""

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
