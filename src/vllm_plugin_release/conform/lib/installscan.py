"""A plugin's installer inputs as the spec names them, read (shell scripts and Dockerfiles
through the shell interpreter) into a `PinningReport`."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform.lib.installs import (
    CoreFindings,
    Fetches,
    Installs,
    PinningReport,
    is_uv_sync,
    parse_install,
    pip_args,
    unhashed,
)
from vllm_plugin_release.conform.lib.plugintree import Unread, read_text, too_large
from vllm_plugin_release.conform.lib.shell import (
    Shell,
    ShellCommand,
    State,
    TooComplex,
    Var,
    display,
    expand,
    numbered,
    words,
)
from vllm_plugin_release.core.errors import BadInput

_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPE_RE = re.compile(r"^\s*#\s*escape\s*=\s*(\S)")


@dataclass
class _Instruction:
    """One Dockerfile instruction, continuations joined."""

    keyword: str  # upper case
    args: str
    start: int  # its first line
    parts: list[tuple[int, str]]  # its physical lines (comment lines dropped)
    heredoc: list[tuple[int, str]]  # the body of a RUN/COPY/ADD <<WORD heredoc


def dockerfile(
    shell: Shell, text: str, file: str, build_args: dict[str, str]
) -> tuple[list[ShellCommand], list[dict]]:
    """Commands of every RUN and fetches made by ADD; `build_args` replace ARG defaults."""
    commands: list[ShellCommand] = []
    fetches: list[dict] = []
    state = State()
    for ins in _instructions(text):
        if ins.keyword == "FROM":
            state = State()
        elif ins.keyword in ("ENV", "ARG"):
            docker_env(shell, ins, state, file, build_args)
        elif ins.keyword == "WORKDIR":
            state.cwd = expand(ins.args, state)
        elif ins.keyword == "RUN":
            commands.extend(_run(shell, ins, state, file))
        elif ins.keyword == "ADD":
            fetches.extend(_add_fetches(ins.args, state, file, ins.start))
    return commands, fetches


def _instructions(text: str) -> Iterator[_Instruction]:
    physical = text.splitlines()
    # the last `# escape=` parser directive in the first lines, else a backslash
    directives = [m.group(1) for h in physical[:5] if (m := _ESCAPE_RE.match(h))]
    escape = directives[-1] if directives else "\\"
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
        keyword = first.strip().split(None, 1)[0].upper()
        joined = " ".join(
            p.rstrip()[: -len(escape)] if p.rstrip().endswith(escape) else p for _, p in parts
        )
        args = joined.strip()[len(keyword) :].strip()
        heredoc: list[tuple[int, str]] = []
        hm = _HEREDOC_RE.search(args)
        if keyword in ("RUN", "COPY", "ADD") and hm:
            word = hm.group(1)
            while i < len(physical):
                text_line = physical[i]
                i += 1
                if text_line.strip() == word:
                    break
                heredoc.append((i, text_line))
        yield _Instruction(keyword, args, start, parts, heredoc)


def _run(shell: Shell, ins: _Instruction, state: State, file: str) -> list[ShellCommand]:
    args = ins.args
    while m := re.match(r"^--\S+\s*", args):
        args = args[m.end() :]
    run_state = state.copy(True)
    if args.startswith("["):  # exec form
        try:
            argv = [str(a) for a in json.loads(args)]
        except ValueError:
            argv = []
        if not argv:
            return []
        return shell.run_text([(ins.start, shlex.join(argv))], file, run_state, 1)
    if ins.heredoc:
        return shell.run_text(ins.heredoc, file, run_state, 1)
    # Hand the shell parser the physical lines (continuations intact, comment
    # lines dropped) so every command keeps its own line number.
    lines = list(ins.parts)
    lead = re.match(r"^\s*RUN\s+(?:--\S+\s+)*", lines[0][1], re.I)
    lines[0] = (lines[0][0], lines[0][1][lead.end() :] if lead else lines[0][1])
    return shell.run_text(lines, file, run_state, 1)


def _add_fetches(args: str, state: State, file: str, line: int) -> list[dict]:
    """Remote ADD sources without --checksum (or git sources not at a commit)."""
    out: list[dict] = []
    argv, _ = words(expand(args, state))
    checksum = any(w.startswith("--checksum") for w in argv)
    sources = [w for w in argv if not w.startswith("--")][:-1]
    for src in sources:
        if "://" not in src and not src.startswith("git@"):
            continue
        git = src.endswith(".git") or ".git#" in src or src.startswith("git@")
        ref = src.split("#", 1)[1] if "#" in src else None
        pinned = checksum or bool(ref and re.fullmatch(r"[0-9a-f]{40}", ref))
        if not pinned:
            note = "ADD without --checksum" if not git else "git ref is not a commit"
            out.append(unhashed(src, (file, line), "ADD", "git-ref" if git else "download", note))
    return out


def docker_env(
    shell: Shell, ins: _Instruction, state: State, file: str, build_args: dict[str, str]
) -> None:
    """An ENV or ARG instruction: the variables it sets in `state`."""
    keyword, args, line = ins.keyword, ins.args, ins.start
    try:
        argv = shlex.split(args, posix=True)
    except ValueError:
        argv = args.split()
    if not argv:
        return
    if keyword == "ENV" and "=" not in argv[0]:
        shell.assign(state, argv[0], Var(expand(" ".join(argv[1:]), state), file, line, True))
        return
    for word in argv:
        name, eq, value = word.partition("=")
        if not _NAME_RE.fullmatch(name):
            continue
        if keyword == "ARG" and name in build_args:
            shell.assign(state, name, Var(build_args[name], file, line, True))
        elif eq:
            shell.assign(state, name, Var(expand(value, state), file, line, True))
        elif keyword == "ARG" and name not in state.vars:
            state.vars[name] = Var(None, file, line, True)


class Analyzer:
    """Turns commands and requirement files into a PinningReport."""

    def __init__(self, root: Path, core_name: str, build_args: dict[str, str]) -> None:
        self.root = root
        self.build_args = build_args
        self.report = PinningReport()
        self.shell = Shell(root, self.report.notes, self.report.files_read)
        self.core = CoreFindings(core_name, self.report)
        self.fetches = Fetches(self.report, self.core)
        self.installs = Installs(root, self.report, self.core, self.fetches)

    def read_file(self, rel: str, kind: str, role: str, text: str) -> None:
        path = self.root / rel
        shown = display(self.root, path)
        if kind in ("shell", "dockerfile"):
            if shown not in self.report.files_read:
                self.report.files_read.append(shown)
            self.script(kind, text, shown)
        elif kind == "pyproject":
            self.installs.pyproject(path, (), shown, None)
        else:
            self.installs.requirements_file(path, role, None, set())

    def script(self, kind: str, text: str, shown: str) -> None:
        """A script's commands; past what the analysis follows, those found before it stopped."""
        start = len(self.shell.emitted)
        try:
            if kind == "shell":
                commands = self.shell.run_text(numbered(text), shown, State())
            else:
                commands, fetches = dockerfile(self.shell, text, shown, self.build_args)
                self.report.unhashed_fetches.extend(fetches)
        except TooComplex as exc:
            commands = self.shell.emitted[start:]
            self.report.incomplete.append(
                f"{exc}; analysed the {len(commands)} command(s) found before {exc.where}"
            )
        self.commands(commands)

    def commands(self, commands: list[ShellCommand]) -> None:
        previous: ShellCommand | None = None
        pipeline: list[ShellCommand] = []
        for cmd in commands:
            self.fetches.order += 1
            if cmd.op == "|":
                pipeline.append(cmd)  # not a copy per command: a long pipe stays linear
                if previous is not None:
                    self.fetches.piped(previous, cmd)
            else:
                pipeline = [cmd]
            self.command(cmd, pipeline)
            previous = cmd
        self.fetches.finish_downloads()

    def command(self, cmd: ShellCommand, pipeline: list[ShellCommand]) -> None:
        name = PurePosixPath(cmd.argv[0]).name
        pip = pip_args(cmd.argv)
        if pip is not None:
            self.installs.install(parse_install(cmd, pip[0], pip[1]))
        elif is_uv_sync(cmd.argv):
            self.installs.uv_sync(cmd)
        elif name in ("curl", "wget"):
            self.fetches.download(cmd, name)
        elif name == "git":
            self.fetches.git(cmd)
        self.fetches.verification(cmd, pipeline)

    def finish(self) -> PinningReport:
        self.installs.locked_ranges()
        self.fetches.finish_downloads()
        self.fetches.finish_clones()
        report = self.report
        report.core_pin = _chosen_pin(report.core_pins)
        report.target_device = _target_device(
            self.core.installs, self.shell.assignments.get("VLLM_TARGET_DEVICE") or []
        )
        return report


def _chosen_pin(pins: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The pin that counts: an exact one on an install, else any exact one, else the first."""
    installs = [p for p in pins if p["via"] not in ("constraint", "override")]
    chosen = (
        next((p for p in installs if p["exact"]), None)
        or next((p for p in pins if p["exact"]), None)
        or (installs[0] if installs else (pins[0] if pins else None))
    )
    if chosen is None:
        return None
    keys = ("version", "requirement", "exact", "file", "line", "via")
    return {key: chosen[key] for key in keys}


def _target_device(
    core_installs: list[tuple[ShellCommand, dict[str, Any]]], assignments: list[Var]
) -> dict[str, Any] | None:
    """VLLM_TARGET_DEVICE for the core install (prefix, export, ENV), else its last value."""
    for cmd, _pin in core_installs:
        var = cmd.env.get("VLLM_TARGET_DEVICE")
        if var is not None:
            return {"value": var.value, "file": var.file, "line": var.line, "effective": True}
    if not assignments:
        return None
    last = assignments[-1]
    entry = {"value": last.value, "file": last.file, "line": last.line, "effective": False}
    entry["note"] = "not exported to the core install"
    if not core_installs:
        entry["note"] = "set, but no core install command was found"
    return entry


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


def scan(
    root: Path,
    files: list[InputFile],
    core_name: str = "vllm",
    build_args: dict[str, str] | None = None,
) -> PinningReport:
    """Read the installer inputs under `root` (missing ones are listed, not raised)."""
    analyzer = Analyzer(root, core_name, dict(build_args or {}))
    for item in files:
        path = root / item.path
        if not path.is_file():
            analyzer.report.missing.append({"file": item.path, "named_by": item.key})
            continue
        try:
            text, cut = read_text(root, path)
        except Unread as exc:
            missing = {"file": item.path, "named_by": item.key, "error": exc.reason}
            analyzer.report.missing.append(missing)
            continue
        if cut:
            analyzer.report.notes.append(too_large(item.path))
        kind = item.kind or guess_kind(item.path, text[:200])
        analyzer.read_file(item.path, kind, item.role, text)
    return analyzer.finish()


def plugin_root_for(spec: Spec, plugin_root: Path | str | None) -> Path:
    """The plugin source folder: given, or [plugin.source] path for kind = path."""
    if plugin_root is not None:
        return Path(plugin_root)
    source = spec.plugin.source if spec.plugin else None
    if source is not None and source.kind == "path" and source.path:
        return Path(spec.resolve(source.path))
    raise BadInput(
        f"{spec.path}: [plugin.source] is not a local path; "
        "the check needs the plugin's source folder",
        hint="fetch the plugin first and pass its checkout (plugin_root)",
    )


@dataclass(frozen=True, slots=True)
class PinningOptions:
    """`[conformance.pinning]` with its defaults."""

    files: tuple[InputFile, ...] = ()
    build_args: dict[str, str] = field(default_factory=dict)
    unhashed_fetch: str = "warn"
    editable_install: str = "warn"
    unpinned: str = "warn"
    require_from_source: bool = True


def pinning_options(spec: Spec) -> PinningOptions:
    """The spec's `[conformance.pinning]`, typed."""
    table = spec.conformance("pinning") or {}
    key = "[conformance.pinning] files"
    return PinningOptions(
        files=tuple(
            InputFile(entry, "", "requirements", key)
            if isinstance(entry, str)
            else InputFile(entry["path"], entry.get("kind", ""), "requirements", key)
            for entry in table.get("files", [])
        ),
        build_args=dict(table.get("build_args") or {}),
        unhashed_fetch=str(table.get("unhashed_fetch", "warn")),
        editable_install=str(table.get("editable_install", "warn")),
        unpinned=str(table.get("unpinned", "warn")),
        require_from_source=table.get("require_from_source", True),
    )


def input_files(spec: Spec, files: Sequence[InputFile] = ()) -> list[InputFile]:
    """The installer inputs to scan: `[plugin] installer` and `overrides`, then `files`."""
    plugin = spec.plugin
    out: list[InputFile] = []
    if plugin is not None and plugin.installer:
        out.append(InputFile(plugin.installer, "", "installer", "[plugin] installer"))
    if plugin is not None and plugin.overrides:
        out.append(InputFile(plugin.overrides, "requirements", "override", "[plugin] overrides"))
    return [*out, *files]
