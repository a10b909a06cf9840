"""Manifest: building from stage records, determinism, schema, missing records, check-env.

The helpers at the top (real wheels written with zipfile and a proper RECORD, stage
records, a buildspec) are shared with test_signing/test_store/test_publish.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.core.cache import sha256_file
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.stages import manifest as mf
from vllm_plugin_release.stages.verify import check_environment

SRC = Path(__file__).resolve().parent.parent / "src"
SDIST_SHA = "ab" * 32
PLUGIN_COMMIT = "c0ffee" + "0" * 34
SDE = 1760000000


# ---------------------------------------------------------------------------
# Helpers (imported by the other test modules)


def _b64(data: bytes) -> str:
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
    record = "".join(f"{p},sha256={_b64(d)},{len(d)}\n" for p, d in members.items())
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
) -> dict[str, Any]:
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
    backend: dict[str, Any] = {"kind": "local"}
    if docker:
        backend = {
            "kind": "docker",
            "base_image": "python@sha256:" + "d" * 64,
            "image_id": "sha256:" + "e" * 64,
        }
    (dist / "build-core.json").write_text(
        json.dumps(
            {
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
        )
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
        (dist / "env.json").write_text(
            json.dumps(
                {
                    "runner": "cpu",
                    "lock_file": "constraints/env-py311.txt",
                    "lock_sha256": "2" * 64,
                    "runtime": runtime or {"name": "tt-metal", "status": "absent"},
                }
            )
        )
    if verdict:
        checks = {
            "cadence": {"status": "pass", "summary": "ok", "evidence": [{"note": "n", "line": 3}]},
            "hardware": {"status": "deferred", "summary": "needs a TT device", "evidence": []},
        }
        if verdict == "lab":
            checks["pinning"] = {"status": "fail", "summary": "bad pin", "evidence": []}
        if verdict == "fleet":
            checks["hardware"] = {"status": "pass", "summary": "ran", "evidence": []}
        (dist / "scorecard.json").write_text(
            json.dumps({"verdict": verdict, "runner": "cpu", "checks": checks})
        )
    return {
        "name": name,
        "core": {
            "name": "vllm",
            "version": core_version,
            "target_device": "empty",
            "source_date_epoch": SDE,
            "source": {"kind": "sdist", "index": "https://pypi.org/simple", "sha256": SDIST_SHA},
        },
        "plugin": {
            "name": plugin_name,
            "source": {"kind": "git", "url": "https://x.invalid/p", "commit": plugin_commit},
        },
        "runtime": {"name": "tt-metal", "package": "ttnn", "version": "0.60.0"},
        "build": {"python": "3.11", "backend": "local"},
    }


def write_spec(root: Path, name: str = "ref", publish: dict[str, str] | None = None) -> Path:
    """A valid buildspec under root/buildspec/ (root gets a pyproject.toml to anchor it)."""
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    lines = [
        "spec_version = 1",
        f'name = "{name}"',
        "[core]",
        'name = "vllm"',
        'version = "0.26.0"',
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


# ---------------------------------------------------------------------------
# Tests


def test_build_manifest_records_everything(tmp_path: Path) -> None:
    dist = tmp_path / "dist" / "ref"
    pins = make_pairing(dist, docker=True)
    m = mf.build_manifest(pins, mf.read_records(dist), pipeline_version="9.9.9")
    assert m["schema_version"] == doc.SCHEMA_VERSION
    assert m["created"] == "2025-10-09T08:53:20Z"
    assert m["core"]["source"] == {
        "kind": "sdist",
        "url": "https://files.example/vllm-0.26.0.tar.gz",
        "index": "https://pypi.org/simple",
        "filename": "vllm-0.26.0.tar.gz",
        "sha256": SDIST_SHA,
    }
    assert m["core"]["wheel"]["filename"] == "vllm-0.26.0+empty-py3-none-any.whl"
    assert m["core"]["platform_tag"] == "any"
    assert m["core"]["build_env"]["lock_sha256"] == "1" * 64
    assert m["plugin"]["commit"] == PLUGIN_COMMIT
    assert m["plugin"]["entry_points"] == {
        "vllm.platform_plugins": {"vpr_test": "vpr_test_plugin:register"}
    }
    assert m["runtime"]["status"] == "absent"
    assert m["runtime"]["note"] == "absent on this runner (cpu)"
    assert m["runtime"]["pinned_version"] == "0.60.0"
    assert m["container"] == {
        "base_image": "python@sha256:" + "d" * 64,
        "base_digest": "sha256:" + "d" * 64,
        "image_id": "sha256:" + "e" * 64,
    }
    assert m["environment"]["lock_sha256"] == "2" * 64
    assert m["conformance"]["verdict"] == "pilot"
    assert m["conformance"]["deferred"] == [{"check": "hardware", "reason": "needs a TT device"}]
    assert m["conformance"]["checks"]["cadence"]["evidence"] == [{"note": "n", "line": 3}]
    assert m["pipeline"] == {"name": "vllm-plugin-release", "version": "9.9.9"}
    doc.validate(m, "test")


def test_manifest_is_deterministic_and_pairing_id_tracks_inputs(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "ref", tmp_path / "b" / "ref"
    pins = make_pairing(a)
    make_pairing(b)
    ma = doc.manifest_bytes(mf.build_manifest(pins, mf.read_records(a)))
    mb = doc.manifest_bytes(mf.build_manifest(pins, mf.read_records(b)))
    assert ma == mb
    assert b"host" not in ma
    c = tmp_path / "c" / "ref"
    other = make_pairing(c, plugin_commit="f" * 40)
    mc = mf.build_manifest(other, mf.read_records(c))
    assert mc["pairing_id"] != json.loads(ma)["pairing_id"]


def test_optional_records_absent(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist, verdict=None, env=False)
    m = mf.build_manifest(pins, mf.read_records(dist))
    assert m["conformance"] == {
        "status": "absent",
        "verdict": None,
        "runner": None,
        "checks": {},
        "deferred": [],
    }
    assert m["environment"]["status"] == "absent"
    assert m["runtime"]["status"] == "absent"
    assert "no env.json" in m["runtime"]["note"]


def test_runtime_present_on_hardware(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    rt = {"name": "tt-metal", "status": "present", "version": "0.60.0", "commit": "9" * 40}
    pins = make_pairing(dist, runtime=rt, verdict="fleet")
    m = mf.build_manifest(pins, mf.read_records(dist))
    assert m["runtime"]["status"] == "present"
    assert m["runtime"]["commit"] == "9" * 40
    assert m["conformance"]["verdict"] == "fleet"


def test_missing_required_record_names_the_producer(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    make_pairing(dist)
    (dist / "build-plugin.json").unlink()
    with pytest.raises(BadInput) as exc:
        mf.read_records(dist, "buildspec/ref.toml")
    assert "build-plugin.json" in str(exc.value)
    assert "vpr build-plugin --spec buildspec/ref.toml" in str(exc.value)
    assert exc.value.exit_code == 2


def test_wheel_changed_after_build_is_a_gate_failure(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    wheel = next(dist.glob("vllm-*.whl"))
    wheel.write_bytes(wheel.read_bytes() + b"x")
    with pytest.raises(GateFailed, match="sha256"):
        mf.build_manifest(pins, mf.read_records(dist))


def test_contradictory_verdict_refused(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist, verdict="pilot")
    card = json.loads((dist / "scorecard.json").read_text())
    card["verdict"] = "fleet"  # but the hardware check is deferred
    (dist / "scorecard.json").write_text(json.dumps(card))
    with pytest.raises(GateFailed, match="hardware"):
        mf.build_manifest(pins, mf.read_records(dist))


def test_newer_schema_version_is_a_clear_message(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    m = mf.build_manifest(pins, mf.read_records(dist))
    m["schema_version"] = doc.SCHEMA_VERSION + 1
    m["something_new"] = {"x": 1}
    with pytest.raises(BadInput, match="newer than this vpr understands"):
        doc.validate(m, "m.json")


def test_schema_errors_name_the_key(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    m = mf.build_manifest(pins, mf.read_records(dist))
    m["core"]["wheel"]["sha256"] = "nothex"
    with pytest.raises(BadInput, match=r"core\.wheel\.sha256"):
        doc.validate(m, "m.json")


def test_cli_build_schema_and_missing_record(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    dist = tmp_path / "dist" / "ref"
    make_pairing(dist)
    done = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first = (dist / "manifest.json").read_bytes()
    statement = (dist / "manifest.intoto.jsonl").read_bytes()
    run = json.loads((dist / "run.json").read_text())
    assert "host" in run["manifest"]
    assert (tmp_path / ".vpr" / "keys" / "manifest-signing.key").exists()
    key_text = (tmp_path / ".vpr" / "keys" / "manifest-signing.key").read_text()
    assert key_text.splitlines()[1] not in done.stdout + done.stderr
    again = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (dist / "manifest.json").read_bytes() == first
    assert (dist / "manifest.intoto.jsonl").read_bytes() == statement

    schema = vpr("manifest", "schema", cwd=tmp_path)
    assert schema.returncode == 0
    assert json.loads(schema.stdout)["properties"]["schema_version"]["const"] == 1

    (dist / "build-core.json").unlink()
    missing = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path)
    assert missing.returncode == 2
    assert "build-core.json" in missing.stderr and "vpr build-core" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_check_env_matches_and_reports_every_mismatch(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    m = mf.build_manifest(pins, mf.read_records(dist))
    mpath = dist / "manifest.json"
    mpath.write_bytes(doc.manifest_bytes(m))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
         "--no-index", "--disable-pip-version-check", *map(str, dist.glob("*.whl"))],
        check=True,
    )  # fmt: skip
    assert check_environment(m, py, dist) == []
    ok = vpr("manifest", "check-env", "--manifest", str(mpath), "--python", str(py), cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # Tamper with an installed file and check against a manifest whose plugin moved on.
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "vllm" / "__init__.py").write_text("tampered = True\n")
    other = json.loads(json.dumps(m))
    other["plugin"]["wheel"]["version"] = "0.2.0"
    other["plugin"]["entry_points"]["vllm.platform_plugins"]["vpr_test"] = "elsewhere:register"
    problems = check_environment(other, py, dist)
    text = "\n".join(problems)
    assert "vllm/__init__.py modified since installation" in text
    assert "installed files differ from the certified wheel" in text
    assert "vllm/__init__.py: installed sha256=" in text
    assert "version 0.1.0, manifest 0.2.0" in text
    assert "entry point [vllm.platform_plugins] vpr_test" in text
    mpath.write_bytes(doc.manifest_bytes(m))
    bad = vpr("manifest", "check-env", "--manifest", str(mpath), "--python", str(py), cwd=tmp_path)
    assert bad.returncode == 1
    assert "vllm/__init__.py" in bad.stdout
