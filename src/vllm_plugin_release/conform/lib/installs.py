"""What an installer installs and fetches: pip / uv install lines, requirement files,
pyproject.toml and the core as a `uv.lock` pins it (bounded, each entry's shape checked),
recorded in the scan's `PinningReport`."""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, urlsplit

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from vllm_plugin_release.conform.lib.plugintree import (
    Unread,
    exists_within,
    read_regular,
    read_text,
    too_large,
)
from vllm_plugin_release.conform.lib.shell import ShellCommand, display, resolve
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
    for number, raw in enumerate([*text.splitlines(), ""], start=1):  # "": the last join ends
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


HEX40 = re.compile(r"^[0-9a-f]{40}$")
_VERSION_TAG = re.compile(r"^v?(\d+(?:\.\d+)+(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)$")
_VLLM_URL_VERSION = re.compile(
    r"github(?:usercontent)?\.com/vllm-project/vllm/(?:(?:blob|raw|tree|archive)/)?"
    r"(?:refs/tags/)?v?(\d+\.\d+(?:\.\d+)*(?:rc\d+)?)(?:/|\.tar\.gz|\.zip|$)"
)


@dataclass
class CorePin:
    requirement: str
    version: str | None
    exact: bool
    file: str
    line: int
    via: str  # install | requirements | constraint | override | git | sdist | url | uv.lock


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
    # where the analysis of a script stopped (too tangled to follow): not vouched for
    incomplete: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def unhashed(
    url: str, at: tuple[str, int], tool: str, kind: str, note: str, **more: Any
) -> dict[str, Any]:
    """An entry of `unhashed_fetches`, its keys in the order the report writes them."""
    return dict(url=url, file=at[0], line=at[1], tool=tool, kind=kind, **more, note=note)


def _ref_note(ref: str | None, without: str) -> str:
    return f"git ref {ref!r} is a tag or branch, not a commit" if ref else without


class CoreFindings:
    """Records into the report what the inputs say about the core package."""

    def __init__(self, core_name: str, report: PinningReport) -> None:
        self.name = canonical(core_name)
        self.report = report
        self.installs: list[tuple[ShellCommand, dict[str, Any]]] = []

    def pin(self, pin: CorePin, inst: Install | None) -> None:
        self.report.core_pins.append(asdict(pin))
        if inst is not None and pin.via not in ("constraint", "override"):
            self.installs.append((inst.cmd, asdict(pin)))

    def git_pin(
        self, requirement: str, ref: str | None, file: str, line: int, inst: Install | None
    ) -> None:
        """The core installed from a git ref: a version tag or a commit is exact."""
        tag = _VERSION_TAG.match(ref or "")
        version = tag.group(1) if tag else None
        exact = bool(version or (ref and HEX40.match(ref)))
        self.pin(CorePin(requirement, version, exact, file, line, "git"), inst)

    def from_source(self, how: str, file: str, line: int) -> None:
        if not self.report.from_source.get("value"):
            self.report.from_source = {"value": True, "how": how, "file": file, "line": line}

    def vllm_url(self, url: str, file: str, line: int) -> None:
        """A fetch of vLLM's own files (e.g. its requirements) names a version."""
        m = _VLLM_URL_VERSION.search(url)
        if m:
            self.report.core_refs.append(
                {"version": m.group(1), "url": url, "file": file, "line": line}
            )

    def is_core_url(self, url: str) -> bool:
        tail = url.split("#")[0].split("@")[0].rstrip("/")
        return PurePosixPath(tail).name.removesuffix(".git") == self.name or bool(
            re.search(rf"/{re.escape(self.name)}(?:\.git)?(?:@|$|#)", url)
        )


_HASHERS = names("sha256sum sha512sum sha384sum sha224sum sha1sum shasum b2sum md5sum")
_CURL_VALUES = set("oHdueAxmwKXTbcEr")  # short options that take a value
_WGET_VALUES = set("OoPaitTwUeBlQ")
_LONG_VALUES = names(
    "--output --output-document --header --data --user --retry --max-time "
    "--connect-timeout --user-agent --write-out --request --cacert --directory-prefix "
    "--output-dir --referer --proxy --config --tries --timeout"
)
# Downloads, clones and hash checks judged, each kind: a real installer has a few; past it
# the analysis says it is incomplete (each is compared with the others: kept small).
MAX_FETCHES = 1000
_CLONE_VALUE_OPTS = names(
    "--depth -o --origin -j --jobs --reference --filter -c --config --separate-git-dir -u "
    "--template --shallow-since"
)


class Fetches:
    """Downloads and clones in command order; unhashed ones go to the report when finished."""

    def __init__(self, report: PinningReport, core: CoreFindings) -> None:
        self.report = report
        self.core = core
        self.clones: list[dict[str, Any]] = []
        self.downloads: list[dict[str, Any]] = []
        self.verified_words: list[tuple[int, str, list[str]]] = []  # (order, file, words)
        self.order = 0  # the number of the command being read
        # lookups by key, not by a scan of every fetch so far per command
        self._pending: list[dict[str, Any]] = []  # downloads not yet judged
        self._by_cmd: dict[int, list[dict[str, Any]]] = {}  # id(command) -> its downloads
        self._by_output: dict[str, dict[str, Any]] = {}  # output file -> first download
        self._first_clone: dict[str, dict[str, Any]] = {}  # folder -> first clone there
        self._last_clone: dict[str, dict[str, Any]] = {}  # folder -> last clone there
        self._over = False

    def _room(self, kind: list[Any], cmd: ShellCommand) -> bool:
        """Whether one more of `kind` is judged; past MAX_FETCHES the analysis is incomplete."""
        if len(kind) < MAX_FETCHES:
            return True
        if not self._over:
            self._over = True
            self.report.incomplete.append(
                f"{cmd.file}:{cmd.line}: more than {MAX_FETCHES} downloads, clones or hash "
                "checks; the rest are not judged"
            )
        return False

    def download(self, cmd: ShellCommand, tool: str) -> None:
        urls, output, remote_name = _download_args(cmd.argv[1:], tool)
        if output is None and cmd.stdout is not None:
            output = cmd.stdout  # curl URL > file
        for url in urls:
            if not self._room(self.downloads, cmd):
                return
            out = output
            if out is None and (remote_name or tool == "wget"):
                out = PurePosixPath(url.split("?")[0]).name
            dl = {
                "url": url,
                "output": out,
                "file": cmd.file,
                "line": cmd.line,
                "tool": tool,
                "_order": self.order,
                "_cmd": cmd,
            }
            self.downloads.append(dl)
            self._pending.append(dl)
            self._by_cmd.setdefault(id(cmd), []).append(dl)
            if out:
                self._by_output.setdefault(out, dl)
            self.core.vllm_url(url, cmd.file, cmd.line)

    def piped(self, previous: ShellCommand, cmd: ShellCommand) -> None:
        """`previous | cmd`: a download of `previous` is fed to `cmd`."""
        for dl in self._by_cmd.get(id(previous), []):
            dl["piped_to"] = PurePosixPath(cmd.argv[0]).name

    def verification(self, cmd: ShellCommand, pipeline: list[ShellCommand]) -> None:
        """Remember the words of a hash or signature check (they name the files checked)."""
        argv = cmd.argv
        name = PurePosixPath(argv[0]).name
        if name in _HASHERS and any(
            a in ("-c", "--check") or (a.startswith("-") and not a.startswith("--") and "c" in a)
            for a in argv[1:]
        ):
            if not self._room(self.verified_words, cmd):
                return
            words = [w for c in pipeline for w in c.argv] + [
                h for c in pipeline for h in c.heredocs
            ]
            self.verified_words.append((self.order, cmd.file, words))
        elif _signature_check(name, argv) and self._room(self.verified_words, cmd):
            self.verified_words.append((self.order, cmd.file, list(argv)))

    def finish_downloads(self) -> None:
        pending, self._pending = self._pending, []
        for dl in pending:
            if dl.get("_done"):
                continue
            dl["_done"] = True
            hashed = self.verified(dl)
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

    def verified(self, dl: dict[str, Any]) -> bool:
        """A later check in the same file names the downloaded file."""
        out = dl.get("output")
        needles = [n for n in (out, PurePosixPath(out).name if out else None) if n]
        return any(
            order > dl["_order"]
            and file == dl["file"]
            and any(n in w for n in needles for w in words)
            for order, file, words in self.verified_words
        )

    def download_for(self, path: str) -> dict[str, Any] | None:
        return self._by_output.get(path) if path else None

    def git(self, cmd: ShellCommand) -> None:
        argv, cwd = _git_global_options(cmd.argv[1:], cmd.cwd)
        if not argv:
            return
        sub, args = argv[0], argv[1:]
        if sub == "clone":
            self.clone(cmd, args, cwd)
        elif sub in ("checkout", "switch", "reset"):
            refs = [a for a in args if not a.startswith("-")]
            if not refs:
                return
            if cwd is not None:
                clone = self._last_clone.get(_norm(cwd))
            else:
                clone = self.clones[-1] if self.clones else None
            if clone is not None:
                clone["ref"] = refs[-1]
                clone["line_ref"] = cmd.line

    def clone(self, cmd: ShellCommand, args: list[str], cwd: str | None) -> None:
        ref, positional = _clone_args(args)
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
        if not self._room(self.clones, cmd):
            return
        clone = {"url": url, "ref": ref, "dir": directory, "file": cmd.file, "line": cmd.line}
        self.clones.append(clone)
        self._first_clone.setdefault(_norm(directory), clone)
        self._last_clone[_norm(directory)] = clone

    def finish_clones(self) -> None:
        for clone in self.clones:
            ref = clone.get("ref")
            if ref and HEX40.match(ref):
                continue
            note = _ref_note(ref, "cloned at the default branch")
            at = (clone["file"], clone["line"])
            self.report.unhashed_fetches.append(
                unhashed(clone["url"], at, "git", "git-ref", note, ref=ref)
            )

    def clone_for(self, path: str, cwd: str | None) -> dict[str, Any] | None:
        full = path if not cwd or path.startswith("/") else str(PurePosixPath(cwd) / path)
        found = [self._first_clone.get(_norm(p)) for p in (full, path)]
        found = [c for c in found if c is not None]
        return min(found, key=self.clones.index) if len(found) > 1 else next(iter(found), None)


def _download_args(argv: list[str], tool: str) -> tuple[list[str], str | None, bool]:
    """curl / wget arguments: (URLs, the output file if named, whether -O names it remotely)."""
    urls: list[str] = []
    output: str | None = None
    remote_name = False
    values = _CURL_VALUES if tool == "curl" else _WGET_VALUES
    i = 0
    while i < len(argv):
        word = argv[i]
        i += 1
        if word.startswith("--"):
            opt, eq, value = word.partition("=")
            if opt in _LONG_VALUES and not eq and i < len(argv):
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
    return urls, output, remote_name


def _git_global_options(argv: list[str], cwd: str | None) -> tuple[list[str], str | None]:
    """Skip `git -C DIR -c KEY=VALUE ...`: the subcommand's words and the directory it runs in."""
    argv = list(argv)
    while argv and argv[0].startswith("-"):
        opt = argv.pop(0)
        if opt == "-C" and argv:
            cwd = argv.pop(0)
        elif opt == "-c" and argv:
            argv.pop(0)
    return argv, cwd


def _clone_args(args: list[str]) -> tuple[str | None, list[str]]:
    """`git clone` arguments: (the --branch ref if any, the positional words)."""
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
        elif word in _CLONE_VALUE_OPTS and i < len(args):
            i += 1
        elif not word.startswith("-"):
            positional.append(word)
    return ref, positional


def _signature_check(name: str, argv: list[str]) -> bool:
    """gpg --verify, gpgv, cosign verify-blob, minisign -V."""
    return (name in ("gpg", "gpgv") and ("--verify" in argv or name == "gpgv")) or (
        name in ("cosign", "minisign") and any(a in ("verify-blob", "-V") for a in argv)
    )


def _norm(folder: str) -> str:
    """A folder as two commands that name it the same way would (`a/`, `./a`: `a`)."""
    return str(PurePosixPath(folder.rstrip("/") or "/")).removeprefix("./")


MAX_NESTED_FILES = 32  # -r inside -r inside ...: pip follows them all; we stop here

# Blanks before an option, matched from the first blank of a run only (a long run of
# blanks is not rescanned from each of them).
_OPTIONS = re.compile(r"(?<!\s)\s+(?=--)")
_SDIST_RE = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+?)-(?P<ver>\d[^-/]*?)\.(?:tar\.gz|zip|tgz)$")


@dataclass(frozen=True)
class _Where:
    """Where a requirement was named (`inst` None for a file read alone) and its role."""

    inst: Install | None
    file: str
    line: int
    role: str


class Installs:
    """Reads what each install names and records pins, editables and unpinned dependencies."""

    def __init__(
        self, root: Path, report: PinningReport, core: CoreFindings, fetches: Fetches
    ) -> None:
        self.root = root
        self.report = report
        self.core = core
        self.fetches = fetches
        self.read_req_files: set[str] = set()
        self.read_pyprojects: set[str] = set()
        # pyproject.toml (as shown) -> the packages its uv.lock pins, for `uv sync`
        self.locked: dict[str, set[str]] = {}

    def locked_ranges(self) -> None:
        """A project's ranges that `uv sync` installs from its lock are pinned there."""
        kept = []
        for item in self.report.unpinned:
            names = self.locked.get(item.get("file") or "")
            try:
                name = canonical(Requirement(item["requirement"]).name)
            except InvalidRequirement:
                name = ""
            if names is not None and item.get("role") == "pyproject dependency" and name in names:
                self.report.notes.append(
                    f"{item['file']}:{item.get('line')}: {item['requirement']} is pinned by "
                    f"the project's uv.lock (`uv sync`)"
                )
            else:
                kept.append(item)
        self.report.unpinned = kept

    def install(self, inst: Install) -> None:
        cmd = inst.cmd
        for requirement in inst.requirements:
            self.requirement(requirement, _Where(inst, cmd.file, cmd.line, "install"))
        for target in inst.editables:
            self.report.editable_installs.append(
                {"target": target, "file": cmd.file, "line": cmd.line}
            )
            self.requirement(target, _Where(inst, cmd.file, cmd.line, "install"))
        for role, target in inst.files:
            self.install_file(role, target, inst)

    def install_file(self, role: str, target: str, inst: Install) -> None:
        """A file named by -r / -c / --override: read it unless it cannot be read yet."""
        cmd = inst.cmd
        dl = self.fetches.download_for(target)
        if dl is not None:
            dl["used_as"] = f"{role} file ({'-r' if role == 'requirement' else role})"
            self.report.notes.append(
                f"{cmd.file}:{cmd.line}: {role} file {target} is downloaded at install "
                f"time from {dl['url']}; its entries cannot be read before the build"
            )
            for entry in self.report.unhashed_fetches:
                if entry.get("url") == dl["url"] and entry.get("line") == dl["line"]:
                    entry["used_as"] = dl["used_as"]
            return
        if "://" in target:
            note = f"{role} file fetched from a URL at install time (no hash)"
            entry = unhashed(
                target, (cmd.file, cmd.line), inst.tool, "download", note, used_as=f"{role} file"
            )
            self.report.unhashed_fetches.append(entry)
            return
        if "$" in target:
            self.report.notes.append(
                f"{cmd.file}:{cmd.line}: {role} file {target} is not a static path; not read"
            )
            return
        path = resolve(self.root, target, cmd.cwd, cmd.file)
        if path is None:
            self.report.missing.append(
                {"file": target, "referenced_by": f"{cmd.file}:{cmd.line}", "role": role}
            )
            return
        self.requirements_file(path, "install" if role == "requirement" else role, inst, set())

    def uv_sync(self, cmd: ShellCommand) -> None:
        """`uv sync`: the core exactly as the project's uv.lock records it."""
        project, frozen = sync_project(cmd.argv)
        target = f"{project.rstrip('/')}/uv.lock" if project else "uv.lock"
        path = None if "$" in target else resolve(self.root, target, cmd.cwd, cmd.file)
        where = f"{cmd.file}:{cmd.line}"
        if path is None:
            self.report.missing.append({"file": target, "referenced_by": where, "role": "uv lock"})
            return
        shown = display(self.root, path)
        if shown not in self.report.files_read:
            self.report.files_read.append(shown)
        if not frozen:
            self.report.notes.append(
                f"{where}: uv sync without --frozen or --locked may update {shown} first; "
                "read as it is in the source"
            )
        try:
            lock = read_lock(path, shown)
            found = lock.core(self.core.name)
        except LockError as exc:
            self.report.missing.append({"file": shown, "referenced_by": where, "error": str(exc)})
            self.report.notes.append(str(exc))
            return
        project_file = display(self.root, path.parent / "pyproject.toml")
        self.locked[project_file] = self.locked.get(project_file, set()) | lock.names
        inst = Install(cmd=cmd, tool="uv")
        for core in found:
            requirement = f"{self.core.name}=={core.version}"
            if core.source == "git":
                requirement = f"{self.core.name} @ git+{core.url}@{core.commit or core.ref}"
                exact = bool(core.commit and HEX40.match(core.commit))
                self.core.from_source(
                    f"git {core.url} @ {core.commit or core.ref}", shown, core.line
                )
            else:
                exact = core.source == "registry"
                if core.sdist_only:
                    self.core.from_source(f"sdist {core.url} (no wheel locked)", shown, core.line)
            via = "git" if core.source == "git" else "uv.lock"
            self.core.pin(CorePin(requirement, core.version, exact, shown, core.line, via), inst)

    def requirements_file(
        self, path: Path, role: str, inst: Install | None, seen: set[str]
    ) -> None:
        key = display(self.root, path)  # read once; the first reader's role wins
        if key in self.read_req_files or key in seen:
            return
        self.read_req_files.add(key)
        text = self.read(path, key, role)
        if text is None:
            return
        file_no_binary: set[str] = set()
        for number, line in requirement_lines(text):
            where = _Where(inst, key, number, role)
            if line.startswith("-"):
                self.option_line(line, path, where, seen | {key}, file_no_binary)
                continue
            parts = _OPTIONS.split(line)
            self.requirement(parts[0], where, file_no_binary, tuple(parts[1:]))

    def read(self, path: Path, shown: str, role: str) -> str | None:
        """The text of a file the installer names, listed as read; None (listed missing) unread."""
        try:
            text, cut = read_text(self.root, path)
        except Unread as exc:
            self.report.missing.append({"file": shown, "role": role, "error": exc.reason})
            return None
        if cut:
            self.report.notes.append(too_large(shown))
        if shown not in self.report.files_read:
            self.report.files_read.append(shown)
        return text

    def option_line(
        self, line: str, path: Path, where: _Where, seen: set[str], file_no_binary: set[str]
    ) -> None:
        """An option line of the requirements file `path` (-r, -c, -e, --no-binary, ...); a
        file it names is read relative to this one."""
        inst, shown, number, role = where.inst, where.file, where.line, where.role
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
        kind = VALUE_OPTS.get(opt)
        if kind == "editable":
            self.report.editable_installs.append({"target": value, "file": shown, "line": number})
            self.requirement(value, where, file_no_binary)
        elif kind == "no_binary":
            file_no_binary.update(binary_names(value))  # an empty name matches no package
        elif kind not in ("requirement", "constraint", "override"):
            return
        elif "://" in value:
            note = f"nested {kind} file fetched from a URL (no hash)"
            entry = unhashed(
                value, (shown, number), "pip", "download", note, used_as=f"{kind} file"
            )
            self.report.unhashed_fetches.append(entry)
        elif (nested := exists_within(self.root, path.parent / value)) is None:
            self.report.missing.append(
                {"file": value, "referenced_by": f"{shown}:{number}", "role": kind}
            )
        elif len(seen) >= MAX_NESTED_FILES:
            self.report.notes.append(
                f"{shown}:{number}: {value} not read: requirement files nested more than "
                f"{MAX_NESTED_FILES} deep"
            )
        else:
            self.requirements_file(nested, role if kind == "requirement" else kind, inst, seen)

    def pyproject(
        self, path: Path, extras: tuple[str, ...], shown: str, inst: Install | None
    ) -> None:
        key = f"{shown}|{','.join(extras)}"
        if key in self.read_pyprojects:
            return
        self.read_pyprojects.add(key)
        text = self.read(path, shown, "pyproject")
        if text is None:
            return
        try:
            data = tomllib.loads(text)
        except Exception as exc:  # tomllib.TOMLDecodeError or tomlkit errors
            self.report.notes.append(f"{shown}: not valid TOML ({exc}); not read")
            return
        project = data.get("project") or {}
        deps = list(project.get("dependencies") or [])
        optional = project.get("optional-dependencies") or {}
        for extra in extras:
            deps.extend(optional.get(extra) or [])
        lines = quoted_lines(text)
        for dep in deps:
            if not isinstance(dep, str):
                continue
            line = lines.get(dep) or 1
            self.requirement(dep, _Where(inst, shown, line, "pyproject dependency"))

    def requirement(
        self,
        text: str,
        where: _Where,
        file_no_binary: frozenset[str] | set[str] = frozenset(),
        options: tuple[str, ...] = (),
    ) -> None:
        inst, file, line, role = where.inst, where.file, where.line, where.role
        cmd = inst.cmd if inst else None
        hashed = any(o.startswith("--hash") for o in options) or (
            inst is not None and "--require-hashes" in inst.flags
        )
        url, name = _direct_url(text)
        if url is not None:
            self.url_requirement(url, name, where, hashed or "#sha256=" in url)
            return
        # `/src/vllm/[audio]` is the checkout /src/vllm with an extra
        clone = self.fetches.clone_for(_without_extras(text), cmd.cwd if cmd else None)
        if _looks_path(text, clone):
            self.path_requirement(text, clone, where)
            return
        if "$" in text:
            self.report.notes.append(
                f"{file}:{line}: requirement {text!r} uses a variable that is not static; "
                "not resolved"
            )
            if text.lower().startswith(self.core.name):
                self.core.pin(CorePin(text, None, False, file, line, "install"), inst)
            return
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            self.report.notes.append(f"{file}:{line}: not a requirement {text!r} ({exc})")
            return
        specs = list(req.specifier)
        exact = len(specs) == 1 and (
            specs[0].operator == "==="
            or (specs[0].operator == "==" and "*" not in specs[0].version)
        )
        if canonical(req.name) == self.core.name:
            version = specs[0].version if exact else None
            pin = CorePin(str(req), version, exact, file, line, _via(role, cmd, file, line))
            self.core_requirement(pin, inst, _no_binary(inst, file_no_binary))
        elif not exact:
            self.report.unpinned.append(
                {"requirement": str(req), "file": file, "line": line, "role": role}
            )

    def core_requirement(self, pin: CorePin, inst: Install | None, no_binary: set[str]) -> None:
        """The core named by a requirement; built from source when --no-binary covers it."""
        self.core.pin(pin, inst)
        name = self.core.name
        if (
            pin.via in ("install", "requirements")
            and (":all:" in no_binary or name in no_binary)
            and not (inst and name in inst.only_binary)
        ):
            how = f"--no-binary {name if name in no_binary else ':all:'}"
            cmd = inst.cmd if inst else None
            self.core.from_source(how, cmd.file if cmd else pin.file, cmd.line if cmd else pin.line)

    def url_requirement(self, url: str, name: str | None, where: _Where, hashed: bool) -> None:
        inst, file, line, role = where.inst, where.file, where.line, where.role
        clean = url.removeprefix("git+") if url.startswith("git+") else url
        is_git = url.startswith("git+") or clean.split("#")[0].split("@")[0].endswith(".git")
        is_core = (name is not None and canonical(name.split("[")[0]) == self.core.name) or (
            self.core.is_core_url(url)
        )
        if is_git:
            self.git_requirement(url, clean, is_core, where)
            return
        filename = PurePosixPath(clean.split("#")[0].split("?")[0]).name
        if not hashed:
            note = "archive URL without #sha256= or --hash"
            tool = inst.tool if inst else "pip"
            entry = unhashed(url, (file, line), tool, "download", note, used_as=role)
            self.report.unhashed_fetches.append(entry)
        sd = _SDIST_RE.match(filename)
        if is_core or (sd and canonical(sd.group("name")) == self.core.name):
            version = sd.group("ver") if sd else None
            self.core.pin(CorePin(url, version, version is not None, file, line, "url"), inst)
            if sd:
                self.core.from_source("sdist URL", file, line)
        self.core.vllm_url(url, file, line)

    def git_requirement(self, url: str, clean: str, is_core: bool, where: _Where) -> None:
        """A VCS requirement (git+https://...@ref): unhashed unless the ref is a commit."""
        inst, file, line = where.inst, where.file, where.line
        ref = None
        m = re.match(r"^(.*?://[^@]*?/[^@]*)@([^@/]+)$", clean.split("#")[0])
        if m:
            ref = m.group(2)
        if not (ref and HEX40.match(ref)):
            note = _ref_note(ref, "VCS requirement without a ref")
            tool = inst.tool if inst else "pip"
            entry = unhashed(url, (file, line), tool, "git-ref", note, ref=ref)
            self.report.unhashed_fetches.append(entry)
        if is_core:
            self.core.git_pin(url, ref, file, line, inst)
            self.core.from_source(f"git {ref or 'default branch'}", file, line)

    def path_requirement(self, text: str, clone: dict[str, Any] | None, where: _Where) -> None:
        inst, file, line = where.inst, where.file, where.line
        cmd = inst.cmd if inst else None
        base, extras = text, ()
        m = re.match(r"^(.*?)\[([^\]]*)\]$", text)
        if m:
            base, extras = m.group(1), tuple(e.strip() for e in m.group(2).split(","))
        if clone is not None:
            if self.core.is_core_url(clone["url"]):
                ref = clone.get("ref")
                self.core.git_pin(f"{clone['url']}@{ref}", ref, clone["file"], clone["line"], inst)
                self.core.from_source(
                    f"git checkout {ref or '(default branch)'}",
                    cmd.file if cmd else file,
                    cmd.line if cmd else line,
                )
            return
        filename = PurePosixPath(base).name
        sd = _SDIST_RE.match(filename)
        if sd and canonical(sd.group("name")) == self.core.name:
            self.core.pin(CorePin(text, sd.group("ver"), True, file, line, "sdist"), inst)
            self.core.from_source("sdist file", file, line)
            return
        if filename.endswith(".whl"):
            name = filename.split("-")[0]
            if canonical(name) == self.core.name:
                version = filename.split("-")[1] if filename.count("-") >= 4 else None
                pin = CorePin(text, version, version is not None, file, line, "wheel")
                self.core.pin(pin, inst)
            return
        path = resolve(self.root, base, cmd.cwd if cmd else None, file)
        if path is not None and path.is_dir() and (path / "pyproject.toml").is_file():
            pyproject = path / "pyproject.toml"
            self.pyproject(pyproject, extras, display(self.root, pyproject), inst)
        elif path is None:
            self.report.notes.append(
                f"{file}:{line}: local install target {text!r} not found "
                "under the plugin source; not read"
            )


def _direct_url(text: str) -> tuple[str | None, str | None]:
    """A PEP 508 direct reference, VCS URL or archive URL: (url, name before ` @ `)."""
    name_part, at, url_part = text.partition(" @ ")
    if at:
        return url_part.strip(), name_part.strip()
    if "://" in text or text.startswith("git+"):
        return text, None
    return None, None


def _without_extras(text: str) -> str:
    """A path or name without its `[extra,...]` (and a trailing slash before it)."""
    m = re.match(r"^(.*?)\[[^\]]*\]$", text.strip())
    return m.group(1).rstrip("/") if m and m.group(1).rstrip("/") else text


def _looks_path(text: str, clone: dict[str, Any] | None) -> bool:
    return (
        text.startswith((".", "/", "~"))
        or clone is not None
        or text.endswith((".whl", ".tar.gz", ".zip", ".tgz"))
        or ("/" in text and not re.search(r"[<>=!~;\[]", text))
    )


def _via(role: str, cmd: ShellCommand | None, file: str, line: int) -> str:
    """How a core requirement is given: on the command line, in a file, as a constraint, ..."""
    if role in ("constraint", "override"):
        return role
    if cmd is not None and role == "install" and (file, line) == (cmd.file, cmd.line):
        return "install"
    if role == "pyproject dependency":
        return "pyproject"
    return "requirements"


def _no_binary(inst: Install | None, file_no_binary: frozenset[str] | set[str]) -> set[str]:
    """Packages built from source: --no-binary of the file and the command, and the env."""
    no_binary = set(file_no_binary) | (inst.no_binary if inst else set())
    env = inst.cmd.env if inst else {}
    for var in ("PIP_NO_BINARY", "UV_NO_BINARY_PACKAGE"):
        if var in env and env[var].value:
            no_binary.update(canonical(v) for v in env[var].value.replace(",", " ").split())
    if "UV_NO_BINARY" in env and (env["UV_NO_BINARY"].value or "").lower() in ("1", "true"):
        no_binary.add(":all:")
    return no_binary
