"""vpr-guard on the headline pairing (VPR_TT_PLUGIN_CHECKOUT): the TT pairing released on
CPython 3.10 with the real ttnn, published, installed with `vpr install`, then vLLM's
start-up under `enforce`. The untouched environment starts (setuptools' `_vendor` folder on
sys.path is part of the setuptools wheel, not extra distributions: the guard once refused
every start here), an extra package and a platform that resolves to another class are
refused. Skips without a checkout (CI has none: the plugin's host is unreachable)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.required import tt_checkout
from tests.support import REPO, vpr
from vllm_plugin_release.edges.uv import uv_bin

START = "import vllm; from vllm.plugins import load_general_plugins; load_general_plugins(); " \
    "print('vLLM started')"  # fmt: skip
REFUSED = "vpr-guard: vLLM will not start: this environment is not the certified pairing "


def _start(venv: Path, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("VPR_GUARD", "PYTHONPATH")}
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", START], cwd=venv.parent,
        env={**full, "VPR_GUARD": "enforce", **env}, capture_output=True, text=True,
        timeout=900, check=False,
    )  # fmt: skip


@tt_checkout()
def test_the_guard_on_the_tt_pairing(cache_root: Path, tmp_path: Path) -> None:
    key = tmp_path / "release.key"
    vpr("keygen", "--out", str(key))
    spec = ("--spec", str(REPO / "buildspec" / "tt.toml"), "--dist", str(tmp_path / "dist"))
    done = vpr("release", *spec, "--cache-dir", str(cache_root), "--no-publish",
               "--signing-key", str(key), "--plugin-source",
               os.environ["VPR_TT_PLUGIN_CHECKOUT"], check=False)  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-3000:]  # a verdict (lab today)
    store = tmp_path / "store"
    vpr("publish", *spec, "--cache-dir", str(tmp_path / "cache"), "--store", str(store),
        "--signing-key", str(key), "--allow-uncertified", "--no-verify-install")  # fmt: skip
    manifest = json.loads((tmp_path / "dist" / "tt" / "manifest.json").read_text())
    assert manifest["platform"]["resolved"] == "vllm_tt_plugin.platform.TTPlatform"
    venv = tmp_path / "venv"
    vpr("install", manifest["pairing_id"][:12], "--store", str(store), "--key", f"{key}.pub",
        "--python-env", str(venv), "--allow-uncertified")  # fmt: skip

    untouched = _start(venv)
    assert untouched.returncode == 0, untouched.stderr[-3000:]
    assert "vLLM started" in untouched.stdout and "vpr-guard" not in untouched.stderr

    platform = _start(venv, VLLM_PLUGINS="vpr_guard")  # the TT platform plugin not loaded
    assert platform.returncode == 1 and REFUSED in platform.stderr
    assert "platform: vLLM resolved vllm.platforms.interface.UnspecifiedPlatform, certified " \
        "vllm_tt_plugin.platform.TTPlatform" in platform.stderr  # fmt: skip

    subprocess.run([uv_bin(), "pip", "install", "-q", "--python", str(venv / "bin" / "python"),
                    "tomli-w==1.2.0"], check=True)  # fmt: skip
    extra = _start(venv)
    assert extra.returncode == 1 and REFUSED in extra.stderr
    assert "  - extra tomli-w 1.2.0: installed, not in the certified set" in extra.stderr
