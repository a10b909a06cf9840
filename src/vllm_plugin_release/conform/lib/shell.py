"""A small shell interpreter that records simple commands with their environment.

It does not run anything: it tracks variables (static values only), exports,
`set -a`, `cd`, and follows `source`d scripts, `bash -c` strings, scripts run
with `bash FILE`, heredocs fed to a shell and command substitutions.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from vllm_plugin_release.conform.lib.installer import branches
from vllm_plugin_release.conform.lib.installer.scanner import SUB_RE, Scanner, Segment, words
from vllm_plugin_release.conform.lib.plugintree import Unread, exists_within, read_text, too_large

ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)
_VAR_RE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)
_RESERVED = {
    "{",
    "}",
    "!",
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "do",
    "done",
    "while",
    "until",
    "time",
    "esac",
    "(",
    ")",
}
_SHELLS = ("bash", "sh", "dash", "zsh")
_MAX_DEPTH = 8  # nested substitutions / bash -c strings / heredocs followed
_MAX_WORDS = 64  # a `for` over more static words runs its body once, as if not static
# Work is bounded, whatever the script: loops, branches, sourced scripts and variables
# multiply. Static `for` loops are run word by word while the words of the loops around
# them multiply to at most _MAX_UNROLL (past it, a body runs once, as if not static); a
# scan does at most _MAX_STEPS units of work (lines read, items run, variables copied,
# merged or exported), then stops with TooComplex naming where (a real installer needs a
# few thousand).
_MAX_UNROLL = 256
MAX_STEPS = 1_000_000


@dataclass
class Var:
    value: str | None  # None: not static (e.g. $(mktemp))
    file: str
    line: int
    exported: bool


@dataclass
class ShellCommand:
    """One simple command as it would run: words, environment, where it is written."""

    argv: list[str]
    file: str
    line: int
    op: str | None = None
    prefix: dict[str, str] = field(default_factory=dict)
    env: dict[str, Var] = field(default_factory=dict)
    cwd: str | None = None
    heredocs: list[str] = field(default_factory=list)
    stdout: str | None = None  # the file a `>` redirection writes


@dataclass
class State:
    vars: dict[str, Var] = field(default_factory=dict)
    allexport: bool = False
    cwd: str | None = None

    def copy(self, exported_only: bool = False) -> State:
        items = {k: v for k, v in self.vars.items() if v.exported or not exported_only}
        return State(dict(items), self.allexport, self.cwd)


def expand(word: str, state: State) -> str:
    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        var = state.vars.get(name)
        value = var.value if var else None
        op, default = m.group(2), m.group(3)
        if op in (":-", "-", ":=", "="):
            if value is None or (op.startswith(":") and value == ""):
                return default if default is not None and "$" not in default else m.group(0)
            return value
        if op in (":+", "+"):
            return m.group(0)
        return value if value is not None else m.group(0)

    return _VAR_RE.sub(repl, word)


class Shell:
    def __init__(self, root: Path, notes: list[str], files_read: list[str]) -> None:
        self.root = root
        self.notes = notes
        self.files_read = files_read
        self.subs: dict[str, tuple[str, int]] = {}
        self.assignments: dict[str, list[Var]] = {}
        self.emitted: list[ShellCommand] = []  # every command, in order (what ran so far)
        self.steps = 0
        self.unrolled = 1  # the words of the static loops around, multiplied
        self.level = 0  # blocks, sourced scripts and subshells around
        self.where = "<shell>:0"
        self.scripts: dict[Path, list[branches.Item]] = {}  # sourced scripts, parsed once
        # (target, cwd, file) of a `source`d script -> its path and name, looked up once
        self.found: dict[tuple[str, str | None, str], tuple[Path | None, str]] = {}
        self.split: dict[str, tuple[list[str], str | None]] = {}  # text -> its words
        self.parsed: dict[tuple[str, tuple[tuple[int, str], ...]], list[branches.Item]] = {}

    def spend(self, units: int) -> None:
        """Count work; TooComplex once a scan has done MAX_STEPS units."""
        self.steps += units
        if self.steps > MAX_STEPS:
            raise branches.TooComplex(
                self.where,
                f"the analysis stopped after {MAX_STEPS:,} steps: the installer's loops, "
                "branches, sourced scripts and variables multiply past what is analysed",
            )

    def words(self, text: str) -> tuple[list[str], str | None]:
        """`scanner.words(text)`, split once per text (a loop body or a sourced script
        runs its commands again); the work counted by the text's length."""
        if text not in self.split:
            self.spend(len(text) + 1)
            self.split[text] = words(text)
        self.spend(1)
        raw, stdout = self.split[text]
        return list(raw), stdout

    def assign(self, state: State, name: str, var: Var) -> None:
        """Set a variable in `state` and remember every assignment (for the report)."""
        state.vars[name] = var
        self.assignments.setdefault(name, []).append(var)

    def unsub(self, word: str) -> str:
        return SUB_RE.sub(lambda m: f"$({self.subs.get(m.group(0), ('...', 0))[0]})", word)

    def run_text(
        self, lines: list[tuple[int, str]], file: str, state: State, depth: int = 0
    ) -> list[ShellCommand]:
        return self.run_items(self.parse(lines, file), file, state, depth)

    def parse(self, lines: list[tuple[int, str]], file: str) -> list[branches.Item]:
        """The items of `lines`, parsed once (a substitution, `bash -c` string or heredoc
        inside a loop or a branch runs again, and is not parsed again)."""
        key = (file, tuple(lines))
        if key not in self.parsed:
            self.spend(sum(len(text) for _, text in lines) // 16 + 1)  # ~ its cost to parse
            scanner = Scanner(lines, self.subs)
            segments = scanner.run()
            if scanner.unterminated:
                self.notes.append(f"{file}: unterminated quote or $( ... ); parsed best-effort")
            self.parsed[key] = branches.structure(segments, file)
        self.spend(1)
        return self.parsed[key]

    def run_items(
        self, items: list[branches.Item], file: str, state: State, depth: int
    ) -> list[ShellCommand]:
        self.level += 1
        try:
            if self.level > branches.MAX_NESTING:
                raise branches.TooComplex(
                    self.where,
                    f"blocks, sourced scripts and subshells nested more than "
                    f"{branches.MAX_NESTING} deep",
                )
            out: list[ShellCommand] = []
            for item in items:
                self.spend(1)
                if isinstance(item, branches.IfBlock):
                    out.extend(self.run_if(item, file, state, depth))
                elif isinstance(item, branches.CaseBlock):
                    out.extend(self.run_case(item, file, state, depth))
                elif isinstance(item, branches.Loop):
                    out.extend(self.run_loop(item, file, state, depth))
                else:
                    self.where = f"{file}:{item.line}"
                    out.extend(self.run_segment(item, file, state, depth))
            return out
        finally:
            self.level -= 1

    def run_possible(
        self, possible: list[list[branches.Item]], file: str, state: State, depth: int, line: int
    ) -> list[ShellCommand]:
        """Bodies of which any one may run: each on a copy of the state, merged after."""
        if len(possible) == 1:
            return self.run_items(possible[0], file, state, depth)
        out: list[ShellCommand] = []
        self.spend(2 * len(possible) * (len(state.vars) + 1))  # the copies, then the merge
        states = [state.copy() for _ in possible]
        for body, copy in zip(possible, states):
            out.extend(self.run_items(body, file, copy, depth))
        merged = branches.merge(states, file, line)
        state.vars, state.allexport, state.cwd = merged.vars, merged.allexport, merged.cwd
        return out

    def static_words(
        self, text: str, seg: branches.Segment, file: str, state: State, depth: int
    ) -> tuple[list[ShellCommand], list[str] | None]:
        """The words of `text` expanded (their command substitutions run first); None
        when any is not static here."""
        raw, _ = self.words(text)
        out = self.substitutions(raw, seg, file, state, depth)
        values = [expand(w, state) for w in raw]
        if any("$" in v or SUB_RE.search(v) for v in values):
            return out, None
        return out, values

    def run_case(
        self, block: branches.CaseBlock, file: str, state: State, depth: int
    ) -> list[ShellCommand]:
        """The first clause whose pattern matches a static word; otherwise every clause
        may run (and none, unless a clause matches anything)."""
        seg = block.word
        out, found = self.static_words(seg.text, seg, file, state, depth)
        word = found[0] if found and len(found) == 1 else None
        possible: list[list[branches.Item]] = []
        for patterns, body in block.clauses:
            values = [expand(p.strip("\"'"), state) for p in patterns]
            known = word is not None and not any("$" in v or SUB_RE.search(v) for v in values)
            if not known:
                possible.append(body)  # may match
            elif any(fnmatch.fnmatchcase(word or "", v) for v in values):
                possible.append(body)  # matches: no later clause runs
                return out + self.run_possible(possible, file, state, depth, seg.line)
        if not any(p == "*" for patterns, _ in block.clauses for p in patterns):
            possible.append([])  # no clause may match
        return out + self.run_possible(possible, file, state, depth, seg.line)

    def run_loop(
        self, loop: branches.Loop, file: str, state: State, depth: int
    ) -> list[ShellCommand]:
        """A `for` over static words: the body once per word, the name set to it. Any
        other loop: its condition, then its body may run or not (merged)."""
        out = self.run_items(loop.cond, file, state, depth)
        line = (
            loop.head.line
            if loop.head
            else next((s.line for s in loop.cond if isinstance(s, branches.Segment)), 0)
        )
        values: list[str] | None = None
        if loop.kind == "for" and loop.head is not None and loop.words is not None:
            found, values = self.static_words(loop.words, loop.head, file, state, depth)
            out.extend(found)
        if (
            loop.name
            and values is not None
            and len(values) <= _MAX_WORDS
            and self.unrolled * max(len(values), 1) <= _MAX_UNROLL
        ):
            self.unrolled *= max(len(values), 1)
            try:
                for value in values:
                    old = state.vars.get(loop.name)
                    exported = state.allexport or bool(old and old.exported)
                    self.assign(state, loop.name, Var(value, file, line, exported))
                    out.extend(self.run_items(loop.body, file, state, depth))
            finally:
                self.unrolled //= max(len(values), 1)
            return out
        if loop.name:
            self.assign(state, loop.name, Var(None, file, line, False))
        return out + self.run_possible([loop.body, []], file, state, depth, line)

    def run_if(
        self, block: branches.IfBlock, file: str, state: State, depth: int
    ) -> list[ShellCommand]:
        """The branch a static condition selects; every possible branch otherwise (each on
        a copy of the state, merged after)."""
        out: list[ShellCommand] = []
        possible: list[list[branches.Item]] = []
        for cond, body in block.branches:
            out.extend(self.run_items(cond, file, state, depth))
            verdict = branches.condition(cond, lambda word: expand(word, state))
            if verdict is True and not possible:
                return out + self.run_items(body, file, state, depth)
            if verdict is not False:
                possible.append(body)
            if verdict is True:
                break
        else:
            possible.append(block.otherwise or [])
        line = next((s.line for s in self._segments(block)), 0)
        return out + self.run_possible(possible, file, state, depth, line)

    @staticmethod
    def _segments(block: branches.IfBlock) -> list[Segment]:
        return [s for cond, _ in block.branches for s in cond if isinstance(s, Segment)]

    def run_segment(self, seg: Segment, file: str, state: State, depth: int) -> list[ShellCommand]:
        self.spend(8)  # a command: its words, expansions and wrappers
        raw, stdout = self.words(seg.text)
        out = self.substitutions(raw, seg, file, state, depth)
        while raw and raw[0] in _RESERVED:
            raw.pop(0)
        if raw and raw[0] in ("for", "case", "function", "select"):
            return out
        prefix, static = self.prefix_assignments(raw, state)
        if not raw:
            self.assign_prefix(prefix, static, state, file, seg.line)
            return out
        argv = [self.unsub(expand(w, state)) for w in raw]
        _unwrap(argv, prefix)
        if not argv:
            return out
        handled = self.builtin(argv, file, seg.line, state, depth)
        if handled is None:
            handled = self.shell_invocation(argv, file, seg.line, state, depth)
        if handled is None:
            cmd = self.record(argv, prefix, seg, file, state, stdout)
            handled = [cmd, *self.heredoc_runs(cmd, seg, state, depth)]
        out.extend(handled)
        return out

    def substitutions(
        self, raw: list[str], seg: Segment, file: str, state: State, depth: int
    ) -> list[ShellCommand]:
        """Command substitutions run first (in a subshell)."""
        out: list[ShellCommand] = []
        for word in raw:
            for key in SUB_RE.findall(word):
                inner, line = self.subs.get(f"__VPR_SUB{key}__", ("", seg.line))
                if depth < _MAX_DEPTH and inner.strip():
                    sub_lines = list(enumerate(inner.split("\n"), start=line))
                    self.spend(len(state.vars))
                    out.extend(self.run_text(sub_lines, file, state.copy(), depth + 1))
        return out

    def prefix_assignments(
        self, raw: list[str], state: State
    ) -> tuple[dict[str, str], dict[str, bool]]:
        """`A=1 B=2 cmd`: take the assignments off `raw`; their values and which are static."""
        prefix: dict[str, str] = {}
        static: dict[str, bool] = {}
        while raw and (m := ASSIGN_RE.match(raw[0])) and not raw[0].startswith("="):
            value = expand(m.group(2), state)
            prefix[m.group(1)] = self.unsub(value)
            static[m.group(1)] = not SUB_RE.search(value) and "$" not in value
            raw.pop(0)
        return prefix, static

    def assign_prefix(
        self, prefix: dict[str, str], static: dict[str, bool], state: State, file: str, line: int
    ) -> None:
        """A line of assignments only: they set shell variables."""
        for name, value in prefix.items():
            old = state.vars.get(name)
            exported = state.allexport or bool(old and old.exported)
            self.assign(state, name, Var(value if static[name] else None, file, line, exported))

    def builtin(
        self, argv: list[str], file: str, line: int, state: State, depth: int
    ) -> list[ShellCommand] | None:
        """Builtins that change the shell's state; None when `argv` is not one."""
        head = argv[0]
        if head in ("export", "declare", "typeset", "readonly", "local"):
            self.declare(argv, file, line, state)
        elif head == "unset":
            for arg in argv[1:]:
                state.vars.pop(arg, None)
        elif head == "set":
            _set_options(argv, state)
        elif head == "cd" and len(argv) > 1:
            target = argv[1]
            if state.cwd and not target.startswith(("/", "$", "~")):
                target = str(PurePosixPath(state.cwd) / target)
            state.cwd = target
        elif head in ("source", ".") and len(argv) > 1:
            return self.follow(argv[1], file, line, state, depth)
        else:
            return None
        return []

    def declare(self, argv: list[str], file: str, line: int, state: State) -> None:
        head = argv[0]
        exporting = head == "export" or any(a.startswith("-") and "x" in a for a in argv[1:])
        for arg in argv[1:]:
            if arg.startswith("-"):
                continue
            if m := ASSIGN_RE.match(arg):
                static = "$" not in m.group(2) and "__VPR_SUB" not in m.group(2)
                value = m.group(2) if static else None
                self.assign(state, m.group(1), Var(value, file, line, exporting))
            elif arg in state.vars and exporting:
                state.vars[arg].exported = True

    def shell_invocation(
        self, argv: list[str], file: str, line: int, state: State, depth: int
    ) -> list[ShellCommand] | None:
        """`bash -c STRING` and `bash SCRIPT`: what they run; None for anything else."""
        if _name(argv[0]) not in _SHELLS or len(argv) < 2:
            return None
        self.spend(len(state.vars))
        if "-c" in argv[1:]:
            idx = argv.index("-c")
            if idx + 1 < len(argv) and depth < _MAX_DEPTH:
                return self.run_text([(line, argv[idx + 1])], file, state.copy(True), depth + 1)
            return []
        script = next((a for a in argv[1:] if not a.startswith("-")), None)
        if script:
            return self.follow(script, file, line, state.copy(True), depth)
        return None

    def record(
        self,
        argv: list[str],
        prefix: dict[str, str],
        seg: Segment,
        file: str,
        state: State,
        stdout: str | None,
    ) -> ShellCommand:
        """The command itself, recorded with its environment (see `heredoc_runs` for what
        it runs in turn)."""
        self.spend(len(state.vars) + 64)  # and the analysis of it afterwards (installs, fetches)
        env = {k: v for k, v in state.vars.items() if v.exported}
        for key, value in prefix.items():
            env[key] = Var(value, file, seg.line, True)
            self.assignments.setdefault(key, []).append(env[key])
        cmd = ShellCommand(
            argv=argv,
            file=file,
            line=seg.line,
            op=seg.op,
            prefix=prefix,
            env=env,
            cwd=state.cwd,
            heredocs=["\n".join(t for _, t in body) for body in seg.heredocs],
            stdout=stdout,
        )
        self.emitted.append(cmd)
        return cmd

    def heredoc_runs(
        self, cmd: ShellCommand, seg: Segment, state: State, depth: int
    ) -> list[ShellCommand]:
        """What `cmd` runs when it is a shell reading a heredoc (`seg`'s)."""
        out: list[ShellCommand] = []
        if _name(cmd.argv[0]) in _SHELLS and seg.heredocs and depth < _MAX_DEPTH:
            for body in seg.heredocs:
                self.spend(len(state.vars))
                out.extend(self.run_text(body, cmd.file, state.copy(True), depth + 1))
        return out

    def follow(
        self, target: str, file: str, line: int, state: State, depth: int
    ) -> list[ShellCommand]:
        if "$" in target or depth >= 5:
            self.notes.append(f"{file}:{line}: not followed: {target} (not a static path)")
            return []
        self.spend(16)  # a lookup on disk, the first time
        key = (target, state.cwd, file)
        if key not in self.found:
            path = resolve(self.root, target, state.cwd, file)
            self.found[key] = (path, display(self.root, path) if path else "")
        path, rel = self.found[key]
        if path is None:
            self.notes.append(f"{file}:{line}: {target} is not in the plugin tree; not read")
            return []
        if path not in self.scripts:
            try:
                text, cut = read_text(self.root, path)
            except Unread as exc:
                self.notes.append(f"{file}:{line}: {target} is {exc.reason}")
                return []
            if cut:
                self.notes.append(too_large(rel))
            self.scripts[path] = self.parse(numbered(text), rel)
        if rel not in self.files_read:
            self.files_read.append(rel)
        return self.run_items(self.scripts[path], rel, state, depth + 1)


def _name(word: str) -> str:
    """`PurePosixPath(word).name`, without building a path (this runs for every command)."""
    parts = [part for part in word.split("/") if part not in ("", ".")]
    return parts[-1] if parts else ""


def _unwrap(argv: list[str], prefix: dict[str, str]) -> None:
    """Drop wrappers that run the rest of the line as a command (sudo, env, exec, ...)."""
    while argv:
        head = _name(argv[0])
        if head in ("sudo", "doas"):
            argv.pop(0)
            while argv and argv[0].startswith("-"):
                opt = argv.pop(0)
                if opt in ("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U") and argv:
                    argv.pop(0)
        elif head == "env":
            argv.pop(0)
            while argv and (argv[0].startswith("-") or ASSIGN_RE.match(argv[0])):
                word = argv.pop(0)
                if word in ("-u", "--unset", "-C", "--chdir", "-S") and argv:
                    argv.pop(0)
                elif m := ASSIGN_RE.match(word):
                    prefix[m.group(1)] = m.group(2)
        elif head in ("exec", "command", "nohup", "time", "builtin", "nice"):
            argv.pop(0)
            while argv and argv[0].startswith("-"):
                argv.pop(0)
        else:
            break


def _set_options(argv: list[str], state: State) -> None:
    """`set -a` / `set +a` / `set -o allexport`."""
    for arg in argv[1:]:
        if arg.startswith("-") and "a" in arg:
            state.allexport = True
        elif arg.startswith("+") and "a" in arg:
            state.allexport = False
    if "allexport" in argv:
        state.allexport = argv[argv.index("allexport") - 1] == "-o"


def numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), start=1))


def display(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def resolve(root: Path, target: str, cwd: str | None, file: str) -> Path | None:
    """A file named by an installer: against its cwd, the plugin root, the installer's
    folder; only inside the plugin tree (links resolved): a path outside it, or a link
    out of it, is not looked at (None, as for a file that is not there)."""
    if target.startswith("~") or "://" in target:
        return None
    candidates: list[Path] = []
    p = Path(target)
    if p.is_absolute():
        candidates.append(p)
    else:
        if cwd and not cwd.startswith(("$", "~")):
            base = Path(cwd) if Path(cwd).is_absolute() else root / cwd
            candidates.append(base / p)
        candidates.append(root / p)
        candidates.append((root / file).parent / p)
    for candidate in candidates:
        inside = exists_within(root, candidate)
        if inside is not None:
            return inside
    return None


def parse_shell(text: str, file: str = "<shell>", root: Path | None = None) -> list[ShellCommand]:
    """The simple commands of a shell script, in order (public for tests and tools)."""
    notes: list[str] = []
    shell = Shell(root or Path("."), notes, [])
    return shell.run_text(numbered(text), file, State())
