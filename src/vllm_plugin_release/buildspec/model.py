"""The typed buildspec: `Spec` and its parts, built from validated data (`from_data`);
light to import (`buildspec/load.py` reads and validates the TOML file)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from vllm_plugin_release.core.manifestmodel import Approval

T = TypeVar("T")


def project_root(spec_path: Path) -> Path:
    """The nearest parent holding `buildspec/` or `pyproject.toml`, else the spec's folder."""
    here = spec_path.resolve().parent
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").exists() or (candidate / "buildspec").is_dir():
            if candidate.name == "buildspec":
                continue
            return candidate
    return here


@dataclass(frozen=True)
class SdistSource:
    index: str
    filename: str
    sha256: str
    kind: str = "sdist"


@dataclass(frozen=True)
class GitSource:
    url: str
    tag: str
    commit: str
    kind: str = "git"


@dataclass(frozen=True)
class CoreSpec:
    name: str
    version: str
    target_device: str
    source_date_epoch: int
    source: SdistSource | GitSource
    # [core.api_approval]: who approved the breaking core API changes of the bump to this
    # core, as the manifest records it; None when there was nothing to approve
    api_approval: Approval | None = field(default=None, hash=False)


@dataclass(frozen=True, kw_only=True)
class BuildSpec:
    python: str
    backend: str
    base_image: str | None = None
    dockerfile: str = "docker/build.Dockerfile"
    constraints: str
    torch: str
    find_links: tuple[str, ...] = ()
    reproducibility_check: bool = True
    network_isolation: str = "auto"
    platform: str = "x86_64-manylinux_2_28"  # the locks' target (uv --python-platform)
    image_python_sha256: str | None = None  # the CPython `vpr build-image` may copy in
    # An interpreter named on the command line (`--interpreter PATH`), never from the file.
    interpreter: str | None = None


@dataclass(frozen=True)
class PluginSourceSpec:
    """`[plugin.source]`: a git commit (url, commit, tag) or a local folder (path)."""

    kind: str  # "git" | "path"
    url: str | None = None
    commit: str | None = None
    tag: str | None = None
    path: str | None = None


@dataclass(frozen=True)
class PluginSpec:
    """`[plugin]`: its name, source, installer inputs and how its wheel is built."""

    name: str
    source: PluginSourceSpec
    installer: str | None = None
    overrides: str | None = None
    subdirectory: str = ""
    build_constraints: str | None = None
    build_requirements: tuple[str, ...] = ()
    build_env: dict[str, str] = field(default_factory=dict)
    # The table as written: the manifest records (and signs) it as it is.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class RuntimeSpec:
    """`[runtime]`: the vendor runtime the plugin loads (name; the module it imports, the
    package and version that install it, the Pythons it loads in) and what stands in for
    it on a cpu runner."""

    name: str
    module: str | None = None
    package: str | None = None
    version: str | None = None
    commit: str | None = None
    stand_in: str | None = None
    python: tuple[str, ...] = ()  # () when the spec names none
    provides: tuple[str, ...] = ()
    no_device: tuple[str, ...] = ()
    system_packages: tuple[str, ...] = ()
    # The table as written: the manifest records (and signs) it, the pairing key holds it.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class EnvSpec:
    """`[env]`: what the pairing environment adds, overrides and caps, and its lock."""

    requirements: tuple[str, ...] = ("pytest",)
    overrides: tuple[str, ...] = ()
    caps: tuple[str, ...] = ()
    constraints: str | None = None


@dataclass(frozen=True)
class PublishSpec:
    """`[publish]`: the index, the store and the signing key (None: left to the caller)."""

    index: str | None = None
    store: str | None = None
    signing_key: str | None = None


@dataclass(frozen=True)
class Spec:
    path: Path
    name: str
    description: str
    core: CoreSpec
    build: BuildSpec
    # Optional tables (None: the spec has none).
    plugin: PluginSpec | None = None
    runtime: RuntimeSpec | None = None
    publish: PublishSpec = field(default_factory=PublishSpec)
    # [fetch]: archive limits (max_members, max_total_bytes, max_file_bytes), each a
    # positive integer, present where the spec sets it (edges.fetch.ArchiveLimits.of)
    fetch: dict[str, int] = field(default_factory=dict)
    env: EnvSpec = field(default_factory=EnvSpec)
    # The validated document as read (the conformance suite's cache key holds it). Each
    # `[conformance.*]` table is read from it by its one owner into a typed record.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def root(self) -> Path:
        """The project folder the spec's relative paths are resolved against."""
        return project_root(self.path)

    @property
    def env_constraints(self) -> str:
        py = self.build.python.replace(".", "")
        if self.env.constraints is not None:
            return self.env.constraints
        return f"constraints/env-{self.name}-py{py}.txt"

    @property
    def runtime_module(self) -> str | None:
        """`[runtime] module`, the vendor runtime's import name (None: none named)."""
        return self.runtime.module if self.runtime is not None else None

    def with_backend(self, backend: str | None) -> Spec:
        """This spec with `[build] backend` replaced (`--backend`); itself for None."""
        if not backend or backend == self.build.backend:
            return self
        raw = {**self.raw, "build": {**self.raw.get("build", {}), "backend": backend}}
        return replace(self, build=replace(self.build, backend=backend), raw=raw)

    def with_interpreter(self, path: str | None) -> Spec:
        """This spec with the interpreter `--interpreter PATH` names; itself for None."""
        if not path:
            return self
        return replace(self, build=replace(self.build, interpreter=path))

    def conformance(self, key: str) -> dict[str, Any] | None:
        """`[conformance.KEY]` as validated with the spec (None when absent)."""
        table = (self.raw.get("conformance") or {}).get(key)
        return table if isinstance(table, dict) else None

    def resolve(self, relative: str) -> Path:
        p = Path(relative)
        return p if p.is_absolute() else self.root / p


# Locating a key path in the TOML text (tomlkit keeps no line numbers).

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(
    r"""^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", text)
    return tuple(p.strip("\"'") for p in parts)


def locate(text: str, path: tuple[str, ...]) -> int | None:
    """1-based line of `path` (a key or table) in TOML `text`, or its nearest parent."""
    best: tuple[int, int] | None = None  # (matched depth, line)
    header: tuple[str, ...] = ()
    for number, line in enumerate(text.splitlines(), start=1):
        m = _HEADER.match(line)
        if m and not _KEY.match(line):
            header = _split_dotted(m.group(1))
            candidate = header
        else:
            k = _KEY.match(line)
            if not k:
                continue
            candidate = header + _split_dotted(k.group(1))
        depth = 0
        for a, b in zip(candidate, path):
            if a != b:
                break
            depth += 1
        prefix = depth == len(candidate) or depth == len(path)  # one is a prefix of the other
        if prefix and depth and (best is None or depth > best[0]):
            best = (depth, number)
    return best[1] if best else None


def torch_for(torch: str | dict[str, str], python: str) -> str:
    """`[build] torch` for `python`: the version, or the table's entry for it."""
    return torch if isinstance(torch, str) else torch[python]


def _typed(cls: Callable[..., T], table: dict[str, Any], **given: Any) -> T:
    """`cls` from a validated table whose keys are its fields, lists as tuples."""
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in table.items()}
    return cls(**{**fields, **given})


def _approval(t: dict[str, Any] | None) -> Approval | None:
    return None if t is None else Approval(t["from"], t["to"], t["by"], t["why"], (*t["changes"],))


def from_data(data: dict[str, Any], file: Path) -> Spec:
    core, build = data["core"], data["build"]
    src, python = core["source"], build["python"]
    source: SdistSource | GitSource = (
        _typed(GitSource, src)
        if src["kind"] == "git"
        else _typed(
            SdistSource,
            src,
            index=src.get("index", "https://pypi.org/simple").rstrip("/"),
            filename=src.get("filename", f"{core['name']}-{core['version']}.tar.gz"),
        )
    )
    plugin, runtime = data.get("plugin"), data.get("runtime")
    return Spec(
        path=file,
        name=data["name"],
        description=data.get("description", ""),
        core=_typed(
            CoreSpec, core, source=source, api_approval=_approval(core.get("api_approval"))
        ),
        build=_typed(
            BuildSpec,
            build,
            constraints=build.get(
                "constraints", f"constraints/build-core-py{python.replace('.', '')}.txt"
            ),
            torch=torch_for(build.get("torch", "2.13.0+cpu"), python),
        ),
        plugin=_typed(
            PluginSpec,
            plugin,
            source=PluginSourceSpec(**plugin["source"]),
            build_env=dict(plugin.get("build_env", {})),
            raw=plugin,
        )
        if plugin
        else None,
        runtime=_typed(RuntimeSpec, runtime, raw=runtime) if runtime else None,
        publish=PublishSpec(**data.get("publish", {})),
        fetch=dict(data.get("fetch", {})),
        env=_typed(EnvSpec, data.get("env", {})),
        raw=data,
    )
