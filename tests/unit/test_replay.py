"""Scheduler replay: request mixes, cost model, metrics, the scheduler check, and real
replays of the reference plugin's scheduler and upstream vLLM's V1 scheduler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO, spec_head
from vllm_plugin_release.cli import main
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.replay import config, mix, model

REFERENCE = "vllm_reference_plugin.scheduler:ReferenceScheduler"


# Small but loaded: bursts of 6 arrive faster than the device drains them, so a
# token-budget scheduler mixes new prompts into running decodes. Two prompts are
# longer than max_model_len (1024) and must be reported as rejected.
SMALL_MIX = """
[conformance.request_mix]
requests = 36
seed = 11
arrival = {{process = "bursts", size = 6, interval = 0.05}}
prompt_tokens = {{dist = "empirical", values = [40, 90, 200, 350, 700, 1500]}}
output_tokens = {{dist = "uniform", min = 4, max = 24}}

[conformance.replay]
plugin_scheduler = "{plugin}"
policy = "{policy}"
max_model_len = 1024
max_num_seqs = 8
max_num_batched_tokens = 256
block_size = 16
cost_model = {{a = 0.002, b = 0.00002, c = 0.0001}}
"""


def write_spec(folder: Path, name: str, plugin: str = REFERENCE, policy: str = "reference") -> Path:
    (folder / "pyproject.toml").write_text("")
    spec = folder / f"{name}.toml"
    spec.write_text(spec_head(name) + SMALL_MIX.format(plugin=plugin, policy=policy))
    return spec


# ---------------------------------------------------------------------------
# Request mixes (pure).

BASE_MIX: dict[str, Any] = {
    "requests": 200,
    "seed": 7,
    "arrival": {"process": "poisson", "rate": 5.0},
    "prompt_tokens": {"dist": "lognormal", "median": 300, "sigma": 0.9, "max": 4000},
    "output_tokens": {"dist": "uniform", "min": 8, "max": 64},
}


def test_mix_same_seed_same_mix() -> None:
    one = mix.generate(dict(BASE_MIX), Path("."))
    two = mix.generate(dict(BASE_MIX), Path("."))
    assert one == two and one.digest() == two.digest()
    other = mix.generate({**BASE_MIX, "seed": 8}, Path("."))
    assert other.digest() != one.digest()
    assert len(one) == 200 and one.arrival[0] == 0.0
    assert one.limit(3).prompt == one.prompt[:3] and len(one.limit(3)) == 3
    assert list(one.arrival) == sorted(one.arrival)
    assert all(8 <= n <= 64 for n in one.output)
    assert all(1 <= n <= 4000 for n in one.prompt)
    # Streams are independent: changing the output distribution keeps arrivals and prompts.
    changed = mix.generate({**BASE_MIX, "output_tokens": {"dist": "fixed", "value": 5}}, Path("."))
    assert changed.arrival == one.arrival and changed.prompt == one.prompt


def test_mix_pinned_values() -> None:
    """The generator is part of the contract: these numbers must never change."""
    m = mix.generate(
        {
            "requests": 4,
            "seed": 1,
            "arrival": {"process": "poisson", "rate": 2.0},
            "prompt_tokens": {"dist": "lognormal", "median": 100, "sigma": 0.5},
            "output_tokens": {"dist": "uniform", "min": 1, "max": 10},
        },
        Path("."),
    )
    assert m.arrival == (0.0, 0.185929, 0.900323, 2.365905)
    assert m.prompt == (88, 126, 66, 155)
    assert m.output == (2, 2, 5, 7)
    assert m.digest() == "84b9733c511508af203e5c051cfc8727acc4b5a54238ecd4d263434975856a89"


def test_mix_bursts_and_at_once() -> None:
    m = mix.generate(
        {
            "requests": 7,
            "arrival": {"process": "bursts", "size": 3, "interval": 2.0},
            "prompt_tokens": {"dist": "fixed", "value": 10},
            "output_tokens": {"dist": "fixed", "value": 2},
        },
        Path("."),
    )
    assert m.arrival == (0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 4.0)
    assert m.prompt == (10,) * 7 and m.seed == 0
    at_once = mix.generate(
        {**BASE_MIX, "requests": 3, "arrival": {"process": "at_once"}}, Path(".")
    )
    assert at_once.arrival == (0.0, 0.0, 0.0)


def test_mix_from_trace_csv_and_jsonl(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "arrival_time,prompt_tokens,output_tokens\n10.5,100,5\n11.0,200,6\n\n12.25,300,7\n"
    )
    m = mix.generate({"trace": "t.csv"}, tmp_path)
    assert m.arrival == (0.0, 0.5, 1.75)
    assert m.prompt == (100, 200, 300) and m.output == (5, 6, 7)
    # Empirical lengths sampled from the trace's columns, Poisson arrivals.
    e = mix.generate(
        {
            "trace": "t.csv",
            "requests": 50,
            "arrival": {"process": "poisson", "rate": 1.0},
            "prompt_tokens": {"dist": "empirical"},
            "output_tokens": {"dist": "empirical"},
        },
        tmp_path,
    )
    assert set(e.prompt) <= {100, 200, 300} and len(e) == 50
    (tmp_path / "t.jsonl").write_text(
        '{"arrival_time": 0, "prompt_tokens": 3, "output_tokens": 4}\n'
        '{"arrival_time": 1, "prompt_tokens": 5, "output_tokens": 6}\n'
    )
    j = mix.generate({"trace": "t.jsonl"}, tmp_path)
    assert j.prompt == (3, 5)
    with pytest.raises(BadInput, match="only 3 rows"):
        mix.generate({"trace": "t.csv", "requests": 10}, tmp_path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("arrival_time,prompt_tokens,output_tokens\n0,10,5\n1,abc,5\n", r"t\.csv:3: prompt_tokens"),
        ("arrival_time,prompt_tokens,output_tokens\n0,10,5\n1,10\n", r"t\.csv:3: 2 fields"),
        ("arrival_time,prompt_tokens,output_tokens\n0,10,5\n-1,10,5\n", r"t\.csv:3: arrival_time"),
        ("arrival_time,prompt_tokens,output_tokens\n0,0,5\n", r"t\.csv:2: prompt_tokens"),
        ("arrival_time,prompt_tokens,output_tokens\n0,10,2.5\n", r"t\.csv:2: output_tokens"),
        ("arrival,prompt_tokens,output_tokens\n0,10,5\n", r"t\.csv:1: header lacks"),
    ],
)
def test_trace_malformed_rows_name_the_line(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "t.csv").write_text(content)
    with pytest.raises(BadInput, match=message):
        mix.generate({"trace": "t.csv"}, tmp_path)


def test_trace_jsonl_malformed_line(tmp_path: Path) -> None:
    (tmp_path / "t.jsonl").write_text(
        '{"arrival_time": 0, "prompt_tokens": 3, "output_tokens": 4}\n{not json\n'
    )
    with pytest.raises(BadInput, match=r"t\.jsonl:2: not a JSON object"):
        mix.generate({"trace": "t.jsonl"}, tmp_path)


def test_mix_table_errors_name_file_line_and_key(tmp_path: Path) -> None:
    spec_path = write_spec(tmp_path, "bad")
    text = spec_path.read_text().replace('process = "bursts"', 'process = "sometimes"')
    text = text.replace("seed = 11", "seed = 11\ncolour = 3")
    spec_path.write_text(text)
    from vllm_plugin_release.conform.registry import load_spec

    # the buildspec schema carries the request-mix schema: loading already names them
    with pytest.raises(BadInput) as info:
        load_spec(spec_path)
    message = str(info.value)
    assert "unknown key 'colour' in [conformance.request_mix]" in message
    assert "process must be one of" in message and "sometimes" in message
    assert f"{spec_path}:" in message
    # and the module's own validation says the same for a table that bypasses the spec
    with pytest.raises(BadInput, match="colour"):
        mix.generate({**BASE_MIX, "colour": 3}, Path("."))
    with pytest.raises(BadInput, match="needs median and sigma"):
        mix.generate({**BASE_MIX, "prompt_tokens": {"dist": "lognormal"}}, Path("."))
    with pytest.raises(BadInput, match="requests"):
        mix.generate({k: v for k, v in BASE_MIX.items() if k != "requests"}, Path("."))


def test_mix_from_named_file(tmp_path: Path) -> None:
    (tmp_path / "pilot.toml").write_text(
        '[request_mix]\nrequests = 5\nseed = 3\narrival = {process = "at_once"}\n'
        'prompt_tokens = {dist = "fixed", value = 9}\noutput_tokens = {dist = "fixed", value = 2}\n'
    )
    m = mix.generate({"file": "pilot.toml", "seed": 4}, tmp_path)
    assert len(m) == 5 and m.seed == 4 and m.prompt == (9,) * 5
    (tmp_path / "pilot.json").write_text(json.dumps({"requests": 2, "colour": 1}))
    with pytest.raises(BadInput, match=r"pilot\.json.*unknown key 'colour'"):
        mix.generate({"file": "pilot.json"}, tmp_path)


# ---------------------------------------------------------------------------
# Replay config and cost model (pure).


def test_replay_config_defaults_and_errors(tmp_path: Path) -> None:
    cfg = config.resolve({"policy": "tt"}, tmp_path)
    assert cfg.plugin_scheduler == "vllm_tt_plugin.scheduler:TTScheduler"
    assert cfg.upstream_scheduler == "vllm.v1.core.sched.scheduler:Scheduler"
    assert cfg.settings["num_gpu_blocks"] == 32 * 256 + 1
    assert cfg.cost.source.startswith("default")
    with pytest.raises(BadInput, match="plugin_scheduler"):
        config.resolve({}, tmp_path)
    with pytest.raises(BadInput, match="not 'module:Class'"):
        config.resolve({"plugin_scheduler": "no class here"}, tmp_path)
    with pytest.raises(BadInput, match="missing b, c"):
        config.resolve({"policy": "tt", "cost_model": {"a": 1}}, tmp_path)
    with pytest.raises(BadInput, match="must be >= max_model_len"):
        config.resolve({"policy": "tt", "enable_chunked_prefill": False}, tmp_path)


def test_cost_model_calibration(tmp_path: Path) -> None:
    rows = ["prefill_tokens,decode_requests,seconds"]
    for p, d in [(0, 1), (0, 8), (0, 32), (512, 0), (2048, 0), (1024, 0), (0, 16), (128, 4)]:
        rows.append(f"{p},{d},{0.003 + 0.00004 * p + 0.0005 * d:.9f}")
    (tmp_path / "steps.csv").write_text("\n".join(rows) + "\n")
    cfg = config.resolve({"policy": "tt", "cost_model": {"calibration": "steps.csv"}}, tmp_path)
    assert cfg.cost.a == pytest.approx(0.003, rel=1e-6)
    assert cfg.cost.b == pytest.approx(0.00004, rel=1e-6)
    assert cfg.cost.c == pytest.approx(0.0005, rel=1e-6)
    assert cfg.cost.source == "fitted from steps.csv"
    (tmp_path / "bad.csv").write_text("prefill_tokens,decode_requests,seconds\n1,2,x\n")
    with pytest.raises(BadInput, match=r"bad\.csv:2"):
        config.resolve({"policy": "tt", "cost_model": {"calibration": "bad.csv"}}, tmp_path)


def test_metrics_from_synthetic_steps() -> None:
    """Four steps, two requests: a mixed step, a decode stall, TTFT and ITL by hand."""
    m = mix.RequestMix((0.0, 0.0015), (10, 10), (3, 2), 0)
    raw = {
        "steps": {
            "start": [0.0, 0.001, 0.003, 0.006],
            "end": [0.001, 0.003, 0.006, 0.007],
            "prefill_tokens": [10, 10, 0, 0],
            "decode_tokens": [0, 1, 0, 1],
            "prefill_requests": [1, 1, 0, 0],
            "decode_requests": [0, 1, 0, 1],
            "preemptions": [0, 0, 0, 1],
            "partial_prefills": [1, 0, 0, 0],
            "prefill_pending": [0, 1, 0, 0],
        },
        # request 0: tokens at steps 0, 1, 3 -> [0, 1, 1, 2, 1]; request 1: at steps 1, 3
        "tokens": [[0, 1, 1, 2, 1], [1, 2, 1]],
        "rejected": [],
    }
    a = model.analyze(raw, m).summary
    assert (a["steps"], a["mixed_steps"], a["prefill_only_steps"]) == (4, 1, 1)
    assert (a["decode_only_steps"], a["empty_steps"], a["preemptions"]) == (1, 1, 1)
    assert a["first_mixed_step"] == 1
    assert a["chunked_prefill_steps"] == 1 and a["interleaved_decode_steps"] == 1
    assert a["ttft_s"]["max"] == pytest.approx(0.0015)  # request 1: 0.003 - 0.0015
    assert a["itl_s"]["max"] == pytest.approx(0.004)  # step 1 end -> step 3 end
    assert a["longest_decode_stall_steps"] == 1
    assert a["requests"]["completed"] == 2 and a["output_tokens"] == 5
    assert a["output_tokens_per_s"] == pytest.approx(5 / 0.007, rel=1e-4)
    assert list(model.expand_tokens([3, 1, 2, 4, 1])) == [3, 4, 5, 9]


def test_ratios() -> None:
    r = model.ratios(
        {"ttft_s": {"p50": 2.0}, "steps": 10, "longest_decode_stall_steps": 3},
        {"ttft_s": {"p50": 1.0}, "steps": 5, "longest_decode_stall_steps": 0},
    )
    assert r["ttft_p50_s"] == 2.0 and r["steps"] == 2.0
    assert r["longest_decode_stall_steps"] is None


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
    from vllm_plugin_release.conform.registry import load_spec
    from vllm_plugin_release.edges.envrun import run_in_env
    from vllm_plugin_release.replay import runner

    folder = tmp_path_factory.mktemp("replay-ref")
    (folder / "mutant").mkdir()
    (folder / "mutant" / "mixing_scheduler.py").write_text(MIXING)
    spec = load_spec(write_spec(folder, "ref"))
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
    raw = run_in_env(vllm_python, "replay", request)
    (folder / "crashing.json").write_text(json.dumps(raw["results"]["crashing"]))
    report, analyses = model.build_report(raw, request_mix, name="ref", replay_config=cfg.to_json())
    out = folder / "dist" / "ref"
    runner.write(runner.ReplayOutcome(report, model.timing_report(raw), analyses), out, plots=True)
    mutant_report = {
        "plugin": model.analyze(raw["results"]["mutant"], request_mix).summary,
        "upstream": report["upstream"],
    }
    (out / "mutant.json").write_text(json.dumps(mutant_report))
    tight_summary = model.analyze(raw["results"]["tight"], request_mix).summary
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
    spec = write_spec(tmp_path, "ref")
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
    from vllm_plugin_release.conform import scheddocs
    from vllm_plugin_release.conform.registry import load_spec

    spec = load_spec(REPO / "buildspec" / "reference.toml")
    root = REPO / "plugin" / "reference"
    result = scheddocs.check(spec, root, replay=report)
    assert result.status == "fail", result.summary
    assert any(e.file and e.line for e in result.evidence)
    # ... while the real reference scheduler passes against the same docs.
    good = json.loads((reference_replay / "replay.json").read_text())
    assert scheddocs.check(spec, root, replay=good).status == "pass"


def test_kv_pressure_preempts_and_still_completes(reference_replay: Path) -> None:
    tight = json.loads((reference_replay / "tight.json").read_text())
    assert tight["preemptions"] > 0
    assert tight["stopped"] is None
    assert tight["requests"]["completed"] + tight["requests"]["rejected"] == 36


def test_crashing_scheduler_is_reported_not_hidden(reference_replay: Path) -> None:
    raw = json.loads((reference_replay.parent.parent / "crashing.json").read_text())
    assert raw["crashed"] == "replay: RuntimeError: boom at step 5"
    assert any("boom" in line for line in raw["traceback"])
    report = {"plugin": model.crashed_summary(raw, mix.RequestMix((0.0,), (1,), (1,), 0))}
    from vllm_plugin_release.conform import scheddocs
    from vllm_plugin_release.conform.registry import load_spec

    spec = load_spec(REPO / "buildspec" / "reference.toml")
    result = scheddocs.check(spec, REPO / "plugin" / "reference", {**report, "upstream": {}})
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
    spec = write_spec(tmp_path, "bad", plugin=plugin, policy="none")
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


def test_replay_without_env_says_run_vpr_env(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = write_spec(tmp_path, "noenv")
    assert main(["replay", "--spec", str(spec)]) == 2
    assert "vpr env --spec" in capsys.readouterr().err
