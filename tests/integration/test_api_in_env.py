"""The api check in the real vLLM env: known-good (the default spec passes against the shipped
contract) and known-bad (an endpoint plugin that removes a request field)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import REPO, api_spec
from vllm_plugin_release.conform.checks import api
from vllm_plugin_release.conform.checks.api import DEFAULT_CONTRACT
from vllm_plugin_release.conform.lib import apicontract
from vllm_plugin_release.conform.lib.apicontract import load_contract

SHIPPED = REPO / DEFAULT_CONTRACT

STRIP_ECHO = '''\
from pydantic import create_model


class StripEcho:
    """Replaces POST /v1/completions with a handler whose request model lacks `echo`."""

    name = "strip-echo"
    required_tasks = None

    def attach_router(self, app):
        from vllm.entrypoints.openai.completion.protocol import CompletionRequest

        fields = {
            n: (f.annotation, f)
            for n, f in CompletionRequest.model_fields.items()
            if n != "echo"
        }
        trimmed = create_model(
            "TrimmedCompletionRequest", __config__=CompletionRequest.model_config, **fields
        )
        app.router.routes[:] = [
            r
            for r in app.router.routes
            if not (getattr(r, "path", None) == "/v1/completions" and "POST" in r.methods)
        ]

        async def create_completion(request: trimmed):
            return {}

        app.post("/v1/completions")(create_completion)

    async def init_state(self, engine_client, state, args):
        return None
'''


def write_endpoint_plugin(site: Path) -> Path:
    """A tiny installed-looking distribution with a `vllm.endpoint_plugins` entry point."""
    site.mkdir(parents=True, exist_ok=True)
    (site / "vpr_strip_echo.py").write_text(STRIP_ECHO)
    info = site / "vpr_strip_echo-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vpr-strip-echo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[vllm.endpoint_plugins]\nstrip-echo = vpr_strip_echo:StripEcho\n"
    )
    return site


@pytest.fixture(scope="module")
def in_env(vllm_python, tmp_path_factory):
    """Both env runs at once (each builds the app, slowly): the check and a mutated capture."""
    site = write_endpoint_plugin(tmp_path_factory.mktemp("endpoint-plugin") / "site")
    with ThreadPoolExecutor(max_workers=2) as pool:
        good = pool.submit(api.check, api_spec({"tasks": ["generate"]}), vllm_python, None)
        bad = pool.submit(
            apicontract.capture, vllm_python, ["generate"], None, env={"PYTHONPATH": str(site)}
        )
        return good.result(), bad.result()


def test_known_good_default_spec_passes_against_shipped_contract(in_env):
    result, _ = in_env
    assert result.name == "api"
    assert result.status == "pass", "\n".join(e.note for e in result.evidence)
    assert result.details["breaking"] == 0
    assert result.details["contract"]["core"]["version"] == "0.25.1"
    captured = result.details["captured"]
    assert captured["counts"]["paths"] >= 20 and captured["counts"]["schemas"] >= 300
    assert captured["platform"]["used"] in {"plugin", "stand-in"}
    assert result.evidence[0].note.startswith("current platform: ")
    # additive changes are listed as info
    assert result.details["additive"] > 0
    assert any(e.note.startswith("[info] ") for e in result.evidence)


def test_known_bad_endpoint_plugin_removing_a_field_fails(in_env):
    _, captured = in_env
    assert captured.endpoint_plugins.attached == ["strip-echo"]
    result = api.evaluate(load_contract(SHIPPED), captured, contract_file=DEFAULT_CONTRACT)
    assert result.status == "fail"
    removed = [
        c
        for c in result.details["changes"]
        if c["kind"] == "removed-request-field" and c["location"].endswith(".echo")
    ]
    assert removed and removed[0]["breaking"] and removed[0]["via"] == "POST /v1/completions"
    assert "silently ignored" in removed[0]["detail"]
    # the app built without the endpoint plugin tells vLLM's own changes from the plugin's
    assert removed[0]["origin"] == "endpoint plugins"
    assert all(
        c["origin"] == "vLLM core"
        for c in result.details["changes"]
        if not c["breaking"]
        and c["kind"] == "added-request-field"
        and c["location"].startswith("Chat")
    )
    assert "from endpoint plugins" in result.summary
