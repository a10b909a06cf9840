"""The buildspec format: its JSON Schema, the one source of truth (the loader validates
against it, `vpr spec schema` prints it, `vpr spec docs` renders docs/buildspec.md), and the
typed `Spec` built from validated data (`from_data`); `buildspec/load.py` reads the file."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from vllm_plugin_release.core.manifestmodel import Approval

T = TypeVar("T")


SPEC_VERSION = 1

HEX64 = "^[0-9a-f]{64}$"
HEX40 = "^[0-9a-f]{40}$"
DOTTED_MODULE = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"
DIGEST_PINNED_IMAGE = r"^[^\s@]+@sha256:[0-9a-f]{64}$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
# What the pipeline sets in a build's environment itself (stages/recipes.build_env,
# edges/runner.host_env), and families that steer the interpreter, installers or loader:
# a spec's [plugin] build_env may not set them.
RESERVED_ENV = (
    r"^(PATH|HOME|TMPDIR|TZ|LANG|LC_[A-Za-z_]*|SOURCE_DATE_EPOCH|PYTHON[A-Za-z0-9_]*"
    r"|PIP_[A-Za-z0-9_]*|UV_[A-Za-z0-9_]*|LD_[A-Za-z0-9_]*|CARGO|VIRTUAL_ENV"
    r"|VLLM_TARGET_DEVICE|SSL_CERT_FILE|XDG_[A-Za-z_]*)$"
)


def string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def integer(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", **extra, "description": description}


def number(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "number", **extra, "description": description}


def array(description: str, items: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    items = items or {"type": "string"}
    return {"type": "array", "items": items, "description": description, **extra}


def table(
    description: str, properties: dict[str, Any], required: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    """A table that refuses keys it does not name."""
    out = {"type": "object", "description": description, "additionalProperties": False}
    if required is not None:
        out["required"] = required
    return {**out, "properties": properties, **extra}


def _kind(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"if": {"properties": properties}, "then": {"required": required}}


API_APPROVAL = table(
    "Written by `vpr bump --approve-by ... --approve-why ... --approve ID`: who "
    "approved the breaking changes of the core API the plugin uses (the migration report's "
    "API coupling section lists them) when the core moved from `from` to `to`. The manifest "
    "records it and the compatibility site shows it; a bump with such a change and no approval "
    "stops (exit 1).",
    {
        "from": string("The core version before the bump.", format="pep440"),
        "to": string("The core version of the bump (the spec's [core] version).", format="pep440"),
        "by": string("Who approved (a name, an address).", minLength=1),
        "why": string(
            "Why the changes are acceptable (what the plugin did about them).", minLength=1
        ),
        "changes": array(
            "Every breaking change approved, by its id.",
            string("A change id of the migration report (KIND:SYMBOL).", minLength=1),
            minItems=1,
        ),
    },
    ["from", "to", "by", "why", "changes"],
)

SDIST_SOURCE = table(
    "vLLM from its source distribution on a package index.",
    {
        "kind": {"const": "sdist", "description": '"sdist"'},
        "index": string(
            "Package index (PEP 503/691 simple API) to download from.",
            format="uri",
            default="https://pypi.org/simple",
        ),
        "filename": string(
            "The sdist's file name on the index; default NAME-VERSION.tar.gz.",
            pattern=r"^[A-Za-z0-9._+-]+\.(tar\.gz|zip)$",
        ),
        "sha256": string(
            "sha256 of the sdist (64 lowercase hex characters); verified before anything "
            "reads the file.",
            pattern=HEX64,
        ),
    },
    ["kind", "sha256"],
)

GIT_SOURCE = table(
    "vLLM from a git repository at a tag, verified against a full commit.",
    {
        "kind": {"const": "git", "description": '"git"'},
        "url": string("Repository URL (https://, file:// or a local path)."),
        "tag": string("Tag to clone, e.g. v0.26.0."),
        "commit": string("Full 40-character commit SHA the tag must resolve to.", pattern=HEX40),
    },
    ["kind", "url", "tag", "commit"],
)

PLUGIN_SOURCE = table(
    "Where the plugin source comes from.",
    {
        "kind": {
            "enum": ["git", "path"],
            "description": '"git" (a repository URL) or "path" (a folder in this repository).',
        },
        "url": string("Repository URL for kind = git."),
        "path": string("Folder, relative to the repository root, for kind = path."),
        "tag": string("Optional tag; when given it must resolve to `commit`."),
        "commit": string("Full 40-character commit SHA (kind = git).", pattern=HEX40),
    },
    ["kind"],
    allOf=[
        _kind(["url", "commit"], kind={"const": "git"}),
        _kind(["path"], kind={"const": "path"}),
    ],
)

PYTHON = r"^3\.\d{1,2}$"
PEP440 = {"type": "string", "format": "pep440"}
# The names a spec's build_env may not set, as its error messages say them.
RESERVED_NAMES = (
    "PATH, HOME, TMPDIR, TZ, LANG, LC_*, SOURCE_DATE_EPOCH, PYTHON*, PIP_*, UV_*, LD_*, CARGO, "
    "VIRTUAL_ENV, VLLM_TARGET_DEVICE, SSL_CERT_FILE, XDG_*"
)

CORE = table(
    "vLLM core: which release, from which source, for which target.",
    {
        "name": {"const": "vllm", "description": 'Distribution name, always "vllm".'},
        "version": string("Core version (PEP 440), e.g. 0.26.0.", format="pep440"),
        "target_device": {
            "const": "empty",
            "description": 'VLLM_TARGET_DEVICE for the build; "empty" (no kernels).',
        },
        "source_date_epoch": integer(
            "SOURCE_DATE_EPOCH for the build (seconds; >= 1980-01-01). "
            "Use the newest file time in the sdist, or the commit time.",
            minimum=315532800,
        ),
        "source": {
            "description": "sdist (kind = sdist) or git (kind = git) source.",
            "oneOf": [SDIST_SOURCE, GIT_SOURCE],
        },
        "api_approval": API_APPROVAL,
    },
    ["name", "version", "target_device", "source_date_epoch", "source"],
)

BUILD = table(
    "How the wheels are built.",
    {
        "python": string(
            "Python version of the build, e.g. 3.11. Where the runner has no such "
            "interpreter (or image), the stages that need it stop with exit 3 and "
            "only the checks that need no pairing environment run (verdict lab).",
            pattern=PYTHON,
        ),
        "backend": {
            "enum": ["local", "docker"],
            "description": '"local" (this machine) or "docker" (every stage '
            "that runs core or plugin code, publish's install proof included, in a "
            "fresh container from base_image, with the docker SDK).",
        },
        "base_image": string(
            "The image every stage runs in with backend = docker, pinned by digest "
            "(name@sha256:...): a registry image, or the Debian-based one "
            "`vpr build-image` makes; an image with another digest is refused.",
            pattern=DIGEST_PINNED_IMAGE,
        ),
        "dockerfile": string(
            "Dockerfile for the docker backend.", default="docker/build.Dockerfile"
        ),
        "constraints": string(
            "Hash-locked build requirements written by `vpr lock`.",
            default="constraints/build-core-pyXY.txt",
        ),
        "torch": {
            "description": "torch for the build and pairing environments (vLLM's "
            "setup.py imports it even for the empty target): a version, or a table "
            'of versions by Python (`{ "3.10" = "2.13.0", "3.11" = '
            '"2.13.0+cpu" }`) that must name [build] python. `+cpu` is the CPU '
            "build (pip's find-links or VPR_FIND_LINKS must offer it for that "
            "Python); a plain version is the index's build (on PyPI, Linux x86_64: "
            "the CUDA build, about 3 GB with its nvidia-* wheels, which imports and "
            "runs on a CPU; downloaded once per machine into uv's cache).",
            "default": "2.13.0+cpu",
            "oneOf": [
                PEP440,
                {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"pattern": PYTHON},
                    "additionalProperties": PEP440,
                },
            ],
        },
        "image_python_sha256": string(
            "The fingerprint of the CPython `vpr build-image` copies into the image "
            "for a Python the Debian suite lacks (`build-core.json` interpreter.sha256 "
            "shows a machine's): another build of that Python is refused (exit 1, both "
            "named), so the image's digest follows from pinned inputs only.",
            pattern=HEX64,
        ),
        "platform": string(
            "The platform the locks are resolved for (uv's --python-platform): the "
            "oldest glibc every locked wheel must install on. A runtime that ships "
            "only newer wheels needs a newer one (ttnn: x86_64-manylinux_2_34).",
            pattern=r"^(x86_64|aarch64)-manylinux_2_\d{1,2}$",
            default="x86_64-manylinux_2_28",
        ),
        "find_links": array(
            "Extra find-links for uv (pip's configured find-links and "
            "VPR_FIND_LINKS are added automatically).",
            default=[],
        ),
        "reproducibility_check": {
            "type": "boolean",
            "description": "Build twice in different folders and compare sha256.",
            "default": True,
        },
        "network_isolation": {
            "enum": ["auto", "required", "off"],
            "description": "Run the build step under `unshare -n`: auto (when the kernel "
            "allows), required (fail otherwise), off.",
            "default": "auto",
        },
    },
    ["python", "backend"],
    allOf=[_kind(["base_image"], backend={"const": "docker"})],
)

PLUGIN = table(
    "The platform plugin paired with the core.",
    {
        "name": string("Distribution name of the plugin, e.g. vllm-tt-plugin."),
        "source": PLUGIN_SOURCE,
        "subdirectory": string("Folder of the plugin's pyproject.toml inside the source."),
        "installer": string("The plugin's installer script (relative to its source)."),
        "overrides": string("The plugin's dependency overrides file (relative)."),
        "build_constraints": string(
            "The plugin's own hash-locked build environment (written by `vpr lock` "
            "from its [build-system].requires plus build_requirements). Unset: the "
            "plugin is built in the core's build lock, which must meet its build "
            "requirements."
        ),
        "build_requirements": array(
            "Build requirements the plugin needs beyond its "
            "[build-system].requires (e.g. what a setup.py imports), PEP 508 strings.",
            {"type": "string", "minLength": 1},
        ),
        "build_env": {
            "type": "object",
            "description": "Environment variables of the plugin's wheel build (e.g. "
            '{ COMPILE_CUSTOM_KERNELS = "0", SOC_VERSION = "ascend910b1" }), string '
            "values, recorded in build-plugin.json and passed to the build on either "
            f"runner. Names the pipeline sets itself are refused: {RESERVED_NAMES}.",
            "propertyNames": {
                "pattern": ENV_NAME,
                "not": {"pattern": RESERVED_ENV},
                "description": "an environment variable name (letters, digits and _, "
                "not starting with a digit) the pipeline does not set itself "
                f"(not {RESERVED_NAMES})",
            },
            "additionalProperties": {"type": "string"},
        },
    },
    ["name", "source"],
)

RUNTIME = table(
    "Vendor runtime the plugin needs (TT-Metal / ttnn for Tenstorrent).",
    {
        "name": string("Runtime name, e.g. tt-metal."),
        "module": string(
            "Python module whose import proves the runtime, e.g. ttnn or a dotted "
            "name such as vendor_sdk.torch.",
            pattern=DOTTED_MODULE,
        ),
        "package": string(
            "Distribution to install, e.g. ttnn. Without `version` it is the vendor "
            "image's to provide: a requirement on it (the plugin's build requirements "
            "and dependencies) is left out of the plugin build lock and the pairing "
            "lock, and recorded as deferred to the hardware runner."
        ),
        "provides": array(
            "Other distributions the vendor image provides with the "
            "runtime (e.g. triton-ascend): left out of the locks like `package`.",
            {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$"},
            default=[],
        ),
        "version": string("Pinned version of `package`.", format="pep440"),
        "commit": string("Runtime source commit (e.g. TT-Metal), recorded.", pattern=HEX40),
        "python": array(
            "Python versions the runtime ships wheels for (loads); "
            "[build] python must be one of them, else the spec is refused.",
            {"type": "string", "pattern": PYTHON},
        ),
        "system_packages": array(
            "Debian packages the runtime's wheels load that a "
            "minimal image lacks (ttnn: libatomic1; `ldd` of its libraries tells): "
            "`vpr build-image` puts them in the image.",
            {"type": "string", "pattern": r"^[a-z0-9][a-z0-9+.-]+$"},
            default=[],
        ),
        "no_device": array(
            "Text of the runtime's own error when it finds no device "
            "(ttnn: `No chips detected in the cluster`): a plugin test on the cpu "
            "runner that fails with it is deferred to the hardware runner with that "
            "reason, not failed.",
            {"type": "string", "minLength": 3},
            default=[],
        ),
        "stand_in": string(
            "A labelled stand-in runtime package (folder in this repository) used for "
            "the runtime-present checks on the cpu runner; never reported as the real "
            "runtime."
        ),
    },
    ["name"],
)

ENV = table(
    "The pairing environment (`vpr env`): vLLM's requirements/common.txt "
    "from the verified sdist, the plugin's dependencies, torch, plus these.",
    {
        "constraints": string(
            "Hash-locked pairing requirements written by `vpr lock`.",
            default="constraints/env-NAME-pyXY.txt",
        ),
        "overrides": array(
            "Requirement overrides that win over vLLM's own pins (uv "
            "--override), e.g. the plugin runtime's numpy<2.",
            default=[],
        ),
        "caps": array(
            "Constraints on the pairing lock (uv --constraint): they "
            "limit which version the resolver may take without adding a requirement "
            "or replacing anyone's, e.g. a cap on a package whose newest release "
            "requires what an [env] override forbids (`vpr lock` names such a clash).",
            default=[],
        ),
        "requirements": array(
            "Extra requirements of the environment (test tools).", default=["pytest"]
        ),
    },
)

FETCH = table(
    "Limits on the source archive's extraction; an archive over a limit "
    "is refused (exit 2) and nothing is kept. Defaults leave headroom over the vLLM "
    "sdist (about 6,000 files, 30 MB unpacked).",
    {
        "max_members": integer(
            "Most members (files, folders, links) the archive may hold.",
            minimum=1,
            default=100000,
        ),
        "max_total_bytes": integer(
            "Most bytes all files together may unpack to (2 GiB).", minimum=1, default=2147483648
        ),
        "max_file_bytes": integer(
            "Most bytes a single file may unpack to (512 MiB).", minimum=1, default=536870912
        ),
    },
)

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://vllm-plugin-release.invalid/schemas/buildspec-1.json",
    "title": "vllm-plugin-release buildspec",
    "type": "object",
    "additionalProperties": False,
    "required": ["spec_version", "name", "core", "build"],
    "properties": {
        "spec_version": {
            "const": SPEC_VERSION,
            "description": f"Format version of this file; this release reads {SPEC_VERSION}.",
        },
        "name": string("Pairing name; outputs go to dist/NAME/.", pattern="^[a-z0-9][a-z0-9._-]*$"),
        "description": string("Free text shown in reports."),
        "core": CORE,
        "build": BUILD,
        "plugin": PLUGIN,
        "runtime": RUNTIME,
        "env": ENV,
        "conformance": table(
            "Conformance checks and their thresholds; each check owns the schema "
            "of its table (the check registry, `conform/registry.py`).",
            {},
        ),
        "publish": table(
            "Where wheels and the manifest go.",
            {
                "index": string(
                    "Package index upload URL; default: a local pypiserver.", format="uri"
                ),
                "store": string("Manifest store (folder or URL)."),
                "signing_key": string("ed25519 private key file for the manifest signature."),
            },
        ),
        "fetch": FETCH,
    },
}


def full_schema(tables: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """SCHEMA with the `[conformance.*]` tables filled in, handed in by the check registry:
    the spec layer knows the shape of a buildspec, not which checks exist."""
    schema = copy.deepcopy(SCHEMA)
    schema["properties"]["conformance"]["properties"] = dict(tables)
    return schema


# -- docs/buildspec.md, rendered from the descriptions -----------------------------------

INTRO = """# Buildspec reference

One TOML file per pairing under `buildspec/`. `vpr spec check FILE` validates a
file and names the file, line and key of every error (exit 2);
`vpr spec schema` prints the JSON Schema; `vpr spec set FILE KEY VALUE` edits a
key and keeps comments and order. This page is generated by `vpr spec docs` from
the schema itself, so it cannot drift from the code.
"""


def _type(node: dict[str, Any]) -> str:
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "oneOf" in node:
        return "table (one of the forms below)"
    if "anyOf" in node:
        return " or ".join(_type(form) for form in node["anyOf"])
    t = node.get("type", "")
    if t == "array":
        return f"array of {node.get('items', {}).get('type', 'values')}"
    return t or "any"


def _rows(
    table: str, node: dict[str, Any], out: list[str], sections: list[tuple[str, dict]]
) -> None:
    required = set(node.get("required", []))
    props = node.get("properties", {})
    if not props:
        return
    out.append(f"\n## `{table}`\n" if table else "\n## Top level\n")
    if node.get("description") and table:
        out.append(node["description"] + "\n")
    out.append("| key | type | required | default | meaning |")
    out.append("|---|---|---|---|---|")
    for key, sub in props.items():
        default = f"`{json.dumps(sub['default'])}`" if "default" in sub else ""
        meaning = sub.get("description", "").replace("|", "\\|")
        needed = "yes" if key in required else "no"
        out.append(f"| `{key}` | {_type(sub)} | {needed} | {default} | {meaning} |")
        child = f"{table}.{key}" if table else key
        if sub.get("type") == "object" and sub.get("properties"):
            sections.append((child, sub))
        items = sub.get("items", {}) if sub.get("type") == "array" else {}
        if items.get("type") == "object" and items.get("properties"):
            sections.append((f"{child}[]", items))  # each table of the array
        named = sub.get("additionalProperties")
        if isinstance(named, dict) and named.get("properties"):
            sections.append((f"{child}.NAME", named))  # a table of named tables
        for form in sub.get("anyOf", []):
            if form.get("type") == "object" and form.get("properties"):
                sections.append((child, form))  # the table form (the array holds the same)
        for i, form in enumerate(sub.get("oneOf", [])):
            kind = form.get("properties", {}).get("kind", {}).get("const", i)
            sections.append((f"{child} (kind = {json.dumps(kind)})", form))


def render(schema: dict[str, Any]) -> str:
    """The key reference of `schema` (the full buildspec schema) as Markdown."""
    out = [INTRO]
    sections: list[tuple[str, dict]] = [("", schema)]
    while sections:
        table, node = sections.pop(0)
        _rows(table, node, out, sections)
    return "\n".join(out) + "\n"


# The typed spec.


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
    """`[runtime]`: the vendor runtime the plugin loads, and what stands in for it on a cpu
    runner."""

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
