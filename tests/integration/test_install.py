"""`vpr install` and `check-env` against a real store: a small pairing published through a
loopback pypiserver, installed by uv with hashes required, offline; then the known-bad
cases (an edited lock, another file under a stored wheel's name, a missing pin)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.pairing import published_pairing, vpr, write_wheel
from vllm_plugin_release.edges.uv import uv_bin


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A project whose pairing lock pins one real wheel (in deps/), published to a store."""
    return published_pairing(tmp_path_factory.mktemp("project"))


def install(p: dict, venv: Path, *more: str) -> subprocess.CompletedProcess:
    args = ["install", p["pid"][:12], "--store", str(p["store"]), "--python-env", str(venv)]
    return vpr(*args, "--offline", *more, cwd=p["root"], env=p["env"])


def test_install_verifies_installs_by_hash_and_second_run_is_a_no_op(
    published: dict, tmp_path: Path
) -> None:
    entry = next(
        iter(json.loads((published["store"] / "index.json").read_text())["pairings"].values())
    )
    assert entry["requirements"]["path"].endswith(".lock.txt")
    assert [w["store_path"] for w in entry["wheels"]] == [
        f"wheels/{entry['core']['wheel']}",
        f"wheels/{entry['plugin']['wheel']}",
    ]
    assert [h["runner"] for h in entry["history"]] == ["cpu"] and entry["certified_at"]
    run = json.loads((published["root"] / "dist" / "ref" / "run.json").read_text())
    assert run["publish"]["certified_at"] == entry["certified_at"]

    venv = tmp_path / "venv"
    first = install(published, venv, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["status"] == "installed"
    second = install(published, venv, "--json")
    assert json.loads(second.stdout)["status"] == "unchanged", second.stderr

    stored = published["store"] / entry["manifest"]
    python = str(venv / "bin" / "python")
    key = ("--key", str(published["root"] / ".vpr" / "keys" / "manifest-signing.key.pub"))
    ok = vpr("manifest", "check-env", "--manifest", str(stored), "--python", python, *key,
             cwd=tmp_path)  # fmt: skip
    assert ok.returncode == 0 and "every pin of" in ok.stdout, ok.stderr
    # drift: a pin removed is reported, and `vpr install` brings the environment back
    subprocess.run([uv_bin(), "pip", "uninstall", "-q", "--python", python, "vpr-test-dep"],
                   check=True)  # fmt: skip
    drift = vpr("manifest", "check-env", "--manifest", str(stored), "--python", python, *key,
                cwd=tmp_path)  # fmt: skip
    assert drift.returncode == 1 and "pin vpr-test-dep: missing (lock 1.0)" in drift.stdout
    again = install(published, venv, "--json")
    assert json.loads(again.stdout)["status"] == "installed", again.stderr


def test_edited_lock_or_wheel_in_the_store_is_refused(published: dict, tmp_path: Path) -> None:
    copy = tmp_path / "store"
    shutil.copytree(published["store"], copy)
    p = {**published, "store": copy}
    lock = next((copy / "pairings").glob("*.lock.txt"))
    original = lock.read_bytes()
    lock.write_bytes(original + b"six==1.17.0\n")
    edited = install(p, tmp_path / "a")
    assert edited.returncode == 1 and "lock_sha256" in edited.stderr
    assert not (tmp_path / "a").exists()  # refused before the environment was made
    lock.write_bytes(original)
    wheel = next((copy / "wheels").glob("vpr_test_plugin-*.whl"))
    # another valid wheel under the certified name
    other = write_wheel(tmp_path / "w", "vpr-test-plugin", "0.1.0", {"vpr_test_plugin/x.py": ""})
    wheel.write_bytes(other.read_bytes())
    swapped = install(p, tmp_path / "b")
    assert swapped.returncode == 1, swapped.stderr
    assert "signed manifest certifies" in swapped.stderr and "Traceback" not in swapped.stderr
    assert not (tmp_path / "b").exists()


def test_wrong_key_and_unknown_pairing(published: dict, tmp_path: Path) -> None:
    other = tmp_path / "other.key"
    vpr("keygen", "--out", str(other), cwd=tmp_path)
    wrong = install(published, tmp_path / "c", "--key", f"{other}.pub")
    assert wrong.returncode == 1 and "signature" in wrong.stderr
    assert not (tmp_path / "c").exists()
    unknown = vpr("install", "f" * 12, "--store", str(published["store"]), cwd=published["root"])
    assert unknown.returncode == 2 and "no store entries match" in unknown.stderr
