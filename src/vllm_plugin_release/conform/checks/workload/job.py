"""The `workload` check's in-environment job: the request inenv/workload.py reads, and its
answer, read key by key (`WorkloadJob.parse_answer`).

The answer comes from the pairing environment, beside the plugin's code: every part the
judging reads (`judge.py`) is checked here once, so a garbled answer is a JobFailed naming
the key, never a KeyError or TypeError while judging. The parts stay JSON objects as
inenv/workload.py writes them (a change, an error, where code lives): the check's
details and rows quote them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from vllm_plugin_release.core import jobanswer

JOB = "workload"


class ProbeModel(NamedTuple):
    """The tiny local model every probe's engine config is built on."""

    max_model_len: int
    architecture: str
    model_type: str


class Probe(NamedTuple):
    """One probe: its id, the EngineArgs keyword arguments of its engine config (None: the
    base config) and the SamplingParams keyword arguments of its request (None: none)."""

    id: str
    engine: dict[str, Any] | None
    params: dict[str, Any] | None


class SlowPath(NamedTuple):
    """A slow path of `[conformance.workload] slow_paths`, as the environment asks it."""

    name: str
    predicate: str  # module:attr of the plugin
    args: dict[str, Any]


@dataclass(frozen=True)
class WorkloadAnswer:
    """What inenv/workload.py saw. `base`, each of `probes` (by probe id) and `combos` (one
    per combination asked, in order) are its objects as written, checked where read."""

    platform: str | None
    vllm_version: str | None
    hooks: dict[str, Any] | None  # hook name -> where the platform defines it
    predicates: dict[str, Any] | None  # slow path name -> where its predicate is
    base: dict[str, Any]
    probes: dict[str, dict[str, Any]]
    combos: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class WorkloadJob:
    """The request of inenv/workload.py (see that module)."""

    model: ProbeModel
    probes: tuple[Probe, ...]
    combos: tuple[dict[str, Any], ...]  # the distinct request combinations, in order
    slow_paths: tuple[SlowPath, ...]
    sys_path: tuple[str, ...] = ()  # folders put first on the environment's path

    module: ClassVar[str] = JOB

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model._asdict(),
            "probes": [p._asdict() for p in self.probes],
            "combos": list(self.combos),
            "slow_paths": [p._asdict() for p in self.slow_paths],
            "sys_path": list(self.sys_path),
        }

    def parse_answer(self, answer: Any) -> WorkloadAnswer:
        return parse_answer(answer, len(self.combos))


def parse_answer(answer: Any, combos: int) -> WorkloadAnswer:
    """The answer to a request of `combos` combinations; JobFailed naming the key that is
    not what inenv/workload.py writes."""
    data = _table(answer, "")
    hooks = _optional_table(data.get("hooks"), "hooks")
    for name, where in (hooks or {}).items():
        _where(where, f"hooks.{name}")
    probes = _table(data.get("probes"), "probes")
    for pid, probe in probes.items():
        _probe(probe, f"probes.{pid}")
    found = data.get("combos")
    if not isinstance(found, list) or len(found) != combos:
        raise jobanswer.problem(JOB, "combos", found, f"a list of {combos} objects")
    for i, combo in enumerate(found):
        _paths(_table(combo, f"combos[{i}]").get("paths"), f"combos[{i}].paths")
    return WorkloadAnswer(
        jobanswer.optional_text(data.get("platform"), JOB, "platform"),
        jobanswer.optional_text(data.get("vllm_version"), JOB, "vllm_version"),
        hooks,
        _optional_table(data.get("predicates"), "predicates"),
        _base(data.get("base")),
        probes,
        tuple(found),
    )


def _table(value: object, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise jobanswer.problem(JOB, key or "(the answer)", value, "an object")
    return value


def _optional_table(value: object, key: str) -> dict[str, Any] | None:
    return None if value is None else _table(value, key)


def _where(value: object, key: str) -> None:
    """Where code is: {file, line, name} (or None)."""
    where = _optional_table(value, key)
    if where is not None:
        jobanswer.text(where.get("file"), JOB, f"{key}.file")
        line = where.get("line")
        if line is not None:
            jobanswer.count(line, JOB, f"{key}.line")


def _error(value: object, key: str) -> None:
    """An exception as data: {type, message, by, where}."""
    error = _optional_table(value, key)
    if error is not None:
        for name in ("type", "message", "by"):
            jobanswer.optional_text(error.get(name), JOB, f"{key}.{name}")
        _where(error.get("where"), f"{key}.where")


def _changes(value: object, key: str) -> None:
    """The watched settings changed: [{field, from, to, where}] (absent: none)."""
    if value is None:
        return
    if not isinstance(value, list):
        raise jobanswer.problem(JOB, key, value, "a list of changes")
    for i, change in enumerate(value):
        item = _table(change, f"{key}[{i}]")
        jobanswer.text(item.get("field"), JOB, f"{key}[{i}].field")
        for name in ("from", "to"):
            if name not in item:
                raise jobanswer.problem(JOB, f"{key}[{i}].{name}", None, "the setting's value")
        _where(item.get("where"), f"{key}[{i}].where")


def _paths(value: object, key: str) -> None:
    """Slow path name -> {taken, where} or {error} (absent: not asked)."""
    for name, said in (_optional_table(value, key) or {}).items():
        if said is not None:
            _where(_table(said, f"{key}.{name}").get("where"), f"{key}.{name}.where")


def _probe(value: object, key: str) -> None:
    probe = _table(value, key)
    engine = _optional_table(probe.get("engine"), f"{key}.engine")
    if engine is not None:
        jobanswer.optional_text(engine.get("hook"), JOB, f"{key}.engine.hook")
        _error(engine.get("error"), f"{key}.engine.error")
        _changes(engine.get("changes"), f"{key}.engine.changes")
    request = _optional_table(probe.get("request"), f"{key}.request")
    if request is not None:
        _error(request.get("error"), f"{key}.request.error")
        _changes(request.get("changes"), f"{key}.request.changes")
    _paths(probe.get("paths"), f"{key}.paths")


def _base(value: object) -> dict[str, Any]:
    """The base config's probe: how the hook fared, what it changed, what vLLM said."""
    base = _table(value, "base")
    jobanswer.optional_text(base.get("hook"), JOB, "base.hook")
    for name in ("error", "after_hook"):
        _error(base.get(name), f"base.{name}")
    _changes(base.get("changes"), "base.changes")
    warnings = base.get("warnings")
    if warnings is not None and not isinstance(warnings, list):
        raise jobanswer.problem(JOB, "base.warnings", warnings, "a list of warnings")
    for i, warning in enumerate(warnings or []):
        text = _table(warning, f"base.warnings[{i}]").get("message")
        jobanswer.text(text, JOB, f"base.warnings[{i}].message")
    _optional_table(base.get("model_classes"), "base.model_classes")
    return base
