"""The pairing manifest: one deterministic JSON document per core/plugin pairing.

`build_manifest(pins, records, dist_dir)` is pure apart from reading the wheels it
describes: the same stage records, pins and wheels give the same bytes
(`manifest_bytes`). Wall-clock and host data go to `run.json` instead.

Stage records read from dist/NAME/ (written by earlier stages):
  build-core.json    required  (`vpr build-core`)
  build-plugin.json  required  (`vpr build-plugin`)
  env.json           optional  (`vpr env`)      -> environment/runtime say "absent"
  scorecard.json     optional  (`vpr conform`)  -> conformance says "absent"
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any

from vllm_plugin_release.core.cache import key_of, sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed

SCHEMA_VERSION = 1
KIND = "vllm-plugin-release/manifest"
MANIFEST_FILE = "manifest.json"
STATEMENT_FILE = "manifest.intoto.jsonl"
RUN_FILE = "run.json"
EVIDENCE_KEPT = 5  # evidence items per check copied into the manifest (the scorecard has all)

# Which command writes each stage record (named in the error when one is missing).
RECORD_PRODUCERS: dict[str, str] = {
    "build-core.json": "vpr build-core --spec SPEC",
    "build-plugin.json": "vpr build-plugin --spec SPEC",
    "env.json": "vpr env --spec SPEC",
    "scorecard.json": "vpr conform --spec SPEC",
}
REQUIRED_RECORDS = ("build-core.json", "build-plugin.json")
OPTIONAL_RECORDS = ("env.json", "scorecard.json")


# ---------------------------------------------------------------------------
# Schema


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The manifest JSON Schema shipped in the package."""
    from importlib.resources import files

    text = files("vllm_plugin_release").joinpath("schemas/manifest.schema.json").read_text()
    return json.loads(text)


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=False) + "\n"


def check_schema_version(data: Any, where: str) -> None:
    """Refuse, in words, a document from a newer (or no) schema_version before validating it."""
    if not isinstance(data, dict):
        raise BadInput(f"{where}: not a manifest (expected a JSON object)")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise BadInput(
            f"{where}: key 'schema_version' is missing or not an integer ({version!r})",
            hint="this is not a manifest written by `vpr manifest build`",
        )
    if version > SCHEMA_VERSION:
        raise BadInput(
            f"{where}: manifest schema_version {version} is newer than this vpr understands "
            f"(it reads schema_version {SCHEMA_VERSION})",
            hint="upgrade vllm-plugin-release (pip install -U vllm-plugin-release)",
        )
    if version < 1:
        raise BadInput(f"{where}: schema_version {version} is not a valid manifest version")


def validate(data: Any, where: str) -> None:
    """Validate a manifest against the shipped schema; BadInput naming each bad key."""
    from jsonschema import Draft202012Validator, FormatChecker

    check_schema_version(data, where)
    validator = Draft202012Validator(schema(), format_checker=FormatChecker())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = []
        for error in errors[:20]:
            key = ".".join(str(p) for p in error.absolute_path) or "(top level)"
            lines.append(f"{where}: {key}: {error.message}")
        raise BadInput(
            "manifest does not match its schema:\n  " + "\n  ".join(lines),
            hint="`vpr manifest schema` prints the schema; rebuild with `vpr manifest build`",
        )


def load(path: Path) -> dict[str, Any]:
    """Read and validate a manifest file."""
    data = read_json(path, what="manifest")
    validate(data, str(path))
    return data


def read_json(path: Path, *, what: str = "record") -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: {what} not found")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"{path}: cannot read {what}: {exc}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}:{exc.colno}: malformed JSON in {what}: {exc.msg}")


# ---------------------------------------------------------------------------
# Stage records


@dataclass(frozen=True)
class Records:
    """The stage records of one pairing (plain JSON data), and where they came from."""

    dist_dir: Path
    build_core: dict[str, Any]
    build_plugin: dict[str, Any]
    env: dict[str, Any] | None = None
    scorecard: dict[str, Any] | None = None


def read_records(dist_dir: Path, spec_path: str | None = None) -> Records:
    """Read the stage records in `dist_dir`; exit 2 naming a missing required one."""
    found: dict[str, Any] = {}
    for name in (*REQUIRED_RECORDS, *OPTIONAL_RECORDS):
        path = dist_dir / name
        if not path.exists():
            if name in REQUIRED_RECORDS:
                producer = RECORD_PRODUCERS[name].replace("SPEC", spec_path or "FILE")
                raise BadInput(
                    f"{path}: required stage record {name} is missing",
                    hint=f"run `{producer}` first (it writes {name})",
                )
            found[name] = None
            continue
        data = read_json(path)
        if not isinstance(data, dict):
            raise BadInput(f"{path}: expected a JSON object")
        found[name] = data
    return Records(
        dist_dir=dist_dir,
        build_core=found["build-core.json"],
        build_plugin=found["build-plugin.json"],
        env=found["env.json"],
        scorecard=found["scorecard.json"],
    )


def _get(record: dict[str, Any], dotted: str, file: str, *, required: bool = True) -> Any:
    node: Any = record
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            if not required:
                return None
            producer = RECORD_PRODUCERS.get(file, "the stage that writes it")
            raise BadInput(
                f"{file}: missing key {dotted!r}",
                hint=f"the record is incomplete or from another version; re-run `{producer}`",
            )
        node = node[part]
    return node


# ---------------------------------------------------------------------------
# Wheels


def _record_hash_b64(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def installed_path(wheel_path: str) -> str | None:
    """Where an installer puts a wheel entry, relative to site-packages; None if not covered.

    Covered: files installed unchanged under site-packages. Not covered: the
    .dist-info folder (installers rewrite RECORD, add INSTALLER ...), scripts,
    headers and data files, and byte-code caches.
    """
    parts = PurePosixPath(wheel_path).parts
    if not parts or ".." in parts or "__pycache__" in parts:
        return None
    top = parts[0]
    if top.endswith(".dist-info"):
        return None
    if top.endswith(".data"):
        if len(parts) > 2 and parts[1] in ("purelib", "platlib"):
            return "/".join(parts[2:])
        return None
    return "/".join(parts)


def files_digest(entries: dict[str, str]) -> str:
    """sha256 over sorted `path,hash` lines (hash as RECORD writes it: sha256=<b64>)."""
    text = "".join(f"{path},{entries[path]}\n" for path in sorted(entries))
    return hashlib.sha256(text.encode()).hexdigest()


def parse_record(text: str) -> dict[str, str]:
    """RECORD (csv) -> {path: 'sha256=...'} for the rows that carry a sha256 hash."""
    import csv
    import io

    out: dict[str, str] = {}
    for row in csv.reader(io.StringIO(text)):
        if len(row) >= 2 and row[1].startswith("sha256="):
            out[row[0]] = row[1]
    return out


def wheel_version(path: Path) -> str:
    """The Version field of a wheel's METADATA (what an installer reports)."""
    from email.parser import HeaderParser

    try:
        with zipfile.ZipFile(path) as zf:
            names = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            if len(names) != 1:
                raise GateFailed(f"{path}: expected one .dist-info/METADATA, found {len(names)}")
            headers = HeaderParser().parsestr(zf.read(names[0]).decode("utf-8"))
    except (zipfile.BadZipFile, OSError, UnicodeDecodeError) as exc:
        raise GateFailed(f"{path}: not a readable wheel ({exc})", hint="rebuild the wheel")
    version = headers.get("Version")
    if not version:
        raise GateFailed(f"{path}: METADATA has no Version")
    return str(version)


def wheel_files(path: Path) -> dict[str, str]:
    """The covered files of a wheel, {installed path: 'sha256=...'}, checked against its RECORD.

    Raises GateFailed if the wheel's RECORD does not match its contents.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            records = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
            if len(records) != 1:
                raise GateFailed(f"{path}: expected one .dist-info/RECORD, found {len(records)}")
            recorded = parse_record(zf.read(records[0]).decode("utf-8"))
            out: dict[str, str] = {}
            for info in zf.infolist():
                if info.is_dir() or info.filename == records[0]:
                    continue
                actual = _record_hash_b64(zf.read(info))
                want = recorded.get(info.filename)
                if want is None:
                    raise GateFailed(f"{path}: {info.filename} is not listed in the wheel's RECORD")
                if want != actual:
                    raise GateFailed(
                        f"{path}: {info.filename} does not match the wheel's RECORD "
                        f"({want} recorded, {actual} in the archive)",
                        hint="the wheel is corrupt; rebuild it",
                    )
                target = installed_path(info.filename)
                if target is not None:
                    out[target] = actual
            return out
    except (zipfile.BadZipFile, OSError, KeyError) as exc:
        raise GateFailed(f"{path}: not a readable wheel ({exc})", hint="rebuild the wheel")


def wheel_tags(filename: str) -> dict[str, str]:
    parts = filename[: -len(".whl")].split("-")
    if len(parts) < 5:
        raise BadInput(f"{filename}: not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)")
    python, abi, platform = parts[-3:]
    return {"python": python, "abi": abi, "platform": platform}


def describe_wheel(dist_dir: Path, filename: str, sha256: str, record_file: str) -> dict[str, Any]:
    """Facts about a wheel in dist_dir, after checking its sha256 against the stage record."""
    path = dist_dir / filename
    if not path.is_file():
        raise BadInput(
            f"{path}: wheel named in {record_file} is missing",
            hint=f"re-run `{RECORD_PRODUCERS[record_file].replace('SPEC', 'FILE')}`",
        )
    actual = sha256_file(path)
    if actual != sha256:
        raise GateFailed(
            f"{path}: sha256 {actual} differs from {record_file} wheel.sha256 {sha256}",
            hint="the wheel changed after it was built; rebuild it",
        )
    files = wheel_files(path)
    return {
        "filename": filename,
        "sha256": actual,
        "version": wheel_version(path),
        "size": path.stat().st_size,
        "files_sha256": files_digest(files),
        "files": len(files),
        "tags": wheel_tags(filename),
    }


# ---------------------------------------------------------------------------
# Pins and pairing id


def pins_from_spec(spec: Any) -> dict[str, Any]:
    """The spec's pins (plain data): what the pairing was asked to be built from."""
    core = spec.core
    src = core.source
    if src.kind == "sdist":
        source = {
            "kind": "sdist",
            "index": src.index,
            "filename": src.filename,
            "sha256": src.sha256,
        }
    else:
        source = {"kind": "git", "url": src.url, "tag": src.tag, "commit": src.commit}
    return {
        "name": spec.name,
        "core": {
            "name": core.name,
            "version": core.version,
            "target_device": core.target_device,
            "source_date_epoch": core.source_date_epoch,
            "source": source,
        },
        "plugin": dict(spec.plugin),
        "runtime": dict(spec.runtime) or None,
        "build": {
            "python": spec.build.python,
            "backend": spec.build.backend,
            "base_image": spec.build.base_image,
            "torch": spec.build.torch,
            "constraints": spec.build.constraints,
        },
    }


def _source_pin(source: dict[str, Any]) -> dict[str, Any]:
    if source.get("kind") == "git":
        return {"kind": "git", "commit": source.get("commit")}
    return {"kind": "sdist", "sha256": source.get("sha256")}


def pairing_inputs(
    manifest_core: dict[str, Any],
    plugin: dict[str, Any],
    runtime_pins: dict[str, Any] | None,
    python: str,
) -> dict[str, Any]:
    runtime = None
    if runtime_pins:
        runtime = {k: runtime_pins.get(k) for k in ("name", "package", "version", "commit")}
    return {
        "core": {
            "name": manifest_core["name"],
            "version": manifest_core["version"],
            "target_device": manifest_core["target_device"],
            "source": _source_pin(manifest_core["source"]),
        },
        "plugin": {"name": plugin["name"], "commit": plugin["commit"]},
        "runtime": runtime,
        "python": python,
    }


# ---------------------------------------------------------------------------
# Building


def _iso(epoch: int) -> str:
    return _dt.datetime.fromtimestamp(epoch, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _core_source(source: dict[str, Any], file: str) -> dict[str, Any]:
    kind = source.get("kind")
    if kind == "git":
        return {
            "kind": "git",
            "url": _get(source, "url", file),
            "tag": source.get("tag"),
            "commit": _get(source, "commit", file),
        }
    if kind == "sdist":
        filename = _get(source, "filename", file)
        index = source.get("index")
        url = source.get("url") or (f"{index.rstrip('/')}/{filename}" if index else filename)
        return {
            "kind": "sdist",
            "url": url,
            "index": index,
            "filename": filename,
            "sha256": _get(source, "sha256", file),
        }
    raise BadInput(f"{file}: core.source.kind must be 'sdist' or 'git', got {kind!r}")


def _runtime(env: dict[str, Any] | None, pins: dict[str, Any] | None) -> dict[str, Any]:
    pinned_version = (pins or {}).get("version")
    pinned_commit = (pins or {}).get("commit")
    observed = (env or {}).get("runtime") or None
    if not pins and not observed:
        return {
            "name": None,
            "status": "not-required",
            "version": None,
            "commit": None,
            "pinned_version": None,
            "pinned_commit": None,
            "note": "the spec names no vendor runtime",
        }
    name = (observed or {}).get("name") or (pins or {}).get("name")
    if env is None:
        status, note = "absent", "no env.json: the environment stage has not run"
    elif not observed or observed.get("status") != "present":
        status = "absent"
        note = f"absent on this runner ({env.get('runner', 'unknown')})"
    else:
        status, note = "present", f"present on the {env.get('runner', 'unknown')} runner"
    return {
        "name": name,
        "status": status,
        "version": (observed or {}).get("version") if status == "present" else None,
        "commit": ((observed or {}).get("commit") or pinned_commit)
        if status == "present"
        else None,
        "pinned_version": pinned_version,
        "pinned_commit": pinned_commit,
        "note": note,
    }


def _conformance(scorecard: dict[str, Any] | None) -> dict[str, Any]:
    if scorecard is None:
        return {"status": "absent", "verdict": None, "runner": None, "checks": {}, "deferred": []}
    file = "scorecard.json"
    verdict = _get(scorecard, "verdict", file)
    if verdict not in ("fleet", "pilot", "lab"):
        raise BadInput(f"{file}: verdict must be fleet, pilot or lab, got {verdict!r}")
    checks_in = _get(scorecard, "checks", file)
    if not isinstance(checks_in, dict):
        raise BadInput(f"{file}: 'checks' must be an object of check name -> result")
    checks: dict[str, Any] = {}
    deferred = []
    for name in sorted(checks_in):
        result = checks_in[name]
        status = _get(result, "status", f"{file}: checks.{name}")
        summary = str(result.get("summary", ""))
        evidence_in = result.get("evidence") or []
        evidence = []
        for item in evidence_in[:EVIDENCE_KEPT]:
            if isinstance(item, dict):
                kept = {
                    k: item[k]
                    for k in ("note", "file", "line", "source")
                    if item.get(k) is not None
                }
                kept["note"] = str(kept.get("note", ""))
                if "line" in kept and not isinstance(kept["line"], int):
                    kept.pop("line")
                for k in ("file", "source"):
                    if k in kept:
                        kept[k] = str(kept[k])
                evidence.append(kept)
            else:
                evidence.append({"note": str(item)})
        checks[name] = {
            "status": status,
            "summary": summary,
            "evidence": evidence,
            "evidence_count": len(evidence_in),
        }
        if status == "deferred":
            deferred.append({"check": name, "reason": summary})
    # A verdict that contradicts its own checks is a gate failure, never recorded as is.
    statuses = {c["status"] for c in checks.values()}
    if verdict == "fleet" and statuses - {"pass", "warn"}:
        bad = sorted(n for n, c in checks.items() if c["status"] not in ("pass", "warn"))
        raise GateFailed(
            f"{file}: verdict 'fleet' but checks {', '.join(bad)} did not pass",
            hint="fleet needs every check passed, hardware included; re-run `vpr conform`",
        )
    if verdict == "pilot" and "fail" in statuses:
        bad = sorted(n for n, c in checks.items() if c["status"] == "fail")
        raise GateFailed(f"{file}: verdict 'pilot' but checks {', '.join(bad)} failed")
    return {
        "status": "present",
        "verdict": verdict,
        "runner": scorecard.get("runner"),
        "checks": checks,
        "deferred": deferred,
    }


def build_manifest(
    pins: dict[str, Any], records: Records, *, pipeline_version: str | None = None
) -> dict[str, Any]:
    """The manifest for one pairing, as plain data (validated against the schema)."""
    if pipeline_version is None:
        from vllm_plugin_release import __version__ as pipeline_version
    bc, bp = records.build_core, records.build_plugin
    fc, fp = "build-core.json", "build-plugin.json"
    core_in = _get(bc, "core", fc)
    sde = core_in.get("source_date_epoch", pins.get("core", {}).get("source_date_epoch"))
    if not isinstance(sde, int):
        raise BadInput(f"{fc}: core.source_date_epoch must be an integer, got {sde!r}")
    core_wheel = describe_wheel(
        records.dist_dir, _get(bc, "wheel.filename", fc), _get(bc, "wheel.sha256", fc), fc
    )
    build_env = bc.get("build_env") or {}
    python = str(_get(bc, "python", fc))
    core = {
        "name": _get(core_in, "name", fc),
        "version": str(_get(core_in, "version", fc)),
        "source": _core_source(_get(core_in, "source", fc), fc),
        "target_device": _get(core_in, "target_device", fc),
        "wheel": core_wheel,
        "reproducible": bc.get("reproducible"),
        "isolated": bc.get("isolated"),
        "build_env": {
            "lock_file": build_env.get("lock_file"),
            "lock_sha256": build_env.get("lock_sha256"),
            "torch": build_env.get("torch"),
            "core_declared_torch": build_env.get("core_declared_torch"),
        },
        "python": python,
        "platform_tag": core_wheel["tags"]["platform"],
    }
    plugin_in = _get(bp, "plugin", fp)
    plugin_wheel = describe_wheel(
        records.dist_dir, _get(bp, "wheel.filename", fp), _get(bp, "wheel.sha256", fp), fp
    )
    entry_points = bp.get("entry_points") or {}
    plugin = {
        "name": _get(plugin_in, "name", fp),
        "version": str(_get(plugin_in, "version", fp)),
        "repository": str(_get(plugin_in, "repository", fp)),
        "commit": plugin_in.get("commit"),
        "wheel": plugin_wheel,
        "entry_points": {
            str(g): {str(k): str(v) for k, v in sorted(eps.items())}
            for g, eps in sorted(entry_points.items())
        },
        "reproducible": bp.get("reproducible"),
    }
    backend = bc.get("backend") or {}
    container = None
    if backend.get("kind") == "docker":
        base = backend.get("base_image")
        container = {
            "base_image": base,
            "base_digest": base.split("@", 1)[1] if base and "@" in base else None,
            "image_id": backend.get("image_id"),
        }
    env = records.env
    environment = (
        {"status": "absent", "runner": None, "lock_file": None, "lock_sha256": None}
        if env is None
        else {
            "status": "present",
            "runner": env.get("runner"),
            "lock_file": env.get("lock_file"),
            "lock_sha256": env.get("lock_sha256"),
        }
    )
    runtime_pins = pins.get("runtime")
    inputs = pairing_inputs(core, plugin, runtime_pins, ".".join(python.split(".")[:2]))
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "name": pins.get("name") or records.dist_dir.name,
        "pairing_id": key_of(inputs),
        "pairing_inputs": inputs,
        "created": _iso(sde),
        "source_date_epoch": sde,
        "pipeline": {"name": "vllm-plugin-release", "version": pipeline_version},
        "core": core,
        "plugin": plugin,
        "runtime": _runtime(env, runtime_pins),
        "container": container,
        "environment": environment,
        "conformance": _conformance(records.scorecard),
    }
    validate(manifest, str(records.dist_dir / MANIFEST_FILE))
    return manifest


def manifest_bytes(manifest: dict[str, Any]) -> bytes:
    """The canonical on-disk form: sorted keys, 2-space indent, trailing newline."""
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def manifest_digest(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(manifest_bytes(manifest)).hexdigest()


def summary_line(manifest: dict[str, Any]) -> str:
    c, p = manifest["core"], manifest["plugin"]
    verdict = manifest["conformance"]["verdict"] or "no conformance"
    commit = (p.get("commit") or "no-commit")[:12]
    return f"{c['name']} {c['version']} + {p['name']} {p['version']} @ {commit}: {verdict}"


# ---------------------------------------------------------------------------
# Writing dist/NAME/ (what `vpr manifest build` and the release pipeline call)


@dataclass(frozen=True)
class Built:
    manifest: dict[str, Any]
    manifest_path: Path
    statement_path: Path
    run_path: Path
    key_path: Path
    public_key_path: Path
    keyid: str
    key_created: bool


def dist_dir_for(spec: Any, dist_root: Path | str = "dist") -> Path:
    """dist/NAME/ (the `--dist` root is relative to the working folder, as for build-core)."""
    return Path(dist_root) / spec.name


def _write_if_changed(path: Path, data: bytes) -> None:
    from vllm_plugin_release.core.cache import atomic_write_bytes

    if path.exists() and path.read_bytes() == data:
        return
    atomic_write_bytes(path, data)


def write_signed(
    dist_dir: Path, manifest: dict[str, Any], pins: dict[str, Any], key_path: Path
) -> tuple[Path, Path, str]:
    """Write manifest.json and the signed manifest.intoto.jsonl; returns (paths..., keyid)."""
    from vllm_plugin_release.stages import signing

    key = signing.load_private_key(key_path)
    data = manifest_bytes(manifest)
    statement = signing.build_statement(manifest, hashlib.sha256(data).hexdigest(), pins)
    envelope = signing.sign_statement(statement, key)
    manifest_path = dist_dir / MANIFEST_FILE
    statement_path = dist_dir / STATEMENT_FILE
    _write_if_changed(manifest_path, data)
    _write_if_changed(statement_path, signing.envelope_bytes(envelope))
    return manifest_path, statement_path, signing.keyid(key.public_key())


def update_run_record(dist_dir: Path, section: str, data: dict[str, Any]) -> Path:
    """Merge run-specific data (host, wall times) into dist/NAME/run.json under `section`."""
    from vllm_plugin_release.core.cache import write_json

    path = dist_dir / RUN_FILE
    current: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            current = loaded if isinstance(loaded, dict) else {}
        except (OSError, json.JSONDecodeError):
            current = {}
    current[section] = data
    write_json(path, current)
    return path


def build_for_spec(
    spec: Any,
    *,
    signing_key: str | Path | None = None,
    dist_root: Path | str = "dist",
    cache: Any = None,
) -> Built:
    """Read dist/NAME/'s stage records, write manifest.json, the signed statement, run.json."""
    import os
    import platform
    import socket
    import sys
    import time

    from vllm_plugin_release import __version__
    from vllm_plugin_release.core.cache import Cache
    from vllm_plugin_release.stages import signing

    started = time.time()
    dist = dist_dir_for(spec, dist_root)
    cache = cache or Cache.from_env()
    key_path, origin = signing.resolve_key_path(
        signing_key, spec.publish.get("signing_key"), root=spec.root, cache_root=cache.root
    )
    records = read_records(dist, str(spec.path))
    pins = pins_from_spec(spec)
    manifest = build_manifest(pins, records, pipeline_version=__version__)
    created = signing.ensure_key(key_path, origin)
    manifest_path, statement_path, kid = write_signed(dist, manifest, pins, key_path)
    finished = time.time()
    run_path = update_run_record(
        dist,
        "manifest",
        {
            "host": socket.gethostname(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "pid": os.getpid(),
            "started": _iso(int(started)),
            "finished": _iso(int(finished)),
            "seconds": round(finished - started, 3),
            "pipeline_version": __version__,
            "builder_id": signing.builder_id(),
            "signing_key": {"path": str(key_path), "origin": origin, "keyid": kid},
        },
    )
    return Built(
        manifest=manifest,
        manifest_path=manifest_path,
        statement_path=statement_path,
        run_path=run_path,
        key_path=key_path,
        public_key_path=signing.public_path(key_path),
        keyid=kid,
        key_created=created,
    )


# ---------------------------------------------------------------------------
# Does an installed environment match a manifest? (`vpr manifest check-env`)

# Runs inside the environment being checked: standard library only, Python 3.8+.
_PROBE = r"""
import base64, csv, hashlib, json, sys
import importlib.metadata as md
out = {}
for name in json.loads(sys.argv[1]):
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        out[name] = None
        continue
    entries, bad = {}, []
    for row in csv.reader((d.read_text("RECORD") or "").splitlines()):
        if len(row) < 2 or not row[1].startswith("sha256="):
            continue
        try:
            with open(d.locate_file(row[0]), "rb") as f:
                data = f.read()
        except OSError:
            bad.append([row[0], "missing"])
            continue
        got = "sha256=" + base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if got != row[1]:
            bad.append([row[0], "modified"])
        entries[row[0]] = got  # what is on disk, not what RECORD claims
    eps = {}
    for ep in d.entry_points:
        eps.setdefault(ep.group, {})[ep.name] = ep.value
    direct = d.read_text("direct_url.json")
    out[name] = {"version": d.version, "record": entries, "bad": bad, "entry_points": eps,
                 "direct_url": json.loads(direct) if direct else None,
                 "location": str(d.locate_file(""))}
print(json.dumps(out))
"""


def probe_environment(python: Path | str, names: list[str]) -> dict[str, Any]:
    """Installed version, RECORD (verified against the files) and entry points per name."""
    import subprocess

    from vllm_plugin_release.core.errors import OutsideFailure

    python = Path(python)
    if not python.exists():
        raise BadInput(f"--python {python}: interpreter not found")
    try:
        done = subprocess.run(
            [str(python), "-I", "-c", _PROBE, json.dumps(names)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OutsideFailure(f"--python {python}: could not run it ({exc})")
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise BadInput(
            f"--python {python}: the environment probe failed:\n{tail}",
            hint="pass the python of a virtual environment (Python >= 3.8)",
        )
    return json.loads(done.stdout)


def installed_files(record: dict[str, str]) -> dict[str, str]:
    """The covered subset of an installed RECORD (same rule as `installed_path`)."""
    out = {}
    for path, digest in record.items():
        parts = PurePosixPath(path).parts
        if (
            not parts
            or path.startswith("/")
            or ".." in parts
            or "__pycache__" in parts
            or parts[0].endswith(".dist-info")
        ):
            continue
        out["/".join(parts)] = digest
    return out


def _same_version(a: str, b: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def check_environment(
    manifest: dict[str, Any], python: Path | str, wheels_dir: Path | None = None
) -> list[str]:
    """Every way the environment differs from the manifest (empty list: it matches)."""
    parts = {"core": manifest["core"], "plugin": manifest["plugin"]}
    found = probe_environment(python, [p["name"] for p in parts.values()])
    mismatches: list[str] = []
    for role, want in parts.items():
        name = want["name"]
        got = found.get(name)
        if got is None:
            mismatches.append(
                f"{role} {name}: not installed (manifest: {want['wheel']['version']})"
            )
            continue
        where = f"{role} {name} ({got['location']})"
        if not _same_version(got["version"], want["wheel"]["version"]):
            mismatches.append(
                f"{where}: version {got['version']}, manifest {want['wheel']['version']}"
            )
        for path, problem in got["bad"]:
            mismatches.append(f"{where}: {path} {problem} since installation (RECORD hash)")
        wheel = want["wheel"]
        archive = (got.get("direct_url") or {}).get("archive_info") or {}
        hashes = dict(archive.get("hashes") or {})
        if "hash" in archive and "=" in archive["hash"]:
            algo, value = archive["hash"].split("=", 1)
            hashes.setdefault(algo, value)
        if "sha256" in hashes and hashes["sha256"] != wheel["sha256"]:
            mismatches.append(
                f"{where}: installed from a wheel with sha256 {hashes['sha256']}, "
                f"manifest {wheel['sha256']}"
            )
        files = installed_files(got["record"])
        if files_digest(files) != wheel["files_sha256"]:
            detail = _file_differences(files, wheels_dir, wheel)
            mismatches.append(
                f"{where}: installed files differ from the certified wheel {wheel['filename']}"
                + (
                    ":\n    " + "\n    ".join(detail)
                    if detail
                    else f" ({len(files)} files installed, {wheel['files']} in the wheel; pass "
                    "--wheels DIR holding the wheel for a file-by-file list)"
                )
            )
        if role == "plugin":
            for group, eps in sorted(want.get("entry_points", {}).items()):
                have = got["entry_points"].get(group, {})
                for ep_name, value in sorted(eps.items()):
                    if have.get(ep_name) != value:
                        mismatches.append(
                            f"{where}: entry point [{group}] {ep_name} = "
                            f"{have.get(ep_name)!r}, manifest {value!r}"
                        )
    return mismatches


def _file_differences(
    files: dict[str, str], wheels_dir: Path | None, wheel: dict[str, Any], limit: int = 20
) -> list[str]:
    if wheels_dir is None:
        return []
    path = wheels_dir / wheel["filename"]
    if not path.is_file() or sha256_file(path) != wheel["sha256"]:
        return []
    expected = wheel_files(path)
    lines = []
    for p in sorted(set(expected) | set(files)):
        if p not in files:
            lines.append(f"{p}: missing from the installation")
        elif p not in expected:
            lines.append(f"{p}: installed but not in the certified wheel")
        elif files[p] != expected[p]:
            lines.append(f"{p}: installed {files[p]}, certified wheel {expected[p]}")
    if len(lines) > limit:
        lines = [*lines[:limit], f"... and {len(lines) - limit} more"]
    return lines
