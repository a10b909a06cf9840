"""Runs a stage graph (core/stagegraph): the line step by step, side by side where stages
need none of each other, ahead work in threads of its own; and the stages added to the
flows' graphs from outside them (`Extra`, given a `Context` when they run)."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.stagegraph import Graph, Stage
from vllm_plugin_release.edges import proc
from vllm_plugin_release.edges.proc import usable_cores

if TYPE_CHECKING:  # the spec module loads jsonschema: keep it off `vpr --help`
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.core.cache import Cache


class Halt(Exception):
    """Raised by a line stage whose outcome ends the flow here: the walk returns."""


@dataclass
class Walk:
    """What a walk did: each line stage's seconds, the one that failed, those stopped beside it."""

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
    """Run what `targets` need (all with None). A line stage's exception ends the walk and
    propagates; `Halt` ends it and returns. `stop[name]` stops stage `name`. `width`: at most this
    many line stages side by side (default: the usable cores)."""
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
    """The step's one stage in this thread under its rule (a collapsible group in a GitHub
    Actions log), timed from before it waits for the ahead work it needs (the wait is its
    time); True when it halted the walk."""
    number, stage = step.stages[0]
    with progress.stage(step.rule(number, stage), group=not step.title):
        start = time.perf_counter()
        try:
            for thread in step.waits(stage):
                thread.join()
            stage.run()
        except Halt:
            record.halted = stage.name
            return True
        except BaseException:
            record.failed = stage.name
            raise
        finally:
            record.seconds[stage.name] = round(time.perf_counter() - start, 3)
    return False


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
                how = "halted the walk" if exc is not None else "ended"
                progress.info(f"{name}: {how} after {seconds:.1f} s")
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


# Stages added to the flows' graphs ("release": `vpr release`; "pairing": a cpu pairing
# environment on another core; "hardware": `vpr conform-hardware`) from outside them: one
# `Extra` each, placed right after the last of its needs in each graph it names.


@dataclass(frozen=True)
class Context:
    """The graph walked and its pairing ("pairing": the derived spec, once core-source ran)."""

    graph: str
    spec: Spec
    cache: Cache
    dist_root: Path


GRAPHS = ("release", "pairing", "hardware")


@dataclass(frozen=True)
class Extra:
    name: str
    run: Callable[[Context], None]
    needs: tuple[str, ...]
    graphs: tuple[str, ...] = GRAPHS
    ahead: bool = False
    about: str = ""


EXTRAS: list[Extra] = []  # the stages every run of the flows adds


def add(extra: Extra) -> None:
    """Register `extra`; ValueError for a name already added or a graph that is not one."""
    if any(e.name == extra.name for e in EXTRAS):
        raise ValueError(f"extra stage {extra.name!r} is added twice")
    unknown = [g for g in extra.graphs if g not in GRAPHS]
    if unknown:
        raise ValueError(
            f"extra stage {extra.name!r}: no graph {unknown[0]!r} (the graphs: {', '.join(GRAPHS)})"
        )
    EXTRAS.append(extra)


@contextlib.contextmanager
def added(extra: Extra) -> Iterator[Extra]:
    """`extra` registered for the block (a test's toy stage)."""
    add(extra)
    try:
        yield extra
    finally:
        EXTRAS.remove(extra)


def extended(graph: str, stages: Sequence[Stage], context: Callable[[], Context]) -> list[Stage]:
    """`stages` of `graph` with the extras that join it, each right after the last of its
    needs; `context` is called when an extra runs. ValueError for a need `graph` lacks."""
    out = list(stages)
    for extra in EXTRAS:
        if graph not in extra.graphs:
            continue
        names = [s.name for s in out]
        for need in extra.needs:
            if need not in names:
                raise ValueError(
                    f"extra stage {extra.name!r} needs {need!r}, which the {graph} graph does "
                    f"not have (its stages: {', '.join(names)})"
                )
        at = max((names.index(n) + 1 for n in extra.needs), default=0)
        run = _bound(extra, context)
        out.insert(at, Stage(extra.name, run, extra.needs, extra.ahead, extra.about))
    return out


def _bound(extra: Extra, context: Callable[[], Context]) -> Callable[[], None]:
    return lambda: extra.run(context())
