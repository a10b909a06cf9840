"""pip / uv install command lines, requirement-file lines and pyproject.toml reading."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from packaging.utils import canonicalize_name

from vllm_plugin_release.conform.lib.shell import ShellCommand

try:  # Python 3.11+
    import tomllib as _tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    _tomllib = None  # type: ignore[assignment]


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


def load_toml(text: str) -> dict[str, Any]:
    if _tomllib is not None:
        return _tomllib.loads(text)
    import tomlkit  # pragma: no cover

    return tomlkit.parse(text).unwrap()  # pragma: no cover


def quoted_lines(text: str) -> dict[str, int]:
    """Each string quoted in `text` (a pyproject.toml) -> the first line that quotes it:
    one pass, for the line numbers of many dependency strings."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        for m in _QUOTED.finditer(line):
            found.setdefault(m.group(1) if m.group(1) is not None else m.group(2), number)
    return found


_QUOTED = re.compile(r"\"([^\"]*)\"|'([^']*)'")
