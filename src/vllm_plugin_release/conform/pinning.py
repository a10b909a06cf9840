"""Build pinning (`pinning`): how the plugin's installer builds vLLM core.

Reads the installer and the files it names (shell scripts, Dockerfiles,
requirements / overrides / constraints files, pyproject.toml) and answers:

- is the core pinned exactly, and to which version (and does that match the spec);
- is `VLLM_TARGET_DEVICE` set (and exported to the core install) to the spec's target;
- is the core built from source (`--no-binary vllm`, an sdist, a git checkout);
- which inputs are fetched at install time without a hash, which installs are
  editable, which dependencies are unpinned.

Shell is tokenized, not grepped: a small scanner handles line structure (quotes,
`\\` continuations, comments, `&&` / `||` / `;` / `|`, `$(...)`, heredocs) and
`shlex` splits each simple command into words. Variables assigned in the script
(and `ENV` / `ARG` in Dockerfiles) are expanded where their value is static;
`source`d scripts, `bash -c` strings and command substitutions are followed.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from jsonschema import Draft202012Validator
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from vllm_plugin_release.conform.result import CheckResult, Evidence
from vllm_plugin_release.core.errors import BadInput

try:  # Python 3.11+
    import tomllib as _tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    _tomllib = None  # type: ignore[assignment]

NAME = "pinning"
LEVELS = ("ignore", "warn", "fail")

PINNING_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Build pinning check: how the plugin's installer builds vLLM core.",
    "additionalProperties": False,
    "properties": {
        "files": {
            "type": "array",
            "description": "More installer inputs to read, relative to the plugin source: "
            'a path, or {path = "...", kind = "shell|dockerfile|requirements|pyproject"}. '
            "[plugin] installer and overrides are always read.",
            "items": {
                "oneOf": [
                    {"type": "string", "minLength": 1},
                    {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["path"],
                        "properties": {
                            "path": {"type": "string", "minLength": 1},
                            "kind": {"enum": ["shell", "dockerfile", "requirements", "pyproject"]},
                        },
                    },
                ]
            },
        },
        "unhashed_fetch": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for an input downloaded at install time without a hash "
            "check (curl/wget without sha256sum -c, URL requirements, git refs that are "
            "not commits).",
        },
        "editable_install": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for an editable install (-e).",
        },
        "unpinned": {
            "enum": list(LEVELS),
            "default": "warn",
            "description": "Verdict for a dependency without an exact pin (== or ===).",
        },
        "require_from_source": {
            "type": "boolean",
            "default": True,
            "description": "Fail unless the installer builds vLLM core from source "
            "(--no-binary vllm, an sdist or a git checkout).",
        },
    },
}

# ---------------------------------------------------------------------------
# Options tables shared by the conformance checks.


def conformance_table(spec: Any, key: str, schema: dict[str, Any]) -> dict[str, Any]:
    """`[conformance.KEY]` validated against `schema`; BadInput names file, line and key."""
    from vllm_plugin_release.spec.model import locate

    table = (getattr(spec, "conformance", None) or {}).get(key, {})
    if table is None:
        table = {}
    where = str(getattr(spec, "path", "buildspec"))
    if not isinstance(table, dict):
        raise BadInput(
            f"{where}: [conformance.{key}] must be a table, got {table!r}",
            hint=f"write it as a [conformance.{key}] section",
        )
    errors = sorted(
        Draft202012Validator(schema).iter_errors(table), key=lambda e: list(e.absolute_path)
    )
    if not errors:
        return dict(table)
    error = errors[0]
    path = tuple(str(p) for p in error.absolute_path)
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(schema.get("properties", {})))
        path = (*path, extra[0] if extra else "?")
        message = f"unknown key; expected one of: {', '.join(sorted(schema['properties']))}"
    else:
        sub = schema.get("properties", {}).get(path[0], {}) if path else {}
        desc = sub.get("description", "")
        message = f"{error.message}" + (f" ({desc})" if desc else "")
    line = None
    with contextlib.suppress(OSError):
        line = locate(Path(where).read_text(encoding="utf-8"), ("conformance", key, *path[:1]))
    dotted = ".".join(path) if path else "(table)"
    raise BadInput(
        f"{where}{f':{line}' if line else ''}: [conformance.{key}] {dotted}: {message}",
        hint=f"fix [conformance.{key}] {path[0] if path else ''}".rstrip(),
    )


def plugin_root_for(spec: Any, plugin_root: Path | str | None) -> Path:
    """The plugin source folder: given, or [plugin.source] path for kind = path."""
    if plugin_root is not None:
        return Path(plugin_root)
    source = (getattr(spec, "plugin", None) or {}).get("source") or {}
    if source.get("kind") == "path" and source.get("path"):
        return Path(spec.resolve(source["path"]))
    raise BadInput(
        f"{getattr(spec, 'path', 'buildspec')}: [plugin.source] is not a local path; "
        "the check needs the plugin's source folder",
        hint="fetch the plugin first and pass its checkout (plugin_root)",
    )


# ---------------------------------------------------------------------------
# Shell: line structure scanner.

_SUB_RE = re.compile(r"__VPR_SUB(\d+)__")
_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=(.*)$", re.S)
_VAR_RE = re.compile(
    r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=+])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)"
)
_WORD_BREAK = " \t;&|()"
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


@dataclass
class _Segment:
    """One simple command's text (command substitutions replaced by placeholders)."""

    text: str
    line: int
    op: str | None  # the operator before it: ";", "&&", "||", "|", "&" or None
    heredoc_marks: list[tuple[str, bool]] = field(default_factory=list)
    heredocs: list[list[tuple[int, str]]] = field(default_factory=list)


class _Scanner:
    """Splits shell text into simple commands, keeping the line each one starts on."""

    def __init__(self, lines: list[tuple[int, str]], subs: dict[str, tuple[str, int]]) -> None:
        self.lines = lines
        self.subs = subs
        self.segments: list[_Segment] = []
        self.cur: list[str] = []
        self.cur_line: int | None = None
        self.next_op: str | None = None
        self.marks: list[tuple[str, bool]] = []
        self.stack: list[str] = []
        self.sub_buf: list[str] = []
        self.sub_line = 0
        self.lineno = 0
        self.pending: list[_Segment] = []
        self.unterminated = False

    def capturing(self) -> bool:
        return "$(" in self.stack or "`" in self.stack

    def put(self, text: str) -> None:
        if self.capturing():
            self.sub_buf.append(text)
            return
        if self.cur_line is None and text.strip():
            self.cur_line = self.lineno
        self.cur.append(text)

    def prev_char(self) -> str:
        buf = self.sub_buf if self.capturing() else self.cur
        for chunk in reversed(buf):
            if chunk:
                return chunk[-1]
        return " "

    def emit(self, op: str | None) -> None:
        text = "".join(self.cur).strip()
        if text:
            seg = _Segment(text, self.cur_line or self.lineno, self.next_op, self.marks)
            self.segments.append(seg)
            if self.marks:
                self.pending.append(seg)
            self.next_op = op
        elif op in ("&&", "||", "|") or self.next_op not in ("&&", "||", "|"):
            self.next_op = op
        self.cur, self.cur_line, self.marks = [], None, []

    def close_sub(self) -> None:
        key = f"__VPR_SUB{len(self.subs)}__"
        self.subs[key] = ("".join(self.sub_buf), self.sub_line)
        self.sub_buf = []
        self.put(key)

    def open_sub(self, token: str) -> None:
        if self.capturing():
            self.sub_buf.append(token)
        else:
            self.sub_buf, self.sub_line = [], self.lineno
        self.stack.append("$(" if token.startswith("$") else "`")

    def run(self) -> list[_Segment]:
        index = 0
        while index < len(self.lines):
            self.lineno, line = self.lines[index]
            index += 1
            continued = self.scan_line(line)
            if continued:
                continue
            top = self.stack[-1] if self.stack else None
            if top in ('"', "'", "`") or self.capturing():
                self.put("\n")
                continue
            self.emit(";")
            # Heredoc bodies follow the line that opened them.
            for seg in self.pending:
                for word, strip_tabs in seg.heredoc_marks:
                    body: list[tuple[int, str]] = []
                    while index < len(self.lines):
                        number, text = self.lines[index]
                        index += 1
                        check = text.lstrip("\t") if strip_tabs else text
                        if check.rstrip() == word:
                            break
                        body.append((number, text))
                    seg.heredocs.append(body)
            self.pending = []
        if self.stack:
            self.unterminated = True
            while self.capturing():
                top = self.stack.pop()
                if top in ("$(", "`") and not self.capturing():
                    self.close_sub()
            self.stack = []
        self.emit(None)
        return self.segments

    def scan_line(self, line: str) -> bool:
        """Scan one physical line; True when it ends with a line continuation."""
        j, n = 0, len(line)
        while j < n:
            c = line[j]
            nxt = line[j + 1] if j + 1 < n else ""
            top = self.stack[-1] if self.stack else None
            if top == "'":
                self.put(c)
                if c == "'":
                    self.stack.pop()
                j += 1
                continue
            if c == "\\":
                if j == n - 1:
                    return True
                self.put(c + nxt)
                j += 2
                continue
            if top == '"':
                if c == '"':
                    self.stack.pop()
                    self.put(c)
                elif c == "$" and nxt == "(":
                    self.open_sub("$(")
                    j += 1
                elif c == "`":
                    self.open_sub("`")
                else:
                    self.put(c)
                j += 1
                continue
            if top == "`":
                if c == "`":
                    self.stack.pop()
                    if self.capturing():
                        self.sub_buf.append(c)
                    else:
                        self.close_sub()
                else:
                    self.put(c)
                j += 1
                continue
            # Unquoted context (top level, inside $( ... ) or a subshell).
            word_start = self.prev_char() in _WORD_BREAK
            if c == "#" and word_start:
                break
            if c in "\"'":
                self.stack.append(c)
                self.put(c)
            elif c == "$" and nxt == "(":
                self.open_sub("$(")
                j += 1
            elif c == "`":
                self.open_sub("`")
            elif c == "(":
                self.stack.append("(")
                if self.capturing():
                    self.put(c)
                else:
                    self.emit(";")
            elif c == ")":
                if top == "$(":
                    self.stack.pop()
                    if self.capturing():
                        self.sub_buf.append(c)
                    else:
                        self.close_sub()
                elif top == "(":
                    self.stack.pop()
                    if self.capturing():
                        self.put(c)
                    else:
                        self.emit(";")
                else:
                    self.put(c)  # a case pattern or a stray parenthesis
            elif self.capturing():
                self.put(c)
            elif c in ";&|":
                pair = line[j : j + 2]
                if pair in ("&&", "||", ";;"):
                    self.emit(pair if pair != ";;" else ";")
                    j += 1
                elif pair == "&>" or self.prev_char() == ">":
                    self.put(c)
                elif pair == "|&":
                    self.emit("|")
                    j += 1
                else:
                    self.emit(c)
            elif c.isdigit() and word_start and re.match(r"\d+[<>]", line[j:]):
                j = re.match(r"\d+", line[j:]).end() + j  # type: ignore[union-attr]
                continue
            elif line.startswith("<<", j) and not line.startswith("<<<", j):
                k = j + 2
                strip_tabs = line.startswith("-", k)
                k += 1 if strip_tabs else 0
                while k < n and line[k] in " \t":
                    k += 1
                m = re.match(r"""(['"])(.*?)\1|([^\s;&|<>()]+)""", line[k:])
                if m:
                    self.marks.append((m.group(2) if m.group(1) else m.group(3), strip_tabs))
                    j = k + m.end()
                else:
                    j = k
                continue
            else:
                self.put(c)
            j += 1
        return False


def _words(text: str) -> tuple[list[str], str | None]:
    """shlex words of one simple command without redirections, and its stdout file if any."""
    lex = shlex.shlex(text, posix=True, punctuation_chars="<>&|")
    lex.whitespace_split = True
    lex.commenters = ""
    try:
        tokens = list(lex)
    except ValueError:  # an unterminated quote: fall back to whitespace words
        tokens = text.split()
    words: list[str] = []
    stdout: str | None = None
    redirect: str | None = None
    for token in tokens:
        if redirect is not None:
            if redirect in (">", ">>", ">|", "&>", "&>>"):
                stdout = token
            redirect = None
            continue
        if token and set(token) <= set("<>&|"):
            if "<" in token or ">" in token:
                redirect = token
            continue
        words.append(token)
    return words, stdout


# ---------------------------------------------------------------------------
# Shell: a small interpreter that records commands with their environment.


@dataclass
class _Var:
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
    env: dict[str, _Var] = field(default_factory=dict)
    cwd: str | None = None
    heredocs: list[str] = field(default_factory=list)
    stdout: str | None = None  # the file a `>` redirection writes


@dataclass
class _State:
    vars: dict[str, _Var] = field(default_factory=dict)
    allexport: bool = False
    cwd: str | None = None

    def copy(self, exported_only: bool = False) -> _State:
        items = {k: v for k, v in self.vars.items() if v.exported or not exported_only}
        return _State(dict(items), self.allexport, self.cwd)


def _expand(word: str, state: _State) -> str:
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


class _Shell:
    def __init__(self, root: Path, notes: list[str], files_read: list[str]) -> None:
        self.root = root
        self.notes = notes
        self.files_read = files_read
        self.subs: dict[str, tuple[str, int]] = {}
        self.assignments: dict[str, list[_Var]] = {}

    def assign(self, state: _State, name: str, var: _Var) -> None:
        """Set a variable in `state` and remember every assignment (for the report)."""
        state.vars[name] = var
        self.assignments.setdefault(name, []).append(var)

    def unsub(self, word: str) -> str:
        return _SUB_RE.sub(lambda m: f"$({self.subs.get(m.group(0), ('...', 0))[0]})", word)

    def run_text(
        self, lines: list[tuple[int, str]], file: str, state: _State, depth: int = 0
    ) -> list[ShellCommand]:
        scanner = _Scanner(lines, self.subs)
        segments = scanner.run()
        if scanner.unterminated:
            self.notes.append(f"{file}: unterminated quote or $( ... ); parsed best-effort")
        out: list[ShellCommand] = []
        for seg in segments:
            out.extend(self.run_segment(seg, file, state, depth))
        return out

    def run_segment(
        self, seg: _Segment, file: str, state: _State, depth: int
    ) -> list[ShellCommand]:
        out: list[ShellCommand] = []
        raw, stdout = _words(seg.text)
        # Command substitutions run first (in a subshell).
        for word in raw:
            for key in _SUB_RE.findall(word):
                inner, line = self.subs.get(f"__VPR_SUB{key}__", ("", seg.line))
                if depth < 8 and inner.strip():
                    sub_lines = list(enumerate(inner.split("\n"), start=line))
                    out.extend(self.run_text(sub_lines, file, state.copy(), depth + 1))
        while raw and raw[0] in _RESERVED:
            raw.pop(0)
        if raw and raw[0] in ("for", "case", "function", "select"):
            return out
        prefix: dict[str, str] = {}
        prefix_static: dict[str, bool] = {}
        while raw and (m := _ASSIGN_RE.match(raw[0])) and not raw[0].startswith("="):
            value = _expand(m.group(2), state)
            prefix[m.group(1)] = self.unsub(value)
            prefix_static[m.group(1)] = not _SUB_RE.search(value) and "$" not in value
            raw.pop(0)
        if not raw:
            for name, value in prefix.items():
                old = state.vars.get(name)
                self.assign(
                    state,
                    name,
                    _Var(
                        value if prefix_static[name] else None,
                        file,
                        seg.line,
                        state.allexport or bool(old and old.exported),
                    ),
                )
            return out
        argv = [self.unsub(_expand(w, state)) for w in raw]
        # Wrappers that run the rest of the line as a command.
        while argv:
            head = PurePosixPath(argv[0]).name
            if head in ("sudo", "doas"):
                argv.pop(0)
                while argv and argv[0].startswith("-"):
                    opt = argv.pop(0)
                    if opt in ("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U") and argv:
                        argv.pop(0)
            elif head == "env":
                argv.pop(0)
                while argv and (argv[0].startswith("-") or _ASSIGN_RE.match(argv[0])):
                    word = argv.pop(0)
                    if word in ("-u", "--unset", "-C", "--chdir", "-S") and argv:
                        argv.pop(0)
                    elif m := _ASSIGN_RE.match(word):
                        prefix[m.group(1)] = m.group(2)
            elif head in ("exec", "command", "nohup", "time", "builtin", "nice"):
                argv.pop(0)
                while argv and argv[0].startswith("-"):
                    argv.pop(0)
            else:
                break
        if not argv:
            return out
        head = argv[0]
        if head in ("export", "declare", "typeset", "readonly", "local"):
            exporting = head == "export" or any(a.startswith("-") and "x" in a for a in argv[1:])
            for arg in argv[1:]:
                if arg.startswith("-"):
                    continue
                if m := _ASSIGN_RE.match(arg):
                    static = "$" not in m.group(2) and "__VPR_SUB" not in m.group(2)
                    value = m.group(2) if static else None
                    self.assign(state, m.group(1), _Var(value, file, seg.line, exporting))
                elif arg in state.vars and exporting:
                    state.vars[arg].exported = True
            return out
        if head == "unset":
            for arg in argv[1:]:
                state.vars.pop(arg, None)
            return out
        if head == "set":
            for arg in argv[1:]:
                if arg.startswith("-") and "a" in arg:
                    state.allexport = True
                elif arg.startswith("+") and "a" in arg:
                    state.allexport = False
            if "allexport" in argv:
                state.allexport = argv[argv.index("allexport") - 1] == "-o"
            return out
        if head == "cd" and len(argv) > 1:
            target = argv[1]
            if state.cwd and not target.startswith(("/", "$", "~")):
                target = str(PurePosixPath(state.cwd) / target)
            state.cwd = target
            return out
        if head in ("source", ".") and len(argv) > 1:
            out.extend(self.follow(argv[1], file, seg.line, state, depth))
            return out
        name = PurePosixPath(head).name
        if name in ("bash", "sh", "dash", "zsh") and len(argv) > 1:
            if "-c" in argv[1:]:
                idx = argv.index("-c")
                if idx + 1 < len(argv) and depth < 8:
                    out.extend(
                        self.run_text(
                            [(seg.line, argv[idx + 1])], file, state.copy(True), depth + 1
                        )
                    )
                return out
            script = next((a for a in argv[1:] if not a.startswith("-")), None)
            if script:
                out.extend(self.follow(script, file, seg.line, state.copy(True), depth))
                return out
        env = {k: v for k, v in state.vars.items() if v.exported}
        for key, value in prefix.items():
            env[key] = _Var(value, file, seg.line, True)
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
        out.append(cmd)
        if name in ("bash", "sh", "dash", "zsh") and seg.heredocs and depth < 8:
            for body in seg.heredocs:
                out.extend(self.run_text(body, file, state.copy(True), depth + 1))
        return out

    def follow(
        self, target: str, file: str, line: int, state: _State, depth: int
    ) -> list[ShellCommand]:
        if "$" in target or depth >= 5:
            self.notes.append(f"{file}:{line}: not followed: {target} (not a static path)")
            return []
        path = _resolve(self.root, target, state.cwd, file)
        if path is None:
            self.notes.append(f"{file}:{line}: sourced script {target} not found; not read")
            return []
        rel = _display(self.root, path)
        if rel not in self.files_read:
            self.files_read.append(rel)
        text = path.read_text(encoding="utf-8", errors="replace")
        return self.run_text(_numbered(text), rel, state, depth + 1)


def _numbered(text: str) -> list[tuple[int, str]]:
    return list(enumerate(text.splitlines(), start=1))


def _display(root: Path, path: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path)


def _resolve(root: Path, target: str, cwd: str | None, file: str) -> Path | None:
    """A file named by an installer: against its cwd, the plugin root, the installer's folder."""
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
        if candidate.exists():
            return candidate
    return None


def parse_shell(text: str, file: str = "<shell>", root: Path | None = None) -> list[ShellCommand]:
    """The simple commands of a shell script, in order (public for tests and tools)."""
    notes: list[str] = []
    shell = _Shell(root or Path("."), notes, [])
    return shell.run_text(_numbered(text), file, _State())


# ---------------------------------------------------------------------------
# Dockerfiles.


def _dockerfile(shell: _Shell, text: str, file: str) -> tuple[list[ShellCommand], list[dict]]:
    """Commands of every RUN (through the shell parser) and fetches made by ADD."""
    physical = text.splitlines()
    escape = "\\"
    for head in physical[:5]:
        m = re.match(r"^\s*#\s*escape\s*=\s*(\S)", head)
        if m:
            escape = m.group(1)
    commands: list[ShellCommand] = []
    fetches: list[dict] = []
    state = _State()
    i = 0
    while i < len(physical):
        first = physical[i]
        start = i + 1
        i += 1
        if not first.strip() or first.lstrip().startswith("#"):
            continue
        parts = [(start, first)]
        while parts[-1][1].rstrip().endswith(escape) and i < len(physical):
            nxt = physical[i]
            i += 1
            if not nxt.strip() or nxt.lstrip().startswith("#"):
                continue
            parts.append((i, nxt))
        keyword = first.strip().split(None, 1)[0]
        keyword = keyword.upper()
        joined = " ".join(
            p.rstrip()[: -len(escape)] if p.rstrip().endswith(escape) else p for _, p in parts
        )
        args = joined.strip()[len(keyword) :].strip()
        heredoc_body: list[tuple[int, str]] = []
        hm = re.search(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?", args)
        if keyword in ("RUN", "COPY", "ADD") and hm:
            word = hm.group(1)
            while i < len(physical):
                text_line = physical[i]
                i += 1
                if text_line.strip() == word:
                    break
                heredoc_body.append((i, text_line))
        if keyword == "FROM":
            state = _State()
        elif keyword in ("ENV", "ARG"):
            _docker_env(shell, keyword, args, state, file, start)
        elif keyword == "WORKDIR":
            state.cwd = _expand(args, state)
        elif keyword == "RUN":
            while m := re.match(r"^--\S+\s*", args):
                args = args[m.end() :]
            run_state = state.copy(True)
            if args.startswith("["):
                try:
                    argv = [str(a) for a in json.loads(args)]
                except ValueError:
                    argv = []
                if argv:
                    commands.extend(shell.run_text([(start, shlex.join(argv))], file, run_state, 1))
                continue
            if heredoc_body:
                commands.extend(shell.run_text(heredoc_body, file, run_state, 1))
                continue
            # Hand the shell parser the physical lines (continuations intact, comment
            # lines dropped) so every command keeps its own line number.
            lines = list(parts)
            lead = re.match(r"^\s*RUN\s+(?:--\S+\s+)*", lines[0][1], re.I)
            lines[0] = (lines[0][0], lines[0][1][lead.end() :] if lead else lines[0][1])
            commands.extend(shell.run_text(lines, file, run_state, 1))
        elif keyword == "ADD":
            words, _ = _words(_expand(args, state))
            checksum = any(w.startswith("--checksum") for w in words)
            sources = [w for w in words if not w.startswith("--")][:-1]
            for src in sources:
                if "://" in src or src.startswith("git@"):
                    git = src.endswith(".git") or ".git#" in src or src.startswith("git@")
                    ref = src.split("#", 1)[1] if "#" in src else None
                    pinned = checksum or bool(ref and re.fullmatch(r"[0-9a-f]{40}", ref))
                    if not pinned:
                        fetches.append(
                            {
                                "url": src,
                                "file": file,
                                "line": start,
                                "tool": "ADD",
                                "kind": "git-ref" if git else "download",
                                "note": "ADD without --checksum"
                                if not git
                                else "git ref is not a commit",
                            }
                        )
    return commands, fetches


def _docker_env(
    shell: _Shell, keyword: str, args: str, state: _State, file: str, line: int
) -> None:
    try:
        words = shlex.split(args, posix=True)
    except ValueError:
        words = args.split()
    if not words:
        return
    if keyword == "ENV" and "=" not in words[0]:
        shell.assign(state, words[0], _Var(_expand(" ".join(words[1:]), state), file, line, True))
        return
    for word in words:
        name, eq, value = word.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            continue
        if eq:
            shell.assign(state, name, _Var(_expand(value, state), file, line, True))
        elif keyword == "ARG" and name not in state.vars:
            state.vars[name] = _Var(None, file, line, True)


# ---------------------------------------------------------------------------
# Requirements files and pyproject.toml.


@dataclass(frozen=True)
class ReqLine:
    text: str
    file: str
    line: int
    options: tuple[str, ...] = ()


def _requirement_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw)
        if not buf:
            start = number
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        if buf.strip():
            out.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))
    return out


def _load_toml(text: str) -> dict[str, Any]:
    if _tomllib is not None:
        return _tomllib.loads(text)
    import tomlkit  # pragma: no cover

    return tomlkit.parse(text).unwrap()  # pragma: no cover


def _line_of(text: str, needle: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if f'"{needle}"' in line or f"'{needle}'" in line:
            return number
    return None


# ---------------------------------------------------------------------------
# The report.


@dataclass
class CorePin:
    requirement: str
    version: str | None
    exact: bool
    file: str
    line: int
    via: str  # install | requirements | constraint | override | git | sdist | url


@dataclass
class PinningReport:
    core_pin: dict[str, Any] | None = None
    core_pins: list[dict[str, Any]] = field(default_factory=list)
    core_refs: list[dict[str, Any]] = field(default_factory=list)
    target_device: dict[str, Any] | None = None
    from_source: dict[str, Any] = field(default_factory=lambda: {"value": False})
    unhashed_fetches: list[dict[str, Any]] = field(default_factory=list)
    editable_installs: list[dict[str, Any]] = field(default_factory=list)
    unpinned: list[dict[str, Any]] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


_VALUE_OPTS: dict[str, str] = {
    **dict.fromkeys(("-r", "--requirement", "--requirements"), "requirement"),
    **dict.fromkeys(
        ("-c", "--constraint", "--constraints", "-b", "--build-constraint", "--build-constraints"),
        "constraint",
    ),
    **dict.fromkeys(("--override", "--overrides"), "override"),
    **dict.fromkeys(("-e", "--editable"), "editable"),
    **dict.fromkeys(("--no-binary", "--no-binary-package"), "no_binary"),
    **dict.fromkeys(("--only-binary", "--only-binary-package"), "only_binary"),
    **dict.fromkeys(
        (
            "-i",
            "--index-url",
            "--extra-index-url",
            "--index",
            "--default-index",
            "-f",
            "--find-links",
        ),
        "index",
    ),
    "--hash": "hash",
}


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Options of pip / uv pip install that take a value this check does not need.
_IGNORED_VALUE_OPTS = _names(
    """
    -t --target --prefix --root --src --upgrade-strategy --platform --python-version
    --implementation --abi -p --python --index-strategy -C --config-settings --config-setting
    --global-option --build-option --progress-bar --report --log --cache-dir --resolution
    --prerelease --exclude-newer --torch-backend --group --extra --keyring-provider --link-mode
    --trusted-host --proxy --retries --timeout --exists-action --cert --client-cert
    --python-platform --reinstall-package --upgrade-package -P --no-build-isolation-package
    --refresh-package --config-file --excludes --no-build-package --directory --project --color
    --allow-insecure-host
    """
)
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_VERSION_TAG = re.compile(r"^v?(\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)$")
_VLLM_URL_VERSION = re.compile(
    r"github(?:usercontent)?\.com/vllm-project/vllm/(?:(?:blob|raw|tree|archive)/)?"
    r"(?:refs/tags/)?v?(\d+\.\d+(?:\.\d+)*(?:rc\d+)?)(?:/|\.tar\.gz|\.zip|$)"
)
_SDIST_RE = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+?)-(?P<ver>\d[^-/]*?)\.(?:tar\.gz|zip|tgz)$")
_PIP_SUBCOMMANDS = _names(
    "install sync download uninstall freeze list show wheel compile check tree config cache "
    "hash inspect index"
)
_HASHERS = _names("sha256sum sha512sum sha384sum sha224sum sha1sum shasum b2sum md5sum")


@dataclass
class _Install:
    cmd: ShellCommand
    tool: str
    requirements: list[str] = field(default_factory=list)
    editables: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (role, path)
    no_binary: set[str] = field(default_factory=set)
    only_binary: set[str] = field(default_factory=set)
    flags: set[str] = field(default_factory=set)


def _pip_args(argv: list[str]) -> tuple[str, list[str]] | None:
    """(tool, arguments after `install`) for pip / python -m pip / uv pip installs."""
    name = PurePosixPath(argv[0]).name
    rest: list[str] | None = None
    tool = "pip"
    if re.fullmatch(r"pip(\d+(\.\d+)?)?", name):
        rest = argv[1:]
    elif re.fullmatch(r"python(\d+(\.\d+)?)?", name) and "-m" in argv:
        idx = argv.index("-m")
        if idx + 1 < len(argv) and argv[idx + 1] == "pip":
            rest = argv[idx + 2 :]
    elif name == "uv":
        words = [w for w in argv[1:] if not w.startswith("-")]
        if words[:1] == ["pip"]:
            tool = "uv"
            rest = argv[argv.index("pip") + 1 :]
    if rest is None:
        return None
    for idx, word in enumerate(rest):
        if word in _PIP_SUBCOMMANDS:
            if word == "install":
                return tool, rest[idx + 1 :]
            if word == "sync":
                return tool, ["--sync", *rest[idx + 1 :]]
            return None
    return None


def _parse_install(cmd: ShellCommand, tool: str, args: list[str]) -> _Install:
    inst = _Install(cmd=cmd, tool=tool)
    sync = bool(args) and args[0] == "--sync"
    if sync:
        args = args[1:]
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        if word == "--":
            inst.requirements.extend(args[i:])
            break
        if not word.startswith("-") or word == "-":
            if sync:
                inst.files.append(("requirement", word))
            else:
                inst.requirements.append(word)
            continue
        opt, eq, value = word.partition("=")
        if not eq and opt not in _VALUE_OPTS and opt not in _IGNORED_VALUE_OPTS:
            attached = re.match(r"^-([rceif])(.+)$", word)
            if attached:
                opt, value, eq = f"-{attached.group(1)}", attached.group(2), "="
        if opt in _VALUE_OPTS or opt in _IGNORED_VALUE_OPTS:
            if not eq:
                if i >= len(args):
                    break
                value = args[i]
                i += 1
            kind = _VALUE_OPTS.get(opt)
            if kind in ("requirement", "constraint", "override"):
                inst.files.append((kind, value))
            elif kind == "editable":
                inst.editables.append(value)
            elif kind == "no_binary":
                inst.no_binary.update(
                    canonical(v) if not v.startswith(":") else v for v in value.split(",") if v
                )
            elif kind == "only_binary":
                inst.only_binary.update(
                    canonical(v) if not v.startswith(":") else v for v in value.split(",") if v
                )
            elif kind == "index":
                inst.flags.add(f"{opt}={value}")
            continue
        inst.flags.add(opt)
    return inst


def canonical(name: str) -> str:
    return str(canonicalize_name(name))


class _Analyzer:
    """Turns commands and requirement files into a PinningReport."""

    def __init__(self, root: Path, core_name: str) -> None:
        self.root = root
        self.core = canonical(core_name)
        self.report = PinningReport()
        self.shell = _Shell(root, self.report.notes, self.report.files_read)
        self.read_req_files: set[str] = set()
        self.read_pyprojects: set[str] = set()
        self.clones: list[dict[str, Any]] = []
        self.core_installs: list[tuple[ShellCommand, dict[str, Any]]] = []
        self.downloads: list[dict[str, Any]] = []
        self.verified_words: list[tuple[int, str, list[str]]] = []  # (order, file, words)
        self.order = 0

    # -- entry points ----------------------------------------------------------
    def read_file(self, rel: str, kind: str, role: str) -> None:
        path = self.root / rel
        text = path.read_text(encoding="utf-8", errors="replace")
        display = _display(self.root, path)
        if kind in ("shell", "dockerfile") and display not in self.report.files_read:
            self.report.files_read.append(display)
        if kind == "shell":
            commands = self.shell.run_text(_numbered(text), display, _State())
            self.commands(commands)
        elif kind == "dockerfile":
            commands, fetches = _dockerfile(self.shell, text, display)
            self.report.unhashed_fetches.extend(fetches)
            self.commands(commands)
        elif kind == "pyproject":
            self.pyproject(path, (), display, None)
        else:
            self.requirements_file(path, role, None, set())

    def commands(self, commands: list[ShellCommand]) -> None:
        previous: ShellCommand | None = None
        pipeline: list[ShellCommand] = []
        for cmd in commands:
            self.order += 1
            pipeline = [*pipeline, cmd] if cmd.op == "|" else [cmd]
            if cmd.op == "|" and previous is not None:
                for dl in self.downloads:
                    if dl.get("_cmd") is previous:
                        dl["piped_to"] = PurePosixPath(cmd.argv[0]).name
            self.command(cmd, pipeline)
            previous = cmd
        self.finish_downloads()

    def command(self, cmd: ShellCommand, pipeline: list[ShellCommand]) -> None:
        argv = cmd.argv
        name = PurePosixPath(argv[0]).name
        pip = _pip_args(argv)
        if pip is not None:
            self.install(_parse_install(cmd, pip[0], pip[1]))
        elif name in ("curl", "wget"):
            self.download(cmd, name)
        elif name == "git":
            self.git(cmd)
        if name in _HASHERS and any(
            a in ("-c", "--check") or (a.startswith("-") and not a.startswith("--") and "c" in a)
            for a in argv[1:]
        ):
            words = [w for c in pipeline for w in c.argv] + [
                h for c in pipeline for h in c.heredocs
            ]
            self.verified_words.append((self.order, cmd.file, words))
        elif (name in ("gpg", "gpgv") and ("--verify" in argv or name == "gpgv")) or (
            name in ("cosign", "minisign") and any(a in ("verify-blob", "-V") for a in argv)
        ):
            self.verified_words.append((self.order, cmd.file, list(argv)))

    # -- downloads -------------------------------------------------------------
    def download(self, cmd: ShellCommand, tool: str) -> None:
        argv = cmd.argv[1:]
        urls: list[str] = []
        output: str | None = None
        remote_name = False
        curl_values = set("oHdueAxmwKXTbcEr")
        wget_values = set("OoPaitTwUeBlQ")
        values = curl_values if tool == "curl" else wget_values
        long_values = _names(
            "--output --output-document --header --data --user --retry --max-time "
            "--connect-timeout --user-agent --write-out --request --cacert --directory-prefix "
            "--output-dir --referer --proxy --config --tries --timeout"
        )
        i = 0
        while i < len(argv):
            word = argv[i]
            i += 1
            if word.startswith("--"):
                opt, eq, value = word.partition("=")
                if opt in long_values and not eq and i < len(argv):
                    value = argv[i]
                    i += 1
                if opt in ("--output", "--output-document"):
                    output = value
                elif opt == "--remote-name":
                    remote_name = True
                continue
            if word.startswith("-") and len(word) > 1:
                for k, ch in enumerate(word[1:], start=1):
                    if ch in values:
                        value = word[k + 1 :]
                        if not value and i < len(argv):
                            value = argv[i]
                            i += 1
                        if (tool == "curl" and ch == "o") or (tool == "wget" and ch == "O"):
                            output = value
                        break
                    if tool == "curl" and ch == "O":
                        remote_name = True
                continue
            urls.append(word)
        if output is None and cmd.stdout is not None:
            output = cmd.stdout  # curl URL > file
        for url in urls:
            out = output
            if out is None and (remote_name or tool == "wget"):
                out = PurePosixPath(url.split("?")[0]).name
            self.downloads.append(
                {
                    "url": url,
                    "output": out,
                    "file": cmd.file,
                    "line": cmd.line,
                    "tool": tool,
                    "_order": self.order,
                    "_cmd": cmd,
                }
            )
            self.vllm_url(url, cmd.file, cmd.line)

    def finish_downloads(self) -> None:
        for dl in self.downloads:
            if dl.get("_done"):
                continue
            dl["_done"] = True
            out = dl.get("output")
            needles = [n for n in (out, PurePosixPath(out).name if out else None) if n]
            hashed = False
            for order, file, words in self.verified_words:
                if order <= dl["_order"] or file != dl["file"]:
                    continue
                if any(n in w for n in needles for w in words):
                    hashed = True
                    break
            if not hashed:
                entry = {k: v for k, v in dl.items() if not k.startswith("_") and v is not None}
                entry["kind"] = "download"
                entry["note"] = (
                    f"piped into {dl['piped_to']} without a hash check"
                    if dl.get("piped_to")
                    else "downloaded without a hash check (no sha256sum -c / gpg --verify "
                    "of the file afterwards)"
                )
                self.report.unhashed_fetches.append(entry)
            dl["hashed"] = hashed

    def download_for(self, path: str) -> dict[str, Any] | None:
        for dl in self.downloads:
            if dl.get("output") and dl["output"] == path:
                return dl
        return None

    # -- git -------------------------------------------------------------------
    def git(self, cmd: ShellCommand) -> None:
        argv = cmd.argv[1:]
        cwd = cmd.cwd
        while argv and argv[0].startswith("-"):
            opt = argv.pop(0)
            if opt == "-C" and argv:
                cwd = argv.pop(0)
            elif opt == "-c" and argv:
                argv.pop(0)
        if not argv:
            return
        sub, args = argv[0], argv[1:]
        if sub == "clone":
            ref = None
            positional: list[str] = []
            i = 0
            while i < len(args):
                word = args[i]
                i += 1
                if word in ("-b", "--branch") and i < len(args):
                    ref = args[i]
                    i += 1
                elif word.startswith("--branch="):
                    ref = word.split("=", 1)[1]
                elif word in (
                    "--depth",
                    "-o",
                    "--origin",
                    "-j",
                    "--jobs",
                    "--reference",
                    "--filter",
                    "-c",
                    "--config",
                    "--separate-git-dir",
                    "-u",
                    "--template",
                    "--shallow-since",
                ) and i < len(args):
                    i += 1
                elif not word.startswith("-"):
                    positional.append(word)
            if not positional:
                return
            url = positional[0]
            directory = (
                positional[1]
                if len(positional) > 1
                else PurePosixPath(url.rstrip("/")).name.removesuffix(".git")
            )
            if cwd and not directory.startswith("/"):
                directory = str(PurePosixPath(cwd) / directory)
            self.clones.append(
                {"url": url, "ref": ref, "dir": directory, "file": cmd.file, "line": cmd.line}
            )
        elif sub in ("checkout", "switch", "reset"):
            refs = [a for a in args if not a.startswith("-")]
            if not refs:
                return
            for clone in reversed(self.clones):
                if cwd is None or _same_dir(clone["dir"], cwd):
                    clone["ref"] = refs[-1]
                    clone["line_ref"] = cmd.line
                    break

    def finish_clones(self) -> None:
        for clone in self.clones:
            ref = clone.get("ref")
            if ref and _HEX40.match(ref):
                continue
            self.report.unhashed_fetches.append(
                {
                    "url": clone["url"],
                    "file": clone["file"],
                    "line": clone["line"],
                    "tool": "git",
                    "kind": "git-ref",
                    "ref": ref,
                    "note": f"git ref {ref!r} is a tag or branch, not a commit"
                    if ref
                    else "cloned at the default branch",
                }
            )

    def clone_for(self, path: str, cwd: str | None) -> dict[str, Any] | None:
        full = path if not cwd or path.startswith("/") else str(PurePosixPath(cwd) / path)
        for clone in self.clones:
            if _same_dir(clone["dir"], full) or _same_dir(clone["dir"], path):
                return clone
        return None

    def is_core_url(self, url: str) -> bool:
        tail = url.split("#")[0].split("@")[0].rstrip("/")
        return PurePosixPath(tail).name.removesuffix(".git") == self.core or bool(
            re.search(rf"/{re.escape(self.core)}(?:\.git)?(?:@|$|#)", url)
        )

    # -- installs ----------------------------------------------------------------
    def install(self, inst: _Install) -> None:
        cmd = inst.cmd
        for requirement in inst.requirements:
            self.requirement(requirement, inst, cmd.file, cmd.line, "install", set(), ())
        for target in inst.editables:
            self.report.editable_installs.append(
                {"target": target, "file": cmd.file, "line": cmd.line}
            )
            self.requirement(target, inst, cmd.file, cmd.line, "install", set(), (), editable=True)
        for role, target in inst.files:
            dl = self.download_for(target)
            if dl is not None:
                dl["used_as"] = f"{role} file ({'-r' if role == 'requirement' else role})"
                self.report.notes.append(
                    f"{cmd.file}:{cmd.line}: {role} file {target} is downloaded at install "
                    f"time from {dl['url']}; its entries cannot be read before the build"
                )
                for entry in self.report.unhashed_fetches:
                    if entry.get("url") == dl["url"] and entry.get("line") == dl["line"]:
                        entry["used_as"] = dl["used_as"]
                continue
            if "://" in target:
                self.report.unhashed_fetches.append(
                    {
                        "url": target,
                        "file": cmd.file,
                        "line": cmd.line,
                        "tool": inst.tool,
                        "kind": "download",
                        "used_as": f"{role} file",
                        "note": f"{role} file fetched from a URL at install time (no hash)",
                    }
                )
                continue
            if "$" in target:
                self.report.notes.append(
                    f"{cmd.file}:{cmd.line}: {role} file {target} is not a static path; not read"
                )
                continue
            path = _resolve(self.root, target, cmd.cwd, cmd.file)
            if path is None:
                self.report.missing.append(
                    {"file": target, "referenced_by": f"{cmd.file}:{cmd.line}", "role": role}
                )
                continue
            self.requirements_file(path, "install" if role == "requirement" else role, inst, set())

    def requirements_file(
        self, path: Path, role: str, inst: _Install | None, seen: set[str]
    ) -> None:
        display = _display(self.root, path)
        key = display  # read once; the first reader's role wins (the installer comes first)
        if key in self.read_req_files or key in seen:
            return
        self.read_req_files.add(key)
        if display not in self.report.files_read:
            self.report.files_read.append(display)
        text = path.read_text(encoding="utf-8", errors="replace")
        file_no_binary: set[str] = set()
        for number, line in _requirement_lines(text):
            if line.startswith("-"):
                try:
                    words = shlex.split(line)
                except ValueError:
                    words = line.split()
                opt, eq, value = words[0].partition("=")
                if not eq and len(words) > 1:
                    value = " ".join(words[1:])
                attached = re.match(r"^-([rce])(\S+)$", words[0])
                if attached:
                    opt, value = f"-{attached.group(1)}", attached.group(2)
                kind = _VALUE_OPTS.get(opt)
                if kind in ("requirement", "constraint", "override"):
                    nested_role = role if kind == "requirement" else kind
                    if "://" in value:
                        self.report.unhashed_fetches.append(
                            {
                                "url": value,
                                "file": display,
                                "line": number,
                                "tool": "pip",
                                "kind": "download",
                                "used_as": f"{kind} file",
                                "note": f"nested {kind} file fetched from a URL (no hash)",
                            }
                        )
                        continue
                    nested = path.parent / value
                    if nested.exists():
                        self.requirements_file(nested, nested_role, inst, seen | {key})
                    else:
                        self.report.missing.append(
                            {"file": value, "referenced_by": f"{display}:{number}", "role": kind}
                        )
                elif kind == "editable":
                    self.report.editable_installs.append(
                        {"target": value, "file": display, "line": number}
                    )
                    self.requirement(
                        value, inst, display, number, role, file_no_binary, (), editable=True
                    )
                elif kind == "no_binary":
                    file_no_binary.update(
                        canonical(v) if not v.startswith(":") else v for v in value.split(",")
                    )
                continue
            parts = re.split(r"\s+(?=--)", line)
            options = tuple(parts[1:])
            self.requirement(parts[0], inst, display, number, role, file_no_binary, options)

    def pyproject(
        self, path: Path, extras: tuple[str, ...], display: str, inst: _Install | None
    ) -> None:
        key = f"{display}|{','.join(extras)}"
        if key in self.read_pyprojects:
            return
        self.read_pyprojects.add(key)
        if display not in self.report.files_read:
            self.report.files_read.append(display)
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            data = _load_toml(text)
        except Exception as exc:  # tomllib.TOMLDecodeError or tomlkit errors
            self.report.notes.append(f"{display}: not valid TOML ({exc}); not read")
            return
        project = data.get("project") or {}
        deps = list(project.get("dependencies") or [])
        optional = project.get("optional-dependencies") or {}
        for extra in extras:
            deps.extend(optional.get(extra) or [])
        for dep in deps:
            if not isinstance(dep, str):
                continue
            line = _line_of(text, dep) or 1
            self.requirement(dep, inst, display, line, "pyproject dependency", set(), ())

    def requirement(
        self,
        text: str,
        inst: _Install | None,
        file: str,
        line: int,
        role: str,
        file_no_binary: set[str],
        options: tuple[str, ...],
        *,
        editable: bool = False,
    ) -> None:
        cmd = inst.cmd if inst else None
        cwd = cmd.cwd if cmd else None
        hashed = any(o.startswith("--hash") for o in options) or (
            inst is not None and "--require-hashes" in inst.flags
        )
        no_binary = set(file_no_binary) | (inst.no_binary if inst else set())
        env = cmd.env if cmd else {}
        for var in ("PIP_NO_BINARY", "UV_NO_BINARY_PACKAGE"):
            if var in env and env[var].value:
                no_binary.update(canonical(v) for v in env[var].value.replace(",", " ").split())
        if "UV_NO_BINARY" in env and (env["UV_NO_BINARY"].value or "").lower() in ("1", "true"):
            no_binary.add(":all:")
        # URLs (PEP 508 direct references, VCS URLs, archive URLs).
        name_part, at, url_part = text.partition(" @ ")
        url = (
            url_part.strip()
            if at
            else (text if ("://" in text or text.startswith("git+")) else None)
        )
        if url is not None:
            self.url_requirement(
                url,
                name_part.strip() if at else None,
                inst,
                file,
                line,
                role,
                hashed or "#sha256=" in url,
            )
            return
        clone = self.clone_for(text, cwd)
        looks_path = (
            text.startswith((".", "/", "~"))
            or clone is not None
            or text.endswith((".whl", ".tar.gz", ".zip", ".tgz"))
            or ("/" in text and not re.search(r"[<>=!~;\[]", text))
        )
        if looks_path:
            self.path_requirement(text, clone, inst, file, line, role, editable)
            return
        if "$" in text:
            self.report.notes.append(
                f"{file}:{line}: requirement {text!r} uses a variable that is not static; "
                "not resolved"
            )
            if text.lower().startswith(self.core):
                self.core_pin(CorePin(text, None, False, file, line, "install"), inst)
            return
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            self.report.notes.append(f"{file}:{line}: not a requirement {text!r} ({exc})")
            return
        name = canonical(req.name)
        specs = list(req.specifier)
        exact = len(specs) == 1 and (
            specs[0].operator == "==="
            or (specs[0].operator == "==" and "*" not in specs[0].version)
        )
        if name == self.core:
            if role in ("constraint", "override"):
                via = role
            elif cmd is not None and role == "install" and (file, line) == (cmd.file, cmd.line):
                via = "install"
            elif role == "pyproject dependency":
                via = "pyproject"
            else:
                via = "requirements"
            self.core_pin(
                CorePin(str(req), specs[0].version if exact else None, exact, file, line, via),
                inst,
            )
            if (
                via in ("install", "requirements")
                and (":all:" in no_binary or name in no_binary)
                and not (inst and name in inst.only_binary)
            ):
                how = f"--no-binary {name if name in no_binary else ':all:'}"
                self.from_source(how, cmd.file if cmd else file, cmd.line if cmd else line)
            return
        if not exact:
            self.report.unpinned.append(
                {"requirement": str(req), "file": file, "line": line, "role": role}
            )

    def url_requirement(
        self,
        url: str,
        name: str | None,
        inst: _Install | None,
        file: str,
        line: int,
        role: str,
        hashed: bool,
    ) -> None:
        clean = url.removeprefix("git+") if url.startswith("git+") else url
        is_git = url.startswith("git+") or clean.split("#")[0].split("@")[0].endswith(".git")
        is_core = (name is not None and canonical(name.split("[")[0]) == self.core) or (
            self.is_core_url(url)
        )
        if is_git:
            base = clean.split("#")[0]
            ref = None
            m = re.match(r"^(.*?://[^@]*?/[^@]*)@([^@/]+)$", base)
            if m:
                ref = m.group(2)
            if not (ref and _HEX40.match(ref)):
                self.report.unhashed_fetches.append(
                    {
                        "url": url,
                        "file": file,
                        "line": line,
                        "tool": inst.tool if inst else "pip",
                        "kind": "git-ref",
                        "ref": ref,
                        "note": f"git ref {ref!r} is a tag or branch, not a commit"
                        if ref
                        else "VCS requirement without a ref",
                    }
                )
            if is_core:
                tag = _VERSION_TAG.match(ref or "")
                version = tag.group(1) if tag else None
                self.core_pin(
                    CorePin(
                        url,
                        version,
                        bool(version or (ref and _HEX40.match(ref))),
                        file,
                        line,
                        "git",
                    ),
                    inst,
                )
                self.from_source(f"git {ref or 'default branch'}", file, line)
            return
        filename = PurePosixPath(clean.split("#")[0].split("?")[0]).name
        if not hashed:
            self.report.unhashed_fetches.append(
                {
                    "url": url,
                    "file": file,
                    "line": line,
                    "tool": inst.tool if inst else "pip",
                    "kind": "download",
                    "used_as": role,
                    "note": "archive URL without #sha256= or --hash",
                }
            )
        sd = _SDIST_RE.match(filename)
        if is_core or (sd and canonical(sd.group("name")) == self.core):
            version = sd.group("ver") if sd else None
            self.core_pin(CorePin(url, version, version is not None, file, line, "url"), inst)
            if sd:
                self.from_source("sdist URL", file, line)
        self.vllm_url(url, file, line)

    def path_requirement(
        self,
        text: str,
        clone: dict[str, Any] | None,
        inst: _Install | None,
        file: str,
        line: int,
        role: str,
        editable: bool,
    ) -> None:
        cmd = inst.cmd if inst else None
        base, extras = text, ()
        m = re.match(r"^(.*?)\[([^\]]*)\]$", text)
        if m:
            base, extras = m.group(1), tuple(e.strip() for e in m.group(2).split(","))
        if clone is not None:
            if self.is_core_url(clone["url"]):
                ref = clone.get("ref")
                tag = _VERSION_TAG.match(ref or "")
                version = tag.group(1) if tag else None
                self.core_pin(
                    CorePin(
                        f"{clone['url']}@{ref}",
                        version,
                        bool(version or (ref and _HEX40.match(ref))),
                        clone["file"],
                        clone["line"],
                        "git",
                    ),
                    inst,
                )
                self.from_source(
                    f"git checkout {ref or '(default branch)'}",
                    cmd.file if cmd else file,
                    cmd.line if cmd else line,
                )
            return
        filename = PurePosixPath(base).name
        sd = _SDIST_RE.match(filename)
        if sd and canonical(sd.group("name")) == self.core:
            self.core_pin(CorePin(text, sd.group("ver"), True, file, line, "sdist"), inst)
            self.from_source("sdist file", file, line)
            return
        if filename.endswith(".whl"):
            name = filename.split("-")[0]
            if canonical(name) == self.core:
                version = filename.split("-")[1] if filename.count("-") >= 4 else None
                self.core_pin(
                    CorePin(text, version, version is not None, file, line, "wheel"), inst
                )
            return
        path = _resolve(self.root, base, cmd.cwd if cmd else None, file)
        if path is not None and path.is_dir() and (path / "pyproject.toml").is_file():
            self.pyproject(
                path / "pyproject.toml", extras, _display(self.root, path / "pyproject.toml"), inst
            )
        elif path is None:
            self.report.notes.append(
                f"{file}:{line}: local install target {text!r} not found "
                "under the plugin source; not read"
            )

    # -- core --------------------------------------------------------------------
    def core_pin(self, pin: CorePin, inst: _Install | None) -> None:
        self.report.core_pins.append(asdict(pin))
        if inst is not None and pin.via not in ("constraint", "override"):
            self.core_installs.append((inst.cmd, asdict(pin)))

    def from_source(self, how: str, file: str, line: int) -> None:
        if not self.report.from_source.get("value"):
            self.report.from_source = {"value": True, "how": how, "file": file, "line": line}

    def vllm_url(self, url: str, file: str, line: int) -> None:
        m = _VLLM_URL_VERSION.search(url)
        if m:
            self.report.core_refs.append(
                {"version": m.group(1), "url": url, "file": file, "line": line}
            )

    # -- summary -----------------------------------------------------------------
    def finish(self) -> PinningReport:
        self.finish_downloads()
        self.finish_clones()
        report = self.report
        pins = report.core_pins
        installs = [p for p in pins if p["via"] not in ("constraint", "override")]
        chosen = (
            next((p for p in installs if p["exact"]), None)
            or next((p for p in pins if p["exact"]), None)
            or (installs[0] if installs else (pins[0] if pins else None))
        )
        if chosen is not None:
            report.core_pin = {
                "version": chosen["version"],
                "requirement": chosen["requirement"],
                "exact": chosen["exact"],
                "file": chosen["file"],
                "line": chosen["line"],
                "via": chosen["via"],
            }
        # VLLM_TARGET_DEVICE in effect for the core install (prefix, export, ENV).
        for cmd, _pin in self.core_installs:
            var = cmd.env.get("VLLM_TARGET_DEVICE")
            if var is not None:
                report.target_device = {
                    "value": var.value,
                    "file": var.file,
                    "line": var.line,
                    "effective": True,
                }
                break
        if report.target_device is None:
            seen = self.shell.assignments.get("VLLM_TARGET_DEVICE") or []
            if seen:
                last = seen[-1]
                report.target_device = {
                    "value": last.value,
                    "file": last.file,
                    "line": last.line,
                    "effective": False,
                    "note": "not exported to the core install"
                    if self.core_installs
                    else "set, but no core install command was found",
                }
        return report


def _same_dir(a: str, b: str) -> bool:
    norm = lambda s: str(PurePosixPath(s.rstrip("/") or "/")).removeprefix("./")  # noqa: E731
    return norm(a) == norm(b)


# ---------------------------------------------------------------------------
# Files named by the spec.


@dataclass(frozen=True)
class InputFile:
    path: str
    kind: str
    role: str
    key: str  # the spec key that names it


def guess_kind(path: str, head: str = "") -> str:
    name = PurePosixPath(path).name.lower()
    if name == "pyproject.toml":
        return "pyproject"
    if (
        name in ("dockerfile", "containerfile")
        or name.endswith((".dockerfile", ".containerfile"))
        or name.startswith(("dockerfile.", "containerfile."))
    ):
        return "dockerfile"
    if name.endswith((".sh", ".bash")) or head.startswith("#!"):
        return "shell"
    return "requirements"


def input_files(spec: Any, options: dict[str, Any]) -> list[InputFile]:
    plugin = getattr(spec, "plugin", None) or {}
    out: list[InputFile] = []
    if plugin.get("installer"):
        out.append(InputFile(plugin["installer"], "", "installer", "[plugin] installer"))
    if plugin.get("overrides"):
        out.append(InputFile(plugin["overrides"], "requirements", "override", "[plugin] overrides"))
    for entry in options.get("files", []):
        if isinstance(entry, str):
            out.append(InputFile(entry, "", "requirements", "[conformance.pinning] files"))
        else:
            out.append(
                InputFile(
                    entry["path"],
                    entry.get("kind", ""),
                    "requirements",
                    "[conformance.pinning] files",
                )
            )
    return out


def scan(root: Path, files: list[InputFile], core_name: str = "vllm") -> PinningReport:
    """Read the installer inputs under `root` (missing ones are listed, not raised)."""
    analyzer = _Analyzer(root, core_name)
    for item in files:
        path = root / item.path
        if not path.is_file():
            analyzer.report.missing.append({"file": item.path, "named_by": item.key})
            continue
        try:
            head = path.read_text(encoding="utf-8", errors="replace")[:200]
        except OSError as exc:
            analyzer.report.missing.append(
                {"file": item.path, "named_by": item.key, "error": str(exc)}
            )
            continue
        kind = item.kind or guess_kind(item.path, head)
        analyzer.read_file(item.path, kind, item.role)
    return analyzer.finish()


# ---------------------------------------------------------------------------
# The check.


def _level(options: dict[str, Any], key: str) -> str:
    return str(options.get(key, "warn"))


def _loc(item: dict[str, Any]) -> str:
    return f"{item.get('file')}:{item.get('line')}" if item.get("line") else str(item.get("file"))


def check(spec: Any, plugin_root: Path | str | None = None) -> CheckResult:
    """The `pinning` check for `spec`, reading installer inputs under `plugin_root`."""
    options = conformance_table(spec, NAME, PINNING_SCHEMA)
    root = plugin_root_for(spec, plugin_root)
    core_name = spec.core.name
    want = spec.core.version
    want_target = spec.core.target_device
    threshold = {
        "core_version": want,
        "target_device": want_target,
        "require_from_source": options.get("require_from_source", True),
        "unhashed_fetch": _level(options, "unhashed_fetch"),
        "editable_install": _level(options, "editable_install"),
        "unpinned": _level(options, "unpinned"),
    }
    files = input_files(spec, options)
    if not files:
        return CheckResult(
            name=NAME,
            status="fail",
            summary="no installer to read: set [plugin] installer (or [conformance.pinning] "
            "files) in the spec",
            evidence=[Evidence(note="the spec names no installer file", file=str(spec.path))],
            threshold=threshold,
        )
    if not root.is_dir():
        return CheckResult(
            name=NAME,
            status="fail",
            summary=f"plugin source folder {root} does not exist; fetch the plugin first",
            evidence=[Evidence(note="plugin source folder missing", file=str(root))],
            threshold=threshold,
        )
    report = scan(root, files, core_name)
    fails: list[str] = []
    warns: list[str] = []
    evidence: list[Evidence] = []

    for item in report.missing:
        named = item.get("named_by") or f"referenced by {item.get('referenced_by')}"
        msg = f"{item['file']} is missing ({named})"
        evidence.append(Evidence(note=f"file missing: {msg}", file=item["file"], source="plugin"))
        if item.get("named_by"):
            fails.append(f"{msg}: fix the path in the spec or the plugin source")
        else:
            warns.append(f"{msg}: the installer names a file that is not in the plugin source")

    pin = report.core_pin
    no_installer = any(m.get("named_by") == "[plugin] installer" for m in report.missing)
    if pin is None:
        if not no_installer:
            fails.append(
                f"the installer never installs {core_name}: no pinned core found in "
                f"{', '.join(report.files_read) or 'the files read'}"
            )
    else:
        evidence.append(
            Evidence(
                note=f"core requirement {pin['requirement']} ({pin['via']})",
                file=pin["file"],
                line=pin["line"],
                value=pin["version"],
                source="plugin",
            )
        )
        if not pin["exact"] or pin["version"] is None:
            fails.append(
                f"{core_name} is not pinned exactly at {_loc(pin)} ({pin['requirement']}); "
                f"pin it to =={want}"
            )
        elif not _same_version(pin["version"], want):
            fails.append(
                f"installer pins {core_name} {pin['version']} ({_loc(pin)}) but the spec pairs "
                f"core {want} ([core] version); bump one so they agree"
            )
        for other in report.core_pins:
            if (
                other["exact"]
                and other["version"]
                and not _same_version(other["version"], pin["version"] or "")
            ):
                msg = (
                    f"the installer pins {core_name} twice: {pin['version']} ({_loc(pin)}) "
                    f"and {other['version']} ({_loc(other)})"
                )
                if msg not in fails:
                    fails.append(msg)
        for ref in report.core_refs:
            if pin["version"] and not _same_version(ref["version"], pin["version"]):
                fails.append(
                    f"{_loc(ref)} fetches {ref['url']} (vLLM {ref['version']}) while the core "
                    f"pin is {pin['version']}; fetch the files of the pinned version"
                )
            evidence.append(
                Evidence(
                    note=f"installer fetches vLLM {ref['version']} files",
                    file=ref["file"],
                    line=ref["line"],
                    value=ref["url"],
                    source="plugin",
                )
            )

    td = report.target_device
    if td is None and no_installer:
        pass  # nothing to judge without the installer; its absence already fails
    elif td is None:
        fails.append(
            f"VLLM_TARGET_DEVICE is never set for the core install; set "
            f"VLLM_TARGET_DEVICE={want_target} on the install command"
        )
    else:
        evidence.append(
            Evidence(
                note="VLLM_TARGET_DEVICE",
                file=td["file"],
                line=td["line"],
                value=td["value"],
                source="plugin",
            )
        )
        if td["value"] != want_target:
            fails.append(
                f"VLLM_TARGET_DEVICE={td['value']} at {_loc(td)}; the spec builds "
                f"target {want_target!r}"
            )
        elif not td.get("effective"):
            fails.append(
                f"VLLM_TARGET_DEVICE={td['value']} at {_loc(td)} is {td.get('note')}; "
                "export it or put it on the install command"
            )

    fs = report.from_source
    if fs.get("value"):
        evidence.append(
            Evidence(
                note=f"core built from source ({fs['how']})",
                file=fs["file"],
                line=fs["line"],
                source="plugin",
            )
        )
    elif options.get("require_from_source", True) and pin is not None:
        fails.append(
            f"{core_name} is not built from source at {_loc(pin)}: add "
            f"--no-binary {core_name} (the published wheel is a CUDA build)"
        )

    for key, items, what in (
        ("unhashed_fetch", report.unhashed_fetches, "fetched without a hash"),
        ("editable_install", report.editable_installs, "editable install"),
        ("unpinned", report.unpinned, "unpinned dependency"),
    ):
        level = _level(options, key)
        for item in items:
            label = item.get("url") or item.get("target") or item.get("requirement")
            evidence.append(
                Evidence(
                    note=f"{what}: {label}",
                    file=item.get("file"),
                    line=item.get("line"),
                    value=item.get("note") or item.get("role"),
                    source="plugin",
                )
            )
        if items and level != "ignore":
            shown = ", ".join(
                f"{i.get('url') or i.get('target') or i.get('requirement')} ({_loc(i)})"
                for i in items[:4]
            ) + (f" and {len(items) - 4} more" if len(items) > 4 else "")
            (fails if level == "fail" else warns).append(f"{what} ({len(items)}): {shown}")

    for note in report.notes:
        evidence.append(Evidence(note=note, source="plugin"))

    details = report.to_json()
    if fails:
        status = "fail"
        summary = "; ".join(fails) + (f"; also {'; '.join(warns)}" if warns else "")
    elif warns:
        status = "warn"
        summary = (
            f"{core_name} {pin['version'] if pin else '?'} pinned and built from source "
            f"for {want_target}; " + "; ".join(warns)
        )
    else:
        status = "pass"
        summary = (
            f"{core_name} pinned to {pin['version'] if pin else '?'} (spec {want}), "
            f"VLLM_TARGET_DEVICE={want_target}, built from source; no unhashed fetches, "
            "editable installs or unpinned dependencies"
        )
    details["failures"] = fails
    details["warnings"] = warns
    return CheckResult(
        name=NAME,
        status=status,
        summary=summary,
        evidence=evidence,
        threshold=threshold,
        details=details,
    )


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b
