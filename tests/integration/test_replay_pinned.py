"""The replay's results, pinned: a fixed mix through the real schedulers (the reference
plugin's, upstream vLLM's, and upstream's again with a KV cache tight enough to preempt,
its slow-path price on a share of the requests) gives the recorded results, per-step
columns and token timelines and their encoding byte for byte, and the recorded report.

What a speed-up of the replay must not change. The record is data/replay_pinned.json;
write it again only for a change of results that is meant (say so in the commit):

    PYTHONPATH=src:. python -m tests.integration.test_replay_pinned ENV_PYTHON
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from vllm_plugin_release.replay import config, mix, model, runner
from vllm_plugin_release.replay.model import parse_answer

RECORD = Path(__file__).resolve().parent / "data" / "replay_pinned.json"

# Loaded (arrivals faster than the batches drain), long prompts split into chunks.
MIX: dict[str, Any] = {
    "requests": 240,
    "seed": 5,
    "arrival": {"process": "poisson", "rate": 40.0},
    "prompt_tokens": {"dist": "lognormal", "median": 256, "sigma": 0.8, "max": 3000},
    "output_tokens": {"dist": "lognormal", "median": 48, "sigma": 0.8, "max": 400},
}
REPLAY: dict[str, Any] = {
    "policy": "reference",
    "max_model_len": 2048,
    "max_num_seqs": 32,
    "max_num_batched_tokens": 1024,
    "cost_model": {"a": 0.004, "b": 0.00005, "c": 0.0002},
}
TIGHT_BLOCKS = 200  # 3,200 tokens of KV cache: running requests get preempted


def request() -> tuple[dict[str, Any], mix.RequestMix]:
    request_mix = mix.generate(MIX, Path("."))
    cfg = config.resolve(REPLAY, Path("."))
    req = runner.build_request(request_mix, cfg)
    tight = {**req["schedulers"][1], "label": "tight"}
    tight["settings"] = {**tight["settings"], "num_gpu_blocks": TIGHT_BLOCKS}
    req["schedulers"].append(tight)
    # A slow path's price on every seventh request (as the workload marks put it).
    prices = [0.003 if i % 7 == 0 else 0.0 for i in range(len(request_mix))]
    req["cost_model"]["per_request"] = prices
    return req, request_mix


def digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def pinned(raw: dict[str, Any], request_mix: mix.RequestMix) -> dict[str, Any]:
    """What is recorded: each result's digest (its timings aside) with a few counts to tell
    which part moved, and the report's digest."""
    results = {}
    for label, result in raw["results"].items():
        kept = {k: v for k, v in result.items() if k != "timing"}
        steps = kept["steps"]
        results[label] = {
            "sha256": digest(kept),
            "tokens_sha256": digest(kept["tokens"]),
            "steps": len(steps["start"]),
            "preemptions": sum(steps["preemptions"]),
            "partial_prefills": sum(steps["partial_prefills"]),
            "end_s": steps["end"][-1],
        }
    labels = tuple(raw["results"])
    answer = parse_answer(raw, labels)
    report, _ = model.build_report(answer, request_mix, name="pinned", replay_config={})
    return {"results": results, "report_sha256": digest(report)}


def replay(python: Path, *, side_by_side: bool) -> dict[str, Any]:
    from tests.unit.test_envrun import Probe
    from vllm_plugin_release.edges.envrun import run_in_env

    req, request_mix = request()
    raw = run_in_env(python, Probe("replay", {**req, "side_by_side": side_by_side}))
    return pinned(raw, request_mix)


def test_the_replay_gives_the_pinned_results(vllm_python: Path) -> None:
    """One scheduler after the other, as on one core."""
    assert replay(vllm_python, side_by_side=False) == json.loads(RECORD.read_text())


def test_side_by_side_gives_the_pinned_results(vllm_python: Path) -> None:
    """Each scheduler in its own forked child, as on two cores or more."""
    assert replay(vllm_python, side_by_side=True) == json.loads(RECORD.read_text())


def test_the_pinned_mix_preempts_chunks_and_prices_slow_paths() -> None:
    """The record covers the loop's branches: preemptions, prefill chunks, slow paths."""
    record = json.loads(RECORD.read_text())["results"]
    assert record["tight"]["preemptions"] > 0
    assert record["upstream"]["partial_prefills"] > 0
    assert record["upstream"]["steps"] != record["plugin"]["steps"]
    req, _ = request()
    assert any(req["cost_model"]["per_request"])


if __name__ == "__main__":
    RECORD.parent.mkdir(exist_ok=True)
    RECORD.write_text(json.dumps(replay(Path(sys.argv[1]), side_by_side=False), indent=2) + "\n")
