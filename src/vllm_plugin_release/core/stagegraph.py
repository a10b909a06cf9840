"""A flow as a graph of stages: what each needs, in which order they run, and how the
graph is drawn (`vpr release --graph`). Pure: no stage runs here (flows/stagewalk does).

A stage is on the *line* (run one after another, numbered, timed, its failure stops the
flow) or *ahead*: work started beside the line as soon as its needs are done, because
a later stage on the line can use it (the build environment while the lock and the
sources are checked; `twine check` while conform runs). An ahead stage's failure is
never the flow's: the stage that needs it meets the same work again and reports it.
The edge says when ahead work starts, where a callback from inside another stage did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[], None] = field(compare=False, repr=False)
    needs: tuple[str, ...] = ()
    ahead: bool = False
    about: str = ""  # one line for the drawing


class Graph:
    """Stages in the order they are declared, which must already respect every `needs`
    (so the run order is the declared one, the same on every run). Raises ValueError on
    a name given twice, an unknown need, a need declared later (a cycle or a misorder),
    or an ahead stage that needs another ahead stage (ahead work waits only on the line)."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        seen: dict[str, Stage] = {}
        for stage in stages:
            if stage.name in seen:
                raise ValueError(f"stage {stage.name!r} is declared twice")
            for need in stage.needs:
                if need not in seen:
                    known = "declared later" if any(s.name == need for s in stages) else "unknown"
                    raise ValueError(f"stage {stage.name!r} needs {need!r}, {known}")
                if stage.ahead and seen[need].ahead:
                    raise ValueError(f"ahead stage {stage.name!r} needs ahead stage {need!r}")
            seen[stage.name] = stage
        self.stages: tuple[Stage, ...] = tuple(stages)
        self._by_name = seen

    def __getitem__(self, name: str) -> Stage:
        return self._by_name[name]

    def needed(self, targets: Iterable[str] | None = None) -> list[Stage]:
        """The stages `targets` need (themselves included), in run order; all with None.
        An ahead stage is kept when a kept stage needs it."""
        if targets is None:
            return list(self.stages)
        wanted: set[str] = set()
        todo = list(targets)
        while todo:
            name = todo.pop()
            if name not in self._by_name:
                raise ValueError(f"no stage {name!r} in the graph")
            if name not in wanted:
                wanted.add(name)
                todo.extend(self._by_name[name].needs)
        return [s for s in self.stages if s.name in wanted]

    def line(self, targets: Iterable[str] | None = None) -> list[Stage]:
        return [s for s in self.needed(targets) if not s.ahead]


def text(graph: Graph, targets: Iterable[str] | None = None) -> str:
    """The graph as lines: the numbered line, each stage with its needs; ahead work
    after the stage it starts behind."""
    stages = graph.needed(targets)
    line = [s for s in stages if not s.ahead]
    place = {s.name: n for n, s in enumerate(line)}
    starts: dict[int, list[Stage]] = {}  # ahead work, under the line stage it waits for
    for stage in stages:
        if stage.ahead:
            starts.setdefault(max((place[n] for n in stage.needs), default=-1), []).append(stage)
    out = [_ahead_line(s) for s in starts.get(-1, [])]
    for number, stage in enumerate(line):
        needs = f"  <- {', '.join(stage.needs)}" if stage.needs else ""
        about = f"  ({stage.about})" if stage.about else ""
        out.append(f"{number + 1:>2}. {stage.name}{needs}{about}")
        out.extend(_ahead_line(s) for s in starts.get(number, []))
    return "\n".join(out) + "\n"


def _ahead_line(stage: Stage) -> str:
    after = f"once {', '.join(stage.needs)} ended" if stage.needs else "from the start"
    about = f"  ({stage.about})" if stage.about else ""
    return f"    ~ {stage.name}: ahead, {after}{about}"


def dot(graph: Graph, targets: Iterable[str] | None = None, name: str = "release") -> str:
    """The graph in Graphviz's DOT: line stages as boxes, ahead work dashed."""
    stages = graph.needed(targets)
    out = [f'digraph "{name}" {{', "  rankdir=LR;", "  node [shape=box];"]
    for stage in stages:
        style = ' [style=dashed, label="' + stage.name + ' (ahead)"]' if stage.ahead else ""
        out.append(f'  "{stage.name}"{style};')
    for stage in stages:
        out.extend(f'  "{need}" -> "{stage.name}";' for need in stage.needs)
    out.append("}")
    return "\n".join(out) + "\n"
