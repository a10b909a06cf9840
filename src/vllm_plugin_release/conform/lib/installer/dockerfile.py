"""Dockerfiles: the commands of every RUN (through the shell interpreter) and ADD fetches."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from vllm_plugin_release.conform.lib.shell import Shell, ShellCommand, State, Var, expand, words

_HEREDOC_RE = re.compile(r"<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class _Instruction:
    """One Dockerfile instruction, continuations joined."""

    keyword: str  # upper case
    args: str
    start: int  # its first line
    parts: list[tuple[int, str]]  # its physical lines (comment lines dropped)
    heredoc: list[tuple[int, str]]  # the body of a RUN/COPY/ADD <<WORD heredoc


def dockerfile(
    shell: Shell, text: str, file: str, build_args: dict[str, str] | None = None
) -> tuple[list[ShellCommand], list[dict]]:
    """Commands of every RUN (through the shell parser) and fetches made by ADD;
    `build_args` replace ARG defaults (`docker build --build-arg`)."""
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


def _escape_char(physical: list[str]) -> str:
    """The `# escape=` parser directive (in the first lines), else a backslash."""
    escape = "\\"
    for head in physical[:5]:
        m = re.match(r"^\s*#\s*escape\s*=\s*(\S)", head)
        if m:
            escape = m.group(1)
    return escape


def _instructions(text: str) -> Iterator[_Instruction]:
    physical = text.splitlines()
    escape = _escape_char(physical)
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
            out.append(
                {
                    "url": src,
                    "file": file,
                    "line": line,
                    "tool": "ADD",
                    "kind": "git-ref" if git else "download",
                    "note": "ADD without --checksum" if not git else "git ref is not a commit",
                }
            )
    return out


def docker_env(
    shell: Shell,
    ins: _Instruction,
    state: State,
    file: str,
    build_args: dict[str, str] | None = None,
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
        if keyword == "ARG" and build_args and name in build_args:
            shell.assign(state, name, Var(build_args[name], file, line, True))
        elif eq:
            shell.assign(state, name, Var(expand(value, state), file, line, True))
        elif keyword == "ARG" and name not in state.vars:
            state.vars[name] = Var(None, file, line, True)
