"""The build records (build-core.json, build-plugin.json, build-guard.json) and where a
stage's commands ran (`RunnerFacts`) as typed, frozen values: their one reader."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from vllm_plugin_release.core.errors import RecordProblem, field_shown

# The section naming what was built, by record: build-core.json's `core`, ...
SECTIONS = {"build-core.json": "core", "build-plugin.json": "plugin", "build-guard.json": "guard"}
SHA256 = re.compile(r"[0-9a-f]{64}")
WHEEL_KEYS = ("filename", "sha256", "platform_tag", "size")  # what a build stage records


def checked(value: Any, key: str, ok: Callable[[Any], object], expected: str) -> Any:
    """`value` (the record's `key`) when `ok(value)`; else RecordProblem naming the key."""
    if not ok(value):
        raise RecordProblem(f"{key!r} is {field_shown(value)}, expected {expected}")
    return value


def text_or_none(value: object) -> bool:
    return value is None or isinstance(value, str)


def text_list(value: object, key: str, expected: str = "a list of text") -> tuple[str, ...]:
    """`value` (the record's `key`) as a tuple when it is a list of text; else RecordProblem."""
    ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    return tuple(checked(value, key, lambda _: ok, expected))


def text_fields(
    data: object, key: str, required: tuple[str, ...], optional: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    """`data` (the object at `key`) when each of `required` is text and each of `optional`
    text or null; RecordProblem naming the first that is not."""
    checked(data, key, is_object, "an object")
    assert isinstance(data, Mapping)
    for name in (*required, *optional):
        ok = text_or_none if name in optional else (lambda v: isinstance(v, str))
        checked(data.get(name), f"{key}.{name}", ok, "text")
    return data


def is_object(value: object) -> bool:
    return isinstance(value, Mapping)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class WheelRef(NamedTuple):
    """The wheel a build record names: its file name in the record's folder and sha256."""

    filename: str
    sha256: str


class WheelEntry(NamedTuple):
    """A build record's `wheel` object whole (build-core.json adds its platform tag and size),
    for a record that repeats it (env.json's `core_wheel` and `plugin_wheel`)."""

    ref: WheelRef
    platform_tag: str | None
    size: int | None

    def to_json(self) -> dict[str, str | int]:
        out: dict[str, str | int] = {"filename": self.ref.filename, "sha256": self.ref.sha256}
        if self.platform_tag is not None:
            out["platform_tag"] = self.platform_tag
        if self.size is not None:
            out["size"] = self.size
        return out


class MadeWith(NamedTuple):
    """The interpreter a record's wheel or environment was made with (its `interpreter`)."""

    path: str
    version: str
    sha256: str
    implementation: str | None = None
    found_by: str | None = None

    def to_json(self) -> dict[str, str]:
        return {key: value for key, value in self._asdict().items() if value is not None}


MADE_WITH_KEYS = ("implementation", "version", "path", "sha256", "found_by")


def parse_made_with(data: Mapping[str, Any]) -> MadeWith | None:
    """A record's `interpreter` typed; None when it has none (an older record, or a
    --runtime-env's); RecordProblem naming the key otherwise."""
    value = data.get("interpreter")
    if value is None:
        return None
    checked(value, "interpreter", lambda v: isinstance(v, Mapping), "an object")
    for key in value:
        if key not in MADE_WITH_KEYS:
            raise RecordProblem(f"'interpreter.{key}' is a key no stage writes")
    for key in ("path", "version", "sha256"):
        checked(value.get(key), f"interpreter.{key}", lambda v: isinstance(v, str), "text")
    for key in ("implementation", "found_by"):
        checked(value.get(key), f"interpreter.{key}", text_or_none, "text")
    checked(value["sha256"], "interpreter.sha256", SHA256.fullmatch, "64 hex digits")
    return MadeWith(
        value["path"],
        value["version"],
        value["sha256"],
        value.get("implementation"),
        value.get("found_by"),
    )


# The keys of a locked file (what `vpr lock` records of a wheel a lock installs):
# required, then optional.
LOCKED_REQUIRED = ("filename", "sha256", "size")
LOCKED_OPTIONAL = ("version", "local", "source")


class LockedFile(NamedTuple):
    """A wheel a lock installs, as `vpr lock` records it: `keys` are the keys given (null
    included), sorted as record files hold them, so a record built equals the one read back."""

    filename: str
    sha256: str
    size: int
    version: str | None
    local: str | None
    source: str | None
    keys: tuple[str, ...]

    def to_json(self) -> dict[str, str | int | None]:
        return {key: getattr(self, key) for key in self.keys}


def parse_locked(value: object, at: str) -> LockedFile | None:
    """`value` (the key `at`) as a locked file; None when it is no object or empty;
    RecordProblem naming the key of a part that is not what a lock records."""
    if not isinstance(value, Mapping) or not value:
        return None
    for key in value:
        if key not in (*LOCKED_REQUIRED, *LOCKED_OPTIONAL):
            raise RecordProblem(f"'{at}.{key}' must be absent (a locked wheel has no such key)")
    for key in ("filename", "sha256"):
        if not isinstance(value.get(key), str):
            raise RecordProblem(f"'{at}.{key}' must be text")
    size = value.get("size")
    if type(size) is not int:
        raise RecordProblem(f"'{at}.size' must be an integer")
    optional = []
    for key in LOCKED_OPTIONAL:
        if value.get(key) is not None and not isinstance(value[key], str):
            raise RecordProblem(f"'{at}.{key}' must be text or null")
        optional.append(value.get(key))
    return LockedFile(
        value["filename"], value["sha256"], size, *optional, keys=tuple(sorted(value))
    )


class CoreBuildEnv(NamedTuple):
    """build-core.json's `build_env`: the build lock, its torch, the torch wheel it
    installs (None when not recorded) and the torch the core declares."""

    lock_file: str | None
    lock_sha256: str | None
    torch: str | None
    torch_file: LockedFile | None
    core_declared_torch: str | None


def _build_env(data: Mapping[str, Any]) -> CoreBuildEnv:
    value = checked(data.get("build_env") or {}, "build_env", is_object, "an object")
    keys = ("lock_file", "lock_sha256", "torch", "core_declared_torch")
    texts = [checked(value.get(k), f"build_env.{k}", text_or_none, "text") for k in keys]
    torch_file = parse_locked(value.get("torch_file"), "build_env.torch_file")
    return CoreBuildEnv(*texts[:3], torch_file, texts[3])


class BuildRecord(NamedTuple):
    """One build record, read and checked (`parse`)."""

    record: str  # the record's file name (build-core.json, ...)
    wheel: WheelRef
    name: str | None  # what was built: the section's `name` (vllm, the plugin, vpr-guard)
    version: str | None  # its `version`
    commit: str | None  # the plugin's source commit (build-plugin.json); else None
    requires_dist: tuple[str, ...] | None  # the plugin wheel's Requires-Dist, when recorded
    backend: RunnerFacts | None  # where it was built (the runner's description)
    entry_points: Mapping[str, Mapping[str, str]]  # group -> name -> object reference ({})
    python: str | None  # the interpreter version it was built with (`python`), when recorded
    target_device: str | None  # build-core.json's `core.target_device`; else None
    source: Mapping[str, str | None] | None  # build-core.json's `core.source` pins; else None
    wheel_entry: WheelEntry  # the `wheel` object whole: `wheel` and what else it holds
    interpreter: MadeWith | None  # the interpreter it was built with, when recorded
    reproducible: bool | None  # whether two builds were byte-identical (None: one build)
    isolated: bool | None  # whether the builds ran without network
    source_date_epoch: int | None  # build-core.json's `core.source_date_epoch`; else None
    repository: str | None  # build-plugin.json's `plugin.repository`; else None
    build_env: CoreBuildEnv | None  # build-core.json's `build_env`; else None

    def requires_list(self) -> list[str] | None:
        """`requires_dist` as a list (None when not recorded; [] when the wheel has none)."""
        return None if self.requires_dist is None else list(self.requires_dist)


def _text(data: Mapping[str, Any], dotted: str, *, required: bool) -> str | None:
    node: Any = data
    for key in dotted.split("."):
        node = node.get(key) if isinstance(node, Mapping) else None
    if required:
        return checked(node, dotted, lambda v: isinstance(v, str) and v, "non-empty text")
    return checked(node, dotted, text_or_none, "text")


def _wheel(data: Mapping[str, Any]) -> WheelRef:
    checked(data.get("wheel"), "wheel", is_object, "an object")
    filename = _text(data, "wheel.filename", required=True)
    sha256 = _text(data, "wheel.sha256", required=True)
    assert filename is not None and sha256 is not None
    if "/" in filename or "\\" in filename or not filename.endswith(".whl"):
        raise RecordProblem(f"'wheel.filename' is {filename!r}, expected a wheel's file name")
    checked(sha256, "wheel.sha256", SHA256.fullmatch, "64 hex digits")
    return WheelRef(filename, sha256)


def _wheel_entry(data: Mapping[str, Any], ref: WheelRef) -> WheelEntry:
    wheel = data["wheel"]  # an object: `_wheel` checked it
    unknown = sorted(str(k) for k in wheel if k not in WHEEL_KEYS)
    if unknown:
        raise RecordProblem(f"'wheel.{unknown[0]}' is a key no build stage writes")
    tag = checked(wheel.get("platform_tag"), "wheel.platform_tag", text_or_none, "text")
    size = wheel.get("size")
    checked(size, "wheel.size", lambda v: v is None or (is_int(v) and v >= 0), "a byte count")
    return WheelEntry(ref, tag, size)


@dataclass(frozen=True, slots=True)
class RunnerFacts:
    """A runner's kind (`local`, `docker`, ...) and, for one that runs in an image, its
    pinned base image and the ID of the image commands run in (both or neither)."""

    kind: str
    base_image: str | None = None
    image_id: str | None = None
    # the interpreter version some records' runner description carries (`parse_recorded_runner`);
    # `describe()` never sets it
    python: str | None = None

    def __post_init__(self) -> None:
        if (self.base_image is None) != (self.image_id is None):
            raise ValueError("a runner's base_image and image_id go together")

    def to_json(self) -> dict[str, str | None]:
        """The object a record holds, as it was always written (same keys, same order)."""
        out: dict[str, str | None] = {"kind": self.kind}
        if self.base_image is not None:
            out |= {"base_image": self.base_image, "image_id": self.image_id}
        if self.python is not None:
            out["python"] = self.python
        return out


def parse_runner(data: object) -> RunnerFacts:
    """The runner described by `data` (a record's JSON object); RecordProblem naming the
    first key missing or of another type, or a key it does not know."""
    if not isinstance(data, Mapping):
        raise RecordProblem(f"the runner is {field_shown(data)}, expected an object")
    unknown = sorted(str(k) for k in data if k not in ("kind", "base_image", "image_id"))
    if unknown:
        raise RecordProblem(f"the runner has an unknown key {unknown[0]!r}")
    kind = checked(data.get("kind"), "kind", lambda v: isinstance(v, str) and v, "non-empty text")
    image = [data.get("base_image"), data.get("image_id")]
    if image == [None, None] and len(data) == 1:
        return RunnerFacts(kind)
    for key, value in zip(("base_image", "image_id"), image, strict=True):
        checked(value, key, lambda v: isinstance(v, str) and v, "non-empty text")
    return RunnerFacts(kind, image[0], image[1])


def parse_recorded_runner(data: object) -> RunnerFacts:
    """The runner a stage's record names (build-*.json's and env.json's `backend`): as
    `parse_runner`, and the `python` key a record may also carry (text) kept."""
    if not isinstance(data, Mapping) or "python" not in data:
        return parse_runner(data)
    python = checked(data["python"], "python", lambda v: isinstance(v, str), "text")
    rest = parse_runner({k: v for k, v in data.items() if k != "python"})
    return RunnerFacts(rest.kind, rest.base_image, rest.image_id, python)


def parse_backend(data: Mapping[str, Any]) -> RunnerFacts | None:
    """A record's `backend` (where its stage ran), typed; None when it has none;
    RecordProblem naming `backend` when it is not a runner's description."""
    backend = data.get("backend")
    if backend is None:
        return None
    checked(backend, "backend", is_object, "an object")
    try:
        return parse_recorded_runner(backend)
    except RecordProblem as exc:
        raise RecordProblem(f"'backend': {exc}") from None


def _requires(section: Mapping[str, Any]) -> tuple[str, ...] | None:
    value = section.get("requires_dist")
    return None if value is None else text_list(value, "plugin.requires_dist")


def _groups(value: object) -> bool:
    """Entry points: group -> name -> text."""
    return value is None or (
        isinstance(value, Mapping)
        and all(
            isinstance(g, Mapping) and all(isinstance(v, str) for v in g.values())
            for g in value.values()
        )
    )


def _texts_object(value: object) -> bool:
    return value is None or (
        isinstance(value, Mapping) and all(text_or_none(v) for v in value.values())
    )


def _flag(data: Mapping[str, Any], key: str) -> bool | None:
    return checked(
        data.get(key), key, lambda v: v is None or isinstance(v, bool), "true, false or null"
    )


def parse(data: Mapping[str, Any], record: str) -> BuildRecord:
    """The build record `record` (a file name in SECTIONS) from its JSON object;
    RecordProblem naming the first key missing or of another type."""
    part = SECTIONS[record]
    section = checked(data.get(part), part, lambda v: isinstance(v, Mapping) and v, "an object")
    backend = parse_backend(data)
    plugin, core = part == "plugin", part == "core"
    wheel = _wheel(data)
    return BuildRecord(
        record=record,
        wheel=wheel,
        name=_text(data, f"{part}.name", required=False),
        version=_text(data, f"{part}.version", required=False),
        commit=_text(data, "plugin.commit", required=False) if plugin else None,
        requires_dist=_requires(section) if plugin else None,
        backend=backend,
        entry_points=checked(data.get("entry_points"), "entry_points", _groups, "groups of text")
        or {},
        python=_text(data, "python", required=False),
        target_device=_text(data, "core.target_device", required=False) if core else None,
        source=checked(section.get("source"), "core.source", _texts_object, "an object of text")
        if core
        else None,
        wheel_entry=_wheel_entry(data, wheel),
        interpreter=parse_made_with(data),
        reproducible=_flag(data, "reproducible"),
        isolated=_flag(data, "isolated"),
        source_date_epoch=checked(
            section.get("source_date_epoch"),
            "core.source_date_epoch",
            lambda v: v is None or is_int(v),
            "an integer",
        )
        if core
        else None,
        repository=_text(data, "plugin.repository", required=False) if plugin else None,
        build_env=_build_env(data) if core else None,
    )
