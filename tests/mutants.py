"""The mutation gate (`nox -s mutants [-- FILE...]`): cosmic-ray mutates each guarantee site
of tests/mutants.toml, one mutant at a time, and runs that site's own tests against it; a
mutant they all pass (it survived) fails the run, as does a site whose tests fail unmutated.

cosmic-ray writes each mutant into the source file itself and puts it back after its tests,
so the `vpr` subprocesses, uv and the pairing environments the tests start run it too.
"""

from __future__ import annotations

import argparse
import ast
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

REPO = Path(__file__).resolve().parents[1]
SITES = Path(__file__).with_name("mutants.toml")

# The operators every site gets: conditions negated and their boundaries moved (PIT's
# defaults: `==`/`!=`, `<`/`>=`, `<`/`<=`, ...), `and`/`or` swapped, `not` added or
# dropped, booleans flipped, an except clause that no longer catches, a loop that never
# runs, break/continue swapped, an argument list without a guarantee flag, `in`/`not in`
# swapped. Replacing `==` by `<`, or `+` by `**`, mostly mutates messages, and doubles
# the run.
DEFAULT_OPERATORS = (
    "core/ReplaceComparisonOperator_Eq_NotEq",
    "core/ReplaceComparisonOperator_NotEq_Eq",
    "core/ReplaceComparisonOperator_Lt_GtE",
    "core/ReplaceComparisonOperator_GtE_Lt",
    "core/ReplaceComparisonOperator_Gt_LtE",
    "core/ReplaceComparisonOperator_LtE_Gt",
    "core/ReplaceComparisonOperator_Lt_LtE",
    "core/ReplaceComparisonOperator_LtE_Lt",
    "core/ReplaceComparisonOperator_Gt_GtE",
    "core/ReplaceComparisonOperator_GtE_Gt",
    "core/ReplaceComparisonOperator_Is_IsNot",
    "core/ReplaceComparisonOperator_IsNot_Is",
    "core/ReplaceUnaryOperator_Delete_Not",
    "core/AddNot",
    "core/ReplaceTrueWithFalse",
    "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd",
    "core/ReplaceBreakWithContinue",
    "core/ReplaceContinueWithBreak",
    "core/ExceptionReplacer",
    "core/ZeroIterationForLoop",
    "vpr/DropFlag",
    "vpr/SwapMembership",
)
# A site's own `operators = [...]` replaces that set ("default" stands for it): the flag
# sites mutate their flag alone, the exit codes are numbers.
EXTRA_OPERATORS = ("core/NumberReplacer",)


class ListProblem(Exception):
    """tests/mutants.toml (or the command line) is not what the gate can run: exit 2."""


@dataclass(frozen=True)
class Site:
    """One guarantee: `file`'s `functions` (top-level names, `Class.method`), mutated and
    run against `tests` (pytest node ids or files). `flags`: argument-list strings whose
    removal is a mutant (`--require-hashes`); `operators`: the site's own set;
    `equivalent`: mutants that cannot change what the code does (`OPERATOR @ LINE`, the
    line's text), each with its reason in the list; they are not run."""

    name: str
    file: str
    functions: tuple[str, ...]
    tests: tuple[str, ...]
    flags: tuple[str, ...] = ()
    operators: tuple[str, ...] = ()
    equivalent: tuple[str, ...] = ()


@dataclass
class Outcome:
    site: Site
    mutants: int = 0
    killed: int = 0
    timeouts: int = 0
    equivalent: int = 0  # listed as such, not run
    unmade: int = 0  # cosmic-ray could not write the mutant (a dotted exception name)
    survived: list[str] = field(default_factory=list)  # their diffs
    baseline: str | None = None  # the tests' output when they fail unmutated
    seconds: float = 0.0


# -- the list -------------------------------------------------------------------------------


def load_sites(path: Path = SITES) -> list[Site]:
    """The sites of `path`, each checked: its file there, its tests' files there."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ListProblem(f"{path}: {exc}")
    out: list[Site] = []
    for n, raw in enumerate(data.get("site", []), start=1):
        where = f"{path.name}: [[site]] #{n}"
        if not isinstance(raw, dict):
            raise ListProblem(f"{where}: not a table")
        unknown = set(raw) - {
            "name",
            "file",
            "functions",
            "tests",
            "flags",
            "operators",
            "equivalent",
        }
        if unknown:
            raise ListProblem(f"{where}: unknown key(s) {sorted(unknown)}")
        try:
            site = Site(
                name=_text(raw, "name", where),
                file=_text(raw, "file", where),
                functions=_texts(raw, "functions", where),
                tests=_texts(raw, "tests", where),
                flags=_texts(raw, "flags", where, required=False),
                operators=_texts(raw, "operators", where, required=False),
                equivalent=_texts(raw, "equivalent", where, required=False),
            )
        except KeyError as exc:
            raise ListProblem(f"{where}: missing key {exc.args[0]}")
        where = f"{path.name}: site {site.name!r}"
        if not (REPO / site.file).is_file():
            raise ListProblem(f"{where}: file {site.file} is not in the repository")
        for test in site.tests:
            if not (REPO / test.split("::")[0]).is_file():
                raise ListProblem(f"{where}: test file of {test} is not in the repository")
        for op in site.operators:
            if op not in ("default", *DEFAULT_OPERATORS, *EXTRA_OPERATORS):
                raise ListProblem(
                    f"{where}: operator {op} is not default, {', '.join(DEFAULT_OPERATORS)} "
                    f"or {', '.join(EXTRA_OPERATORS)}"
                )
        out.append(site)
    names = [s.name for s in out]
    if len(set(names)) != len(names):
        raise ListProblem(f"{path.name}: two sites share a name")
    return out


def _text(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value:
        raise ListProblem(f"{where}: {key} must be a non-empty string")
    return value


def _texts(raw: dict[str, Any], key: str, where: str, required: bool = True) -> tuple[str, ...]:
    value = raw[key] if required else raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ListProblem(f"{where}: {key} must be a list of strings")
    if required and not value:
        raise ListProblem(f"{where}: {key} is empty")
    return tuple(value)


def operators(site: Site) -> set[str]:
    """The operators that mutate `site`."""
    if not site.operators:
        return set(DEFAULT_OPERATORS)
    return {o for o in site.operators if o != "default"} | (
        set(DEFAULT_OPERATORS) if "default" in site.operators else set()
    )


def spans(site: Site) -> list[tuple[int, int]]:
    """The (first, last) lines of each of the site's functions (or classes, or module
    assignments); ListProblem naming one the file no longer has."""
    tree = ast.parse((REPO / site.file).read_text(), site.file)
    found: dict[str, tuple[int, int]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            names: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
                found[prefix + name] = (first, node.end_lineno or node.lineno)
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    missing = [f for f in site.functions if f not in found]
    if missing:
        raise ListProblem(
            f"{SITES.name}: site {site.name!r}: {site.file} has no {', '.join(missing)}",
            # the list names the code by function: a rename must be made in the list too
        )
    return [found[f] for f in site.functions]


def select(sites: list[Site], files: list[str]) -> list[Site]:
    """The sites in `files` (all sites when no file is given)."""
    if not files:
        return sites
    wanted = {_relative(f) for f in files}
    return [s for s in sites if s.file in wanted]


def _relative(name: str) -> str:
    path = Path(name)
    if path.is_absolute():
        try:
            return path.resolve().relative_to(REPO).as_posix()
        except ValueError:
            return path.as_posix()
    return path.as_posix()


# -- the operators of our own ---------------------------------------------------------------


def _providers() -> dict[str, Any]:
    """cosmic-ray's operator provider for our two operators (registered in this process:
    the local distributor mutates here)."""
    import parso
    from cosmic_ray.operators.operator import Example, Operator

    class DropFlag(Operator):
        """A guarantee flag (`flag`) left out of the argument list it is an element of."""

        def __init__(self, flag: str) -> None:
            self.flag = flag

        @classmethod
        def arguments(cls):  # type: ignore[override]
            from cosmic_ray.operators.operator import Argument

            return (Argument("flag", "the argument whose removal is the mutant"),)

        def mutation_positions(self, node: Any):
            if (
                node.type == "string"
                and node.value in (f'"{self.flag}"', f"'{self.flag}'")
                and node.parent is not None
                and node.parent.type in ("testlist_comp", "arglist", "atom", "exprlist")
            ):
                yield (node.start_pos, node.end_pos)

        def mutate(self, node: Any, index: int) -> Any:
            # an empty unpacking takes the element's place: valid in lists, tuples, calls
            return parso.python.tree.Operator("*()", node.start_pos, prefix=node.prefix)

        @classmethod
        def examples(cls):  # type: ignore[override]
            return (Example('[a, "--x", b]', "[a, *(), b]", operator_args={"flag": "--x"}),)

    class SwapMembership(Operator):
        """`in` made `not in`, and `not in` made `in` (cosmic-ray's comparisons leave
        both alone)."""

        def mutation_positions(self, node: Any):
            if node.type == "comparison":
                for op in node.children[1::2]:
                    if op.get_code().split() in (["in"], ["not", "in"]):
                        yield (op.start_pos, op.end_pos)

        def mutate(self, node: Any, index: int) -> Any:
            ops = [
                (i, op)
                for i, op in enumerate(node.children)
                if i % 2 == 1 and op.get_code().split() in (["in"], ["not", "in"])
            ]
            i, op = ops[index]
            swapped = " in" if op.get_code().split() == ["not", "in"] else " not in"
            node.children[i] = parso.parse(swapped)
            return node

        @classmethod
        def examples(cls):  # type: ignore[override]
            return (Example("x in y", "x not in y"), Example("x not in y", "x in y"))

    return {"DropFlag": DropFlag, "SwapMembership": SwapMembership}


# -- running --------------------------------------------------------------------------------


def site_command(site: Site) -> str:
    """pytest on the site's tests, stopping at the first failure (a kill)."""
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "--no-header"]
    return shlex.join([*argv, *site.tests])


def run_site(site: Site, log: Any = sys.stdout) -> Outcome:
    """Every mutant of the site's functions, each against the site's tests."""
    import cosmic_ray.plugins
    from cosmic_ray.commands import init
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.testing import run_tests
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    cosmic_ray.plugins.OPERATOR_PROVIDERS.setdefault("vpr", _providers())
    outcome = Outcome(site)
    started = time.monotonic()
    lines = spans(site)
    path = REPO / site.file
    _drop_bytecode(path)
    command = site_command(site)
    began = time.monotonic()
    status, output = run_tests(command, timeout=None)
    baseline = time.monotonic() - began
    if status != TestOutcome.SURVIVED:  # the tests fail on the code as it is
        outcome.baseline = output[-4000:]
        outcome.seconds = time.monotonic() - started
        return outcome
    timeout = baseline * 4 + 60
    wanted = operators(site)
    configs = {"vpr/DropFlag": [{"flag": f} for f in site.flags]}
    tmp = tempfile.TemporaryDirectory(prefix="vpr-mutants-")
    with tmp, use_db(str(Path(tmp.name) / "session.sqlite"), WorkDB.Mode.create) as db:
        init([path], db, configs)
        items = []
        source = path.read_text().splitlines()
        listed = set(site.equivalent)
        for item in db.pending_work_items:
            (m,) = item.mutations
            line = m.start_pos[0]
            if m.operator_name in wanted and any(a <= line <= b for a, b in lines):
                key = f"{m.operator_name} @ {source[line - 1].strip()}"
                if key not in site.equivalent:
                    items.append(item)
                    continue
                listed.discard(key)
                outcome.equivalent += 1
            db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
        if listed:
            raise ListProblem(
                f"{SITES.name}: site {site.name!r}: no such mutant any more (remove it from "
                f"`equivalent`): {sorted(listed)[0]}"
            )
        flags_hit = {i.mutations[0].operator_args.get("flag") for i in items}
        for flag in site.flags:
            if flag not in flags_hit:
                raise ListProblem(
                    f"{SITES.name}: site {site.name!r}: no argument list of "
                    f"{', '.join(site.functions)} holds {flag}"
                )
        for item in items:
            (m,) = item.mutations
            result = mutate_and_test(item.mutations, command, timeout)
            db.set_result(item.job_id, result)
            outcome.mutants += 1
            line = m.start_pos[0]  # named as `equivalent` takes it
            tag = f"line {line}: {m.operator_name} @ {source[line - 1].strip()}"
            if result.worker_outcome != WorkerOutcome.NORMAL:  # no mutant was written
                outcome.mutants -= 1
                outcome.unmade += 1
                print(f"  not made: {tag} (cosmic-ray cannot write it)", file=log, flush=True)
            elif result.test_outcome == TestOutcome.SURVIVED:
                outcome.survived.append(f"{tag}\n{result.diff}")
                print(f"  SURVIVED {tag}", file=log, flush=True)
            else:
                outcome.killed += 1
                outcome.timeouts += result.output == "timeout"
                print(f"  killed {tag}", file=log, flush=True)
    _drop_bytecode(path)
    outcome.seconds = time.monotonic() - started
    return outcome


def _drop_bytecode(path: Path) -> None:
    """The module's cached bytecode, removed: a mutant of the same size written within the
    second of the original's timestamp would otherwise import as the original."""
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def report(outcomes: list[Outcome]) -> str:
    rows = ["site                                            mutants killed survived equiv seconds"]
    for o in outcomes:
        survived = "baseline failed" if o.baseline is not None else str(len(o.survived))
        rows.append(
            f"{o.site.name:<47} {o.mutants:>7} {o.killed:>6} {survived:>8} {o.equivalent:>5} "
            f"{o.seconds:>7.0f}"
        )
    total = sum(o.seconds for o in outcomes)
    rows.append(
        f"{len(outcomes)} sites, {sum(o.mutants for o in outcomes)} mutants run, "
        f"{sum(o.equivalent for o in outcomes)} listed equivalent, "
        f"{sum(o.unmade for o in outcomes)} cosmic-ray could not write, {total:.0f} s"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__)
    parser.add_argument("files", nargs="*", help="only the sites in these files")
    parser.add_argument(
        "--list", action="store_true", help="print the selected sites' names and stop"
    )
    args = parser.parse_args(argv)
    try:
        sites = select(load_sites(), args.files)
        for site in sites:
            spans(site)
    except ListProblem as exc:
        print(f"mutants: {exc}", file=sys.stderr)
        return 2
    if args.list:
        print("\n".join(s.name for s in sites))
        return 0
    if not sites:
        print("mutants: no guarantee site in these files; nothing to mutate")
        return 0
    outcomes = []
    for site in sites:
        print(f"mutants: {site.name} ({site.file}: {', '.join(site.functions)})", flush=True)
        try:
            outcomes.append(run_site(site))
        except ListProblem as exc:
            print(f"mutants: {exc}", file=sys.stderr)
            return 2
    print(report(outcomes))
    failed = False
    for o in outcomes:
        if o.baseline is not None:
            failed = True
            print(f"\n{o.site.name}: its tests fail on the unmutated code:\n{o.baseline}")
        for diff in o.survived:
            failed = True
            print(f"\n{o.site.name}: a mutant survived {diff}")
        if o.mutants == 0 and o.baseline is None:
            failed = True
            print(f"\n{o.site.name}: no mutant in {', '.join(o.site.functions)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
