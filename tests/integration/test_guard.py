"""vpr-guard with the real vLLM 0.26.0 in the real reference pairing: released (the guard's
wheel built and signed with the pairing), published to a store, installed with `vpr
install`; then vLLM is started as its own processes start (`import vllm` and
`load_general_plugins()`, which loads the guard):

- the untouched environment starts, under enforce too;
- an extra package, a changed version and a swapped plugin wheel are each refused under
  enforce (exit 1, one message naming it, no traceback) and started with a warning under
  warn; the `vpr install` line the message names brings the environment back;
- the platform resolving to another class (the runtime put on PYTHONPATH, so the plugin's
  platform activates where the pairing was certified without it) is refused.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.pairing import write_wheel
from tests.support import REFERENCE_SPEC, REPO, script, vpr
from vllm_plugin_release.edges.uv import uv_bin

START = "import vllm; from vllm.plugins import load_general_plugins; load_general_plugins(); " \
    "print('vLLM started')"  # fmt: skip
REFUSED = "vpr-guard: vLLM will not start: this environment is not the certified pairing "
WARNED = "vpr-guard: WARNING: vLLM starts in an environment that is not certified: "
UNSPECIFIED = "vllm.platforms.interface.UnspecifiedPlatform"
REFERENCE = "vllm_reference_plugin.platform.ReferencePlatform"


@pytest.fixture(scope="module")
def installed(reference_env: dict, session_dist: Path, cache_root: Path, tmp_path_factory) -> dict:
    """The reference pairing released (shared cache), published to its own store and local
    index (a cache of its own: the shared index may hold another build of the plugin), and
    installed with `vpr install`."""
    tmp = tmp_path_factory.mktemp("guarded")
    key = tmp / "keys" / "release.key"
    vpr("keygen", "--out", str(key))
    spec = ("--spec", str(REFERENCE_SPEC), "--dist", str(session_dist))
    vpr("release", *spec, "--cache-dir", str(cache_root), "--no-publish", "--signing-key", str(key))
    store, cache = tmp / "store", tmp / "cache"
    vpr(
        "publish",
        *spec,
        "--cache-dir",
        str(cache),
        "--store",
        str(store),
        "--signing-key",
        str(key),
    )
    manifest = json.loads((session_dist / "reference" / "manifest.json").read_text())
    venv = tmp / "venv"
    done = vpr("install", manifest["pairing_id"][:12], "--store", str(store), "--key",
               f"{key}.pub", "--python-env", str(venv), "--offline", "--cache-dir", str(cache),
               "--json")  # fmt: skip
    assert json.loads(done.stdout)["status"] == "installed"
    return {"venv": venv, "manifest": manifest, "cache": cache, "tmp": tmp}


def start(venv: Path, policy: str | None, **env: str) -> subprocess.CompletedProcess:
    """vLLM's start-up in that environment, from a neutral folder."""
    full = {k: v for k, v in os.environ.items() if k not in ("VPR_GUARD", "PYTHONPATH")}
    if policy:
        full["VPR_GUARD"] = policy
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", START], cwd=venv.parent, env={**full, **env},
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def guard_lines(done: subprocess.CompletedProcess) -> list[str]:
    """The guard's message: its lines of standard error, from its first one."""
    lines = done.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("vpr-guard: "))
    return [line for line in lines[first:] if not line.startswith(("INFO ", "WARNING "))]


def recover(installed: dict, done: subprocess.CompletedProcess) -> None:
    """Run the `vpr install` line the guard printed (offline, from the test's cache)."""
    line = next(x for x in guard_lines(done) if x.startswith("to get back to the certified set"))
    argv = shlex.split(line.split(": ", 1)[1])
    assert argv[:2] == ["vpr", "install"]
    vpr(*argv[1:], "--offline", "--cache-dir", str(installed["cache"]))
    check = subprocess.run([str(installed["venv"] / "bin" / "python"), "-m", "vpr_guard",
                            "check"], capture_output=True, text=True, check=False)  # fmt: skip
    assert check.returncode == 0, check.stdout


def uv_install(venv: Path, wheel: Path) -> None:
    subprocess.run([uv_bin(), "pip", "install", "-q", "--no-deps", "--reinstall", "--offline",
                    "--python", str(venv / "bin" / "python"), str(wheel)], check=True)  # fmt: skip


def rewheel(venv: Path, name: str, version: str, edit: str = "") -> Path:
    """A real wheel of an installed distribution's files under `version` (`edit` appended
    to its first module), with its entry points."""
    site = next((venv / "lib").glob("python3.*/site-packages"))
    info = next(site.glob(f"{name.replace('-', '_')}-*.dist-info"))
    files: dict[str, str] = {}
    for row in (info / "RECORD").read_text().splitlines():
        path = row.split(",")[0]
        if path.endswith(".py") and "__pycache__" not in path and ".dist-info" not in path:
            files[path] = (site / path).read_text()
    first = sorted(files)[0]
    files[first] += edit
    eps: dict[str, dict[str, str]] = {}
    if (info / "entry_points.txt").exists():
        group = ""
        for line in (info / "entry_points.txt").read_text().splitlines():
            if line.startswith("["):
                group = line.strip("[]")
            elif "=" in line:
                k, v = (x.strip() for x in line.split("=", 1))
                eps.setdefault(group, {})[k] = v
    return write_wheel(venv.parent / "wheels" / name, name, version, files, entry_points=eps)


def test_the_untouched_environment_starts(installed: dict) -> None:
    for policy in ("enforce", None):  # enforce, and the pilot's default (warn)
        done = start(installed["venv"], policy)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "vLLM started" in done.stdout and "vpr-guard" not in done.stderr
    state = json.loads((installed["venv"] / "vpr-guard" / "manifest.json").read_text())
    assert state["platform"] == {"resolved": UNSPECIFIED, "runner": "cpu"}


@pytest.mark.parametrize("tampering", ["extra package", "changed version", "swapped plugin"])
def test_a_tampering_is_refused_under_enforce_and_warned_under_warn(
    installed: dict, tampering: str
) -> None:
    venv, manifest = installed["venv"], installed["manifest"]
    if tampering == "extra package":
        wheel = write_wheel(venv.parent / "wheels", "vpr-extra", "1.0", {"vpr_extra.py": ""})
        expected = "  - extra vpr-extra 1.0: installed, not in the certified set"
    elif tampering == "changed version":
        wheel = rewheel(venv, "idna", "3.99")
        record = json.loads((venv / "vpr-guard" / "certified.json").read_text())
        expected = f"  - idna: installed 3.99, certified {record['dists']['idna']['version']}"
    else:
        wheel = rewheel(venv, "vllm-reference-plugin", "0.1.0", "\n# another build\n")
        expected = (
            "  - plugin vllm-reference-plugin 0.1.0: its installed files are not those of the "
            f"certified wheel {manifest['plugin']['wheel']['filename']} (files_sha256 "
        )
    uv_install(venv, wheel)
    refused = start(venv, "enforce")
    lines = guard_lines(refused)
    assert refused.returncode == 1 and "vLLM started" not in refused.stdout
    assert "Traceback" not in refused.stderr
    assert lines[0].startswith(REFUSED + manifest["pairing_id"][:16])
    assert lines[1].startswith(expected), lines
    assert lines[-2].startswith(
        f"to get back to the certified set: vpr install {manifest['pairing_id'][:16]} --store "
    )
    print(f"\n[{tampering}] refused:\n" + "\n".join(lines))  # for the closing note
    warned = start(venv, "warn")
    assert warned.returncode == 0 and "vLLM started" in warned.stdout, warned.stderr[-3000:]
    assert guard_lines(warned)[0].startswith(WARNED) and expected in "\n".join(guard_lines(warned))
    recover(installed, refused)
    assert start(venv, "enforce").returncode == 0


def test_a_platform_resolving_to_another_class_is_refused(installed: dict) -> None:
    runtime = installed["tmp"] / "runtime-on-path"
    shutil.copytree(REPO / "plugin" / "reference" / "runtime" / "src" / "refrt", runtime / "refrt")
    refused = start(installed["venv"], "enforce", PYTHONPATH=str(runtime))
    lines = guard_lines(refused)
    assert refused.returncode == 1, refused.stderr[-3000:]
    platform = f"  - platform: vLLM resolved {REFERENCE}, certified {UNSPECIFIED} ("
    assert any(line.startswith(platform) for line in lines), lines
    print("\n[platform] refused:\n" + "\n".join(lines))
    warned = start(installed["venv"], "warn", PYTHONPATH=str(runtime))
    assert warned.returncode == 0 and "vLLM started" in warned.stdout


def test_the_site_of_the_released_store(installed: dict) -> None:
    """The compatibility site of that very store (the real reference pairing, its guard
    and platform in the signed manifest), and Chromium's view of it at 390 and 1280 px."""

    out = installed["tmp"] / "site"
    store = installed["tmp"] / "store"
    key = installed["tmp"] / "keys" / "release.key.pub"
    vpr("manifest", "site", "--store", str(store), "--key", str(key), "--out", str(out),
        "--cache-dir", str(installed["cache"]), "--newest-from", "store")  # fmt: skip
    compat = json.loads((out / "compat.json").read_text())
    (pairing,) = compat["pairings"]
    assert pairing["pairing_id"] == installed["manifest"]["pairing_id"]
    assert pairing["signature"]["verified"] and pairing["guard"] is True
    assert pairing["sites"]["cpu"]["verdict"] == "pilot"
    assert pairing["sites"]["hardware"]["signed_by"] is None  # the hardware part: not run
    check = script("sitecheck")
    if check.find_browser() is None:
        pytest.skip("no Chromium (apt-get install -y chromium)")
    for width in (390, 1280):
        seen = check.inspect(out / "index.html", width, installed["tmp"] / "shots")
        assert check.problems(seen) == [], seen
        cells = [[c["text"].strip() for c in row] for row in seen["rows"] if len(row) == 3]
        assert cells[0][0].startswith("vllm-reference-plugin 0.1.0")
        assert cells[0][1].split("\n")[:2][0] == "PILOT" and cells[0][2] == "not run"
