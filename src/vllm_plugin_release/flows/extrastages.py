"""Stages added to the flows' graphs from outside them: one entry each.

The flows walk three graphs (core/stagegraph, flows/stagewalk):

* "release": `vpr release` (flows/release);
* "pairing": a cpu pairing environment on another core, which baseline, nightly,
  bisect, matrix and `vpr plugin-tests --baseline` all walk (flows/pairing_graph);
* "hardware": `vpr hardware conform` (flows/hardware).

Adding a stage takes its module (a function of a `flows.stagecontext.Context`) and one
`Extra` entry in `EXTRAS` below, or `add(...)` (`added(...)` for a test). Each graph named in
`Extra.graphs` places it right after the last of its `needs` it declares (so the line
runs it there, numbered with the rest) and runs it with that flow's context. A need
that one of those graphs does not have is refused (ValueError) when the graph is made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from vllm_plugin_release.core.stagegraph import Stage
from vllm_plugin_release.flows.stagecontext import Context

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
