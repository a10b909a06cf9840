"""The records stages hand forward in `dist/NAME/`: their names, who writes them, and the
bounded read every typed reader uses (a bad record is exit 2 naming its producer)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from vllm_plugin_release.core import bounded
from vllm_plugin_release.core.buildrecord import BuildRecord, RecordProblem
from vllm_plugin_release.core.buildrecord import parse as _parse_build
from vllm_plugin_release.core.cache import sha256_file
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.envrecord import parse as _parse_env
from vllm_plugin_release.core.errors import BadInput, GateFailed

BUILD_CORE = "build-core.json"
BUILD_PLUGIN = "build-plugin.json"
BUILD_GUARD = "build-guard.json"
ENV = "env.json"
PLUGIN_TESTS = "plugin-tests.json"
REPLAY = "replay.json"
REPLAY_TIMING = "replay-timing.json"
REPLAY_PLOTS = ("replay-steps.png", "replay-itl.png")
SCORECARD = "scorecard.json"
SCORECARD_MD = "scorecard.md"
SCORECARD_HTML = "scorecard.html"
RUN = "run.json"
MANIFEST = "manifest.json"
STATEMENT = "manifest.intoto.jsonl"
LOADTEST = "loadtest.json"
HARDWARE_PROBE = "hardware-probe.json"
HARDWARE = "hardware.json"

# The most bytes read of one record: a record in dist/NAME or the stage cache is input
# from outside (a hand-edited or planted file).
MAX_RECORD = 64 * bounded.MiB

# The command that writes each record, for hints ("run `...` first").
PRODUCERS: dict[str, str] = {
    BUILD_CORE: "vpr build-core",
    BUILD_PLUGIN: "vpr build-plugin",
    BUILD_GUARD: "vpr build-guard",
    ENV: "vpr env",
    PLUGIN_TESTS: "vpr plugin-tests",
    REPLAY: "vpr replay",
    SCORECARD: "vpr conform",
    MANIFEST: "vpr manifest build",
    HARDWARE: "vpr hardware live",
    HARDWARE_PROBE: "vpr hardware probe",
}


# The keys (dotted) each record must carry as strings or objects before anyone reads it:
# a `{}` or hand-edited record is bad input naming the file, not a KeyError later.
SHAPES: dict[str, dict[str, type]] = {
    BUILD_CORE: {"wheel.filename": str, "wheel.sha256": str, "core": dict},
    BUILD_PLUGIN: {"wheel.filename": str, "wheel.sha256": str, "plugin": dict},
    BUILD_GUARD: {"wheel.filename": str, "wheel.sha256": str, "guard": dict},
    ENV: {"runner": str},
}


def _shape_problem(data: dict[str, Any], name: str) -> str | None:
    """The first required key of record `name` that `data` lacks (or has of another type)."""
    for dotted, kind in SHAPES.get(name, {}).items():
        node: Any = data
        for key in dotted.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, kind) or not node:
            return f"no {dotted!r} ({'text' if kind is str else 'an object'})"
    return None


def dist_dir(dist_root: Path, name: str) -> Path:
    """dist/NAME: where every record and artifact of pairing NAME goes."""
    return dist_root / name


def producer(name: str, spec_path: Path | str | None = None, extra: str = "") -> str:
    """The command that writes record `name`, with the spec when known."""
    command = PRODUCERS.get(name, "the stage that writes it")
    if spec_path is not None and command.startswith("vpr "):
        command += f" --spec {spec_path}"
    return command + extra


T = TypeVar("T")


def read_object(path: Path, parse: Callable[[Any], T | None]) -> T | None:
    """What `parse` (answering None or raising RecordProblem) makes of the JSON object in `path`,
    read bounded; None when there is none or it is unusable: for a look that must never fail."""
    try:
        data = json.loads(bounded.read_file(path, MAX_RECORD, "record"))
    except (OSError, ValueError, RecursionError, BadInput):
        return None
    try:
        return parse(data) if isinstance(data, dict) else None
    except RecordProblem:
        return None


def read(dist: Path, name: str, producer_hint: str | None = None) -> dict[str, Any]:
    """The JSON record `name` in `dist`, bounded; BadInput naming the file and what to run."""
    path = dist / name
    hint = producer_hint or producer(name)
    try:
        data = json.loads(bounded.read_file(path, MAX_RECORD, "record"))
    except FileNotFoundError:
        raise BadInput(f"{path}: not found", hint=f"run `{hint}` first")
    except bounded.TooLarge as exc:
        raise BadInput(exc.message, hint=f"run `{hint}` again")
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise BadInput(f"{path}: malformed JSON ({exc})", hint=f"run `{hint}` again")
    if not isinstance(data, dict):
        raise BadInput(f"{path}: not a JSON object", hint=f"run `{hint}` again")
    problem = _shape_problem(data, name)
    if problem:
        raise BadInput(f"{path}: incomplete record: {problem}", hint=f"run `{hint}` again")
    return data


def read_with(
    dist: Path, name: str, parse: Callable[[Any], T], producer_hint: str | None = None
) -> T:
    """What `parse` (BadInput naming the dotted key) makes of the JSON record `name` in `dist`."""
    return parse(read(dist, name, producer_hint))


def build_record(dist: Path, name: str, producer_hint: str | None = None) -> BuildRecord:
    """The build record `name` in `dist`, typed; BadInput naming the file, key and what to run."""
    return parse_build(dist / name, name, read(dist, name, producer_hint), producer_hint)


def parse_build(
    path: Path, name: str, data: dict[str, Any], hint: str | None = None
) -> BuildRecord:
    """Build record `name` (read from or going to `path`) typed; BadInput naming the file."""
    return _typed(path, name, lambda: _parse_build(data, name), hint)


def _typed(path: Path, name: str, parse: Callable[[], T], hint: str | None) -> T:
    """`parse()`, or BadInput naming `path`, the key and what to run (`hint` or the producer)."""
    try:
        return parse()
    except RecordProblem as exc:
        again = hint or producer(name)
        raise BadInput(f"{path}: incomplete record: {exc}", hint=f"run `{again}` again")


def env_record(
    dist: Path, spec_path: Path | str | None = None, hint: str | None = None
) -> EnvRecord:
    """dist/NAME/env.json typed; BadInput naming the file, the key and what to run."""
    hint = hint or producer(ENV, spec_path)
    return parse_env(dist / ENV, read(dist, ENV, hint), hint)


def env_record_at(dist: Path) -> EnvRecord | None:
    """dist/NAME/env.json typed, or None when there is none or it is no env record."""
    return read_object(dist / ENV, _parse_env)


def parse_env(path: Path, data: dict[str, Any], hint: str | None = None) -> EnvRecord:
    """The env record (read from or going to `path`) typed; BadInput naming the file."""
    return _typed(path, ENV, lambda: _parse_env(data), hint)


class RunFile(NamedTuple):
    """dist/NAME/run.json's sections as written, kept to be written back beside a stage's own."""

    raw: Mapping[str, Any]


def run_file(dist: Path) -> RunFile:
    """dist/NAME/run.json's sections (none when unusable: it is a note, never a stage's input)."""
    return read_object(dist / RUN, RunFile) or RunFile({})


def verified_wheel(dist: Path, record: BuildRecord, producer_hint: str) -> Path:
    """The wheel a build record names, after checking its sha256 against the record."""
    wheel = dist / record.wheel.filename
    if not wheel.exists():
        raise BadInput(f"{wheel}: not found", hint=f"run `{producer_hint}` first")
    if sha256_file(wheel) != record.wheel.sha256:
        raise GateFailed(
            f"{wheel}: sha256 differs from its build record", hint=f"run `{producer_hint}` again"
        )
    return wheel
