"""Scheduler replay: request mixes, cost model, metrics and the CLI's bad input (the real
replays in the vLLM env: tests/integration/test_replay_in_env.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import replay_spec
from vllm_plugin_release.cli import main
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.replay import config, mix, model
from vllm_plugin_release.replay.model import ReplayAnswer, parse_answer

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
    spec_path = replay_spec(tmp_path, "bad")
    text = spec_path.read_text().replace('process = "bursts"', 'process = "sometimes"')
    text = text.replace("seed = 11", "seed = 11\ncolour = 3")
    spec_path.write_text(text)
    from vllm_plugin_release.buildspec.load import load_spec

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


def test_a_calibration_column_naming_no_path_is_ignored(tmp_path: Path) -> None:
    """A bare `path:` header names no slow path: it is neither fitted nor read."""
    rows = ["prefill_tokens,decode_requests,seconds,path:"]
    for p, d in [(0, 1), (0, 8), (512, 0), (2048, 0), (128, 4)]:
        rows.append(f"{p},{d},{0.003 + 0.00004 * p + 0.0005 * d:.9f},x")
    (tmp_path / "steps.csv").write_text("\n".join(rows) + "\n")
    cfg = config.resolve({"policy": "tt", "cost_model": {"calibration": "steps.csv"}}, tmp_path)
    assert cfg.cost.paths == {}
    assert cfg.cost.b == pytest.approx(0.00004, rel=1e-6)


def test_slow_path_terms_in_the_cost_model(tmp_path: Path) -> None:
    """A `path:NAME` column fits that path's price; without one the spec's price (or 0:
    not calibrated) is used; a price may come with a, b, c too."""
    rows = ["prefill_tokens,decode_requests,seconds,path:host sampler"]
    for p, d, h in [(0, 1, 0), (0, 8, 4), (0, 32, 0), (512, 0, 0), (2048, 0, 0), (0, 16, 16),
                    (128, 4, 1), (0, 4, 4)]:  # fmt: skip
        rows.append(f"{p},{d},{0.003 + 0.00004 * p + 0.0005 * d + 0.002 * h:.9f},{h}")
    (tmp_path / "steps.csv").write_text("\n".join(rows) + "\n")
    cfg = config.resolve({"policy": "tt", "cost_model": {"calibration": "steps.csv"}}, tmp_path)
    assert cfg.cost.paths["host sampler"] == pytest.approx(0.002, rel=1e-6)
    assert cfg.cost.c == pytest.approx(0.0005, rel=1e-6)
    # known-bad: a path column that never varies cannot be told apart from a
    flat = [rows[0]] + [",".join(r.split(",")[:3]) + ",1" for r in rows[1:]]
    (tmp_path / "flat.csv").write_text("\n".join(flat) + "\n")
    with pytest.raises(BadInput, match="requests per slow path"):
        config.resolve({"policy": "tt", "cost_model": {"calibration": "flat.csv"}}, tmp_path)
    priced = config.resolve(
        {"policy": "tt", "cost_model": {"a": 0.004, "b": 0, "c": 0, "paths": {"x": 0.001}}},
        tmp_path,
    )
    assert priced.cost.paths == {"x": 0.001}
    slow = [{"name": "host sampler", "predicate": "m:f"}, {"name": "x", "predicate": "m:g"}]
    marked = config.with_slow_paths(priced, slow)
    assert marked.cost.paths == {"x": 0.001, "host sampler": 0.0}
    assert marked.to_json()["slow_paths"] == slow


def _marked(paths: dict[str, Any] | None) -> ReplayAnswer:
    """An answer of the in-env replay with no scheduler's side, and these marks."""
    return parse_answer({"results": {}, "paths": paths}, ())


def test_slow_path_marks_in_the_report() -> None:
    m = mix.RequestMix((0.0,) * 4, (5,) * 4, (2,) * 4, 0)
    slow = [{"name": "host sampler", "instead_of": "device sampler", "predicate": "m:f"}]
    marks = model.path_marks(
        _marked({"per_request": [None, "host sampler", None, "host sampler"]}), slow, m
    )
    assert marks["per_path"]["host sampler"] == {
        "instead_of": "device sampler", "requests": 2, "share": 0.5, "indices": [1, 3]
    }  # fmt: skip
    assert marks["per_path"]["default"] == {"requests": 2, "share": 0.5}
    report = {"ratios": {}, "plugin": {}, "upstream": {}, "paths": marks}
    assert "50.0% of requests leave the device sampler for the host sampler" in (
        model.headline_text(model.headline(report))
    )
    assert model.path_marks(_marked({"error": "no such module"}), slow, m) == {
        "error": "no such module"
    }
    assert model.path_marks(_marked(None), slow, m) is None


def _old_headline(report: dict[str, Any]) -> dict[str, Any]:
    """What `headline` returned as a plain dict before it was a record."""
    ratios_ = report.get("ratios") or {}
    out: dict[str, Any] = {
        "ratios": {key: ratios_.get(key) for _, key in model.HEADLINE},
        "mixed_step_share": {
            side: (report.get(side) or {}).get("mixed_step_share")
            for side in ("plugin", "upstream")
        },
    }
    per_path = (report.get("paths") or {}).get("per_path")
    if per_path:
        out["paths"] = {
            name: {k: v for k, v in mark.items() if k != "indices"}
            for name, mark in per_path.items()
        }
    return out


def _report() -> dict[str, Any]:
    m = mix.RequestMix((0.0,) * 4, (5,) * 4, (2,) * 4, 0)
    slow = [{"name": "host sampler", "instead_of": "device sampler", "predicate": "m:f"},
            {"name": "cpu", "predicate": "m:g"}]  # fmt: skip
    marks = model.path_marks(_marked({"per_request": [None, "host sampler", "cpu", None]}), slow, m)
    ratios = {key: 1.25 for key, _ in model.RATIO_KEYS} | {"steps": None}
    return {"ratios": ratios, "plugin": {"mixed_step_share": 0.0}, "upstream": {}, "paths": marks}


def test_the_headline_writes_the_json_it_always_did() -> None:
    report = _report()
    assert json.dumps(model.headline(report).to_json()) == json.dumps(_old_headline(report))
    plain = {"ratios": {}, "plugin": {"crashed": "boom"}, "upstream": {}, "paths": {"error": "x"}}
    assert json.dumps(model.headline(plain).to_json()) == json.dumps(_old_headline(plain))
    assert "25.0% of requests take the cpu" in model.headline_text(model.headline(report))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"paths": {"per_path": {"cpu": 3}}}, "paths.per_path.cpu is int, expected an object"),
        ({"ratios": {"itl_p50_s": "fast"}}, "ratios.itl_p50_s is 'fast', expected a number"),
        ({"plugin": ["x"]}, "plugin is list, expected an object"),
        ({"paths": {"per_path": {"cpu": {"requests": -1}}}}, "cpu.requests is -1"),
        ({"paths": {"per_path": {"cpu": {"requests": 1, "instead_of": 2}}}}, "instead_of is 2"),
    ],
)
def test_a_malformed_replay_record_is_refused_naming_the_key(
    change: dict[str, Any], message: str
) -> None:
    """A hand-edited or truncated replay.json is exit 2 naming the file and the key (the
    old headline crashed on a path that is not an object, or passed a text ratio on)."""
    with pytest.raises(BadInput, match=r"^dist/x/replay\.json: ") as info:
        model.headline({**_report(), **change}, "dist/x/replay.json")
    assert message in info.value.message


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
    a = model.analyze(
        parse_answer({"results": {"plugin": raw}}, ("plugin",)).results["plugin"], m
    ).summary
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


def test_replay_without_env_says_run_vpr_env(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    spec = replay_spec(tmp_path, "noenv")
    assert main(["replay", "--spec", str(spec)]) == 2
    assert "vpr env --spec" in capsys.readouterr().err


def test_headline_and_plot_titles_name_pairing_cost_model_and_one_unit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from tests.unit.test_scorecard import FACTS
    from vllm_plugin_release.replay import runner

    report = {
        "name": "reference",
        "vllm_version": "0.26.0",
        "config": {"cost_model": {"a": 0.004, "b": 2e-05, "c": 0.0005, "source": "spec"}},
        "ratios": FACTS["replay"]["ratios"],  # the reference replay's figures
        "plugin": {"mixed_step_share": 0.0},
        "upstream": {"mixed_step_share": 0.186},
    }
    text = model.headline_text(model.headline(report))
    assert "ITL p99 1.17x" in text and "throughput 0.97x" in text and "0.0% vs 18.6%" in text
    title = runner.caption(report)
    assert "reference" in title and "0.26.0" in title
    assert "4 ms + 0.02 ms/prefill token + 0.5 ms/decode request (spec)" in title
    itl = np.array([0.004, 0.02, 0.02, 0.06])
    a = model.Analysis({}, np.array([0.0, 1.0]), np.array([1.0, 2.0]), np.array([10, 0]),
                       np.array([0, 4]), np.array([False, False]), itl, itl)  # fmt: skip
    captured: list[str] = []
    import matplotlib.figure

    real = matplotlib.figure.Figure.savefig

    def spy(fig: Any, *args: Any, **kw: Any) -> Any:
        captured.extend(
            [fig._suptitle.get_text() if fig._suptitle else ""]
            + [ax.get_xlabel() for ax in fig.axes]
        )
        return real(fig, *args, **kw)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)  # reads, then draws for real
    runner.draw({"plugin": a, "upstream": a}, tmp_path, title=title)
    assert (tmp_path / "replay-itl.png").stat().st_size > 0
    assert sum(title in c for c in captured) == 2  # both figures carry the title
    itl_labels = [c for c in captured if "inter-token latency" in c]
    assert itl_labels == ["inter-token latency (ms)", "inter-token latency (ms)"]


def test_a_scheduler_gets_the_arguments_its_own_vllm_passes() -> None:
    """vLLM 0.19.0's Scheduler takes no `hash_block_size` (0.26.0's does): the replay passes
    each constructor what it takes, as that core's EngineCore would."""
    from vllm_plugin_release.inenv.replay import accepted

    offered = {"vllm_config": 1, "block_size": 16, "hash_block_size": 16, "log_stats": False}

    class Old:
        def __init__(self, vllm_config, block_size, log_stats=True):  # type: ignore[no-untyped-def]
            pass

    class Plugin(Old):  # a plugin's scheduler handing **kwargs to vLLM's
        def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__(*args, **kwargs)

    class Open:
        def __init__(self, vllm_config, **kwargs):  # type: ignore[no-untyped-def]
            pass

    assert accepted(Old, offered) == {"vllm_config": 1, "block_size": 16, "log_stats": False}
    assert accepted(Plugin, offered) == accepted(Old, offered)
    assert accepted(Open, offered) == offered
    Plugin(**accepted(Plugin, offered))
