"""The request mix's workload features (spec data), the `workload` check's answers (pure
judging of what the pairing environment saw), variant plans' verdicts, the scorecard and
manifest records, and the in-env tracer that names the line that decided.

The environment half runs against the real reference plugin in
tests/integration/test_workload_reference.py; here the judging gets the shape that half
reports, one case per answer, each known-good next to its known-bad."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.required import tt_checkout
from tests.support import REFERENCE_SPEC, REPO, visible_text, vpr
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import CheckResult
from vllm_plugin_release.conform.checks import workload
from vllm_plugin_release.conform.checks.workload import (
    Plan,
    Seen,
    base_stop,
    judge_plan,
    variant_key,
)
from vllm_plugin_release.conform.scorecard import markdown, scorecard, to_html
from vllm_plugin_release.core.envrecord import EnvRecord, parse
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.inenv import workload as inenv
from vllm_plugin_release.replay import mix
from vllm_plugin_release.replay import mix as feat

BASE_MIX = {
    "requests": 200,
    "seed": 7,
    "arrival": {"process": "at_once"},
    "prompt_tokens": {"dist": "fixed", "value": 8},
    "output_tokens": {"dist": "fixed", "value": 4},
}


# ---------------------------------------------------------------------------
# Features as spec data.


def test_shares_are_exact_and_the_same_for_the_same_seed() -> None:
    features = {
        "logprobs": {"share": 0.25},
        "structured_output": [{"share": 0.1, "kind": "json"}, {"share": 0.05, "kind": "regex"}],
        "speculative": {"method": "ngram"},
    }
    one = mix.generate({**BASE_MIX, "features": features}, Path("."))
    two = mix.generate({**BASE_MIX, "features": features}, Path("."))
    assert one.features == two.features and one.digest() == two.digest()
    counts = one.features.counts()
    assert counts == {"logprobs": 50, "structured_output[0]": 20, "structured_output[1]": 10}
    # the variants of one key are exclusive: no request has both
    ids = [v.id for v in one.features.variants]
    both = [
        c
        for c in one.features.per_request
        if {ids.index("structured_output[0]"), ids.index("structured_output[1]")} <= set(c)
    ]
    assert both == []
    assert one.summary()["features"]["speculative"]["requests"] == 200  # engine-wide
    # another seed: other requests; a mix without features keeps its old digest
    other = mix.generate({**BASE_MIX, "seed": 8, "features": features}, Path("."))
    assert other.features.per_request != one.features.per_request
    plain = mix.generate(dict(BASE_MIX), Path("."))
    assert plain.features is None and plain.digest() != one.digest()


def test_the_mix_summary_and_variants_write_the_json_they_always_did() -> None:
    features = {"speculative": {}, "logprobs": {"share": 0.25}, "n": [{"share": 0.1}]}
    one = mix.generate({**BASE_MIX, "features": features}, Path("."))
    assert one.features is not None
    counts = one.features.counts()
    old = {  # what FeatureMix.summary returned as a plain dict
        v.id: {
            "share": v.share,
            "requests": counts.get(v.id, 200 if v.level == "engine" else 0),
            "options": dict(v.options),
        }
        for v in one.features.variants
    }
    assert json.dumps(one.summary()["features"]) == json.dumps(old)
    assert old["n[0]"] == {"share": 0.1, "requests": 20, "options": {"value": 2}}
    assert list(one.features.variants[0].to_json()) == [
        "id",
        "key",
        "share",
        "declared",
        "needed",
        "level",
        "options",
    ]


def test_a_feature_added_does_not_reshuffle_the_others() -> None:
    a = mix.generate({**BASE_MIX, "features": {"logprobs": {"share": 0.3}}}, Path("."))
    b = mix.generate(
        {**BASE_MIX, "features": {"logprobs": {"share": 0.3}, "seed": {"share": 0.5}}}, Path(".")
    )
    with_logprobs = {i for i, c in enumerate(a.features.per_request) if c}  # only logprobs in a
    lp = [v.id for v in b.features.variants].index("logprobs")
    assert with_logprobs == {i for i, c in enumerate(b.features.per_request) if lp in c}


def test_what_vllm_is_given_for_each_variant() -> None:
    [spec_v, lp, big, n] = feat.parse(
        {
            "speculative": {"num_tokens": 3},
            "logprobs": [{"share": 0.1, "top": 5}, {"share": 0.1, "top": 25}],
            "n": {"share": 0.1},
        }
    )
    assert feat.engine_kwargs(spec_v) == {
        "speculative_config": {"method": "ngram", "num_speculative_tokens": 3}
    }
    assert feat.engine_kwargs(lp) == {} and feat.engine_kwargs(big) == {"max_logprobs": 25}
    assert feat.combined_params([lp]) == {"temperature": 0.0, "logprobs": 5}
    # vLLM refuses n > 1 with greedy sampling: such a request samples at temperature 1
    assert feat.combined_params([n]) == {"temperature": 1.0, "n": 2}
    assert big.label() == "logprobs #2 (top 25)" and spec_v.needed and spec_v.share == 1.0
    asked = feat.asked([lp])
    assert [v.key for v in asked] == list(feat.FEATURE_KEYS)
    assert not next(v for v in asked if v.key == "speculative").needed


def _spec_file(tmp_path: Path, features: str, plans: str = "") -> Path:
    text = REFERENCE_SPEC.read_text()
    head = "[conformance.request_mix.features]"
    start = text.index(head)
    end = text.index("[conformance.workload]")
    text = text[:start] + head + "\n" + features + "\n" + plans + "\n" + text[end:]
    path = tmp_path / "buildspec" / "mix.toml"
    path.parent.mkdir()
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("features", "plans", "key", "message"),
    [
        ("logprob = { share = 0.1 }\n", "", "features", "unknown key 'logprob'"),
        (
            "logprobs = { share = 1.5 }\n",
            "",
            "features.logprobs.share",
            "share = 1.5: must be <= 1",
        ),
        (
            "logprobs = { share = -0.1 }\n",
            "",
            "features.logprobs.share",
            "share = -0.1: must be >= 0",
        ),
        (
            '[[conformance.request_mix.features.structured_output]]\nshare = 0.7\nkind = "json"\n'
            '[[conformance.request_mix.features.structured_output]]\nshare = 0.4\nkind = "regex"\n',
            "",
            "features.structured_output",
            "add up to 1.1",
        ),
        (
            "logprobs = { share = 0.1 }\n",
            "[conformance.request_mix.plans.big.features]\n"
            "n = [{ share = 0.6 }, { share = 0.6, value = 3 }]\n",
            "plans.big.features.n",
            "add up to 1.2",
        ),
    ],
)
def test_bad_features_are_exit_2_naming_file_line_and_key(
    tmp_path: Path, features: str, plans: str, key: str, message: str
) -> None:
    path = _spec_file(tmp_path, features, plans)
    done = vpr("spec", "check", str(path), check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    line = re.search(rf"{re.escape(str(path))}:(\d+): .*{re.escape(message)}", done.stderr)
    assert line, done.stderr
    named = text_line(path, int(line.group(1)))
    assert key.split(".")[-1] in named or key.split(".")[-1] in done.stderr, named


def text_line(path: Path, number: int) -> str:
    return path.read_text().splitlines()[number - 1]


def test_good_features_and_plans_load(tmp_path: Path) -> None:
    path = _spec_file(
        tmp_path,
        'logprobs = { share = 0.2 }\nstructured_output = [{ share = 0.5 }, { share = 0.5, kind = "regex" }]\n',  # noqa: E501
        "[conformance.request_mix.plans.spec.features]\nspeculative = { num_tokens = 2 }\n",
    )
    assert vpr("spec", "check", str(path), check=False).returncode == 0


def test_a_request_mix_file_is_held_to_the_same_rules(tmp_path: Path) -> None:
    (tmp_path / "pilot.json").write_text(
        json.dumps({**BASE_MIX, "features": {"n": [{"share": 0.8}, {"share": 0.3}]}})
    )
    with pytest.raises(BadInput, match=r"pilot.json: features.n: the variants of 'n'"):
        mix.generate({"file": "pilot.json"}, tmp_path)


def test_the_plans_of_a_spec_cross_as_typed_tables(tmp_path: Path) -> None:
    path = _spec_file(
        tmp_path,
        "logprobs = { share = 0.2 }\n",
        '[conformance.request_mix.plans.big]\ndescription = "a big one"\n'
        "[conformance.request_mix.plans.big.features]\nn = { share = 0.5 }\n",
    )
    base, big = mix.spec_plans(load_spec(path))
    assert base == mix.PlanTable(None, "", {"logprobs": {"share": 0.2}})
    assert big == mix.PlanTable(
        "big", "a big one", {"logprobs": {"share": 0.2}, "n": {"share": 0.5}}
    )
    [only] = workload.plans(load_spec(path))[1:]
    assert (only.name, only.description) == ("big", "a big one")
    assert [v.id for v in only.variants if v.declared] == ["logprobs", "n"]


@pytest.mark.parametrize(
    ("plans", "message"),
    [
        ({"bad": {"features": {"n": [{"share": 0.6}, {"share": 0.6}]}}}, "plans.bad.features.n"),
        ({"bad": {"description": 3, "features": {}}}, "3 is not of type 'string'"),
        ({"bad": {"features": {"n": "all"}}}, "plans.bad.features.n"),
    ],
)
def test_a_request_mix_file_s_plans_are_checked_where_they_are_read(
    tmp_path: Path, plans: dict[str, Any], message: str
) -> None:
    """The file a spec's request mix names is read (and checked) by `spec_plans`, once:
    a plan of the wrong shape is exit 2 naming the file and the key, never a crash."""
    path = _spec_file(tmp_path, "logprobs = { share = 0.2 }\n")
    text = path.read_text().replace(
        "[conformance.request_mix]\n", '[conformance.request_mix]\nfile = "pilot.json"\n', 1
    )
    path.write_text(text)
    (tmp_path / "pilot.json").write_text(json.dumps({"plans": plans}))
    spec = load_spec(path)
    with pytest.raises(BadInput, match=re.escape("pilot.json")) as info:
        mix.spec_plans(spec)
    assert message in info.value.message


# ---------------------------------------------------------------------------
# Judging what the environment saw.

HOOKS = {
    "check_and_update_config": {"file": "plug/platform.py", "line": 10, "name": "x"},
    "validate_request": {"file": "plug/platform.py", "line": 40, "name": "y"},
}
SLOW = [{"name": "host sampler", "instead_of": "device sampler", "predicate": "plug.p:host"}]


def _plan(features: dict[str, Any], name: str | None = None) -> Plan:
    declared = feat.parse(features)
    return Plan(
        name, name or "base", tuple(feat.asked(declared)), feat.feature_mix(features, 100, 3)
    )


def _accepted(taken: bool = False) -> dict[str, Any]:
    where = {"file": "plug/platform.py", "line": 77 if taken else 80, "name": "host"}
    return {
        "request": {"accepted": True, "changes": [], "warnings": []},
        "paths": {"host sampler": {"taken": taken, "where": where}},
    }


def _environment(plans: list[Plan], answers: dict[str, dict[str, Any]], base: dict | None = None):
    """What inenv/workload.py would report: each variant answered as `answers[key]` says
    (default: accepted, device sampler), each combination on the host sampler when one of
    its variants is."""
    request, ids = workload.build_request(_NoSpec(), plans)
    probes = {}
    for plan in plans:
        for v in plan.variants:
            if variant_key(v) in ids:
                probes[ids[variant_key(v)]] = answers.get(v.key, _accepted())
    host = [
        k for k, a in answers.items() if a.get("paths", {}).get("host sampler", {}).get("taken")
    ]
    # the tests send only logprobs to the host: its SamplingParams key is its feature key
    combos = [
        {"paths": {"host sampler": {"taken": any(k in params for k in host)}}}
        for params in request.combos
    ]
    result = {
        "platform": "plug.platform.Platform",
        "hooks": HOOKS,
        "base": base or {"hook": "returned", "changes": [], "warnings": []},
        "probes": probes,
        "combos": combos,
    }
    return Seen(request.parse_answer(result), ids, request.combos, SLOW)


class _NoSpec:
    """A spec as the workload check reads it: only its `[conformance.workload]` slow paths."""

    def __init__(self) -> None:
        self.raw: dict[str, Any] = {"conformance": {"workload": {"slow_paths": SLOW}}}

    conformance = Spec.conformance


def _row(result, key: str) -> dict[str, Any]:
    return next(r for r in result.rows if r["feature"] == key)


def test_supported_and_slow_path_answers_with_the_share_on_each_path() -> None:
    plan = _plan({"sampling": {"share": 0.5}, "logprobs": {"share": 0.2}})
    seen = _environment([plan], {"logprobs": _accepted(taken=True)})
    r = judge_plan(plan, seen)
    assert _row(r, "sampling")["outcome"] == "supported"
    assert _row(r, "sampling")["where"] == "plug/platform.py:80"  # the line that kept it
    logprobs = _row(r, "logprobs")
    assert logprobs["outcome"] == "slow_path" and logprobs["path"] == "host sampler"
    assert logprobs["where"] == "plug/platform.py:77" and logprobs["requests"] == 20
    assert r.paths["host sampler"] == {"instead_of": "device sampler", "requests": 20, "share": 0.2}
    assert r.paths["default"]["requests"] == 80
    assert r.status == "warn" and r.warns == [
        "20.0% of requests leave the device sampler for the host sampler"
    ]


REFUSED_HOOK = {
    "engine": {
        "hook": "raised",
        "error": {
            "type": "AssertionError",
            "message": "no speculation here",
            "by": "plugin",
            "where": {"file": "plug/platform.py", "line": 12, "name": "check_and_update_config"},
        },
        "changes": [],
    }
}


def test_refused_fails_a_plan_that_needs_it_and_passes_one_that_does_not() -> None:
    base = _plan({"sampling": {"share": 0.5}})
    variant = _plan({"speculative": {"num_tokens": 4}}, "spec")
    seen = _environment([base, variant], {"speculative": REFUSED_HOOK})
    good, bad = judge_plan(base, seen), judge_plan(variant, seen)
    assert _row(good, "speculative")["outcome"] == "refused" and good.status == "pass"
    assert _row(bad, "speculative")["where"] == "plug/platform.py:12"
    assert bad.status == "fail" and bad.blockers == [
        "needs speculative decoding (ngram, 4 tokens) for every request, which the plugin "
        "refuses: AssertionError: no speculation here (plug/platform.py:12)"
    ]


def test_a_request_refused_by_validate_request_names_its_line() -> None:
    error = {
        "type": "ValueError",
        "message": "no prompt logprobs",
        "by": "plugin",
        "where": {"file": "plug/platform.py", "line": 44, "name": "validate_request"},
    }
    answer = {"request": {"accepted": False, "stage": "validate_request", "error": error}}
    plan = _plan({"prompt_logprobs": {"share": 0.1}})
    r = judge_plan(plan, _environment([plan], {"prompt_logprobs": answer}))
    row = _row(r, "prompt_logprobs")
    assert (row["outcome"], row["by"], row["where"]) == ("refused", "plugin", "plug/platform.py:44")
    assert r.status == "fail" and "in validate_request" in row["message"]


def _dropped(field: str, before: Any, after: Any, line: int) -> dict[str, Any]:
    return {
        "field": field,
        "from": before,
        "to": after,
        "where": {"file": "plug/platform.py", "line": line},
    }


def test_changed_is_a_failure_whether_or_not_the_plan_needs_it() -> None:
    spec_dropped = {
        "engine": {
            "hook": "returned",
            "changes": [
                _dropped("speculative_config", {"method": "ngram"}, None, 20),
                # a setting the feature did not ask for: a note, not a change of the feature
                _dropped("structured_outputs_config.backend", "auto", "xgrammar", 21),
            ],
        }
    }
    logprobs_dropped = {
        "request": {"accepted": True, "changes": [_dropped("logprobs", 5, None, 45)]},
    }
    plan = _plan({"logprobs": {"share": 0.1}})
    seen = _environment([plan], {"speculative": spec_dropped, "logprobs": logprobs_dropped})
    r = judge_plan(plan, seen)
    speculative = _row(r, "speculative")
    assert speculative["outcome"] == "changed" and not speculative["needed"]
    assert speculative["where"] == "plug/platform.py:20"
    assert [c["field"] for c in speculative["changes"]] == ["speculative_config"]
    assert _row(r, "logprobs")["outcome"] == "changed"
    assert r.status == "fail" and len(r.fails) == 2
    # known-good: the same plan with nothing changed passes
    assert judge_plan(plan, _environment([plan], {})).status == "pass"


def test_vllm_normalising_a_request_value_is_not_the_plugins_change() -> None:
    vllm_change = {
        "request": {
            "accepted": True,
            "changes": [
                {
                    **_dropped("top_k", 0, -1, 9),
                    "where": {"file": "vllm/sampling_params.py", "line": 9},
                }
            ],
        }
    }
    plan = _plan({"sampling": {"share": 0.5}})
    assert judge_plan(plan, _environment([plan], {"sampling": vllm_change})).status == "pass"


def test_deferred_for_a_plan_that_needs_what_this_runner_cannot_ask() -> None:
    plan = _plan({"multimodal": {"share": 0.1, "images": 2}})
    r = judge_plan(plan, _environment([plan], {}))
    assert _row(r, "multimodal")["outcome"] == "deferred" and r.status == "deferred"
    assert "image inputs" in r.deferred[0]
    # not needed: reported, the plan passes
    assert judge_plan(_plan({}), _environment([_plan({})], {})).status == "pass"


def test_a_hook_that_stops_for_every_config_is_not_the_features_refusal() -> None:
    stop = {
        "hook": "raised",
        "error": {"type": "ValueError", "message": "no model class", "by": "plugin",
                  "where": {"file": "plug/platform.py", "line": 99}},
        "changes": [],
        "warnings": [{"message": "Error loading X: ModuleNotFoundError: No module named 'models'"}],
        "model_classes": {"TTLlama": "models.llama:Llama"},
    }  # fmt: skip
    same = {"engine": {**stop}}
    plan = _plan({"logprobs": {"share": 0.1, "top": 30}, "speculative": {}}, None)
    seen = _environment(
        [plan], {"logprobs": {**same, **_accepted()}, "speculative": REFUSED_HOOK}, base=stop
    )
    r = judge_plan(plan, seen)
    assert _row(r, "logprobs")["outcome"] == "supported"  # stopped where every config stops
    assert _row(r, "speculative")["outcome"] == "refused"  # stopped earlier: the feature
    short, full = base_stop(stop)
    assert "plug/platform.py:99" in short and "No module named 'models'" in short
    assert "models.llama:Llama" in full
    assert base_stop({"hook": "returned", "changes": []}) is None


def test_the_check_result_and_the_plan_verdicts_in_the_scorecard_and_manifest() -> None:
    base = _plan({"sampling": {"share": 0.5}, "logprobs": {"share": 0.2}})
    variant = _plan({"sampling": {"share": 0.5}, "speculative": {}}, "spec")
    seen = _environment(
        [base, variant], {"logprobs": _accepted(taken=True), "speculative": REFUSED_HOOK}
    )
    cov = {
        "model": "org/m",
        "listed": True,
        "where": ["README.md:3"],
        "table": [{"model": "org/m"}],
    }
    result = workload.assess(seen, [base, variant], "plug.platform.Platform", cov)
    assert result.status == "warn"
    assert "20.0% of requests leave the device sampler for the host sampler" in result.summary
    assert result.details["plans"]["spec"]["status"] == "fail"
    assert result.evidence[0].note.startswith("plan spec: needs speculative decoding")
    others = [CheckResult("cadence", "pass", "ok"), result]
    card = scorecard(
        others,
        runner="cpu",
        pairing={
            "name": "p",
            "core": "vllm 0.1",
            "plugin": "plug 0.1",
            "core_wheel_sha256": None,
            "plugin_wheel_sha256": None,
        },
    )
    assert card["verdict"] == "pilot"
    plan = card["plans"]["spec"]
    assert plan["verdict"] == "lab" and plan["why"][0].startswith(
        "the plan cannot run on this pairing: it needs speculative decoding"
    )
    assert card["workload"]["paths"]["host sampler"]["share"] == 0.2
    page = visible_text(to_html(card, {}))
    assert "20.0% of requests leave the device sampler for the host sampler" in page
    assert re.search(r"Plan spec: spec:\s+lab", page)
    assert "| logprobs (top 5) | 20% | slow path |" in markdown(card)
    from vllm_plugin_release.core.cardrecord import parse
    from vllm_plugin_release.core.manifestdoc import schema
    from vllm_plugin_release.stages.manifest import workload as _workload

    read = parse(json.loads(json.dumps(card)), "scorecard.json")
    assert read.workload is not None and read.to_json() == card  # written back whole
    recorded = _workload(read.workload, read.plans)
    assert recorded["plans"]["spec"]["verdict"] == "lab" and recorded["models"]["listed"]
    from jsonschema import Draft202012Validator

    sub = schema()["properties"]["conformance"]["properties"]["workload"]
    Draft202012Validator({**sub, "$defs": schema()["$defs"]}).validate(recorded)


def test_a_platform_that_is_not_the_plugins_asks_nothing() -> None:
    plan = _plan({})
    seen = _environment([plan], {})
    result = workload.assess(seen, [plan], "other.Platform", {"model": None})
    assert result.status == "deferred" and "not the plugin's platform" in result.summary


def test_no_runtime_no_answer() -> None:
    def env(runtime: dict) -> EnvRecord:
        return parse({"python": "/x/bin/python", "runner": "cpu", "runtime": runtime})

    absent = env({"name": "rt", "status": "absent", "reason": "no wheel"})
    assert "rt), absent here: no wheel" in workload.runtime_python(absent)
    present = env({"status": "present"})
    assert workload.runtime_python(present) == (Path("/x/bin/python"), None)
    stand_in = env({"status": "absent", "stand_in": {"python": "/o/bin/python"}})
    assert workload.runtime_python(stand_in) == (Path("/x/bin/python"), Path("/o"))


# ---------------------------------------------------------------------------
# The in-env tracer (stdlib only: no vLLM needed to watch a line change a value).


class _Config:
    def __init__(self) -> None:
        self.speculative: dict[str, str] | None = {"method": "ngram"}
        self.logprobs = 20


def _quiet_hook(config: _Config) -> None:
    config.logprobs = min(config.logprobs, 10)
    config.speculative = None  # a silent drop


def test_the_watch_names_the_line_that_changed_each_value() -> None:
    config = _Config()
    watch = inenv.Watch(
        {"speculative": lambda: config.speculative, "logprobs": lambda: config.logprobs}
    )
    watch.run(_quiet_hook, config)
    changes = {c["field"]: c for c in watch.changes()}
    source = Path(__file__).read_text().splitlines()
    for field, text in (
        ("speculative", "config.speculative = None"),
        ("logprobs", "min(config.logprobs"),
    ):
        line = changes[field]["where"]["line"]
        assert text in source[line - 1], (field, source[line - 1])
    # known-bad: a hook that changes nothing reports nothing
    untouched = _Config()
    quiet = inenv.Watch({"logprobs": lambda: untouched.logprobs})
    quiet.run(lambda c: None, untouched)
    assert quiet.changes() == []


@dataclasses.dataclass
class _Structured:
    json: dict[str, Any]
    choice: list[str] | None = None
    _backend: str | None = None


class _Lax:
    """Equal to anything (a lax `==`), its repr its state: only its JSON-ready form tells
    a change."""

    def __init__(self) -> None:
        self.state = 1

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Lax({self.state})"


class _Params:
    def __init__(self) -> None:
        self.structured = _Structured(json={"type": "object", "properties": {"a": {}}})
        self.tags = {"x"}
        self.lax = _Lax()


def _deep_hook(params: _Params) -> None:
    params.structured._backend = "xgrammar"  # private: not reported
    params.structured.json["properties"]["a"]["type"] = "string"  # deep, in place
    params.tags.add("y")  # a set: no copy is kept, its form decides
    params.lax.state = 2  # only its repr changes


def _watched(params: _Params) -> Any:
    return inenv.Watch(
        {
            "structured": lambda: params.structured,
            "tags": lambda: params.tags,
            "lax": lambda: params.lax,
        }
    )


def test_the_watch_sees_changes_inside_values_and_names_their_lines() -> None:
    params = _Params()
    watch = _watched(params)
    watch.run(_deep_hook, params)
    changes = {c["field"]: c for c in watch.changes()}
    source = Path(__file__).read_text().splitlines()
    for field, text in (
        ("structured", '["a"]["type"] = "string"'),
        ("tags", 'params.tags.add("y")'),
        ("lax", "params.lax.state = 2"),
    ):
        line = changes[field]["where"]["line"]
        assert text in source[line - 1], (field, source[line - 1])
    assert changes["structured"]["to"] == {
        "json": {"type": "object", "properties": {"a": {"type": "string"}}},
        "choice": None,
    }
    assert changes["lax"]["from"] == "Lax(1)" and changes["lax"]["to"] == "Lax(2)"


def test_the_watch_does_not_remake_an_unchanged_values_form_at_every_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A plain-data value equal to the copy kept is unchanged: its JSON-ready form is not
    # made again at each traced event (that was most of a workload check's time).
    params = _Params()
    watch = inenv.Watch({"structured": lambda: params.structured})
    made: list[int] = []
    real = inenv._plain
    monkeypatch.setattr(inenv, "_plain", lambda v: made.append(1) or real(v))

    def busy(p: _Params) -> int:
        total = 0
        for i in range(200):
            total += i
        return total

    watch.run(busy, params)
    assert watch.changes() == []
    assert len(made) < 20, len(made)  # not made again at each traced event


@dataclasses.dataclass
class _Noted:
    value: int
    note: str = dataclasses.field(default="", compare=False)  # `==` does not look at it


class _Tagged(str):
    """A str whose `==` ignores case: equal to its old value after a change of case."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and self.lower() == other.lower()

    __hash__ = str.__hash__


def test_a_change_that_eq_does_not_see_is_still_found() -> None:
    # Values whose `==` is not the JSON form's (a field left out of a dataclass's `==`, a
    # str subclass with its own `==`) are read in full at every event, never taken as
    # unchanged because they compare equal.
    holder = {"noted": _Noted(1), "tag": _Tagged("abc")}
    watch = inenv.Watch({k: (lambda k=k: holder[k]) for k in holder})

    def hook(h: dict[str, Any]) -> None:
        h["noted"].note = "changed"
        h["tag"] = _Tagged("ABC")

    watch.run(hook, holder)
    assert {c["field"]: c["to"] for c in watch.changes()} == {
        "noted": {"value": 1, "note": "changed"},
        "tag": "ABC",
    }


def test_a_module_imported_meanwhile_is_not_traced_and_its_change_is_the_importing_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first validation imports modules (structured output's backends): their bodies are
    # not traced line by line; what one changed is named at the line that imported it.
    body = "".join(f"v{i} = {i}\n" for i in range(300))
    (tmp_path / "vpr_watch_probe_mod.py").write_text(
        body + "import builtins\nbuiltins._vpr_watch_target.logprobs = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = _Config()
    monkeypatch.setattr("builtins._vpr_watch_target", config, raising=False)
    watch = inenv.Watch({"logprobs": lambda: config.logprobs})
    events: list[str] = []
    real = watch._poll
    monkeypatch.setattr(watch, "_poll", lambda: events.append("poll") or real())

    def validate(c: _Config) -> None:
        import vpr_watch_probe_mod  # noqa: F401  (the importing line)

        c.speculative = None

    watch.run(validate, config)
    (change,) = watch.changes()
    line = Path(__file__).read_text().splitlines()[change["where"]["line"] - 1]
    assert "import vpr_watch_probe_mod" in line, line
    assert change["to"] == 3
    assert len(events) < 100, len(events)  # the module's 300 lines were not polled


def _predicate(params: Any, *, limit: int) -> bool:
    if params.get("logprobs"):
        return True
    return (
        params.get("min_p", 0) > 0 or params.get("bias") is not None or params.get("n", 1) > limit
    )


def test_the_deciding_line_of_a_predicate() -> None:
    source = Path(__file__).read_text().splitlines()
    cases = [
        ({"logprobs": 5}, "return True"),
        ({"bias": 1}, 'params.get("bias")'),
        ({"n": 9}, 'params.get("n", 1)'),
    ]
    for params, text in cases:
        said = inenv.decide(_predicate, params, {"limit": 2})
        assert said["taken"] is True
        assert text in source[said["where"]["line"] - 1], (
            params,
            source[said["where"]["line"] - 1],
        )
    assert inenv.decide(_predicate, {}, {"limit": 2})["taken"] is False
    assert "error" in inenv.decide(_predicate, {}, {"wrong": 2})


def test_relative_paths_never_name_this_machine() -> None:
    import vllm_plugin_release

    here = Path(vllm_plugin_release.__file__).resolve()
    assert inenv.relative(str(here)) == "vllm_plugin_release/__init__.py"


# ---------------------------------------------------------------------------
# Model coverage from the plugin's docs.


def test_models_are_read_where_the_docs_name_a_model(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(
        "Run `vllm serve --model meta-llama/Llama-3.1-8B`.\n"
        "| Model | Devices |\n|---|---|\n| `Qwen/Qwen2.5-7B` | n300 |\n\n"
        "See docs/install.md and [weights](https://huggingface.co/google/gemma-3-27b-it).\n"
        "| Key | Purpose |\n|---|---|\n| optimizations | model/runtime profile |\n"
    )
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "run.py").write_text(
        'parser.add_argument("--model", default="openai/gpt-oss-20b")\n'
    )
    _, seen = workload.read_models(tmp_path)
    rows = workload.table(seen)
    assert [r["model"] for r in rows] == [
        "google/gemma-3-27b-it",
        "meta-llama/Llama-3.1-8B",
        "openai/gpt-oss-20b",
        "Qwen/Qwen2.5-7B",
    ]
    assert workload.coverage("qwen/qwen2.5-7b", rows)["where"] == ["README.md:4"]
    missing = workload.coverage("meta-llama/Llama-3.1-8B-Instruct", rows)
    assert missing["listed"] is False and missing["nearest"][0] == "meta-llama/Llama-3.1-8B"
    warning, _ = workload.coverage_finding({**missing, "table": rows})
    assert warning and "not among the 4 models" in warning


@tt_checkout()
def test_the_tt_spec_model_in_the_tt_plugin_docs() -> None:
    root = Path(os.environ["VPR_TT_PLUGIN_CHECKOUT"])
    cov = workload.model_coverage(load_spec(REPO / "buildspec" / "tt.toml"), root)
    assert cov["model"] == "meta-llama/Llama-3.1-8B-Instruct" and cov["listed"] is True
    file, _, line = cov["where"][0].rpartition(":")
    assert cov["model"] in (root / file).read_text().splitlines()[int(line) - 1]
    shown = {str(r["model"]) for r in cov["table"]}
    assert "meta-llama/Llama-3.2-11B-Vision-Instruct" in shown  # a multimodal model it lists
