"""Replay of the plugin's own scheduler class with its platform's check_and_update_config
hook applied, both named in the spec. The synthetic plugin is
tests/plugins/hooked_scheduler; the replay runs in the real vLLM environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import replay_spec
from tests.unit.test_envrun import Probe
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges.envrun import run_in_env
from vllm_plugin_release.replay import config, mix, runner

PLUGIN_SRC = Path(__file__).resolve().parents[1] / "plugins" / "hooked_scheduler" / "src"
SCHEDULER = "hooked_plugin.scheduler:HookedScheduler"


def _request(tmp_path: Path, policy: str) -> dict:
    spec = load_spec(replay_spec(tmp_path, "hooked", plugin=SCHEDULER, policy=policy))
    return runner.build_request(mix.from_spec(spec), config.from_spec(spec), sys_path=[PLUGIN_SRC])


def test_the_platform_hook_shapes_the_plugin_side(vllm_python: Path, tmp_path: Path) -> None:
    request = _request(tmp_path, "platform:hooked_plugin.platform:HookedPlatform")
    raw = run_in_env(vllm_python, Probe("replay", request), timeout=900)
    plugin, upstream = raw["results"]["plugin"], raw["results"]["upstream"]
    assert "crashed" not in plugin, plugin.get("crashed")
    assert plugin["scheduler_class"] == "hooked_plugin.scheduler.HookedScheduler"
    changes = {c["key"]: (c["from"], c["to"]) for c in plugin["policy"]["changes"]}
    assert changes["max_num_seqs"] == (8, 4)
    assert changes["scheduler_cls"][1] == "hooked_plugin.scheduler.HookedScheduler"
    assert plugin["settings_effective"]["max_num_seqs"] == 4
    assert upstream["policy"]["changes"] == []  # the hook shapes the plugin side only


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("platform:collections:OrderedDict", "is not a vLLM platform"),
        ("platform:hooked_plugin.platform:Nope", "has no 'Nope'"),
    ],
)
def test_a_platform_that_is_not_one_is_bad_input(
    vllm_python: Path, tmp_path: Path, policy: str, message: str
) -> None:
    with pytest.raises(BadInput, match=message):
        run_in_env(vllm_python, Probe("replay", _request(tmp_path, policy)), timeout=900)
