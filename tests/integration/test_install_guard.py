"""`vpr install` of a pairing whose manifest names vpr-guard, against a real store (a small
pairing published through a loopback pypiserver, installed by uv offline with hashes): the
guard is installed with the verified manifest beside the environment, its own check agrees,
each tampering is seen by it and `vpr install` (the line the guard prints) repairs it,
another build of a certified wheel under the same version included. vLLM itself starting
under the guard: tests/integration/test_guard.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.pairing import published_pairing, vpr, write_wheel
from vllm_plugin_release.edges.uv import uv_bin


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("project")
    return published_pairing(root, guard=True, platform="vllm.platforms.cpu.CpuPlatform")


def install(p: dict, venv: Path, *more: str) -> subprocess.CompletedProcess:
    args = ["install", p["pid"][:12], "--store", str(p["store"]), "--python-env", str(venv)]
    return vpr(*args, "--offline", "--json", *more, cwd=p["root"], env=p["env"])


def guard_check(venv: Path) -> tuple[int, dict]:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "vpr_guard", "check", "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def uv_pip(venv: Path, *args: str) -> None:
    subprocess.run([uv_bin(), "pip", *args, "--python", str(venv / "bin" / "python"), "-q"],
                   check=True)  # fmt: skip


def test_install_leaves_the_guard_and_repairs_what_it_finds(published: dict, tmp_path: Path):
    manifest = json.loads((published["root"] / "dist" / "ref" / "manifest.json").read_text())
    assert manifest["guard"]["name"] == "vpr-guard"
    assert manifest["platform"] == {"resolved": "vllm.platforms.cpu.CpuPlatform", "runner": "cpu"}
    entry = json.loads((published["store"] / "index.json").read_text())["pairings"][
        published["pid"]
    ]
    assert [w["role"] for w in entry["wheels"]] == ["core", "plugin", "guard"]
    assert all(w["store_path"] for w in entry["wheels"])

    venv = tmp_path / "venv"
    first = install(published, venv, "--guard-policy", "enforce")
    assert first.returncode == 0, first.stderr
    state = venv / "vpr-guard"
    assert sorted(p.name for p in state.iterdir()) == [
        "certified.json", "manifest.intoto.jsonl", "manifest.json", "manifest.lock.txt", "policy"
    ]  # fmt: skip
    assert (state / "manifest.json").read_bytes() == (
        published["store"] / "pairings" / f"{published['pid']}.json"
    ).read_bytes()
    assert (state / "policy").read_text() == "enforce\n"
    record = json.loads((state / "certified.json").read_text())
    assert record["recover"].startswith(f"vpr install {published['pid'][:16]} --store ")
    assert record["roles"] == {"core": "vllm", "plugin": "vpr-test-plugin", "guard": "vpr-guard"}
    assert guard_check(venv) == (0, {"ok": True, "pairing_id": published["pid"],
                                     "findings": [], "recover": record["recover"]})  # fmt: skip
    second = install(published, venv)
    assert json.loads(second.stdout)["status"] == "unchanged", second.stderr

    # an extra distribution: the guard names it; vpr install takes it out again
    extra = write_wheel(tmp_path / "w", "vpr-extra", "1.0", {"vpr_extra/__init__.py": ""})
    uv_pip(venv, "install", "--no-deps", str(extra))
    code, answer = guard_check(venv)
    assert code == 1 and [f["kind"] for f in answer["findings"]] == ["extra"]
    assert answer["findings"][0]["text"] == (
        "extra vpr-extra 1.0: installed, not in the certified set"
    )
    assert json.loads(install(published, venv).stdout)["status"] == "installed"
    assert guard_check(venv)[0] == 0

    # another build of the plugin under its certified version: uv keeps a matching version,
    # so vpr install installs it again from the certified wheel
    swapped = write_wheel(tmp_path / "s", "vpr-test-plugin", "0.1.0",
                          {"vpr_test_plugin/__init__.py": "def register():\n    return 'x'\n"},
                          entry_points=manifest["plugin"]["entry_points"])  # fmt: skip
    uv_pip(venv, "install", "--no-deps", "--reinstall", str(swapped))
    code, answer = guard_check(venv)
    assert code == 1 and [(f["kind"], f["name"]) for f in answer["findings"]] == [
        ("build", "vpr-test-plugin")
    ]
    again = install(published, venv)
    assert json.loads(again.stdout)["status"] == "installed", again.stderr
    assert guard_check(venv)[0] == 0


def test_a_record_beside_the_environment_that_was_edited_is_written_again(
    published: dict, tmp_path: Path
) -> None:
    venv = tmp_path / "venv"
    assert install(published, venv).returncode == 0
    # what vpr install left beside the environment re-verifies with the publisher's key
    key = published["root"] / ".vpr" / "keys" / "manifest-signing.key.pub"
    manifest = venv / "vpr-guard" / "manifest.json"
    ok = vpr("manifest", "check-env", "--manifest", str(manifest), "--key", str(key),
             "--python", str(venv / "bin" / "python"), cwd=tmp_path)  # fmt: skip
    assert ok.returncode == 0 and "every pin of" in ok.stdout, ok.stdout + ok.stderr
    manifest.write_text(manifest.read_text().replace('"pilot"', '"fleet"'))
    code, answer = guard_check(venv)
    assert code == 2 and "is not the manifest vpr install verified" in answer["findings"][0]["text"]
    assert json.loads(install(published, venv).stdout)["status"] == "installed"
    assert guard_check(venv)[0] == 0
