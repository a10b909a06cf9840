"""A flow as a graph of stages (pure): what each needs, the steps they run in, the work started
*ahead* beside the line, and its drawing (`vpr release --graph`); docs/architecture.md."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# What a stage's cache probe says: its result for today's inputs is cached, is not, or
# cannot be known before another stage's output exists ("unknown: needs ...").
CACHED = "cached"
NOT_CACHED = "not cached"


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[], None] = field(compare=False, repr=False)
    needs: tuple[str, ...] = ()
    ahead: bool = False
    about: str = ""  # one line for the drawing
    # Says, without running anything (no network, no download, no write), whether the
    # stage's result for today's inputs is cached: CACHED, NOT_CACHED, "unknown: why";
    # None (or no probe): the stage keeps nothing to reuse, nothing is drawn.
    cached: Callable[[], str | None] | None = field(default=None, compare=False, repr=False)


def cache_state(stage: Stage) -> str | None:
    """The stage's probe's answer; a probe that fails is "unknown" with the reason."""
    if stage.cached is None:
        return None
    try:
        state = stage.cached()
    except Exception as exc:  # any error: the drawing says it, and goes on
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"unknown: {reason}"
    if state is not None and not isinstance(state, str):
        return f"unknown: the probe answered {state!r}"
    return state


def cache_states(graph: Graph, targets: Iterable[str] | None = None) -> dict[str, str]:
    """Each drawn stage's cache state, for the ones that have a probe and an answer."""
    found = {s.name: cache_state(s) for s in graph.needed(targets)}
    return {name: state for name, state in found.items() if state is not None}


class Graph:
    """Stages in declared order, each after its `needs`; ValueError on a name given twice, an
    unknown or later need, or an ahead stage that needs another ahead stage."""

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
        """The stages `targets` need (themselves included), in run order; all with None."""
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

    def steps(
        self, targets: Iterable[str] | None = None, width: int | None = None
    ) -> list[list[Stage]]:
        """The line in steps: a stage joins the step before when nothing it needs (through an
        ahead stage too) is in it and it holds fewer than `width` stages (None: no bound)."""
        steps: list[list[Stage]] = []
        for stage in self.line(targets):
            needs = set(stage.needs)
            needs.update(
                n for s in stage.needs if self._by_name[s].ahead for n in self._by_name[s].needs
            )
            last = steps[-1] if steps else None
            if (
                last is not None
                and (width is None or len(last) < width)
                and not needs & {s.name for s in last}
            ):
                last.append(stage)
            else:
                steps.append([stage])
        return steps


def text(
    graph: Graph, targets: Iterable[str] | None = None, states: Mapping[str, str] | None = None
) -> str:
    """The graph as lines: the numbered line with needs, cache states and `|| beside`; ahead
    work after the stage it starts behind."""
    states = states or {}
    stages = graph.needed(targets)
    line = [s for s in stages if not s.ahead]
    beside = {
        s.name: [b.name for b in step[:i]]
        for step in graph.steps(targets)
        for i, s in enumerate(step)
    }
    place = {s.name: n for n, s in enumerate(line)}
    starts: dict[int, list[Stage]] = {}  # ahead work, under the line stage it waits for
    for stage in stages:
        if stage.ahead:
            starts.setdefault(max((place[n] for n in stage.needs), default=-1), []).append(stage)
    out = [_ahead_line(s, states) for s in starts.get(-1, [])]
    for number, stage in enumerate(line):
        needs = f"  <- {', '.join(stage.needs)}" if stage.needs else ""
        side = f"  || beside {', '.join(beside[stage.name])}" if beside[stage.name] else ""
        about = f"  ({stage.about})" if stage.about else ""
        out.append(f"{number + 1:>2}. {stage.name}{_state(stage, states)}{needs}{side}{about}")
        out.extend(_ahead_line(s, states) for s in starts.get(number, []))
    return "\n".join(out) + "\n"


def _state(stage: Stage, states: Mapping[str, str]) -> str:
    return f" [{states[stage.name]}]" if stage.name in states else ""


def _ahead_line(stage: Stage, states: Mapping[str, str]) -> str:
    after = f"once {', '.join(stage.needs)} ended" if stage.needs else "from the start"
    about = f"  ({stage.about})" if stage.about else ""
    return f"    ~ {stage.name}{_state(stage, states)}: ahead, {after}{about}"


def dot(
    graph: Graph,
    targets: Iterable[str] | None = None,
    name: str = "release",
    states: Mapping[str, str] | None = None,
) -> str:
    """The graph in Graphviz's DOT: ahead work dashed, cached stages filled with their state,
    stages that may run side by side in one dotted cluster."""
    states = states or {}
    stages = graph.needed(targets)
    out = [f'digraph "{name}" {{', "  rankdir=LR;", "  node [shape=box];"]
    for stage in stages:
        out.append(f'  "{stage.name}"{_dot_attrs(stage, states.get(stage.name))};')
    for stage in stages:
        out.extend(f'  "{need}" -> "{stage.name}";' for need in stage.needs)
    for number, step in enumerate(graph.steps(targets)):
        if len(step) > 1:
            names = " ".join(f'"{s.name}";' for s in step)
            out.append(
                f'  subgraph cluster_step{number} {{ label="side by side"; style=dotted; {names} }}'
            )
    out.append("}")
    return "\n".join(out) + "\n"


def _dot_attrs(stage: Stage, state: str | None) -> str:
    """The node's attributes: its label (name, "(ahead)", the cache state) and style."""
    styles = (["dashed"] if stage.ahead else []) + (["filled"] if state == CACHED else [])
    if not styles and state is None:
        return ""
    label = _escaped(stage.name + (" (ahead)" if stage.ahead else ""))
    if state is not None:
        label += "\\n" + _escaped(state)  # DOT's line break in a label
    attrs = [f'label="{label}"']
    if styles:
        style = styles[0] if len(styles) == 1 else '"' + ",".join(styles) + '"'
        attrs.insert(0, f"style={style}")
    if state == CACHED:
        attrs.append("fillcolor=palegreen")
    return " [" + ", ".join(attrs) + "]"


def _escaped(text: str) -> str:
    """Text inside a DOT string: a probe's reason may hold quotes or backslashes."""
    return text.replace("\\", "\\\\").replace('"', '\\"')
