"""A pairing without building one: real wheels written with zipfile and a proper RECORD,
the stage records, a buildspec, and the CLI run from a scratch project folder.

Shared by the manifest, signing, store and publish tests.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

from tests.support import REPO
from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.core import manifestmodel as mm
from vllm_plugin_release.core.attest import (
    BuildPins,
    CorePins,
    PluginTable,
    RuntimeTable,
    SdistPin,
    SpecPins,
)
from vllm_plugin_release.core.cache import key_of, sha256_file
from vllm_plugin_release.core.manifestdoc import RuntimePins
from vllm_plugin_release.stages import manifest as mf

SRC = REPO / "src"
SDIST_SHA = "ab" * 32
PLUGIN_COMMIT = "c0ffee" + "0" * 34
SDE = 1760000000
# The one pin of the tests' pairing lock: a distribution every venv can hold (the install
# tests make the wheel it names).
LOCK_PIN = "vpr-test-dep==1.0"


def b64_digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(
    folder: Path,
    name: str,
    version: str,
    files: dict[str, str],
    *,
    entry_points: dict[str, dict[str, str]] | None = None,
    tag: str = "py3-none-any",
) -> Path:
    """A real, installable wheel with METADATA (markdown description), WHEEL and RECORD."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    metadata = (
        "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n"
        f"Summary: test distribution {name}\n"
        "Description-Content-Type: text/markdown\n\n"
        f"# {name}\n\nA small distribution written by the vpr tests.\n"
    )
    members: dict[str, bytes] = {p: c.encode() for p, c in files.items()}
    members[f"{info}/METADATA"] = metadata.encode()
    members[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: vpr-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    ).encode()
    if entry_points:
        text = ""
        for group, eps in entry_points.items():
            text += f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        members[f"{info}/entry_points.txt"] = text.encode()
    record = "".join(f"{p},sha256={b64_digest(d)},{len(d)}\n" for p, d in members.items())
    record += f"{info}/RECORD,,\n"
    members[f"{info}/RECORD"] = record.encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for p, d in members.items():
            zi = zipfile.ZipInfo(p, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zf.writestr(zi, d)
    return path


def _core_record(core_version: str, core_wheel: Path, docker: bool) -> dict[str, Any]:
    """build-core.json as `vpr build-core` writes it."""
    backend: dict[str, Any] = {"kind": "local"}
    if docker:
        backend = {
            "kind": "docker",
            "base_image": "python@sha256:" + "d" * 64,
            "image_id": "sha256:" + "e" * 64,
        }
    return {
        "core": {
            "name": "vllm",
            "version": core_version,
            "target_device": "empty",
            "source_date_epoch": SDE,
            "source": {
                "kind": "sdist",
                "index": "https://pypi.org/simple",
                "filename": f"vllm-{core_version}.tar.gz",
                "sha256": SDIST_SHA,
                "url": f"https://files.example/vllm-{core_version}.tar.gz",
            },
        },
        "wheel": {"filename": core_wheel.name, "sha256": sha256_file(core_wheel)},
        "reproducible": True,
        "isolated": True,
        "python": "3.11.7",
        "build_env": {
            "lock_file": "constraints/build-core-py311.txt",
            "lock_sha256": "1" * 64,
            "torch": "2.13.0+cpu",
            "core_declared_torch": "torch==2.13.0",
        },
        "backend": backend,
        "env": {"VLLM_TARGET_DEVICE": "empty", "SOURCE_DATE_EPOCH": str(SDE)},
    }


def _scorecard(verdict: str) -> dict[str, Any]:
    """scorecard.json for `verdict`: lab fails pinning, fleet passed the hardware check."""
    checks = {
        "cadence": {"status": "pass", "summary": "ok", "evidence": [{"note": "n", "line": 3}]},
        "hardware": {"status": "deferred", "summary": "needs a TT device", "evidence": []},
    }
    if verdict == "lab":
        checks["pinning"] = {"status": "fail", "summary": "bad pin", "evidence": []}
    if verdict == "fleet":
        checks["hardware"] = {"status": "pass", "summary": "ran", "evidence": []}
    return {
        "verdict": verdict,
        "runner": "cpu",
        "pairing": {
            "name": "ref",
            "core": "vllm",
            "plugin": "plug",
            "core_wheel_sha256": None,
            "plugin_wheel_sha256": None,
        },
        "checks": checks,
    }


def make_pairing(
    dist: Path,
    *,
    name: str = "ref",
    core_version: str = "0.26.0",
    plugin_name: str = "vpr-test-plugin",
    plugin_version: str = "0.1.0",
    plugin_commit: str = PLUGIN_COMMIT,
    verdict: str | None = "pilot",
    env: bool = True,
    runtime: dict[str, Any] | None = None,
    docker: bool = False,
    core_extra: str = "",
    guard: bool = False,
    platform: str | None = None,
) -> SpecPins:
    """Wheels + stage records in `dist`; returns the pins (as `pins_from_spec` makes them)."""
    core_wheel = write_wheel(
        dist,
        "vllm",
        f"{core_version}+empty",
        {"vllm/__init__.py": f"__version__ = '{core_version}+empty'\n{core_extra}"},
    )
    mod = plugin_name.replace("-", "_")
    eps = {"vllm.platform_plugins": {"vpr_test": f"{mod}:register"}}
    plugin_wheel = write_wheel(
        dist,
        plugin_name,
        plugin_version,
        {f"{mod}/__init__.py": "def register():\n    return None\n"},
        entry_points=eps,
    )
    (dist / "build-core.json").write_text(
        json.dumps(_core_record(core_version, core_wheel, docker))
    )
    (dist / "build-plugin.json").write_text(
        json.dumps(
            {
                "plugin": {
                    "name": plugin_name,
                    "version": plugin_version,
                    "repository": "https://example.invalid/plugin.git",
                    "commit": plugin_commit,
                },
                "wheel": {"filename": plugin_wheel.name, "sha256": sha256_file(plugin_wheel)},
                "entry_points": eps,
                "reproducible": True,
            }
        )
    )
    if env:
        # the pairing lock, where a project keeps it (the project root is dist/../..)
        lock = dist.parent.parent / "constraints" / "env-py311.txt"
        lock.parent.mkdir(parents=True, exist_ok=True)
        if not lock.exists():
            lock.write_text(f"# pairing lock of the vpr tests\n{LOCK_PIN}\n")
        (dist / "env.json").write_text(
            json.dumps(
                {
                    "runner": "cpu",
                    "python": str(dist / "env" / "bin" / "python"),  # never run here
                    "lock_file": "constraints/env-py311.txt",
                    "lock_sha256": sha256_file(lock),
                    "runtime": runtime or {"name": "tt-metal", "status": "absent"},
                }
            )
        )
    if verdict:
        (dist / "scorecard.json").write_text(json.dumps(_scorecard(verdict)))
    if guard:
        write_guard(dist)
    if platform and env:
        record = json.loads((dist / "env.json").read_text())
        check = "platform activation (vllm.platforms.current_platform)"
        record["checks"] = [
            {"name": check, "status": "skipped", "detail": "resolved", "value": platform}
        ]
        (dist / "env.json").write_text(json.dumps(record))
    source = SdistPin("https://pypi.org/simple", f"vllm-{core_version}.tar.gz", SDIST_SHA)
    plugin_table = {
        "name": plugin_name,
        "source": {"kind": "git", "url": "https://x.invalid/p", "commit": plugin_commit},
    }
    return SpecPins(
        name=name,
        core=CorePins("vllm", core_version, "empty", SDE, source),
        plugin=PluginTable(plugin_name, plugin_table),
        runtime=RuntimeTable(
            RuntimePins("tt-metal", "ttnn", "0.60.0", None),
            {"name": "tt-metal", "package": "ttnn", "version": "0.60.0"},
        ),
        build=BuildPins("3.11", "local", None, "2.13.0+cpu", "constraints/build-core-py311.txt"),
    )


def write_guard(dist: Path) -> Path:
    """The real vpr-guard wheel (built from guard/ by its own backend, as `vpr build-guard`
    does) and build-guard.json in `dist`."""
    from vllm_plugin_release.core.wheelfacts import wheel_entry_points
    from vllm_plugin_release.edges.guard import CHECKOUT, build_wheel

    wheel = build_wheel(CHECKOUT, dist)
    (dist / "build-guard.json").write_text(
        json.dumps(
            {
                "guard": {"name": "vpr-guard", "version": "1.0.0"},
                "wheel": {"filename": wheel.name, "sha256": sha256_file(wheel)},
                "entry_points": wheel_entry_points(wheel),
                "reproducible": True,
            }
        )
    )
    return wheel


def locked_project(root: Path) -> Path:
    """The pairing lock of a project in `root` (constraints/env-py311.txt) pinning LOCK_PIN
    by the sha256 of a real wheel written to root/deps; returns deps (VPR_FIND_LINKS for an
    offline install)."""
    deps = root / "deps"
    name, version = LOCK_PIN.split("==")
    dep = write_wheel(deps, name, version, {"vpr_test_dep/__init__.py": "VALUE = 1\n"})
    lock = root / "constraints" / "env-py311.txt"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text(f"{LOCK_PIN} \\\n    --hash=sha256:{sha256_file(dep)}\n")
    return deps


def write_spec(
    root: Path,
    name: str = "ref",
    publish: dict[str, str] | None = None,
    *,
    core_version: str = "0.26.0",
    approval: dict[str, Any] | None = None,
) -> Path:
    """A valid buildspec under root/buildspec/ (root gets a pyproject.toml to anchor it);
    `approval`: its [core.api_approval] (`to` is the core version)."""
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    lines = [
        "spec_version = 1",
        f'name = "{name}"',
        "[core]",
        'name = "vllm"',
        f'version = "{core_version}"',
        'target_device = "empty"',
        f"source_date_epoch = {SDE}",
        "[core.source]",
        'kind = "sdist"',
        f'sha256 = "{SDIST_SHA}"',
        "[build]",
        'python = "3.11"',
        'backend = "local"',
        "[plugin]",
        'name = "vpr-test-plugin"',
        "[plugin.source]",
        'kind = "git"',
        'url = "https://example.invalid/plugin.git"',
        f'commit = "{PLUGIN_COMMIT}"',
        "[runtime]",
        'name = "tt-metal"',
        'package = "ttnn"',
        'version = "0.60.0"',
    ]
    if approval:
        lines.append("[core.api_approval]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in {**approval, "to": core_version}.items()]
    if publish:
        lines.append("[publish]")
        lines += [f'{k} = "{v}"' for k, v in publish.items()]
    spec = root / "buildspec" / f"{name}.toml"
    spec.parent.mkdir(parents=True, exist_ok=True)
    spec.write_text("\n".join(lines) + "\n")
    return spec


def vpr(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), full_env.get("PYTHONPATH")]))
    full_env.setdefault("VPR_CACHE_DIR", str(cwd / ".vpr"))
    return subprocess.run(
        [sys.executable, "-m", "vllm_plugin_release", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def flip_byte(path: Path, offset: int) -> bytes:
    """Flip the lowest bit of one byte of `path`; returns the original bytes."""
    data = path.read_bytes()
    changed = bytearray(data)
    changed[offset] ^= 0x01
    path.write_bytes(bytes(changed))
    return data


# -- manifests and the store ----------------------------------------------------------


def built_manifest(dist: Path) -> dict[str, Any]:
    """`make_pairing` in `dist`, then the manifest its records make."""
    return mf.build_manifest(make_pairing(dist), mf.read_records(dist))


def typed(m: dict[str, Any]) -> mm.Manifest:
    """`m` as its readers get it (`manifestmodel.parse`)."""
    return mm.parse(m, "test manifest")


def ledger_manifest(
    pairing_id: str,
    core: tuple[str, str | None],
    plugin: tuple[str, str | None],
    verdict: str | None,
    guard: str | None = None,
) -> mm.Manifest:
    """A typed manifest of what a ledger entry and the guard's record read (ids, names and
    versions, the verdict; the core and plugin as (version, commit) and (name, commit), the
    guard's version when there is one), its wheels stand-ins: for the ledger's tests,
    which make thousands of entries and no wheels, and the guard's."""
    wheel = mm.Wheel("x-1-py3-none-any.whl", "0" * 64, "1", "0" * 64, 0)
    return mm.Manifest(
        schema_version=doc.SCHEMA_VERSION,
        name="ref",
        pairing_id=pairing_id,
        source_date=None,
        source_date_epoch=SDE,
        pipeline_version="0",
        core=mm.Part("core", "vllm", core[0], wheel, core[1], "3.11.9", {}),
        core_source=mm.Source("git", "https://example.invalid/vllm", None, None, None, core[1]),
        build_lock=mm.Lock(None, None),
        plugin=mm.Part("plugin", plugin[0], "1.0", wheel, plugin[1], None, {}),
        plugin_repository="https://example.invalid/plugin",
        guard=mm.Part("guard", "vpr-guard", guard, wheel, None, None, {}) if guard else None,
        runtime=mm.Runtime("refrt", "stand-in", None, None, None, None, None),
        container=None,
        environment=mm.Environment("absent", None, None, None),
        conformance=mm.Conformance("present", verdict, "cpu", {}, ()),
        platform=None,
        api_approval=None,
        raw={},
    )


def manifest_variant(
    m: dict[str, Any], *, commit: str | None = None, core: str | None = None, verdict: str = ""
) -> dict[str, Any]:
    """A copy of manifest `m` with another plugin commit, core version or verdict; the
    pairing inputs and id are recomputed as the pipeline would."""
    out = copy.deepcopy(m)
    if commit:
        out["plugin"]["commit"] = commit
    if core:
        out["core"]["version"] = core
    if verdict:
        out["conformance"]["verdict"] = verdict
    core, source = out["core"], out["core"]["source"]
    out["pairing_inputs"] = doc.PairingInputs(
        core_name=core["name"],
        core_version=core["version"],
        target_device=core["target_device"],
        source=doc.SourcePin(source.get("kind"), source.get("commit"), source.get("sha256")),
        plugin_name=out["plugin"]["name"],
        plugin_commit=out["plugin"]["commit"],
        runtime=doc.RuntimePins("tt-metal", None, "0.60.0", None),
        python="3.11",
    ).to_json()
    out["pairing_id"] = key_of(out["pairing_inputs"])
    return out


def write_manifest(folder: Path, m: dict[str, Any], name: str | None = None) -> Path:
    """`m` as the pipeline writes it, in `folder` (named by its pairing id unless `name`)."""
    path = folder / (name or f"{m['pairing_id'][:12]}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(doc.manifest_bytes(m))
    return path


def store_key(root: Path) -> Any:
    """The manifest signing key where the CLI looks by default with VPR_CACHE_DIR=root/.vpr
    (made on first use): a store signed with it reads without --key."""
    from vllm_plugin_release.edges import keys

    private = root / ".vpr" / keys.DEFAULT_KEY
    if not private.exists():
        keys.generate_keypair(private)
    return keys.load_private_key(private)


def sign_store(store: Path, key: Any, *, check: bool = True) -> None:
    """A new head over every file of `store` as it is now (`vpr manifest sign-store`): for
    a store a test wrote or edited by hand, whose consumers must get past its head.
    `check=False`: a head written as a buggy or hostile publisher would, over whatever is
    there (the writers' own checks, such as each ledger line's, skipped)."""
    import datetime as dt

    from vllm_plugin_release.core import signed
    from vllm_plugin_release.core import storehead as sh
    from vllm_plugin_release.edges.store import head_record, sign_head, vouched_files

    if check:
        sign_head(store, key, everything=True)
        return
    files = {name: head_record(name, (store / name).read_bytes()) for name in vouched_files(store)}
    body = sh.body(files, previous=0, now=dt.datetime.now(dt.timezone.utc), days=30)
    (store / sh.HEAD_FILE).write_bytes(signed.sign(body.payload(), sh.PAYLOAD_TYPE, key))


def check_store(root: Path) -> dict[str, Any]:
    """Every visible file is complete JSON; the index lists exactly the manifests present."""
    index = json.loads((root / "index.json").read_text())
    for path in (root / "pairings").iterdir():
        if path.name.startswith(".") or path.name.endswith(".lock.txt"):
            continue
        json.loads(path.read_text())  # never half-written
    present = {p.stem for p in (root / "pairings").glob("*.json")}
    assert set(index["pairings"]) <= present
    return index


def published_pairing(
    root: Path, approval: dict[str, Any] | None = None, **pairing: Any
) -> dict[str, Any]:
    """A project in `root` whose pairing lock pins one real wheel (in deps/), its pairing
    (`make_pairing(**pairing)`) built and published to root/store: {root, store, pid, env}.
    `approval`: the spec's [core.api_approval]."""
    deps = locked_project(root)
    spec = write_spec(root, approval=approval)
    make_pairing(root / "dist" / "ref", **pairing)
    built = vpr("manifest", "build", "--spec", str(spec), cwd=root)
    assert built.returncode == 0, built.stderr
    store = root / "store"
    done = vpr("publish", "--spec", str(spec), "--store", str(store), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    pid = json.loads(done.stdout)["pairing_id"]
    return {"root": root, "store": store, "pid": pid, "env": {"VPR_FIND_LINKS": str(deps)}}
