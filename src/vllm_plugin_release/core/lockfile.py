"""Hash-locked requirement files: what to lock, reading a lock back (its header's hashes catch
a stale or hand-edited lock), and a lock's drift from what an environment has installed."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from vllm_plugin_release.core.bounded import tomllib
from vllm_plugin_release.core.cache import key_of
from vllm_plugin_release.core.errors import BadInput

LOCK_PLATFORM = "x86_64-manylinux_2_28"
INPUTS_LINE = re.compile(r"^# inputs-sha256: ([0-9a-f]{64})$", re.M)
BODY_LINE = re.compile(r"^# body-sha256: ([0-9a-f]{64})\n", re.M)
# `name==version` or, for a release that must not be taken by a local build of it
# (`torch===2.13.0`, never a find-links `2.13.0+cpu`), `name===version`
PIN_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)===?([^\s;\\=]+)", re.M)


@dataclass(frozen=True)
class LockRequest:
    """What to lock: requirement lines, for one Python version and platform."""

    name: str
    requirements: tuple[str, ...]
    python: str
    overrides: tuple[str, ...] = ()
    platform: str = LOCK_PLATFORM
    caps: tuple[str, ...] = ()  # constraints (uv --constraint): limits, not requirements
    files: tuple[str, ...] = ("torch",)  # whose installed file the header names (not an input)
    title: str = ""
    notes: tuple[str, ...] = ()

    @property
    def inputs_key(self) -> str:
        return key_of(
            {
                "requirements": list(self.requirements),
                "overrides": list(self.overrides),
                "python": self.python,
                "platform": self.platform,
                # only when set: the keys of locks without caps are unchanged
                **({"caps": list(self.caps)} if self.caps else {}),
            }
        )


def read_build_requires(source_tree: Path) -> list[str]:
    """`[build-system].requires` of a source tree's pyproject.toml."""
    pyproject = source_tree / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        return list(data["build-system"]["requires"])
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise BadInput(f"{pyproject}: cannot read [build-system].requires ({exc})")


def exact_pins(request: LockRequest, body: str) -> str:
    """`body` with the pins the request asks for exactly (`name===version`) written `===` too:
    uv writes `==`, which a find-links file with a local label (`2.13.0+cpu`) would satisfy."""
    exact = {
        m.group(1).lower()
        for line in (*request.requirements, *request.overrides)
        if (m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*===", line))
    }

    def rewrite(m: re.Match[str]) -> str:
        name, version = m.group(1), m.group(2)
        return f"{name}==={version}" if name.lower() in exact else m.group(0)

    return PIN_LINE.sub(rewrite, body)


def torch_requirement(version: str) -> str:
    """`[build] torch`'s requirement: `===` for the index's build (`==` would let a find-links
    `+cpu` file take it)."""
    return f"torch=={version}" if "+" in version else f"torch==={version}"


def body_sha256(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def header(request: LockRequest, body: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The comment lines a lock file starts with; the body-sha256 line is the last: the body is
    what follows it. `extra`: notes found while locking."""
    caps = (f"caps (uv --constraint): {', '.join(request.caps)}",) if request.caps else ()
    return [
        f"# {request.title or request.name}",
        "# Written by `vpr lock`; do not edit by hand (install uses --require-hashes).",
        *(f"# {note}" for note in (*request.notes, *caps, *extra)),
        f"# python: {request.python}  platform: {request.platform}",
        f"# inputs-sha256: {request.inputs_key}",
        f"# body-sha256: {body_sha256(body)}",
    ]


def check_lock(path: Path, request: LockRequest) -> str:
    """The lock's text, after checking it exists and matches the request's inputs."""
    from vllm_plugin_release.core import bounded

    text = bounded.read_text(  # a regular file named by the spec: never a device or a fifo
        path,
        bounded.MAX_DOCUMENT,
        "lock file",
        missing_hint="run `vpr lock --spec FILE` to write it",
    )
    m = INPUTS_LINE.search(text)
    if not m:
        raise BadInput(f"{path}: not a vpr lock (no inputs-sha256 line)", hint="run `vpr lock`")
    if m.group(1) != request.inputs_key:
        raise BadInput(
            f"{path}: lock is stale (its inputs changed since it was written)",
            hint="run `vpr lock --spec FILE` and commit the new lock",
        )
    body = BODY_LINE.search(text)
    if not body:
        raise BadInput(
            f"{path}: lock written by an older vpr (no body-sha256 line)",
            hint="run `vpr lock --spec FILE` and commit the new lock",
        )
    if body.group(1) != body_sha256(text[body.end() :]):
        raise BadInput(
            f"{path}: lock body was edited after `vpr lock` wrote it "
            "(its body-sha256 does not match its pins and hashes)",
            hint="run `vpr lock --spec FILE` and commit the new lock; never edit a lock by hand",
        )
    return text


def pins(lock_text: str) -> dict[str, str]:
    """name -> version of every pin in a lock."""
    return {m.group(1).lower(): m.group(2) for m in PIN_LINE.finditer(lock_text)}


HASH_LINE = re.compile(r"--hash=sha256:([0-9a-f]{64})")
FILE_LINE = re.compile(
    r"^# file: (?P<name>[a-z0-9][a-z0-9._-]*) (?P<filename>\S+\.whl) "
    r"sha256=(?P<sha256>[0-9a-f]{64}) size=(?P<size>\d+) from=(?P<source>\S+)$",
    re.M,
)


def hashes(lock_text: str) -> dict[str, set[str]]:
    """name -> the sha256 hashes a lock allows for it (its `--hash` lines)."""
    found: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in lock_text.splitlines():
        pin = PIN_LINE.match(line)
        if pin:
            current = found.setdefault(pin.group(1).lower(), set())
        elif not line.startswith(" "):
            current = None
        if current is not None:  # the pin line itself may carry a hash
            current.update(HASH_LINE.findall(line))
    return found


@dataclass(frozen=True)
class LockedFile:
    """The wheel a lock installs for a package (`vpr lock` records torch's and the runtime's)."""

    name: str
    filename: str
    sha256: str
    size: int
    source: str  # the find-links folder or index it comes from

    def note(self) -> str:
        return (
            f"file: {self.name} {self.filename} sha256={self.sha256} size={self.size} "
            f"from={self.source}"
        )

    def record(self, version: str) -> dict[str, str | int | None]:
        local = version.split("+", 1)[1] if "+" in version else None
        return {
            "version": version,
            "local": local,
            "filename": self.filename,
            "sha256": self.sha256,
            "size": self.size,
            "source": self.source,
        }


def locked_file(lock_text: str, name: str) -> LockedFile | None:
    """The file a lock's header names for `name` (None: none recorded, or an older lock)."""
    for m in FILE_LINE.finditer(lock_text):
        if m["name"] == name:
            return LockedFile(m["name"], m["filename"], m["sha256"], int(m["size"]), m["source"])
    return None


# Drift between a lock and an installed environment: a pin not installed is missing, at
# another version different, a distribution pinned nowhere extra; the installer seeds of
# a venv (`python -m venv` puts them there) are compared only when the lock pins them.


SEEDS = frozenset({"pip", "setuptools", "wheel"})


@dataclass
class Drift:
    missing: list[tuple[str, str]] = field(default_factory=list)  # (name, pinned)
    different: list[tuple[str, str, str]] = field(default_factory=list)  # (name, pinned, have)
    extra: list[tuple[str, str]] = field(default_factory=list)  # (name, installed)
    compared: int = 0
    seeds: list[str] = field(default_factory=list)  # installer seeds, not compared

    def lines(self) -> list[str]:
        out = [f"pin {n}: missing (lock {v})" for n, v in self.missing]
        out += [f"pin {n}: installed {have}, lock {want}" for n, want, have in self.different]
        out += [f"extra {n} {v}: installed but not in the lock" for n, v in self.extra]
        return out


def same_version(a: str, b: str) -> bool:
    """Equal as versions (PEP 440), else as text."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def drift(pins: dict[str, str], installed: dict[str, str]) -> Drift:
    """Compare `pins` (name -> version) with `installed` (name -> version); names are
    normalised (PEP 503) on both sides."""
    from packaging.utils import canonicalize_name

    want = {canonicalize_name(k): v for k, v in pins.items()}
    have = {canonicalize_name(k): v for k, v in installed.items()}
    out = Drift(compared=len(want))
    for name in sorted(want):
        if name not in have:
            out.missing.append((name, want[name]))
        elif not same_version(have[name], want[name]):
            out.different.append((name, want[name], have[name]))
    for name in sorted(set(have) - set(want)):
        if name in SEEDS:
            out.seeds.append(name)
        else:
            out.extra.append((name, have[name]))
    return out
