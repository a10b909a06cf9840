"""Runs a stage graph (core/stagegraph): the line stage by stage in this thread, each
under a numbered progress rule and timed; ahead work in a thread of its own as soon
as the line stages it needs have ended, joined before a line stage that needs it, and
stopped when the walk ends while it still runs (a failure, Ctrl-C, or a target reached
without it).

A line stage may end the walk early with its outcome decided (`Halt`: a gate, such as
conformance giving verdict lab before the live test): what follows it does not run, and
it is not a failure. A titled walk is part of a larger command's output (a baseline
pairing inside a bisection, a matrix, a nightly): its rules carry the title ("baseline
0.25.1 stage 2/6: build-core") and stay plain lines on stderr, never GitHub groups
(they do not nest, and the command's report is on standard output)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.stagegraph import Graph, Stage


class Halt(Exception):
    """Raised by a line stage whose outcome ends the flow here: the walk returns."""


@dataclass
class Walk:
    """What a walk did: each line stage's seconds, and the one that failed."""

    seconds: dict[str, float] = field(default_factory=dict)
    failed: str | None = None
    halted: str | None = None  # the stage that ended the walk early (`Halt`)
    ahead_started: list[str] = field(default_factory=list)


def walk(
    graph: Graph,
    targets: Iterable[str] | None = None,
    *,
    record: Walk | None = None,
    stop: dict[str, Callable[[], None]] | None = None,
    title: str = "",
) -> Walk:
    """Run what `targets` need (all with None). A line stage's exception ends the walk
    and propagates (`record.failed` names the stage); `Halt` ends it and returns
    (`record.halted`). `stop[name]` stops ahead work `name` when the walk ends with it
    still running. `title`: the walk is part of a larger command's output."""
    record = record if record is not None else Walk()
    stages = graph.needed(targets)
    line = [s for s in stages if not s.ahead]
    threads: dict[str, threading.Thread] = {}
    ended: set[str] = set()

    def start_ahead() -> None:
        for stage in stages:
            if stage.ahead and stage.name not in threads and set(stage.needs) <= ended:
                threads[stage.name] = _started(stage)
                record.ahead_started.append(stage.name)

    try:
        start_ahead()
        for number, stage in enumerate(line, start=1):
            waits = [threads[n] for n in stage.needs if n in threads]
            rule = f"{title} stage {number}/{len(line)}: {stage.name}".lstrip()
            try:
                _run_timed(stage, rule, record, waits, group=not title)
            except Halt:
                record.halted = stage.name
                break
            ended.add(stage.name)
            start_ahead()
    finally:
        for name, thread in threads.items():
            if thread.is_alive() and stop and name in stop:
                stop[name]()
            thread.join()
    return record


def _run_timed(
    stage: Stage, title: str, record: Walk, waits: list[threading.Thread], *, group: bool
) -> None:
    """The stage under its rule (a collapsible group in a GitHub Actions log), timed from
    before it waits for the ahead work it needs (the wait is its time)."""
    with progress.stage(title, group=group):
        start = time.perf_counter()
        try:
            for thread in waits:
                thread.join()
            stage.run()
        except Halt:
            raise
        except BaseException:
            record.failed = stage.name
            raise
        finally:
            record.seconds[stage.name] = round(time.perf_counter() - start, 3)


def _started(stage: Stage) -> threading.Thread:
    def run() -> None:
        with contextlib.suppress(Exception):  # ahead work: the stage needing it meets it again
            stage.run()

    thread = threading.Thread(target=run, name=f"vpr-{stage.name}", daemon=True)
    thread.start()
    return thread
