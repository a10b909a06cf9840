"""The pairing manifest: one deterministic JSON document per pairing, from dist/NAME/'s stage
records and wheels (wall-clock and host data go to run.json)."""

from __future__ import annotations

import contextlib
import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import attest, cardrecord
from vllm_plugin_release.core.attest import (
    BuildPins,
    CorePins,
    GitPin,
    PluginTable,
    RuntimeTable,
    SdistPin,
    SpecPins,
)
from vllm_plugin_release.core.buildrecord import BuildRecord
from vllm_plugin_release.core.cache import Cache, key_of, sha256_file, write_json
from vllm_plugin_release.core.cardrecord import (
    CheckResult,
    Deferred,
    Plan,
    Scorecard,
    Workload,
)
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.core.manifestdoc import (
    KIND,
    MANIFEST_FILE,
    RUN_FILE,
    SCHEMA_VERSION,
    STATEMENT_FILE,
    PairingInputs,
    RuntimePins,
    SourcePin,
    file_bytes,
    validate,
)
from vllm_plugin_release.core.manifestmodel import Manifest, parse
from vllm_plugin_release.core.records import (
    BUILD_CORE,
    BUILD_GUARD,
    BUILD_PLUGIN,
    ENV,
    SCORECARD,
    build_record,
    env_record,
    read_object,
    run_file,
)
from vllm_plugin_release.core.records import producer as record_producer
from vllm_plugin_release.core.wheelfacts import files_digest, wheel_files, wheel_tags, wheel_version
from vllm_plugin_release.edges import keys, runner


def _missing(file: str, key: str) -> BadInput:
    """BadInput naming record `file`, its missing `key` and the command that writes it."""
    return BadInput(
        f"{file}: missing key {key!r}",
        hint="the record is incomplete or from another version; "
        f"re-run `{record_producer(file, 'SPEC')}`",
    )


def _key(record: dict[str, Any], key: str, file: str) -> Any:
    if key not in record:
        raise _missing(file, key)
    return record[key]


_T = TypeVar("_T")


def _recorded(value: _T | None, dotted: str, file: str) -> _T:
    if value is None:
        raise _missing(file, dotted)
    return value


EVIDENCE_KEPT = 5  # evidence items per check copied into the manifest (the scorecard has all)


def check_verdict(verdict: str, results: tuple[CheckResult, ...], file: str) -> None:
    """A verdict that contradicts its own checks is a gate failure, never recorded as is."""
    statuses = {r.status for r in results}
    if verdict == "fleet" and statuses - {"pass", "warn"}:
        bad = sorted(r.name for r in results if r.status not in ("pass", "warn"))
        raise GateFailed(
            f"{file}: verdict 'fleet' but checks {', '.join(bad)} did not pass",
            hint="fleet needs every check passed, hardware included; re-run `vpr conform`",
        )
    if verdict == "pilot" and "fail" in statuses:
        bad = sorted(r.name for r in results if r.status == "fail")
        raise GateFailed(f"{file}: verdict 'pilot' but checks {', '.join(bad)} failed")


def _check(result: CheckResult) -> dict[str, Any]:
    """A check as the manifest keeps it: the first EVIDENCE_KEPT items and how many."""
    return {
        "status": result.status,
        "summary": result.summary,
        "evidence": [  # note, file, line and source: not the value
            {k: v for k, v in item.to_json().items() if k != "value"}
            for item in result.evidence[:EVIDENCE_KEPT]
        ],
        "evidence_count": len(result.evidence),
    }


def _deferred(item: Deferred) -> dict[str, str]:
    """A deferred item as the manifest keeps it: an empty value is not given."""
    given = (("check", item.check), ("reason", item.reason), ("run_with", item.run_with))
    return {key: value for key, value in given if value}


def conformance(card: Scorecard | None) -> dict[str, Any]:
    """The manifest's `conformance` section ("absent" without scorecard.json); GateFailed
    when the verdict contradicts the checks."""
    if card is None:
        return {"status": "absent", "verdict": None, "runner": None, "checks": {}, "deferred": []}
    results = sorted(card.results, key=lambda r: r.name)
    deferred = [
        _deferred(Deferred(r.name, r.summary, None)) for r in results if r.status == "deferred"
    ]
    # scorecard v2 also lists the checks this runner never ran (the hardware part).
    names = {r.name for r in results}
    deferred += [_deferred(item) for item in card.deferred if item.check not in names]
    check_verdict(card.verdict, card.results, SCORECARD)
    out: dict[str, Any] = {
        "status": "present",
        "verdict": card.verdict,
        "runner": card.runner,
        "checks": {r.name: _check(r) for r in results},
        "deferred": deferred,
    }
    if card.workload is not None:
        out["workload"] = workload(card.workload, card.plans)
    return out


def workload(answers: Workload, plans: Mapping[str, Plan]) -> dict[str, Any]:
    """The workload answers as the manifest records them."""
    keep = ("feature", "share", "needed", "outcome", "where", "path")
    models = answers.models
    return {
        "platform": answers.platform,
        "features": [{k: v for k, v in f.to_json().items() if k in keep} for f in answers.features],
        "paths": {name: mark.to_json() for name, mark in answers.paths.items()},
        "plans": {n: {"verdict": p.verdict, "why": list(p.why)} for n, p in plans.items()},
        "models": {"model": models.model, "listed": models.listed, "table": list(models.table)},
    }


@dataclass(frozen=True)
class Records:
    """The stage records of one pairing, typed (None: not written)."""

    dist_dir: Path
    build_core: BuildRecord
    build_plugin: BuildRecord
    env: EnvRecord | None = None
    scorecard: Scorecard | None = None
    build_guard: BuildRecord | None = None


def read_records(dist_dir: Path, spec_path: str | None = None) -> Records:
    """Read the stage records in `dist_dir`; exit 2 naming a missing required one."""

    def hint(name: str) -> str:
        return record_producer(name, spec_path or "FILE")

    for name in (BUILD_CORE, BUILD_PLUGIN):
        if not (dist_dir / name).exists():
            raise BadInput(
                f"{dist_dir / name}: required stage record {name} is missing",
                hint=f"run `{hint(name)}` first (it writes {name})",
            )
    has = {name: (dist_dir / name).exists() for name in (ENV, SCORECARD, BUILD_GUARD)}
    return Records(
        dist_dir=dist_dir,
        build_core=build_record(dist_dir, BUILD_CORE, hint(BUILD_CORE)),
        build_plugin=build_record(dist_dir, BUILD_PLUGIN, hint(BUILD_PLUGIN)),
        env=env_record(dist_dir, hint=hint(ENV)) if has[ENV] else None,
        scorecard=cardrecord.read(dist_dir, hint(SCORECARD)) if has[SCORECARD] else None,
        build_guard=build_record(dist_dir, BUILD_GUARD, hint(BUILD_GUARD))
        if has[BUILD_GUARD]
        else None,
    )


WHEEL_FACTS = "wheel-files"  # .vpr/stages/wheel-files/<wheel sha256>.json


def describe_wheel(
    dist_dir: Path, filename: str, sha256: str, record_file: str, memo: Path | None = None
) -> dict[str, Any]:
    """Facts about a wheel in dist_dir, after checking its sha256 against the stage record.
    `memo`: a folder where the facts of its files are kept by the wheel's sha256 (reading
    and checking every member against the wheel's RECORD is done once per wheel)."""
    path = dist_dir / filename
    if not path.is_file():
        raise BadInput(
            f"{path}: wheel named in {record_file} is missing",
            hint=f"re-run `{record_producer(record_file, 'FILE')}`",
        )
    actual = sha256_file(path)
    if actual != sha256:
        raise GateFailed(
            f"{path}: sha256 {actual} differs from {record_file} wheel.sha256 {sha256}",
            hint="the wheel changed after it was built; rebuild it",
        )
    digest, count = _files_facts(path, actual, memo)
    return {
        "filename": filename,
        "sha256": actual,
        "version": wheel_version(path),
        "size": path.stat().st_size,
        "files_sha256": digest,
        "files": count,
        "tags": wheel_tags(filename),
    }


class FilesFacts(NamedTuple):
    """A wheel's files' digest and count, as noted by its sha256 (`_files_facts`)."""

    files_sha256: str
    files: int


def parse_files_facts(data: Any) -> FilesFacts | None:
    """A wheel-files note, typed; None when it is not one (64 hex digits, a count)."""
    digest = data.get("files_sha256") if isinstance(data, dict) else None
    files = data.get("files") if isinstance(data, dict) else None
    if (
        isinstance(digest, str)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest)
        and type(files) is int
        and files >= 0
    ):
        return FilesFacts(digest, files)
    return None


def _files_facts(path: Path, sha256: str, memo: Path | None) -> tuple[str, int]:
    """(files_sha256, number of files) of the wheel at `path`, whose bytes the caller has
    checked to be `sha256`: from `memo` when an earlier run noted them for those bytes
    (a malformed note is ignored), else read from the wheel, checked against its RECORD
    (GateFailed when they differ), and noted."""
    note = memo / f"{sha256}.json" if memo is not None else None
    if note is not None:
        kept = read_object(note, parse_files_facts)  # bounded; None when unusable
        if kept is not None:
            return kept.files_sha256, kept.files
    files = wheel_files(path)
    facts = files_digest(files), len(files)
    if note is not None:  # a read-only cache: the facts are simply read again next time
        with contextlib.suppress(OSError):
            write_json(note, {"files_sha256": facts[0], "files": facts[1]})
    return facts


def pins_from_spec(spec: Spec) -> SpecPins:
    """The spec's pins: what the pairing is built from and its statement signs."""
    core = spec.core
    src = core.source
    source: SdistPin | GitPin
    if src.kind == "sdist":
        source = SdistPin(src.index, src.filename, src.sha256)
    else:
        source = GitPin(src.url, src.tag, src.commit)
    build = spec.build
    plugin = spec.plugin
    return SpecPins(
        name=spec.name,
        core=CorePins(core.name, core.version, core.target_device, core.source_date_epoch, source),
        plugin=None if plugin is None else PluginTable(plugin.name, dict(plugin.raw)),
        runtime=None
        if spec.runtime is None
        else RuntimeTable(_runtime_pins(dict(spec.runtime.raw)), dict(spec.runtime.raw)),
        build=BuildPins(
            build.python, build.backend, build.base_image, build.torch, build.constraints
        ),
        api_approval=core.api_approval,
    )


def _iso(epoch: int) -> str:
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _core_source(source: dict[str, Any], file: str) -> dict[str, Any]:
    kind = source.get("kind")
    if kind == "git":
        return {
            "kind": "git",
            "url": _key(source, "url", file),
            "tag": source.get("tag"),
            "commit": _key(source, "commit", file),
        }
    if kind == "sdist":
        filename = _key(source, "filename", file)
        index = source.get("index")
        url = source.get("url") or (f"{index.rstrip('/')}/{filename}" if index else filename)
        return {
            "kind": "sdist",
            "url": url,
            "index": index,
            "filename": filename,
            "sha256": _key(source, "sha256", file),
        }
    raise BadInput(f"{file}: core.source.kind must be 'sdist' or 'git', got {kind!r}")


def _runtime(env: EnvRecord | None, pins: RuntimePins | None) -> dict[str, Any]:
    pinned_version = None if pins is None else pins.version
    pinned_commit = None if pins is None else pins.commit
    observed = None if env is None or not env.runtime.named else env.runtime
    name = (None if observed is None else observed.name) or (None if pins is None else pins.name)
    if pins is None and observed is None:
        status, note = "not-required", "the spec names no vendor runtime"
    elif env is None:
        status, note = "absent", "no env.json: the environment stage has not run"
    elif observed is None or observed.status != "present":
        status = "absent"
        why = None if observed is None else observed.reason
        note = f"absent on this runner ({env.runner})" + (f": {why}" if why else "")
    else:
        status, note = "present", f"present on the {env.runner} runner"
    found = observed if status == "present" else None  # what is read of a present one
    wheel = None if found is None else found.wheel
    return {
        "name": name,
        "status": status,
        **({"wheel": wheel.to_json()} if wheel is not None else {}),
        "version": None if found is None else found.version,
        "commit": None if found is None else (found.commit or pinned_commit),
        "pinned_version": pinned_version,
        "pinned_commit": pinned_commit,
        "note": note,
    }


def _core(records: Records, pins: SpecPins, memo: Path | None = None) -> dict[str, Any]:
    """The manifest's `core` section, from build-core.json and the core wheel."""
    bc, fc = records.build_core, BUILD_CORE
    core_wheel = describe_wheel(records.dist_dir, bc.wheel.filename, bc.wheel.sha256, fc, memo)
    build_env = bc.build_env
    assert build_env is not None  # build-core.json's, always read
    torch_file = build_env.torch_file
    return {
        "name": _recorded(bc.name, "core.name", fc),
        "version": _recorded(bc.version, "core.version", fc),
        "source": _core_source(dict(_recorded(bc.source, "core.source", fc)), fc),
        "target_device": _recorded(bc.target_device, "core.target_device", fc),
        "wheel": core_wheel,
        "reproducible": bc.reproducible,
        "isolated": bc.isolated,
        "build_env": {
            "lock_file": build_env.lock_file,
            "lock_sha256": build_env.lock_sha256,
            "torch": build_env.torch,
            # only when recorded (a build record of an older vpr has none)
            **({"torch_file": torch_file.to_json()} if torch_file is not None else {}),
            "core_declared_torch": build_env.core_declared_torch,
        },
        "python": _recorded(bc.python, "python", fc),
        **({"interpreter": bc.interpreter.to_json()} if bc.interpreter is not None else {}),
        "platform_tag": core_wheel["tags"]["platform"],
    }


def _entry_points(record: BuildRecord) -> dict[str, dict[str, str]]:
    return {
        group: dict(sorted(names.items())) for group, names in sorted(record.entry_points.items())
    }


def _part(dist_dir: Path, record: BuildRecord, role: str, memo: Path | None) -> dict[str, Any]:
    """The manifest's `plugin` or `guard` section, from its build record and its wheel."""
    file = BUILD_PLUGIN if role == "plugin" else BUILD_GUARD
    out: dict[str, Any] = {
        "name": _recorded(record.name, f"{role}.name", file),
        "version": _recorded(record.version, f"{role}.version", file),
    }
    if role == "plugin":
        out["repository"] = _recorded(record.repository, "plugin.repository", file)
        out["commit"] = record.commit
    out["wheel"] = describe_wheel(dist_dir, record.wheel.filename, record.wheel.sha256, file, memo)
    out["entry_points"] = _entry_points(record)
    out["reproducible"] = record.reproducible
    return out


def _container(build_core: BuildRecord) -> dict[str, Any] | None:
    backend = build_core.backend
    if backend is None or backend.kind != "docker":
        return None
    base = backend.base_image
    return {
        "base_image": base,
        "base_digest": base.split("@", 1)[1] if base and "@" in base else None,
        "image_id": backend.image_id,
    }


def _environment(env: EnvRecord | None) -> dict[str, Any]:
    if env is None:
        return {"status": "absent", "runner": None, "lock_file": None, "lock_sha256": None}
    return {
        "status": "present",
        "runner": env.runner,
        "lock_file": env.lock_file,
        "lock_sha256": env.lock_sha256,
    }


def pairing_id_of(spec: Spec, core: BuildRecord, plugin: BuildRecord) -> str:
    """The pairing id `build_manifest` gives these records (and the spec's runtime pins,
    as `pins_from_spec` takes them), without reading the wheels (the scorecard names it
    before the manifest exists); BadInput naming the record's key that is missing."""
    fc = BUILD_CORE
    source = _recorded(core.source, "core.source", fc)
    sections = {  # read in this order: the first key missing is the one named
        "name": _recorded(core.name, "core.name", fc),
        "version": _recorded(core.version, "core.version", fc),
        "target_device": _recorded(core.target_device, "core.target_device", fc),
        "source": _core_source(dict(source), fc),
    }
    named = {"name": _recorded(plugin.name, "plugin.name", BUILD_PLUGIN), "commit": plugin.commit}
    sections["python"] = _recorded(core.python, "python", fc)
    runtime = _runtime_pins(dict(spec.runtime.raw) if spec.runtime else None)
    return key_of(_pairing_inputs(sections, named, runtime).to_json())


def _runtime_pins(pins: dict[str, Any] | None) -> RuntimePins | None:
    """The runtime pins a pairing id holds, read from the spec's `[runtime]` as written."""
    if not pins:
        return None
    return RuntimePins(
        pins.get("name"), pins.get("package"), pins.get("version"), pins.get("commit")
    )


def _pairing_inputs(
    core: dict[str, Any], plugin: dict[str, Any], runtime_pins: RuntimePins | None
) -> PairingInputs:
    """What identifies the pairing of the manifest's `core` and `plugin` sections (of the
    source, its git commit or its sdist's sha256)."""
    source = core["source"]
    return PairingInputs(
        core_name=core["name"],
        core_version=core["version"],
        target_device=core["target_device"],
        source=SourcePin(source.get("kind"), source.get("commit"), source.get("sha256")),
        plugin_name=plugin["name"],
        plugin_commit=plugin["commit"],
        runtime=runtime_pins,
        python=".".join(core["python"].split(".")[:2]),
    )


def build_manifest(
    pins: SpecPins,
    records: Records,
    *,
    pipeline_version: str | None = None,
    wheel_memo: Path | None = None,
) -> dict[str, Any]:
    """The manifest for one pairing, as plain data (validated against the schema)."""
    if pipeline_version is None:
        from vllm_plugin_release import __version__ as pipeline_version
    sde = records.build_core.source_date_epoch
    if sde is None:
        sde = pins.core.source_date_epoch
    core = _core(records, pins, wheel_memo)
    plugin = _part(records.dist_dir, records.build_plugin, "plugin", wheel_memo)
    container = _container(records.build_core)
    environment = _environment(records.env)
    runtime_pins = None if pins.runtime is None else pins.runtime.pins
    inputs = _pairing_inputs(core, plugin, runtime_pins).to_json()
    approval = pins.api_approval
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "name": pins.name or records.dist_dir.name,
        "pairing_id": key_of(inputs),
        "pairing_inputs": inputs,
        # The vLLM source date (SOURCE_DATE_EPOCH), never the certification time: that is
        # not deterministic and lives in run.json and the store entry.
        "source_date": _iso(sde),
        "source_date_epoch": sde,
        "pipeline": {"name": "vllm-plugin-release", "version": pipeline_version},
        "core": core,
        "plugin": plugin,
        "runtime": _runtime(records.env, runtime_pins),
        "container": container,
        "environment": environment,
        "conformance": conformance(records.scorecard),
        "guard": None
        if records.build_guard is None
        else _part(records.dist_dir, records.build_guard, "guard", wheel_memo),
        # the platform class vLLM resolved in the pairing environment (never the stand-in
        # overlay's, a test double's), and the runner; None without env.json
        "platform": None
        if records.env is None
        else {
            "resolved": records.env.platform,
            "runner": records.env.runner,
        },
        "api_approval": None if approval is None else approval.as_json(),
    }
    validate(manifest, str(records.dist_dir / MANIFEST_FILE))
    return manifest


@dataclass(frozen=True)
class Built:
    manifest: Manifest  # as written (its `raw` is the object signed)
    manifest_path: Path
    statement_path: Path
    run_path: Path
    key_path: Path
    public_key_path: Path
    keyid: str
    key_created: bool


def _write_if_changed(path: Path, data: bytes) -> None:
    from vllm_plugin_release.core.cache import atomic_write_bytes

    if path.exists() and path.read_bytes() == data:
        return
    atomic_write_bytes(path, data)


def write_signed(
    dist_dir: Path, manifest: dict[str, Any], pins: SpecPins, key_path: Path
) -> tuple[Path, Path, str]:
    """Write manifest.json and the signed manifest.intoto.jsonl; returns (paths..., keyid)."""
    key = keys.load_private_key(key_path)
    manifest_path = dist_dir / MANIFEST_FILE
    statement_path = dist_dir / STATEMENT_FILE
    typed = parse(manifest, str(manifest_path))
    data = file_bytes(typed)
    signed = attest.sign_pairing(
        typed, data, pins, key, builder_id=keys.builder_id(), invocation_id=keys.invocation_id()
    )
    _write_if_changed(manifest_path, data)
    _write_if_changed(statement_path, signed)
    return manifest_path, statement_path, attest.keyid(key.public_key())


def _run_facts(started: float, finished: float, signing_key: dict[str, str]) -> dict[str, Any]:
    """What run.json records about this run (host, wall times: never in the manifest)."""
    from vllm_plugin_release import __version__

    return {
        **runner.host_facts().to_json(),
        "started": _iso(int(started)),
        "finished": _iso(int(finished)),
        "seconds": round(finished - started, 3),
        "pipeline_version": __version__,
        "builder_id": keys.builder_id(),
        "signing_key": signing_key,
    }


def build_for_spec(
    spec: Spec,
    *,
    signing_key: str | Path | None = None,
    dist_root: Path | str = "dist",
    cache: Cache,
) -> Built:
    """Read dist/NAME/'s stage records, write manifest.json, the signed statement, run.json."""
    import time

    from vllm_plugin_release import __version__

    started = time.time()
    dist = Path(dist_root) / spec.name  # relative to the working folder, as for build-core
    key_path, origin = keys.resolve_key_path(
        signing_key, spec.publish.signing_key, root=spec.root, cache_root=cache.root
    )
    records = read_records(dist, str(spec.path))
    pins = pins_from_spec(spec)
    manifest = build_manifest(
        pins, records, pipeline_version=__version__, wheel_memo=cache.root / "stages" / WHEEL_FACTS
    )
    created = keys.ensure_key(key_path, origin)
    manifest_path, statement_path, kid = write_signed(dist, manifest, pins, key_path)
    finished = time.time()
    key_facts = {"path": str(key_path), "origin": origin, "keyid": kid}
    run_path = dist / RUN_FILE  # the other sections kept as written
    write_json(
        run_path, {**run_file(dist).raw, "manifest": _run_facts(started, finished, key_facts)}
    )
    return Built(
        manifest=parse(manifest, str(manifest_path)),
        manifest_path=manifest_path,
        statement_path=statement_path,
        run_path=run_path,
        key_path=key_path,
        public_key_path=keys.public_path(key_path),
        keyid=kid,
        key_created=created,
    )
