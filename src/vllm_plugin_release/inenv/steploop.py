"""The replay's step loop inside the pairing environment: a scheduler stepped on a simulated
clock with a fake model-runner output, each request's token timeline run-length encoded."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

# The per-step columns of a result, in the order it lists them.
STEP_COLUMNS = (
    "start",
    "end",
    "prefill_tokens",
    "decode_tokens",
    "prefill_requests",
    "decode_requests",
    "preemptions",
    "partial_prefills",  # prefill chunks that did not finish their prompt
    "prefill_pending",  # 1 when prefill work was pending before the step
)


def split_by_length(
    arrival: list[float], prompt: list[int], max_model_len: int
) -> tuple[list[int], list[dict[str, Any]]]:
    """Request indices in arrival order that the engine accepts, and those it rejects."""
    order = sorted(range(len(arrival)), key=lambda i: (arrival[i], i))
    rejected: list[dict[str, Any]] = []
    admitted: list[int] = []
    for i in order:
        if prompt[i] >= max_model_len:
            # vLLM's input processor refuses these before they reach the scheduler.
            rejected.append(
                {
                    "index": i,
                    "prompt_tokens": prompt[i],
                    "reason": f"prompt ({prompt[i]} tokens) plus at least one output token "
                    f"exceeds max_model_len {max_model_len}",
                }
            )
        else:
            admitted.append(i)
    return admitted, rejected


class Arrivals:
    """The admitted requests, added to the scheduler as the simulated clock reaches them."""

    def __init__(
        self,
        scheduler: Any,
        arrival: list[float],
        prompt: list[int],
        output: list[int],
        admitted: list[int],
    ) -> None:
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request

        self._sampling_params = SamplingParams
        self._request = Request
        self._add = scheduler.add_request
        self.arrival, self.prompt, self.output, self.admitted = arrival, prompt, output, admitted
        self.params_cache: dict[int, Any] = {}
        self.reqs: dict[str, Any] = {}
        self.index_of: dict[str, int] = {}
        # Each request's token steps, by index (the result) and by request id (the loop).
        self.timeline: list[list[int]] = [[] for _ in range(len(arrival))]
        self.line_of: dict[str, list[int]] = {}
        self.add_s = 0.0  # time spent in the scheduler's add_request

    def add_due(self, nxt: int, clock: float) -> int:
        """Add the admitted requests from `nxt` on arrived by `clock`; the next one's index."""
        SamplingParams, Request = self._sampling_params, self._request
        arrival, prompt, output, admitted = self.arrival, self.prompt, self.output, self.admitted
        params_cache, reqs, index_of, add = self.params_cache, self.reqs, self.index_of, self._add
        timeline, line_of = self.timeline, self.line_of
        perf = time.perf_counter
        while nxt < len(admitted) and arrival[admitted[nxt]] <= clock:
            i = admitted[nxt]
            nxt += 1
            out_n = output[i]
            params = params_cache.get(out_n)
            if params is None:
                params = SamplingParams(max_tokens=out_n, ignore_eos=True, temperature=0.0)
                params_cache[out_n] = params
            rid = str(i)
            req = Request(
                request_id=rid,
                prompt_token_ids=[1 + i % 30000] * prompt[i],
                sampling_params=params,
                pooling_params=None,
                arrival_time=arrival[i],
            )
            reqs[rid] = req
            index_of[rid] = i
            line_of[rid] = timeline[i]
            t0 = perf()
            add(req)
            self.add_s += perf() - t0
        return nxt


@dataclass
class Loop:
    """What the step loop leaves: per-step columns, per-request token steps, timings."""

    steps: dict[str, list[Any]]
    timeline: list[list[int]]
    stopped: str | None
    one_token_chunks: int
    scheduler_s: float
    wall_s: float


def no_progress(scheduler: Any, empty_run: int) -> str:
    return (
        f"scheduler made no progress: {empty_run} empty steps in a row with "
        f"{scheduler.get_num_unfinished_requests()} unfinished requests and no "
        f"arrivals left"
    )


def step_loop(
    scheduler: Any, feed: Arrivals, cost: dict[str, float], max_steps: int, timeout_s: float
) -> Loop:
    """Step the scheduler on the simulated clock until the mix drains or a limit stops it."""
    # One function on purpose, over the usual length: the harness's own time per step
    # is measured against the scheduler's (replay-timing.json), so the step body works
    # on locals and calls nothing of ours but the arrival feed, when requests arrive.
    from vllm.v1.outputs import ModelRunnerOutput

    a, b, c = float(cost["a"]), float(cost["b"]), float(cost["c"])
    # Seconds added per token sampled on a slow path, per request (None: no slow path cost).
    extra: list[float] | None = cost.get("per_request")
    arrival, admitted, reqs, index_of = feed.arrival, feed.admitted, feed.reqs, feed.index_of
    timeline, line_of = feed.timeline, feed.line_of
    columns: list[list[Any]] = [[] for _ in STEP_COLUMNS]
    st_start, st_end, st_pf_tok, st_dec_tok, st_pf_req, st_dec_req = columns[:6]
    st_pre, st_partial, st_pending = columns[6:]
    mid: set[str] = set()  # requests between two chunks of their prompt
    sched_s = clock = 0.0
    nxt = step = empty_run = one_token_chunks = 0  # nxt: the next admitted request to add
    stopped: str | None = None
    schedule, update = scheduler.schedule, scheduler.update_from_output
    has_work = scheduler.has_unfinished_requests
    perf = time.perf_counter
    wall0 = perf()
    deadline = wall0 + timeout_s

    while True:
        if nxt < len(admitted) and arrival[admitted[nxt]] <= clock:
            nxt = feed.add_due(nxt, clock)
        if not has_work():
            if nxt >= len(admitted):
                break
            clock = max(clock, arrival[admitted[nxt]])
            continue
        if step >= max_steps:
            stopped = f"step limit {max_steps} reached"
            break
        if step & 63 == 0 and perf() > deadline:
            stopped = f"time limit {timeout_s:g} s reached"
            break

        # Prefill work pending before the step: a prompt part-way prefilled, or requests
        # waiting for admission (new or preempted).
        pending = (
            1 if (mid or scheduler.waiting or getattr(scheduler, "skipped_waiting", None)) else 0
        )
        t0 = perf()
        sout = schedule()
        sched_s += perf() - t0

        nst = sout.num_scheduled_tokens
        pf_tok = dec_tok = pf_req = dec_req = 0
        # Scheduled requests whose prompt and outputs are not all computed after the
        # step: a prefill chunk that does not finish its prompt (no token sampled).
        held: list[str] = []
        for new in sout.scheduled_new_reqs:
            rid = new.req_id
            pf_tok += nst[rid]
            pf_req += 1
            req = reqs[rid]
            if req.num_computed_tokens < req.num_tokens:
                held.append(rid)
        cached = sout.scheduled_cached_reqs
        resumed = cached.resumed_req_ids
        for rid, before in zip(cached.req_ids, cached.num_computed_tokens):
            req = reqs[rid]
            total = req.num_tokens
            if req.num_computed_tokens < total:
                held.append(rid)
            # Decode: not new, not resumed, exactly one token left before the step, and
            # that token is not the prompt's last (a one-token final prompt chunk is
            # prefill work, e.g. a 2049-token prompt under a 2048-token budget).
            if total - before == 1 and rid not in resumed:
                if before >= req.num_prompt_tokens:
                    dec_tok += nst[rid]
                    dec_req += 1
                    continue
                one_token_chunks += 1
            pf_tok += nst[rid]
            pf_req += 1

        # The fake model-runner output, in the scheduler's order: one token for each
        # request whose prompt and outputs are computed, none for the held ones.
        req_ids = list(nst)
        if len(req_ids) != pf_req + dec_req:  # the two lists do not name every request
            held = [rid for rid in req_ids if (r := reqs[rid]).num_computed_tokens < r.num_tokens]
        if held:
            not_done = set(held)
            got = [rid for rid in req_ids if rid not in not_done]
            sampled = [[] if rid in not_done else [7] for rid in req_ids]
        else:
            got = req_ids
            sampled = [[7] for _ in req_ids]
        partial = len(req_ids) - len(got)
        if mid:
            mid.difference_update(got)
        if partial:
            mid.update(held)
        for rid in got:
            line_of[rid].append(step)
        mro = ModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index=dict(zip(req_ids, range(len(req_ids)))),
            sampled_token_ids=sampled,
        )
        t0 = perf()
        update(sout, mro)
        sched_s += perf() - t0

        if pf_req == 0 and dec_req == 0:
            empty_run += 1
            duration = a
        else:
            empty_run = 0
            duration = a + b * pf_tok + c * dec_req
            if extra is not None:
                for rid in got:
                    duration += extra[index_of[rid]]
        st_start.append(clock)
        clock += duration
        st_end.append(clock)
        st_pf_tok.append(pf_tok)
        st_dec_tok.append(dec_tok)
        st_pf_req.append(pf_req)
        st_dec_req.append(dec_req)
        st_pre.append(len(sout.preempted_req_ids))
        st_partial.append(partial)
        st_pending.append(pending)
        if mid and sout.preempted_req_ids:
            mid.difference_update(sout.preempted_req_ids)
        step += 1
        if empty_run:
            # Nothing changes in an idle engine until the next arrival.
            if nxt < len(admitted):
                clock = max(clock, arrival[admitted[nxt]])
            elif empty_run >= 3:
                stopped = no_progress(scheduler, empty_run)
                break
    wall = perf() - wall0
    steps = dict(zip(STEP_COLUMNS, columns))
    return Loop(steps, timeline, stopped, one_token_chunks, sched_s, wall)


def encode_timelines(timeline: list[list[int]]) -> list[list[int] | None]:
    """Each request's token steps run-length encoded: [first_step, gap, count, ...]."""
    tokens: list[list[int] | None] = []
    for steps in timeline:
        enc = steps[:1]
        for gap, run in itertools.groupby(b - a for a, b in itertools.pairwise(steps)):
            enc += [gap, sum(1 for _ in run)]
        tokens.append(enc)
    return tokens
