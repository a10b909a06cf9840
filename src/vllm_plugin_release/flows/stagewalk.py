"""Runs a stage graph (core/stagegraph): the line step by step (`Graph.steps`), each
stage under a numbered progress rule and timed; ahead work in a thread of its own as
soon as the line stages it needs have ended, joined before a line stage that needs it,
and stopped when the walk ends while it still runs (a failure, Ctrl-C, or a target
reached without it).

A step of one stage runs in this thread. A step of several (line stages none of which
needs another, as many as there are usable cores) runs them side by side, a thread
each: their rules are printed together when the step starts, each line they print
carries the stage's name (`progress.tagged`; a helper thread of theirs prints its own,
already named, lines), and a line says when each ends. Their output stays live rather
than held to the end: a long stage's heartbeats still show it is alive. The first of
them to fail is the walk's failure: the others are stopped (their `stop` hook, else
every child process started since the step began, `proc.stop_since`), their own
errors dropped, and the failure raised once all have ended. Whatever order they end
in, the record (`Walk`) keeps the line's order.

A line stage may end the walk early with its outcome decided (`Halt`: a gate, such as
conformance giving verdict lab before the live test): what follows its step does not
run, and it is not a failure. A titled walk is part of a larger command's output (a
baseline pairing inside a bisection, a matrix, a nightly): its rules carry the title
("baseline 0.25.1 stage 2/6: build-core") and stay plain lines on stderr, never GitHub
groups (they do not nest, and the command's report is on standard output); the rules
of a step of several stages are plain lines too, for the same reason."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.edges import proc
from vllm_plugin_release.edges.proc import usable_cores


class Halt(Exception):
    """Raised by a line stage whose outcome ends the flow here: the walk returns."""


@dataclass
class Walk:
    """What a walk did: each line stage's seconds (in the line's order), the one that
    failed, and those stopped beside it."""

    seconds: dict[str, float] = field(default_factory=dict)
    failed: str | None = None
    halted: str | None = None  # the stage that ended the walk early (`Halt`)
    ahead_started: list[str] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)  # ran beside the failed one


@dataclass
class _Step:
    """One step of the walk: its stages with their numbers, and what the walk knows."""

    stages: list[tuple[int, Stage]]
    total: int
    title: str
    threads: dict[str, threading.Thread]  # the ahead work started so far
    stop: dict[str, Callable[[], None]]

    def rule(self, number: int, stage: Stage, beside: list[str] | None = None) -> str:
        side = f" (beside {', '.join(beside)})" if beside else ""
        return f"{self.title} stage {number}/{self.total}: {stage.name}{side}".lstrip()

    def waits(self, stage: Stage) -> list[threading.Thread]:
        return [self.threads[n] for n in stage.needs if n in self.threads]


def walk(
    graph: Graph,
    targets: Iterable[str] | None = None,
    *,
    record: Walk | None = None,
    stop: dict[str, Callable[[], None]] | None = None,
    title: str = "",
    width: int | None = None,
) -> Walk:
    """Run what `targets` need (all with None). A line stage's exception ends the walk
    and propagates (`record.failed` names the stage); `Halt` ends it and returns
    (`record.halted`). `stop[name]` stops stage `name` (ahead work when the walk ends
    with it still running; a line stage beside one that failed). `title`: the walk is
    part of a larger command's output. `width`: at most this many line stages side by
    side (default: the usable cores)."""
    record = record if record is not None else Walk()
    stages = graph.needed(targets)
    steps = graph.steps(targets, width or usable_cores())
    threads: dict[str, threading.Thread] = {}
    ended: set[str] = set()

    def start_ahead() -> None:
        for stage in stages:
            if stage.ahead and stage.name not in threads and set(stage.needs) <= ended:
                threads[stage.name] = _started(stage)
                record.ahead_started.append(stage.name)

    total = sum(len(step) for step in steps)
    try:
        start_ahead()
        number = 0
        for step in steps:
            numbered = [(number + i, s) for i, s in enumerate(step, start=1)]
            number += len(step)
            run = _Step(numbered, total, title, threads, stop or {})
            if (_run_one if len(step) == 1 else _run_beside)(run, record):
                break
            ended.update(s.name for s in step)
            start_ahead()
    finally:
        for name, thread in threads.items():
            if thread.is_alive() and stop and name in stop:
                stop[name]()
            thread.join()
    return record


def _run_one(step: _Step, record: Walk) -> bool:
    """The step's one stage in this thread; True when it halted the walk."""
    number, stage = step.stages[0]
    try:
        _run_timed(stage, step.rule(number, stage), record, step.waits(stage), group=not step.title)
    except Halt:
        record.halted = stage.name
        return True
    return False


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


# What a stage run beside others ended with: its name, its exception (None: it ended
# well), its seconds.
_Ended = tuple[str, BaseException | None, float]


def _run_beside(step: _Step, record: Walk) -> bool:
    """The step's stages side by side, a thread each; True when one halted the walk.
    The first failure stops the others and is raised once every one has ended."""
    names = [stage.name for _, stage in step.stages]
    since = proc.mark()
    done: queue.Queue[_Ended] = queue.Queue()
    threads: list[threading.Thread] = []
    outcomes: dict[str, tuple[BaseException | None, float]] = {}
    failed: str | None = None
    try:  # from the first rule: a Ctrl-C that lands while the threads start is met here too
        for number, stage in step.stages:
            progress.rule(step.rule(number, stage, [n for n in names if n != stage.name]))
        for _, stage in step.stages:
            threads.append(_beside_thread(stage, step.waits(stage), done))
            threads[-1].start()
        while len(outcomes) < len(names):
            try:
                name, exc, seconds = done.get(timeout=None if failed is None else 0.2)
            except queue.Empty:  # stopping: children started since the last stop, too
                proc.stop_since(since)
                continue
            outcomes[name] = (exc, seconds)
            if failed is not None:
                record.stopped.append(name)
            elif exc is not None and not isinstance(exc, Halt):
                failed = name
                _stop_others(step, [n for n in names if n not in outcomes], since)
            else:
                _ended_line(name, exc, seconds)
    except BaseException:  # Ctrl-C here: every child of the step ends, then its threads
        failed = failed or next(n for n in names if n not in outcomes)
        _drain(done, outcomes, threads, since)
        record.failed = failed
        raise
    finally:
        for name in names:  # the line's order, whichever ended first
            if name in outcomes:
                record.seconds[name] = outcomes[name][1]
    if failed is not None:
        record.failed = failed
        error = outcomes[failed][0]
        assert error is not None
        raise error
    halted = [n for n in names if isinstance(outcomes[n][0], Halt)]
    if halted:
        record.halted = halted[0]
    return bool(halted)


def _beside_thread(
    stage: Stage, waits: list[threading.Thread], done: queue.Queue[_Ended]
) -> threading.Thread:
    def run() -> None:
        start = time.perf_counter()
        error: BaseException | None = None
        try:
            with progress.tagged(stage.name):
                for thread in waits:
                    thread.join()
                stage.run()
        except BaseException as exc:  # handed to the walk, which raises the first failure
            error = exc
        done.put((stage.name, error, round(time.perf_counter() - start, 3)))

    return threading.Thread(target=run, name=f"vpr-{stage.name}", daemon=True)


def _ended_line(name: str, error: BaseException | None, seconds: float) -> None:
    how = "halted the walk" if error is not None else "ended"
    progress.info(f"{name}: {how} after {seconds:.1f} s")


def _stop_others(step: _Step, running: list[str], since: int) -> None:
    """The stages still running beside a failed one: their own stop hook where the walk
    was given one, then every child process started since the step began."""
    for name in running:
        if name in step.stop:
            with contextlib.suppress(Exception):  # the failure reported is the first one
                step.stop[name]()
    proc.stop_since(since)


def _drain(
    done: queue.Queue[_Ended],
    outcomes: dict[str, tuple[BaseException | None, float]],
    threads: list[threading.Thread],
    since: int,
) -> None:
    """Stop every child the step started, and wait for the threads it started to end (a
    thread the interruption kept from starting is not waited for)."""
    while any(t.is_alive() for t in threads) or not done.empty():
        proc.stop_since(since)
        with contextlib.suppress(queue.Empty):
            name, exc, seconds = done.get(timeout=0.2)
            outcomes[name] = (exc, seconds)


def _started(stage: Stage) -> threading.Thread:
    def run() -> None:
        with contextlib.suppress(Exception):  # ahead work: the stage needing it meets it again
            stage.run()

    thread = threading.Thread(target=run, name=f"vpr-{stage.name}", daemon=True)
    thread.start()
    return thread
