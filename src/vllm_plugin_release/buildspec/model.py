"""The typed buildspec: `Spec` and its parts, built from validated data (`from_data`);
light to import (`buildspec/load.py` reads and validates the TOML file)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.manifestmodel import Approval


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


@dataclass(frozen=True)
class BuildSpec:
    python: str
    backend: str
    base_image: str | None
    dockerfile: str
    constraints: str
    torch: str
    find_links: tuple[str, ...]
    reproducibility_check: bool
    network_isolation: str
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
    """`[plugin]`: the plugin's distribution name, its source, the installer inputs the
    pinning check reads, and how its wheel is built."""

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
    """`[env]`: what the pairing environment adds (requirements, pytest when the table
    names none), its overrides and caps, and its lock (None: `Spec.env_constraints`)."""

    requirements: tuple[str, ...] = ("pytest",)
    overrides: tuple[str, ...] = ()
    caps: tuple[str, ...] = ()
    constraints: str | None = None


@dataclass(frozen=True)
class PublishSpec:
    """`[publish]`: where releases go (a package index, a manifest store) and the key that
    signs them; each None when the spec leaves it to the command line or environment."""

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

    def resolve(self, relative: str) -> Path:
        p = Path(relative)
        return p if p.is_absolute() else self.root / p


# ---------------------------------------------------------------------------
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
    """`[build] torch` for `python`: the version, or the table's entry for it (the loader
    has checked that the table names it)."""
    return torch if isinstance(torch, str) else torch[python]


def _approval(table: dict[str, Any] | None) -> Approval | None:
    if table is None:
        return None
    return Approval(
        source=table["from"],
        to=table["to"],
        by=table["by"],
        why=table["why"],
        changes=tuple(table["changes"]),
    )


def _plugin(table: dict[str, Any] | None) -> PluginSpec | None:
    if not table:
        return None
    src = table["source"]
    return PluginSpec(
        name=table["name"],
        source=PluginSourceSpec(
            kind=src["kind"],
            url=src.get("url"),
            commit=src.get("commit"),
            tag=src.get("tag"),
            path=src.get("path"),
        ),
        installer=table.get("installer"),
        overrides=table.get("overrides"),
        subdirectory=table.get("subdirectory", ""),
        build_constraints=table.get("build_constraints"),
        build_requirements=tuple(table.get("build_requirements", [])),
        build_env=dict(table.get("build_env", {})),
        raw=table,
    )


def _runtime(table: dict[str, Any] | None) -> RuntimeSpec | None:
    if not table:
        return None
    return RuntimeSpec(
        name=table["name"],
        module=table.get("module"),
        package=table.get("package"),
        version=table.get("version"),
        commit=table.get("commit"),
        stand_in=table.get("stand_in"),
        python=tuple(table.get("python", [])),
        provides=tuple(table.get("provides", [])),
        no_device=tuple(table.get("no_device", [])),
        system_packages=tuple(table.get("system_packages", [])),
        raw=table,
    )


def _env(table: dict[str, Any]) -> EnvSpec:
    return EnvSpec(
        requirements=tuple(table.get("requirements", ["pytest"])),
        overrides=tuple(table.get("overrides", [])),
        caps=tuple(table.get("caps", [])),
        constraints=table.get("constraints"),
    )


def from_data(data: dict[str, Any], file: Path) -> Spec:
    core = data["core"]
    src = core["source"]
    source: SdistSource | GitSource
    if src["kind"] == "sdist":
        source = SdistSource(
            index=src.get("index", "https://pypi.org/simple").rstrip("/"),
            filename=src.get("filename", f"{core['name']}-{core['version']}.tar.gz"),
            sha256=src["sha256"],
        )
    else:
        source = GitSource(url=src["url"], tag=src["tag"], commit=src["commit"])
    build = data["build"]
    python = build["python"]
    return Spec(
        path=file,
        name=data["name"],
        description=data.get("description", ""),
        core=CoreSpec(
            name=core["name"],
            version=core["version"],
            target_device=core["target_device"],
            source_date_epoch=core["source_date_epoch"],
            source=source,
            api_approval=_approval(core.get("api_approval")),
        ),
        build=BuildSpec(
            python=python,
            backend=build["backend"],
            base_image=build.get("base_image"),
            dockerfile=build.get("dockerfile", "docker/build.Dockerfile"),
            constraints=build.get(
                "constraints", f"constraints/build-core-py{python.replace('.', '')}.txt"
            ),
            torch=torch_for(build.get("torch", "2.13.0+cpu"), python),
            find_links=tuple(build.get("find_links", [])),
            reproducibility_check=build.get("reproducibility_check", True),
            network_isolation=build.get("network_isolation", "auto"),
            platform=build.get("platform", "x86_64-manylinux_2_28"),
            image_python_sha256=build.get("image_python_sha256"),
        ),
        plugin=_plugin(data.get("plugin")),
        runtime=_runtime(data.get("runtime")),
        publish=PublishSpec(**data.get("publish", {})),
        fetch=dict(data.get("fetch", {})),
        env=_env(data.get("env", {})),
        raw=data,
    )
