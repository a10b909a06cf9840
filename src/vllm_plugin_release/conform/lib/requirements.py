"""pip / uv install command lines, requirement-file lines, pyproject.toml, and the core
as a project's `uv.lock` pins it (an outside input: bounded, each entry's shape checked)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlsplit

from packaging.utils import canonicalize_name

from vllm_plugin_release.conform.lib.plugintree import Unread, read_regular
from vllm_plugin_release.conform.lib.shell import ShellCommand
from vllm_plugin_release.core.bounded import tomllib


def canonical(name: str) -> str:
    return str(canonicalize_name(name))


def names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Options of pip / uv pip install that name a file or a package set, by what they mean.
VALUE_OPTS: dict[str, str] = {
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
        names("-i --index-url --extra-index-url --index --default-index -f --find-links"), "index"
    ),
    "--hash": "hash",
}

# Options of pip / uv pip install that take a value this check does not need.
_IGNORED_VALUE_OPTS = names(
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
_PIP_SUBCOMMANDS = names(
    "install sync download uninstall freeze list show wheel compile check tree config cache "
    "hash inspect index"
)


def binary_names(value: str) -> set[str]:
    """The packages of a --no-binary / --only-binary value (`:all:` / `:none:` kept as is)."""
    return {canonical(v) if not v.startswith(":") else v for v in value.split(",") if v}


@dataclass
class Install:
    cmd: ShellCommand
    tool: str
    requirements: list[str] = field(default_factory=list)
    editables: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)  # (role, path)
    no_binary: set[str] = field(default_factory=set)
    only_binary: set[str] = field(default_factory=set)
    flags: set[str] = field(default_factory=set)


def pip_args(argv: list[str]) -> tuple[str, list[str]] | None:
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


def parse_install(cmd: ShellCommand, tool: str, args: list[str]) -> Install:
    inst = Install(cmd=cmd, tool=tool)
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
        if not eq and opt not in VALUE_OPTS and opt not in _IGNORED_VALUE_OPTS:
            attached = re.match(r"^-([rceif])(.+)$", word)
            if attached:
                opt, value, eq = f"-{attached.group(1)}", attached.group(2), "="
        if opt in VALUE_OPTS or opt in _IGNORED_VALUE_OPTS:
            if not eq:
                if i >= len(args):
                    break
                value = args[i]
                i += 1
            _apply_option(inst, opt, value)
            continue
        inst.flags.add(opt)
    return inst


def _apply_option(inst: Install, opt: str, value: str) -> None:
    kind = VALUE_OPTS.get(opt)
    if kind in ("requirement", "constraint", "override"):
        inst.files.append((kind, value))
    elif kind == "editable":
        inst.editables.append(value)
    elif kind == "no_binary":
        inst.no_binary.update(binary_names(value))
    elif kind == "only_binary":
        inst.only_binary.update(binary_names(value))
    elif kind == "index":
        inst.flags.add(f"{opt}={value}")


def requirement_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) of a requirements file: comments and joins done."""
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


def quoted_lines(text: str) -> dict[str, int]:
    """Each string quoted in `text` -> the first line that quotes it, in one pass."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        for m in _QUOTED.finditer(line):
            found.setdefault(m.group(1) if m.group(1) is not None else m.group(2), number)
    return found


_QUOTED = re.compile(r"\"([^\"]*)\"|'([^']*)'")


MAX_BYTES = 64 * 1024 * 1024
_AT_LINE = re.compile(r"\(at line (\d+)")
_PROJECT_OPTS = ("--project", "--directory")


@dataclass(frozen=True)
class LockedCore:
    """The core package of a uv.lock: its version and where uv takes it from."""

    version: str
    line: int
    source: str  # registry | git | url | path | other
    url: str | None = None
    ref: str | None = None  # git: the rev asked for
    commit: str | None = None  # git: the commit the lock resolved
    sdist_only: bool = False  # registry: no wheel, so uv builds it


class LockError(ValueError):
    """A uv.lock that cannot be read as one: the message names the file and line."""


def sync_project(argv: list[str]) -> tuple[str | None, bool]:
    """(`uv sync`'s `--project`/`--directory` or None, whether `--frozen`/`--locked`)."""
    project = None
    for i, word in enumerate(argv):
        for opt in _PROJECT_OPTS:
            if word == opt and i + 1 < len(argv):
                project = argv[i + 1]
            elif word.startswith(opt + "="):
                project = word.split("=", 1)[1]
    return project, any(w in ("--frozen", "--locked") for w in argv)


def is_uv_sync(argv: list[str]) -> bool:
    words = [w for w in argv[1:] if not w.startswith("-")]
    return PurePosixPath(argv[0]).name == "uv" and words[:1] == ["sync"]


def _package_lines(text: str) -> dict[str, int]:
    """Each `[[package]]`'s name -> the line of its first `name = "NAME"`, in one pass."""
    found: dict[str, int] = {}
    previous = ""
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if previous == "[[package]]" and line.startswith('name = "') and line.endswith('"'):
            found.setdefault(line[len('name = "') : -1], number)
        previous = line
    return found


def _source(entry: dict[str, Any]) -> dict[str, Any]:
    """The entry's source, the git url split into url, rev and resolved commit."""
    source = entry.get("source")
    if not isinstance(source, dict):
        return {"source": "other"}
    if isinstance(source.get("registry"), str):
        wheels = entry.get("wheels")
        return {"source": "registry", "url": source["registry"], "sdist_only": not wheels}
    if isinstance(source.get("git"), str):
        parts = urlsplit(source["git"])
        rev = (parse_qs(parts.query).get("rev") or parse_qs(parts.query).get("tag") or [None])[0]
        base = parts._replace(query="", fragment="").geturl()
        return {"source": "git", "url": base, "ref": rev, "commit": parts.fragment or None}
    if isinstance(source.get("url"), str):
        return {"source": "url", "url": source["url"]}
    for kind in ("path", "directory", "editable", "virtual"):
        if isinstance(source.get(kind), str):
            return {"source": "path", "url": source[kind]}
    return {"source": "other"}


@dataclass(frozen=True)
class Lock:
    """A uv.lock as read: its text (for line numbers) and its `[[package]]` tables."""

    shown: str
    text: str
    packages: tuple[dict[str, Any], ...]
    lines: dict[str, int]  # package name -> the line of its name

    @property
    def names(self) -> set[str]:
        """Every locked package (canonical names)."""
        return {canonical(p["name"]) for p in self.packages}

    def core(self, core: str) -> list[LockedCore]:
        """Every entry named `core`, with its version and source."""
        found: list[LockedCore] = []
        for entry in self.packages:
            if canonical(entry["name"]) != canonical(core):
                continue
            line = self.lines.get(entry["name"], 1)
            version = entry.get("version")
            if not isinstance(version, str) or not version:
                raise LockError(f"{self.shown}:{line}: [[package]] {entry['name']} has no version")
            try:
                source = _source(entry)
            except ValueError as exc:  # urlsplit: "Invalid IPv6 URL", a bad port, ...
                raise LockError(
                    f"{self.shown}:{line}: [[package]] {entry['name']}: its source URL cannot "
                    f"be read ({exc})"
                ) from None
            found.append(LockedCore(version=version, line=line, **source))
        return found


def read_lock(path: Path, shown: str) -> Lock:
    """The uv.lock at `path` (`shown`: its name in messages), checked for size and shape."""
    try:
        raw = read_regular(path, MAX_BYTES)
    except Unread as exc:
        raise LockError(f"{shown}: {exc.reason}") from None
    if len(raw) > MAX_BYTES:
        raise LockError(f"{shown}: larger than {MAX_BYTES // (1024 * 1024)} MiB; not read")
    text = raw.decode("utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = _AT_LINE.search(str(exc))
        raise LockError(f"{shown}:{m.group(1) if m else 1}: not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses once per nested array or table
        raise LockError(f"{shown}: arrays or tables nested too deep to read; not read") from None
    packages = data.get("package")
    if not isinstance(packages, list):
        raise LockError(f"{shown}:1: no [[package]] list; not a uv lock file")
    tables = tuple(p for p in packages if isinstance(p, dict) and isinstance(p.get("name"), str))
    return Lock(shown, text, tables, _package_lines(text))
