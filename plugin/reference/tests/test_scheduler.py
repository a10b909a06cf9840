"""ReferenceScheduler driven through vLLM's real scheduling code path.

Each test builds a real VllmConfig and KVCacheConfig, feeds real Request
objects and returns real ModelRunnerOutput objects through
`update_from_output`, exactly like the engine core loop.
"""

from __future__ import annotations

import pytest
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.request import RequestStatus

from vllm_reference_plugin.policy import apply_scheduler_policy
from vllm_reference_plugin.scheduler import ReferenceScheduler


@pytest.fixture
def policy_config(make_vllm_config):
    """A config with the reference policy applied (whether or not the platform is active)."""

    def build(**kwargs):
        config = make_vllm_config(**kwargs)
        apply_scheduler_policy(config.scheduler_config, config.model_config)
        return config

    return build


def mixed_load(make_request):
    """Arrivals that land while earlier requests are decoding."""
    return {
        0: [make_request("A", 40, 12), make_request("B", 24, 8)],
        3: [make_request("C", 60, 10)],
        5: [make_request("D", 30, 6), make_request("E", 100, 10)],
        9: [make_request("F", 20, 4)],
    }


def test_reference_scheduler_never_mixes_prefill_and_decode(
    policy_config, make_scheduler, make_request, driver
):
    sched = make_scheduler(ReferenceScheduler, policy_config())
    run = driver(sched)
    load = mixed_load(make_request)
    run.run(load)

    assert "mixed" not in run.kinds, run.kinds
    assert {"prefill", "decode"} <= set(run.kinds)
    # every request ran to completion with exactly max_tokens outputs
    for requests in load.values():
        for request in requests:
            assert request.status == RequestStatus.FINISHED_LENGTH_CAPPED
            assert len(run.outputs[request.request_id]) == request.max_tokens
    # the scheduler's own bookkeeping agrees with the classification
    assert sched.step_kinds["prefill"] == run.kinds.count("prefill")
    assert sched.step_kinds["decode"] == run.kinds.count("decode")


def test_upstream_scheduler_mixes_under_the_same_load(
    policy_config, make_scheduler, make_request, driver
):
    """Same config, same load, vLLM's own Scheduler: steps do mix (the check can fail)."""
    run = driver(make_scheduler(Scheduler, policy_config()))
    run.run(mixed_load(make_request))
    assert "mixed" in run.kinds, run.kinds


def test_arrival_gets_a_prefill_only_step_then_decodes_resume(
    policy_config, make_scheduler, make_request, driver
):
    run = driver(make_scheduler(ReferenceScheduler, policy_config()))
    run.add([make_request("A", 32, 20), make_request("B", 16, 20)])
    first = run.step()
    assert first.kind == "prefill" and set(first.prefill) == {"A", "B"}
    assert run.step().kind == "decode"

    run.add([make_request("C", 48, 5)])
    admit = run.step()
    assert admit.kind == "prefill"
    assert admit.prefill == {"C": 48}  # whole prompt, A and B withheld

    after = run.step()
    assert after.kind == "decode"
    assert set(after.decode) == {"A", "B", "C"}


def chunked(config, budget: int = 64):
    """Undo the policy on a built config: chunked prefill on, a small token budget.

    (When ReferencePlatform is the current platform, building the VllmConfig
    already applied the policy; this puts the upstream defaults back.)
    """
    config.scheduler_config.enable_chunked_prefill = True
    config.scheduler_config.max_num_batched_tokens = budget
    config.scheduler_config.scheduler_cls = None
    return config


def test_prompt_is_prefilled_whole(make_vllm_config, make_scheduler, make_request, driver):
    """Chunked prefill requested with a small budget: the policy makes it one step."""
    config = chunked(make_vllm_config())
    reasons = apply_scheduler_policy(config.scheduler_config, config.model_config)
    assert any("enable_chunked_prefill" in r for r in reasons)
    run = driver(make_scheduler(ReferenceScheduler, config))
    run.add([make_request("long", 300, 2)])
    assert run.step().prefill == {"long": 300}

    # vLLM's scheduler on the config without the policy splits the same prompt
    upstream = driver(make_scheduler(Scheduler, chunked(make_vllm_config())))
    upstream.add([make_request("long", 300, 2)])
    assert upstream.step().prefill == {"long": 64}


def test_falls_back_to_decode_when_max_num_seqs_is_reached(
    policy_config, make_scheduler, make_request, driver
):
    sched = make_scheduler(ReferenceScheduler, policy_config(max_num_seqs=2))
    run = driver(sched)
    load = {0: [make_request("A", 20, 4), make_request("B", 20, 6)], 2: [make_request("C", 20, 3)]}
    run.run(load)

    # the last step is empty: it only reports the last finished ids, as in the engine
    assert run.kinds[-1] == "empty" and run.steps[-1].finished_req_ids
    assert "mixed" not in run.kinds and "empty" not in run.kinds[:-1], run.kinds
    first_c = next(s.index for s in run.steps if "C" in s.prefill)
    # C waited (decode steps ran) until A finished and freed its seat
    assert run.kinds[2:first_c] == ["decode"] * (first_c - 2)
    assert "A" in run.steps[first_c].finished_req_ids
    assert len(run.outputs["C"]) == 3


def test_falls_back_to_decode_under_kv_pressure(
    policy_config, make_scheduler, make_request, driver
):
    # 10 blocks x 16 tokens; A grows to 64 + 40 tokens (7 blocks); C needs 7 blocks.
    sched = make_scheduler(ReferenceScheduler, policy_config(), num_blocks=10)
    run = driver(sched)
    load = {0: [make_request("A", 64, 40)], 2: [make_request("C", 100, 4)]}
    run.run(load)

    assert "mixed" not in run.kinds, run.kinds
    first_c = next(s.index for s in run.steps if "C" in s.prefill)
    assert first_c > 3, "C should have waited for KV blocks"
    assert run.kinds[2:first_c].count("decode") == first_c - 2
    assert len(run.outputs["A"]) == 40 and len(run.outputs["C"]) == 4


def test_decode_fallback_still_reports_finished_requests(
    policy_config, make_scheduler, make_request, driver
):
    """The discarded prefill attempt must not swallow finished request ids."""
    sched = make_scheduler(ReferenceScheduler, policy_config(max_num_seqs=2))
    run = driver(sched)
    run.add([make_request("A", 16, 50), make_request("B", 16, 50)])
    run.step()
    run.add([make_request("C", 16, 5), make_request("D", 16, 5)])
    sched.finish_requests("D", RequestStatus.FINISHED_ABORTED)

    step_before = sched.current_step
    step = run.step()
    assert step.kind == "decode"  # C cannot be admitted: two seats, both taken
    assert "D" in step.finished_req_ids
    assert sched.current_step == step_before + 1


def test_preempted_requests_come_back_as_prefill_only_steps(
    policy_config, make_scheduler, make_request, driver
):
    # 12 blocks; three requests that each grow to 80 tokens (5 blocks) cannot all stay.
    sched = make_scheduler(ReferenceScheduler, policy_config(), num_blocks=12)
    run = driver(sched)
    requests = [make_request(name, 40, 40) for name in "XYZ"]
    run.run({0: requests})

    assert sum(r.num_preemptions for r in requests) > 0, "load should force a preemption"
    assert "mixed" not in run.kinds, run.kinds
    assert all(len(run.outputs[r.request_id]) == 40 for r in requests)


def test_partial_prefills_stay_out_of_decode_steps(
    make_vllm_config, make_scheduler, make_request, driver
):
    """Without the policy (chunked prefill on) chunks are still never mixed with decodes."""
    run = driver(make_scheduler(ReferenceScheduler, chunked(make_vllm_config())))
    run.run({0: [make_request("A", 20, 30)], 2: [make_request("long", 200, 3)]})

    assert "mixed" not in run.kinds, run.kinds
    chunks = [s.prefill["long"] for s in run.steps if "long" in s.prefill]
    assert len(chunks) > 1 and sum(chunks) == 200  # really chunked
    assert len(run.outputs["long"]) == 3 and len(run.outputs["A"]) == 30


def test_empty_step_when_nothing_can_run(policy_config, make_scheduler, make_request, driver):
    sched = make_scheduler(ReferenceScheduler, policy_config())
    run = driver(sched)
    assert run.step().kind == "empty"
    assert sched.last_step_kind == "empty"
