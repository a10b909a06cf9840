"""`ReferenceScheduler`: vLLM's V1 scheduler, one kind of work per step.

vLLM's `Scheduler.schedule()` is token-budget based: it first advances every
running request (decodes, and continuations of chunked prefills), then admits
waiting requests into whatever budget is left, so one step routinely carries
both prefill and decode work. The reference device runs a batch as either a
prefill or a decode, never both, so this subclass makes every step one of:

- prefill step: admits waiting requests (whole prompts; the platform policy
  turns chunked prefill off). Running decodes are withheld.
- decode step: advances running decodes only. Waiting requests are not admitted.
- empty step: nothing could be scheduled.

Policy: when prefill work is pending, try a prefill step first. If it admits
nothing (token budget, KV blocks or max_num_seqs exhausted) and decodes are
running, fall back to a decode step in the same call, so decodes progress and
free capacity. With no prefill work pending, run a decode step.

Both kinds go through the base class's own `schedule()` (KV allocation,
preemption, structured output, stats, `SchedulerOutput` construction). Work is
withheld through two levers that code path already honours:

- a running request whose `next_decode_eligible_step` lies in the future is
  skipped by the running loop but stays in `running`, so the max_num_seqs
  check and the KV watermark still count it;
- `PauseState.PAUSED_NEW` makes the base skip admission of waiting requests
  while running requests are scheduled.

Both are restored before `schedule()` returns.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from vllm.v1.core.sched.interface import PauseState
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.request import Request

StepKind = Literal["prefill", "decode", "empty"]

_NEVER = sys.maxsize


class ReferenceScheduler(Scheduler):
    """A V1 `Scheduler` whose every step is prefill-only, decode-only or empty."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.connector is not None or self.ec_connector is not None:
            raise ValueError(
                "ReferenceScheduler does not support KV or encoder-cache connectors: a "
                "decode fallback schedules twice in one step and connector metadata "
                "cannot be merged"
            )
        self.last_step_kind: StepKind = "empty"
        self.step_kinds: Counter[str] = Counter()

    # -- policy -------------------------------------------------------------

    def has_pending_prefill(self) -> bool:
        """Whether any request still needs prefill work."""
        return (
            bool(self.waiting)
            or bool(self.skipped_waiting)
            or any(r.is_prefill_chunk for r in self.running)
        )

    def has_running_decodes(self) -> bool:
        """Whether a decode step could advance anything."""
        return any(not r.is_prefill_chunk for r in self.running)

    def schedule(self, throttle_prefills: bool = False) -> SchedulerOutput:
        if self.has_pending_prefill():
            attempt = self._prefill_step(throttle_prefills)
            if attempt.total_num_scheduled_tokens > 0 or not self.has_running_decodes():
                return self._record(attempt, "prefill")
            # Nothing admissible now: let running requests progress instead.
            return self._record(self._decode_step(carry=attempt), "decode")
        return self._record(self._decode_step(), "decode")

    # -- the two step kinds -------------------------------------------------

    def _prefill_step(self, throttle_prefills: bool) -> SchedulerOutput:
        decodes = [r for r in self.running if not r.is_prefill_chunk]
        with self._withheld(decodes):
            return super().schedule(throttle_prefills)

    def _decode_step(self, carry: SchedulerOutput | None = None) -> SchedulerOutput:
        if carry is not None:
            self._reopen_step(carry)
        partial_prefills = [r for r in self.running if r.is_prefill_chunk]
        with self._withheld(partial_prefills), self._admission_paused():
            output = super().schedule()
        if carry is not None:
            _merge_drained_state(carry, output)
        return output

    # -- levers -------------------------------------------------------------

    @contextmanager
    def _withheld(self, requests: Iterable[Request]) -> Iterator[None]:
        """Keep `requests` in `running` but out of this step's running loop."""
        saved = [(r, r.next_decode_eligible_step) for r in requests]
        for request, _ in saved:
            request.next_decode_eligible_step = _NEVER
        try:
            yield
        finally:
            for request, value in saved:
                request.next_decode_eligible_step = value

    @contextmanager
    def _admission_paused(self) -> Iterator[None]:
        """Skip admission of waiting requests (a user-set pause is left alone)."""
        previous = self._pause_state
        if previous == PauseState.UNPAUSED:
            self._pause_state = PauseState.PAUSED_NEW
        try:
            yield
        finally:
            self._pause_state = previous

    def _reopen_step(self, discarded: SchedulerOutput) -> None:
        """Undo the bookkeeping an empty prefill attempt did, before the fallback.

        The attempt consumed the step counter and handed the finished and
        preempted request ids to an output nobody will see; give them back so
        the decode step reports them.
        """
        self.current_step -= 1
        self.finished_req_ids = set(discarded.finished_req_ids) | self.finished_req_ids
        if discarded.preempted_req_ids:
            self.reset_preempted_req_ids = (
                set(discarded.preempted_req_ids) | self.reset_preempted_req_ids
            )

    def _record(self, output: SchedulerOutput, kind: StepKind) -> SchedulerOutput:
        if output.total_num_scheduled_tokens == 0:
            kind = "empty"
        self.last_step_kind = kind
        self.step_kinds[kind] += 1
        return output


def _merge_drained_state(discarded: SchedulerOutput, output: SchedulerOutput) -> None:
    """Carry per-step queues the discarded attempt drained into the output sent."""
    if discarded.free_encoder_mm_hashes:
        output.free_encoder_mm_hashes = [
            *discarded.free_encoder_mm_hashes,
            *output.free_encoder_mm_hashes,
        ]
    if discarded.new_block_ids_to_zero:
        output.new_block_ids_to_zero = [
            *discarded.new_block_ids_to_zero,
            *(output.new_block_ids_to_zero or []),
        ]
    if discarded.kv_cache_block_copies:
        output.kv_cache_block_copies = [
            *discarded.kv_cache_block_copies,
            *(output.kv_cache_block_copies or []),
        ]
