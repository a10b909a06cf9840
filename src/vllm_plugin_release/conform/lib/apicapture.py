"""The in-environment API capture (inenv/openapi.py's answer), read key by key.

`parse_capture` turns the answer into a `Capture`: vLLM's version, the OpenAPI document
and model schemas (open documents: JSON Schema and OpenAPI, kept as they are), and the
typed rest: the platform used, the endpoint plugins, the counts, the notes, or the crash
of vLLM's load_general_plugins(). The platform, plugins, counts and crash keep the object
as written (`raw`): the `api` check's details quote them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from vllm_plugin_release.core import jobanswer
from vllm_plugin_release.core.errors import BadInput, field_shown

JOB = "openapi"


class CapturedPlatform(NamedTuple):
    """vLLM's current platform while the app was built: its label and which one was used
    (plugin, stand-in, recorded)."""

    label: str | None
    used: str | None
    raw: dict[str, Any]


class EndpointPlugins(NamedTuple):
    """The `vllm.endpoint_plugins` installed (discovered), attached, and by which loader."""

    discovered: list[str] | None
    attached: list[str] | None
    loader: str | None
    raw: dict[str, Any]


class Counts(NamedTuple):
    """How many paths and component schemas the captured OpenAPI document holds."""

    paths: int | None
    schemas: int | None
    raw: dict[str, Any]


class PluginsCrash(NamedTuple):
    """vLLM's load_general_plugins() raised: the error, the last frames, the entry points."""

    error: str
    frames: list[str]
    entry_points: list[str]
    raw: dict[str, Any]


@dataclass(frozen=True)
class Capture:
    """inenv/openapi.py's answer. `openapi` is None only when `crash` says why."""

    vllm_version: str
    openapi: dict[str, Any] | None  # the app's OpenAPI document (open)
    models: dict[str, Any]  # model name -> its JSON Schema (open)
    core_openapi: dict[str, Any] | None  # the app without endpoint plugins (open)
    tasks: list[str] | None
    model_sources: dict[str, str] | None  # model name -> the class its schema came from
    platform: CapturedPlatform
    endpoint_plugins: EndpointPlugins
    notes: list[str]
    counts: Counts
    timings: dict[str, float]
    crash: PluginsCrash | None = None


class _Reader(NamedTuple):
    """Names what is wrong: an answer of the job, or a recorded contract's file."""

    where: str
    hint: str

    def bad(self, key: str, value: object, wanted: str) -> BadInput:
        return BadInput(
            f"{self.where}: {key!r} is {field_shown(value)}, expected {wanted}", hint=self.hint
        )

    def table(self, value: object, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.bad(key, value, "an object")
        return value

    def text(self, value: object, key: str, optional: bool = True) -> str | None:
        if (value is not None or not optional) and not isinstance(value, str):
            raise self.bad(key, value, "text")
        return value

    def texts(self, value: object, key: str) -> list[str] | None:
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            raise self.bad(key, value, "a list of text")
        return value

    def count(self, value: object, key: str) -> int | None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.bad(key, value, "a count")
        return value


ANSWER = _Reader(
    f"inenv {JOB}: the answer",
    f"the pairing environment's answer is malformed; {jobanswer.RERUN[JOB]}",
)


def parse_capture(answer: Any, reader: _Reader = ANSWER) -> Capture:
    """The capture from inenv/openapi.py's answer (or a recorded contract's, `reader`
    naming its file); BadInput naming the key that is not what that module writes."""
    data = reader.table(answer, "(the answer)")
    crash = _crash(data.get("general_plugins_crash"), reader)
    openapi, models = data.get("openapi"), data.get("models")
    if crash is None:
        if not isinstance(openapi, dict) or not isinstance(openapi.get("paths"), dict):
            raise reader.bad("openapi", openapi, "an OpenAPI document with a 'paths' object")
        models = reader.table(models, "models")
        for name, schema in models.items():
            reader.table(schema, f"models.{name}")
    core = data.get("core_openapi")
    sources = data.get("model_sources")
    if sources is not None:
        for name, source in reader.table(sources, "model_sources").items():
            reader.text(source, f"model_sources.{name}", optional=False)
    timings = reader.table(data.get("timings") or {}, "timings")
    return Capture(
        vllm_version=str(reader.text(data.get("vllm_version"), "vllm_version", optional=False)),
        openapi=openapi if crash is None else None,
        models=models if isinstance(models, dict) else {},
        core_openapi=core if isinstance(core, dict) else None,  # else: origins unknown
        tasks=reader.texts(data.get("tasks"), "tasks"),
        model_sources=sources,
        platform=_platform(data.get("platform"), reader),
        endpoint_plugins=_plugins(data.get("endpoint_plugins"), reader),
        notes=reader.texts(data.get("notes"), "notes") or [],
        counts=_counts(data.get("counts"), reader),
        timings=dict(timings),
        crash=crash,
    )


def _platform(value: object, reader: _Reader) -> CapturedPlatform:
    raw = reader.table({} if value is None else value, "platform")
    return CapturedPlatform(
        reader.text(raw.get("label"), "platform.label"),
        reader.text(raw.get("used"), "platform.used"),
        raw,
    )


def _plugins(value: object, reader: _Reader) -> EndpointPlugins:
    raw = reader.table({} if value is None else value, "endpoint_plugins")
    return EndpointPlugins(
        reader.texts(raw.get("discovered"), "endpoint_plugins.discovered"),
        reader.texts(raw.get("attached"), "endpoint_plugins.attached"),
        reader.text(raw.get("loader"), "endpoint_plugins.loader"),
        raw,
    )


def _counts(value: object, reader: _Reader) -> Counts:
    raw = reader.table({} if value is None else value, "counts")
    return Counts(
        reader.count(raw.get("paths"), "counts.paths"),
        reader.count(raw.get("schemas"), "counts.schemas"),
        raw,
    )


def _crash(value: object, reader: _Reader) -> PluginsCrash | None:
    if not value:
        return None
    raw = reader.table(value, "general_plugins_crash")
    return PluginsCrash(
        str(reader.text(raw.get("error"), "general_plugins_crash.error", optional=False)),
        reader.texts(raw.get("frames"), "general_plugins_crash.frames") or [],
        reader.texts(raw.get("entry_points"), "general_plugins_crash.entry_points") or [],
        raw,
    )


def recorded_reader(file: str) -> _Reader:
    """Names a recorded contract's `captured_with` keys (`api.check_recorded`)."""
    return _Reader(f"{file}: captured_with", "write it again with `vpr api-contract`")
