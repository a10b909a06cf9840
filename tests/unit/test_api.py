"""API compatibility (`api`): the contract diff engine, the config and the CLI.

The capture in the real vLLM env is in tests/integration/test_api_in_env.py."""

from __future__ import annotations

import copy
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tests.support import REFERENCE_SPEC, REPO, api_spec
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.cli import main
from vllm_plugin_release.conform.checks import api
from vllm_plugin_release.conform.checks.api import (
    API_SCHEMA,
    DEFAULT_CONTRACT,
    Allow,
    api_config,
    split_allowed,
)
from vllm_plugin_release.conform.lib import apicontract
from vllm_plugin_release.conform.lib.apicontract import (
    Capture,
    dump_contract,
    load_contract,
    parse_capture,
)
from vllm_plugin_release.conform.lib.apidiff import KINDS, Change, diff_contracts
from vllm_plugin_release.core.errors import BadInput

SHIPPED = REPO / DEFAULT_CONTRACT

# ---------------------------------------------------------------------------
# Small hand-written documents


def contract(
    paths: dict[str, Any] | None = None,
    schemas: dict[str, Any] | None = None,
    models: dict[str, Any] | None = None,
    version: str = "1.0",
) -> dict[str, Any]:
    return {
        "contract_version": 1,
        "core": {"name": "vllm", "version": version},
        "openapi": {
            "openapi": "3.1.0",
            "info": {"title": "t", "version": "0"},
            "paths": paths if paths is not None else {},
            "components": {"schemas": schemas or {}},
        },
        "models": models or {},
    }


def json_op(
    request: dict | None = None,
    response: dict | None = None,
    *,
    params: list | None = None,
    media: tuple[str, ...] = ("application/json",),
    statuses: tuple[str, ...] = ("200", "400"),
) -> dict[str, Any]:
    op: dict[str, Any] = {"responses": {}}
    for status in statuses:
        content = (
            {m: {"schema": response or {}} for m in media}
            if status == "200"
            else {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        )
        op["responses"][status] = {"description": status, "content": content}
    if request is not None:
        op["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": request}},
        }
    if params:
        op["parameters"] = params
    return op


ERROR = {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}


def chat_contract() -> dict[str, Any]:
    """A tiny chat API: POST /v1/chat (request + response components), GET /v1/models."""
    schemas = {
        "ChatRequest": {
            "type": "object",
            "additionalProperties": True,
            "properties": {
                "model": {"type": "string"},
                "messages": {"type": "array", "items": {"$ref": "#/components/schemas/Message"}},
                "temperature": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": 1.0},
                "stop": {"type": "string", "maxLength": 64},
                "role_hint": {"type": "string", "enum": ["user", "system", "tool"]},
                "n": {"type": "integer", "minimum": 1},
            },
            "required": ["messages"],
        },
        "Message": {
            "type": "object",
            "properties": {"role": {"type": "string"}, "content": {"type": "string"}},
            "required": ["role", "content"],
        },
        "ChatResponse": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "created": {"type": "integer"},
                "finish_reason": {"type": "string", "enum": ["stop", "length"]},
                "usage": {"$ref": "#/components/schemas/Usage"},
            },
            "required": ["id", "created", "usage"],
        },
        "Usage": {
            "type": "object",
            "properties": {"total_tokens": {"type": "integer"}},
            "required": ["total_tokens"],
        },
        "Error": ERROR,
    }
    paths = {
        "/v1/chat": {
            "post": json_op(
                {"$ref": "#/components/schemas/ChatRequest"},
                {"$ref": "#/components/schemas/ChatResponse"},
                media=("application/json", "text/event-stream"),
            )
        },
        "/v1/models": {
            "get": json_op(
                None,
                {"type": "object"},
                params=[
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "schema": {"type": "integer"},
                    }
                ],
            )
        },
    }
    models = {
        "ChatRequest": {
            "type": "object",
            "properties": {"model": {"type": "string"}, "seed": {"type": "integer"}},
        },
        "ChatResponse": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "card": {"$ref": "#/$defs/Card"}},
            "required": ["id"],
            "$defs": {
                "Card": {
                    "type": "object",
                    "properties": {"owned_by": {"type": "string"}},
                    "required": ["owned_by"],
                }
            },
        },
    }
    return contract(paths, schemas, models)


def mutate(fn) -> dict[str, Any]:
    doc = chat_contract()
    fn(doc)
    return doc


def S(doc: dict) -> dict[str, Any]:
    return doc["openapi"]["components"]["schemas"]


def P(doc: dict) -> dict[str, Any]:
    return doc["openapi"]["paths"]


def _set(d: dict, keys: list[str], value: Any) -> None:
    for k in keys[:-1]:
        d = d[k]
    d[keys[-1]] = value


def _del(d: dict, keys: list[str]) -> None:
    for k in keys[:-1]:
        d = d[k]
    del d[keys[-1]]


def _req(doc: dict) -> dict:
    return S(doc)["ChatRequest"]


def _resp(doc: dict) -> dict:
    return S(doc)["ChatResponse"]


# (id, mutation, expected kind, expected location, breaking)
BREAKING_CASES = [
    ("removed-path", lambda d: P(d).pop("/v1/models"), "removed-path", "/v1/models"),
    (
        "removed-operation",
        lambda d: P(d)["/v1/models"].update(post=P(d)["/v1/models"].pop("get")),
        "removed-operation",
        "GET /v1/models",
    ),
    (
        "removed-success-status",
        lambda d: _set(
            P(d)["/v1/chat"]["post"],
            ["responses"],
            {"201": P(d)["/v1/chat"]["post"]["responses"]["200"]},
        ),
        "removed-success-status",
        "POST /v1/chat 200",
    ),
    (
        "removed-media-type",
        lambda d: _del(
            P(d)["/v1/chat"]["post"], ["responses", "200", "content", "text/event-stream"]
        ),
        "removed-media-type",
        "POST /v1/chat 200 text/event-stream",
    ),
    (
        "removed-response-property",
        lambda d: _del(_resp(d), ["properties", "created"]),
        "removed-response-property",
        "ChatResponse.created",
    ),
    (
        "retyped-response-property",
        lambda d: _set(_resp(d), ["properties", "created", "type"], "string"),
        "retyped-response-property",
        "ChatResponse.created",
    ),
    (
        "response-property-optional",
        lambda d: _set(_resp(d), ["required"], ["id", "usage"]),
        "response-property-optional",
        "ChatResponse.created",
    ),
    (
        "response-property-nullable",
        lambda d: _set(
            _resp(d), ["properties", "id"], {"anyOf": [{"type": "string"}, {"type": "null"}]}
        ),
        "response-property-nullable",
        "ChatResponse.id",
    ),
    (
        "response-property-nullable-in-ref",
        lambda d: _set(S(d)["Usage"], ["properties", "total_tokens", "type"], ["integer", "null"]),
        "response-property-nullable",
        "Usage.total_tokens",
    ),
    (
        "new-required-request-field",
        lambda d: (
            _set(_req(d), ["properties", "user"], {"type": "string"}),
            _req(d)["required"].append("user"),
        ),
        "new-required-request-field",
        "ChatRequest.user",
    ),
    (
        "optional-request-field-made-required",
        lambda d: _req(d)["required"].append("model"),
        "new-required-request-field",
        "ChatRequest.model",
    ),
    (
        "new-required-parameter",
        lambda d: P(d)["/v1/models"]["get"]["parameters"].append(
            {"name": "owner", "in": "query", "required": True, "schema": {"type": "string"}}
        ),
        "new-required-parameter",
        "GET /v1/models query parameter owner",
    ),
    (
        "removed-parameter",
        lambda d: P(d)["/v1/models"]["get"].pop("parameters"),
        "removed-parameter",
        "GET /v1/models query parameter limit",
    ),
    (
        "removed-request-field",
        lambda d: _del(_req(d), ["properties", "temperature"]),
        "removed-request-field",
        "ChatRequest.temperature",
    ),
    (
        "removed-request-field-nested",
        lambda d: (
            _del(S(d)["Message"], ["properties", "content"]),
            S(d)["Message"]["required"].remove("content"),
        ),
        "removed-request-field",
        "Message.content",
    ),
    (
        "request-no-longer-nullable",
        lambda d: _set(_req(d), ["properties", "temperature"], {"type": "number"}),
        "retyped-request-field",
        "ChatRequest.temperature",
    ),
    (
        "retyped-request-field",
        lambda d: _set(_req(d), ["properties", "model", "type"], "integer"),
        "retyped-request-field",
        "ChatRequest.model",
    ),
    (
        "removed-enum-value-request",
        lambda d: _set(_req(d), ["properties", "role_hint", "enum"], ["user", "system"]),
        "removed-enum-value",
        "ChatRequest.role_hint",
    ),
    (
        "removed-enum-value-response",
        lambda d: _set(_resp(d), ["properties", "finish_reason", "enum"], ["stop"]),
        "removed-enum-value",
        "ChatResponse.finish_reason",
    ),
    (
        "tightened-maxLength",
        lambda d: _set(_req(d), ["properties", "stop", "maxLength"], 16),
        "tightened-constraint",
        "ChatRequest.stop",
    ),
    (
        "tightened-minimum",
        lambda d: _set(_req(d), ["properties", "n", "minimum"], 2),
        "tightened-constraint",
        "ChatRequest.n",
    ),
    (
        "tightened-pattern-added",
        lambda d: _set(_req(d), ["properties", "model", "pattern"], "^[a-z]+$"),
        "tightened-constraint",
        "ChatRequest.model",
    ),
    (
        "tightened-enum-added",
        lambda d: _set(_req(d), ["properties", "model", "enum"], ["a", "b"]),
        "tightened-constraint",
        "ChatRequest.model",
    ),
    (
        "tightened-extra-forbidden",
        lambda d: _set(_req(d), ["additionalProperties"], False),
        "tightened-constraint",
        "ChatRequest",
    ),
    (
        "removed-request-media-type",
        lambda d: _set(
            P(d)["/v1/chat"]["post"]["requestBody"],
            ["content"],
            {"text/plain": {"schema": {"type": "string"}}},
        ),
        "removed-request-media-type",
        "POST /v1/chat request body application/json",
    ),
    (
        "removed-model",
        lambda d: d["models"].pop("ChatRequest"),
        "removed-model",
        "ChatRequest",
    ),
    (
        "model-request-field-removed",
        lambda d: _del(d["models"]["ChatRequest"], ["properties", "seed"]),
        "removed-request-field",
        "ChatRequest.seed",
    ),
    (
        "model-response-property-removed-in-defs",
        lambda d: (
            _del(d["models"]["ChatResponse"], ["$defs", "Card", "properties", "owned_by"]),
            d["models"]["ChatResponse"]["$defs"]["Card"].pop("required"),
        ),
        "removed-response-property",
        "Card.owned_by",
    ),
    (
        "response-union-gains-branch",
        lambda d: _set(
            _resp(d),
            ["properties", "usage"],
            {"anyOf": [{"$ref": "#/components/schemas/Usage"}, {"type": "string"}]},
        ),
        "retyped-response-property",
        "ChatResponse.usage",
    ),
]


@pytest.mark.parametrize(
    ("mutation", "kind", "location"),
    [case[1:] for case in BREAKING_CASES],
    ids=[case[0] for case in BREAKING_CASES],
)
def test_breaking_change_is_flagged_and_unchanged_is_not(mutation, kind, location):
    old = chat_contract()
    new = mutate(mutation)
    assert diff_contracts(old, copy.deepcopy(old)) == []
    assert diff_contracts(new, copy.deepcopy(new)) == []
    changes = diff_contracts(old, new)
    hits = [c for c in changes if c.kind == kind and c.location == location]
    assert hits, "\n".join(c.line() for c in changes)
    assert all(c.breaking for c in hits)
    assert kind in KINDS


ADDITIVE_CASES = [
    ("added-path", lambda d: P(d).update({"/v2/x": {"get": json_op()}}), "added-path", "/v2/x"),
    (
        "added-optional-request-field",
        lambda d: _set(_req(d), ["properties", "user"], {"type": "string"}),
        "added-request-field",
        "ChatRequest.user",
    ),
    (
        "added-response-property",
        lambda d: _set(_resp(d), ["properties", "system_fingerprint"], {"type": "string"}),
        "added-response-property",
        "ChatResponse.system_fingerprint",
    ),
    (
        "added-enum-value",
        lambda d: _set(
            _req(d), ["properties", "role_hint", "enum"], ["user", "system", "tool", "x"]
        ),
        "added-enum-value",
        "ChatRequest.role_hint",
    ),
    (
        "loosened-constraint",
        lambda d: _set(_req(d), ["properties", "stop", "maxLength"], 128),
        "loosened-constraint",
        "ChatRequest.stop",
    ),
    (
        "widened-request-type",
        lambda d: _set(_req(d), ["properties", "model", "type"], ["string", "integer"]),
        "widened-request-type",
        "ChatRequest.model",
    ),
    (
        "request-field-now-nullable",
        lambda d: _set(
            _req(d), ["properties", "model"], {"anyOf": [{"type": "string"}, {"type": "null"}]}
        ),
        "widened-request-type",
        "ChatRequest.model",
    ),
    (
        "tightened-response-constraint-is-info",
        lambda d: _set(_resp(d), ["properties", "id", "maxLength"], 10),
        "tightened-constraint",
        "ChatResponse.id",
    ),
    (
        "changed-default",
        lambda d: _set(_req(d), ["properties", "temperature", "default"], 0.7),
        "changed-default",
        "ChatRequest.temperature",
    ),
    (
        "removed-error-status",
        lambda d: P(d)["/v1/chat"]["post"]["responses"].pop("400"),
        "removed-error-status",
        "POST /v1/chat 400",
    ),
    (
        "added-model",
        lambda d: d["models"].update(ModelList={"type": "object"}),
        "added-model",
        "ModelList",
    ),
]


@pytest.mark.parametrize(
    ("mutation", "kind", "location"),
    [case[1:] for case in ADDITIVE_CASES],
    ids=[case[0] for case in ADDITIVE_CASES],
)
def test_additive_change_is_info_only(mutation, kind, location):
    changes = diff_contracts(chat_contract(), mutate(mutation))
    hits = [c for c in changes if c.kind == kind and c.location == location]
    assert hits, "\n".join(c.line() for c in changes)
    assert not any(c.breaking for c in changes), "\n".join(c.line() for c in changes)


def test_change_in_shared_component_reported_once_with_via():
    def shared(d):
        S(d)["Other"] = {
            "type": "object",
            "properties": {"u": {"$ref": "#/components/schemas/Usage"}},
        }
        P(d)["/v1/other"] = {"get": json_op(None, {"$ref": "#/components/schemas/Other"})}

    old = mutate(shared)
    new = mutate(lambda d: (shared(d), _del(S(d)["Usage"], ["properties", "total_tokens"])))
    hits = [c for c in diff_contracts(old, new) if c.location == "Usage.total_tokens"]
    assert len(hits) == 1
    assert hits[0].kind == "removed-response-property"
    assert hits[0].via in {"POST /v1/chat", "GET /v1/other"}


def model_changes(old: Any, new: Any, name: str) -> list[Change]:
    """The differences between two contracts that differ only in their model `name` (a
    request model when the name ends in Request, else a response model)."""
    base = chat_contract()
    return diff_contracts({**base, "models": {name: old}}, {**base, "models": {name: new}})


def test_recursive_schema_terminates_and_finds_nested_change():
    node = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
        },
        "required": ["name"],
    }
    old = {"$ref": "#/$defs/Node", "$defs": {"Node": node}}
    new = copy.deepcopy(old)
    new["$defs"]["Node"]["properties"]["name"]["type"] = "integer"
    assert model_changes(old, copy.deepcopy(old), "Tree") == []
    changes = model_changes(old, new, "Tree")
    assert [(c.kind, c.location) for c in changes if c.breaking] == [
        ("retyped-response-property", "Node.name")
    ]


def test_union_of_refs_losing_a_branch_breaks_requests_only():
    def union(*names):
        return {"anyOf": [{"$ref": f"#/$defs/{n}"} for n in names]}

    defs = {n: {"type": "object", "properties": {"k": {"const": n}}} for n in ("A", "B", "C")}
    old = {**union("A", "B", "C"), "$defs": defs}
    new = {**union("A", "B"), "$defs": defs}
    req = model_changes(old, new, "UnionRequest")
    assert [(c.kind, c.breaking) for c in req] == [("retyped-request-field", True)]
    resp = model_changes(old, new, "Union")
    assert resp and not any(c.breaking for c in resp)
    assert any(c.breaking for c in model_changes(new, old, "Union"))


def test_const_literals_in_union_are_enum_values():
    old = {"anyOf": [{"const": "none"}, {"const": "auto"}, {"type": "object"}, {"type": "null"}]}
    new = {"anyOf": [{"const": "none"}, {"type": "object"}, {"type": "null"}]}
    changes = model_changes(
        {"type": "object", "properties": {"tool_choice": old}},
        {"type": "object", "properties": {"tool_choice": new}},
        "ChatRequest",
    )
    assert [(c.kind, c.location, c.breaking) for c in changes] == [
        ("removed-enum-value", "ChatRequest.tool_choice", True)
    ]
    assert '"auto"' in changes[0].detail


def test_bare_openapi_document_is_a_contract():
    doc = chat_contract()["openapi"]
    norm = apicontract.normalize_contract(doc)
    assert norm["models"] == {} and norm["openapi"] is doc
    assert diff_contracts(doc, doc) == []


# ---------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", ":1:2: contract is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"title": "x"}', "neither a contract"),
        ('{"contract_version": 2}', "contract_version = 2"),
        (
            json.dumps({**chat_contract(), "openapi": {"paths": []}}),
            "key 'openapi' must be an OpenAPI document",
        ),
        (json.dumps({**chat_contract(), "models": []}), "key 'models'"),
    ],
)
def test_bad_contract_is_bad_input(tmp_path, text, needle):
    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(BadInput) as err:
        load_contract(path)
    assert needle in str(err.value)
    assert str(path) in str(err.value)


def test_dangling_ref_is_bad_input(tmp_path):
    doc = mutate(lambda d: S(d).pop("Usage"))
    path = tmp_path / "c.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BadInput, match=r"\$ref '#/components/schemas/Usage' does not resolve"):
        load_contract(path)


def test_missing_contract_file(tmp_path):
    with pytest.raises(BadInput, match="contract file not found"):
        load_contract(tmp_path / "nope.json")


# ---------------------------------------------------------------------------
# Spec keys and allow list


def test_api_schema_is_valid_and_matches_config():
    Draft202012Validator.check_schema(API_SCHEMA)
    good = {
        "contract": DEFAULT_CONTRACT,
        "tasks": ["generate"],
        "allow": [{"kind": "removed-path", "location": "/v1/x*", "reason": "gone upstream"}],
    }
    assert not list(Draft202012Validator(API_SCHEMA).iter_errors(good))
    cfg = api_config(api_spec(good))
    assert cfg.tasks == ("generate",) and cfg.allow[0].location == "/v1/x*"
    assert api_config(api_spec()).contract == DEFAULT_CONTRACT


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ({"tasks": []}, "tasks = []"),
        ({"contrct": "x"}, "unknown key 'contrct' in [conformance.api]"),
        ({"allow": [{"location": "x"}]}, "missing key 'reason' in [conformance.api.allow.0]"),
        ({"allow": [{"location": "x", "reason": "r", "kind": "nope"}]}, "kind must be one of"),
        ({"allow": [{"location": "x", "reason": "  "}]}, "reason = '  '"),
        ({"timeout": 0}, "timeout = 0"),
    ],
)
def test_bad_api_config(table, needle):
    # The spec loader refuses them: the check's table schema is part of the buildspec's.
    with pytest.raises(BadInput) as err:
        api_spec(table)
    assert needle in str(err.value)


def test_allow_list_accepts_matching_breaking_changes_only():
    changes = [
        Change("removed-path", "/v1/x/y", True, "gone"),
        Change("removed-path", "/v2/z", True, "gone"),
        Change("added-path", "/v3", False, "new"),
    ]
    blocking, accepted, info = split_allowed(
        changes, [Allow("/v1/x/*", "moved to /v2", "removed-path"), Allow("/v3", "irrelevant")]
    )
    assert [c.location for c in blocking] == ["/v2/z"]
    assert [(c.location, a.reason) for c, a in accepted] == [("/v1/x/y", "moved to /v2")]
    assert [c.location for c in info] == ["/v3"]


def _fake_capture(doc: dict[str, Any], **more: Any) -> Capture:
    return parse_capture({**_fake_answer(doc), **more})


def _fake_answer(doc: dict[str, Any]) -> dict[str, Any]:
    return {
        "vllm_version": "9.9",
        "tasks": ["generate"],
        "openapi": doc["openapi"],
        "models": doc["models"],
        "platform": {"used": "stand-in", "label": "stand-in vllm.platforms.cpu.CpuPlatform"},
        "endpoint_plugins": {"discovered": [], "attached": []},
        "notes": [],
        "counts": {"paths": 2, "schemas": 5},
        "timings": {"total": 0.1},
    }


def test_evaluate_keeps_run_specific_timings_out_of_the_result():
    """The same contract and app give the same check result, however long the capture took
    (the scorecard, and the manifest that quotes it, are deterministic)."""
    old = chat_contract()
    fast, slow = _fake_capture(old), _fake_capture(old, timings={"total": 42.5})
    one = api.evaluate(old, fast, contract_file="c.json").to_json()
    two = api.evaluate(old, slow, contract_file="c.json").to_json()
    assert one == two
    assert "42.5" not in json.dumps(two) and "timings" not in json.dumps(two)


def test_evaluate_statuses_and_evidence():
    old = chat_contract()
    same = api.evaluate(old, _fake_capture(old), contract_file="c.json")
    assert same.status == "pass" and same.details["breaking"] == 0
    assert "stand-in" in same.evidence[0].note

    new = mutate(lambda d: (P(d).pop("/v1/models"), P(d).update({"/v9": {"get": json_op()}})))
    bad = api.evaluate(old, _fake_capture(new), contract_file="c.json")
    assert bad.status == "fail"
    notes = [e.note for e in bad.evidence]
    assert any("[BREAKING] removed-path /v1/models" in n for n in notes)
    assert any("[info] added-path /v9" in n for n in notes)  # additive listed too
    allowed = api.evaluate(
        old, _fake_capture(new), contract_file="c.json", allow=[Allow("/v1/models", "retired")]
    )
    assert allowed.status == "warn" and allowed.details["accepted"] == 1
    json.dumps(bad.to_json())


# ---------------------------------------------------------------------------
# CLI


def test_cli_api_diff(tmp_path, capsys):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(dump_contract(chat_contract()))
    new.write_text(dump_contract(mutate(lambda d: _del(_resp(d), ["properties", "created"]))))
    assert main(["api-diff", str(old), str(old)]) == 0
    assert "0 breaking" in capsys.readouterr().out
    assert main(["api-diff", str(old), str(new), "--json"]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert payload["breaking"] == 1
    assert payload["changes"][0]["kind"] == "removed-response-property"
    assert main(["api-diff", str(old), str(new), "--markdown"]) == 1
    md = capsys.readouterr().out
    assert md.startswith("# API diff") and "removed-response-property" in md
    assert main(["api-diff", str(new), str(old)]) == 0  # adding it back is additive


def test_cli_bad_contract_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    assert main(["api-diff", str(bad), str(SHIPPED)]) == 2
    out = capsys.readouterr()
    assert "not valid JSON" in out.out + out.err


def test_cli_api_contract_needs_env(tmp_path, capsys):
    spec_file = tmp_path / "s.toml"
    spec_file.write_text(
        textwrap.dedent(
            """\
            spec_version = 1
            name = "api-cli"
            [core]
            name = "vllm"
            version = "0.26.0"
            target_device = "empty"
            source_date_epoch = 1700000000
            [core.source]
            kind = "sdist"
            sha256 = "%s"
            [build]
            python = "3.11"
            backend = "local"
            """
            % ("0" * 64)
        )
    )
    code = main(["api-contract", "--spec", str(spec_file), "--out", str(tmp_path / "c.json")])
    assert code == 2
    out = capsys.readouterr()
    assert "vpr env --spec" in out.out + out.err


# ---------------------------------------------------------------------------
# The shipped contract


def test_shipped_contract_is_valid_deterministic_and_small():
    text = SHIPPED.read_text()
    assert len(text.encode()) < 1_500_000
    doc = load_contract(SHIPPED)
    assert doc["core"] == {"name": "vllm", "version": "0.25.1"}
    assert dump_contract(json.loads(text)) == text  # sorted keys, our formatting
    assert set(doc["models"]) >= {
        "ChatCompletionRequest",
        "ChatCompletionResponse",
        "CompletionRequest",
        "CompletionResponse",
        "ModelList",
        "ErrorResponse",
    }
    assert {"/v1/chat/completions", "/v1/completions", "/v1/models"} <= set(doc["openapi"]["paths"])
    assert diff_contracts(doc, doc) == []


def test_default_contract_is_the_newest_older_than_the_core(tmp_path):
    """The previous release's clients, not a fixed 0.25.1."""
    from vllm_plugin_release.conform.checks.api import default_contract

    root = tmp_path / "repo"
    (root / "buildspec" / "contracts").mkdir(parents=True)
    for version in ("0.18.0", "0.25.1", "0.26.0", "0.27.0", "x"):
        (root / "buildspec" / "contracts" / f"vllm-{version}-openai.json").write_text("{}")
    (root / "pyproject.toml").write_text("")

    def at(core):
        text = REFERENCE_SPEC.read_text().replace('version = "0.26.0"', f'version = "{core}"', 1)
        (root / "buildspec" / "s.toml").write_text(text)
        return default_contract(load_spec(root / "buildspec" / "s.toml"))

    assert at("0.26.0") == "buildspec/contracts/vllm-0.25.1-openai.json"
    assert at("0.27.1") == "buildspec/contracts/vllm-0.27.0-openai.json"
    assert at("0.19.0") == "buildspec/contracts/vllm-0.18.0-openai.json"
    assert at("0.17.0") == DEFAULT_CONTRACT


def _recorded_project(tmp_path: Path, drop_path: str | None = None) -> Path:
    """A project pinning vLLM 0.26.0 whose buildspec/contracts holds the client contract
    (0.25.1, the shipped one) and a recorded 0.26.0 contract made from it."""
    from tests.pairing import write_spec

    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = write_spec(tmp_path)
    contracts = tmp_path / "buildspec" / "contracts"
    contracts.mkdir(parents=True, exist_ok=True)
    shipped = REPO / "buildspec" / "contracts" / "vllm-0.25.1-openai.json"
    (contracts / shipped.name).write_bytes(shipped.read_bytes())
    recorded = json.loads(shipped.read_text())
    recorded["core"]["version"] = "0.26.0"
    if drop_path is not None:
        del recorded["openapi"]["paths"][drop_path]
    (contracts / "vllm-0.26.0-openai.json").write_text(json.dumps(recorded))
    return spec


def test_recorded_contract_is_diffed_without_an_environment(tmp_path: Path) -> None:
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.conform.checks.api import check_recorded

    result = check_recorded(load_spec(_recorded_project(tmp_path / "good")))
    assert result is not None and result.status == "pass", result.summary
    assert "from the recorded contract buildspec/contracts/vllm-0.26.0-openai.json" in (
        result.summary
    )
    assert any("not captured in this pairing's environment" in e.note for e in result.evidence)
    # Known-bad: the recorded core drops an endpoint clients of 0.25.1 call.
    gone = "/v1/completions"
    bad = check_recorded(load_spec(_recorded_project(tmp_path / "bad", drop_path=gone)))
    assert bad is not None and bad.status == "fail"
    assert any(gone in e.note for e in bad.evidence)


def test_no_recorded_contract_means_no_answer(tmp_path: Path) -> None:
    from tests.pairing import write_spec
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.conform.checks.api import check_recorded

    assert check_recorded(load_spec(write_spec(tmp_path))) is None
