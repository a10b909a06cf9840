"""Real replays in the vLLM environment: the reference plugin's scheduler, upstream vLLM's V1
scheduler, a mutant that mixes, a tight KV cache and a crashing scheduler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, replay_spec
from vllm_plugin_release.cli import main
from vllm_plugin_release.replay import config, mix, model

# ---------------------------------------------------------------------------
# ---------------------------------------------------------------------------
# Real replays in the vLLM environment.

MIXING = '''
from vllm.v1.core.sched.scheduler import Scheduler
from vllm_reference_plugin.scheduler import ReferenceScheduler


class MixingScheduler(ReferenceScheduler):
    """The reference scheduler with its phase separation mutated away."""

    def schedule(self, throttle_prefills=False):
        return Scheduler.schedule(self, throttle_prefills)


class CrashingScheduler(Scheduler):
    """Fails part-way, as an incompatible plugin scheduler would."""

    def schedule(self, throttle_prefills=False):
        if self.current_step >= 5:
            raise RuntimeError("boom at step 5")
        return super().schedule(throttle_prefills)
'''


@pytest.fixture(scope="module")
def reference_replay(vllm_python: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One in-env run: the reference scheduler, upstream's, and a mutant that mixes.

    The report for reference vs upstream is written as `vpr replay` writes it; the
    mutant's raw result is kept beside it (one vLLM import for all three).
    """
    from tests.unit.test_envrun import Probe
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.edges.envrun import run_in_env
    from vllm_plugin_release.replay import runner
    from vllm_plugin_release.replay.model import parse_answer

    folder = tmp_path_factory.mktemp("replay-ref")
    (folder / "mutant").mkdir()
    (folder / "mutant" / "mixing_scheduler.py").write_text(MIXING)
    spec = load_spec(replay_spec(folder, "ref"))
    request_mix, cfg = mix.from_spec(spec), config.from_spec(spec)
    request = runner.build_request(request_mix, cfg, sys_path=[folder / "mutant"])
    mutant = {**request["schedulers"][0], "label": "mutant"}
    mutant["cls"] = "mixing_scheduler:MixingScheduler"
    request["schedulers"].append(mutant)
    # Upstream again with a KV cache that holds barely more than one full sequence.
    tight = {**request["schedulers"][1], "label": "tight"}
    tight["settings"] = {**tight["settings"], "num_gpu_blocks": 72}
    request["schedulers"].append(tight)
    crashing = {**request["schedulers"][1], "label": "crashing"}
    crashing["cls"] = "mixing_scheduler:CrashingScheduler"
    request["schedulers"].append(crashing)
    raw = run_in_env(vllm_python, Probe("replay", request))
    (folder / "crashing.json").write_text(json.dumps(raw["results"]["crashing"]))
    answer = parse_answer(raw, tuple(s["label"] for s in request["schedulers"]))
    report, analyses = model.build_report(
        answer, request_mix, name="ref", replay_config=cfg.to_json()
    )
    out = folder / "dist" / "ref"
    runner.write(
        runner.ReplayOutcome(report, model.timing_report(answer), analyses), out, plots=True
    )
    mutant_report = {
        "plugin": model.analyze(answer.results["mutant"], request_mix).summary,
        "upstream": report["upstream"],
    }
    (out / "mutant.json").write_text(json.dumps(mutant_report))
    tight_summary = model.analyze(answer.results["tight"], request_mix).summary
    (out / "tight.json").write_text(json.dumps(tight_summary))
    return out


def test_reference_never_mixes_upstream_does(reference_replay: Path) -> None:
    report = json.loads((reference_replay / "replay.json").read_text())
    plugin, upstream = report["plugin"], report["upstream"]
    for side in (plugin, upstream):
        for key in (
            "steps",
            "mixed_steps",
            "prefill_only_steps",
            "decode_only_steps",
            "requests",
            "ttft_s",
            "itl_s",
            "output_tokens_per_s",
            "longest_decode_stall_steps",
        ):
            assert key in side, key
        assert side["steps"] == (
            side["mixed_steps"]
            + side["prefill_only_steps"]
            + side["decode_only_steps"]
            + side["empty_steps"]
        )
    assert plugin["mixed_steps"] == 0
    assert plugin["prefill_only_steps"] > 0 and plugin["decode_only_steps"] > 0
    assert upstream["mixed_steps"] > 0
    # Chunked prefill: off on the plugin side (policy), on upstream (256-token budget).
    assert plugin["chunked_prefill_steps"] == 0 and upstream["chunked_prefill_steps"] > 0
    # Both run decode steps while prompts wait (the reference one falls back to decode
    # when no waiting request can be admitted).
    assert plugin["interleaved_decode_steps"] > 0 and upstream["interleaved_decode_steps"] > 0
    # Prompts over max_model_len are rejected, as vLLM would, not dropped.
    rejected = [i for i, p in enumerate(mix_of(report)) if p >= 1024]
    assert rejected and plugin["requests"]["rejected"] == len(rejected)
    assert sorted(r["index"] for r in plugin["rejected"]) == rejected
    assert "max_model_len 1024" in plugin["rejected"][0]["reason"]
    assert plugin["requests"]["completed"] == 36 - len(rejected)
    assert upstream["requests"]["completed"] == 36 - len(rejected)
    # The reference policy was applied to the plugin side only, and said why.
    changes = {c["key"]: c for c in plugin["policy"]["changes"]}
    assert changes["enable_chunked_prefill"]["to"] is False
    assert changes["max_num_batched_tokens"]["to"] == 1024
    assert changes["enable_chunked_prefill"]["why"]
    assert plugin["settings_effective"]["enable_chunked_prefill"] is False
    assert upstream["policy"]["changes"] == []
    assert upstream["settings_effective"]["enable_chunked_prefill"] is True
    assert set(report["ratios"]) >= {"ttft_p50_s", "itl_p99_s", "output_tokens_per_s"}
    for png in ("replay-steps.png", "replay-itl.png"):
        assert (reference_replay / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    timing = json.loads((reference_replay / "replay-timing.json").read_text())
    assert timing["scheduler_s"] > 0 and timing["overhead_ratio"] >= 1.0


def mix_of(report: dict[str, Any]) -> list[int]:
    """The prompts of SMALL_MIX (regenerated: the report holds the digest only)."""
    m = mix.generate(
        {
            "requests": 36,
            "seed": 11,
            "arrival": {"process": "bursts", "size": 6, "interval": 0.05},
            "prompt_tokens": {"dist": "empirical", "values": [40, 90, 200, 350, 700, 1500]},
            "output_tokens": {"dist": "uniform", "min": 4, "max": 24},
        },
        Path("."),
    )
    assert m.digest() == report["mix"]["sha256"]
    return list(m.prompt)


def test_replay_is_deterministic(reference_replay: Path, vllm_python: Path, tmp_path: Path) -> None:
    """`vpr replay` in a second process gives the same replay.json."""
    spec = replay_spec(tmp_path, "ref")
    code = main(
        [
            "replay",
            "--spec",
            str(spec),
            "--python",
            str(vllm_python),
            "--no-plots",
            "--dist",
            str(tmp_path / "dist"),
        ]
    )
    assert code == 0
    first = json.loads((reference_replay / "replay.json").read_text())
    first.pop("plots", None)
    second = json.loads((tmp_path / "dist" / "ref" / "replay.json").read_text())
    assert first == second


def test_mutated_scheduler_fails_the_check(reference_replay: Path, tmp_path: Path) -> None:
    report = json.loads((reference_replay / "mutant.json").read_text())
    assert report["plugin"]["mixed_steps"] > 0
    # The real scheduler check (docs half + replay half) on the reference plugin's docs,
    # which say a step never mixes prefill and decode.
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.conform.checks import scheduler as scheddocs

    spec = load_spec(REPO / "buildspec" / "reference.toml")
    root = REPO / "plugin" / "reference"
    result = scheddocs.check(spec, root, replay=model.parse_report(report))
    assert result.status == "fail", result.summary
    assert any(e.file and e.line for e in result.evidence)
    # ... while the real reference scheduler passes against the same docs.
    good = json.loads((reference_replay / "replay.json").read_text())
    assert scheddocs.check(spec, root, replay=model.parse_report(good)).status == "pass"


def test_kv_pressure_preempts_and_still_completes(reference_replay: Path) -> None:
    tight = json.loads((reference_replay / "tight.json").read_text())
    assert tight["preemptions"] > 0
    assert tight["stopped"] is None
    assert tight["requests"]["completed"] + tight["requests"]["rejected"] == 36


def test_crashing_scheduler_is_reported_not_hidden(reference_replay: Path) -> None:
    raw = json.loads((reference_replay.parent.parent / "crashing.json").read_text())
    assert raw["crashed"] == "replay: RuntimeError: boom at step 5"
    assert any("boom" in line for line in raw["traceback"])
    from vllm_plugin_release.replay.model import parse_answer

    side = parse_answer({"results": {"plugin": raw}}, ("plugin",)).results["plugin"]
    report = {"plugin": model.crashed_summary(side, mix.RequestMix((0.0,), (1,), (1,), 0))}
    from vllm_plugin_release.buildspec.load import load_spec
    from vllm_plugin_release.conform.checks import scheduler as scheddocs

    spec = load_spec(REPO / "buildspec" / "reference.toml")
    replay = model.parse_report({**report, "upstream": {}})
    result = scheddocs.check(spec, REPO / "plugin" / "reference", replay)
    assert result.status == "fail" and "boom at step 5" in result.summary


@pytest.mark.parametrize(
    ("plugin", "message"),
    [
        ("no_such_module_xyz:Sched", "does not import"),
        ("collections:OrderedDict", "is not a vLLM scheduler"),
        ("json:NoSuchThing", "has no 'NoSuchThing'"),
    ],
)
def test_bad_scheduler_class_exits_2(
    vllm_python: Path, tmp_path: Path, plugin: str, message: str, capsys: pytest.CaptureFixture
) -> None:
    spec = replay_spec(tmp_path, "bad", plugin=plugin, policy="none")
    code = main(
        [
            "replay",
            "--spec",
            str(spec),
            "--python",
            str(vllm_python),
            "--no-plots",
            "--dist",
            str(tmp_path / "dist"),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and plugin.split(":")[0] in err
