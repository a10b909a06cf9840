"""`vpr install` of a pairing whose manifest names vpr-guard, against a real store (a small
pairing published through a loopback pypiserver, installed by uv offline with hashes): the
guard is installed with the verified manifest beside the environment, its own check agrees,
each tampering is seen by it and `vpr install` (the line the guard prints) repairs it,
another build of a certified wheel under the same version included. Then the guard's
start-up hook in that environment (its `vllm.general_plugins` entry point, called as vLLM
calls it, with a stand-in `vllm` whose platform is the certified one): it fails closed on a
damaged record of its own, on code of the core, plugin or guard imported from anywhere
but their certified files, and on a distribution from a zip or an egg. The
real vLLM starting under the guard: tests/integration/test_guard.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.pairing import published_pairing, vpr, write_wheel
from vllm_plugin_release.edges.uv import uv_bin

# the stand-in vllm's platform: what `vllm.platforms.current_platform` resolves to in vLLM
CPU_PLATFORM = """
import types as _types
class CpuPlatform:
    pass
CpuPlatform.__module__ = "vllm.platforms.cpu"
platforms = _types.SimpleNamespace(current_platform=CpuPlatform())
"""
# vLLM's start-up as far as the guard sees it: import vllm, then call every general plugin
START = """
import vllm
from importlib.metadata import entry_points
for ep in entry_points(group="vllm.general_plugins"):
    ep.load()()
print("vLLM started")
"""
REFUSED = "vpr-guard: vLLM will not start: "


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("project")
    return published_pairing(
        root, guard=True, platform="vllm.platforms.cpu.CpuPlatform", core_extra=CPU_PLATFORM
    )


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


@pytest.fixture(scope="module")
def guarded(published: dict, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The pairing installed with no policy file (its verdict, pilot, says warn)."""
    venv = tmp_path_factory.mktemp("guarded") / "venv"
    done = install(published, venv)
    assert done.returncode == 0, done.stderr
    site = next((venv / "lib").glob("python3.*/site-packages"))
    return {"venv": venv, "site": site, "record": venv / "vpr-guard"}


def start(venv: Path, policy: str | None, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """The guard's start-up hook in a new Python of that environment, from `cwd`."""
    full = {k: v for k, v in os.environ.items() if k not in ("VPR_GUARD", "PYTHONPATH")}
    if policy:
        full["VPR_GUARD"] = policy
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", START], cwd=cwd, env={**full, **env},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def refused_lines(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "vLLM started" not in done.stdout and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(REFUSED), lines
    return lines


def test_the_untouched_environment_starts_under_its_default_and_enforce(
    guarded: dict, tmp_path: Path
) -> None:
    for policy in (None, "enforce"):
        done = start(guarded["venv"], policy, tmp_path)
        assert done.returncode == 0 and "vLLM started" in done.stdout, done.stderr
        assert done.stderr == ""
    # started from inside site-packages: the working folder is the environment's own
    done = start(guarded["venv"], "enforce", guarded["site"])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    # a folder of plain modules on PYTHONPATH and as the working folder: none of the
    # certified packages, no distribution
    (tmp_path / "vpr_plain.py").write_text("PLAIN = 1\n")
    done = start(guarded["venv"], "enforce", tmp_path, PYTHONPATH=str(tmp_path))
    assert done.returncode == 0 and done.stderr == "", done.stderr


@pytest.mark.parametrize(
    "damage", ["certified.json truncated", "certified.json missing", "manifest.json unparsable",
               "manifest.json missing"],
)  # fmt: skip
def test_a_damaged_record_refuses_to_start_under_the_default_policy(
    guarded: dict, tmp_path: Path, damage: str
) -> None:
    """Without VPR_GUARD or a policy file the verdict says the policy; a record that cannot
    be read has no verdict, and that is no reason to let vLLM start (known-good: the same
    environment with its record whole starts under that default, warn)."""
    name, how = damage.split()
    path = guarded["record"] / name
    kept = path.read_bytes()
    try:
        if how == "truncated":
            path.write_bytes(kept[: len(kept) // 2])
        elif how == "unparsable":
            path.write_bytes(b"{not json\n")
        else:
            path.unlink()
        lines = refused_lines(start(guarded["venv"], None, tmp_path))
        print(f"\n[{damage}] refused:\n" + "\n".join(lines))
        assert any(str(path) in line for line in lines[1:-2]), lines
        assert lines[0] == REFUSED + "the certified record of this environment cannot be used:"
        assert lines[-1].startswith(
            "(policy enforce, from the default when the certified record cannot be used; "
        ), lines
        warned = start(guarded["venv"], "warn", tmp_path)  # the operator's word still counts
        assert warned.returncode == 0 and "vLLM started" in warned.stdout, warned.stderr
        assert warned.stderr.startswith("vpr-guard: WARNING: ")
    finally:
        path.write_bytes(kept)
    assert start(guarded["venv"], None, tmp_path).returncode == 0


def _copy_package(site: Path, name: str, to: Path, edit: str) -> Path:
    shutil.copytree(site / name, to / name, ignore=shutil.ignore_patterns("__pycache__"))
    init = to / name / "__init__.py"
    init.write_text(init.read_text() + edit)
    return init


def _egg(folder: Path, zipped: bool) -> Path:
    """An egg of vpr-egg 1.0 as setuptools' easy_install left them: a folder or a zip."""
    files = {"EGG-INFO/PKG-INFO": "Metadata-Version: 1.1\nName: vpr-egg\nVersion: 1.0\n",
             "vpr_egg/__init__.py": "EGG = 1\n"}  # fmt: skip
    egg = folder / "vpr_egg-1.0-py3.11.egg"
    if zipped:
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(egg, "w") as zf:
            for path, text in files.items():
                zf.writestr(path, text)
    else:
        for path, text in files.items():
            (egg / path).parent.mkdir(parents=True, exist_ok=True)
            (egg / path).write_text(text)
    return egg


@pytest.mark.parametrize(
    "drift", ["core on PYTHONPATH", "plugin on PYTHONPATH", "guard on PYTHONPATH",
              "core in the working folder"],
)  # fmt: skip
def test_the_core_plugin_or_guard_imported_from_elsewhere_refuses_to_start(
    guarded: dict, tmp_path: Path, drift: str
) -> None:
    """Under enforce the code Python imports for the core, the plugin and the guard must be
    their certified files: a changed copy on PYTHONPATH, or vLLM started from inside its
    source tree (`python -c` puts the working folder first), is refused and named."""
    role, where = drift.split(" ", 1)
    name = {"core": "vllm", "plugin": "vpr_test_plugin", "guard": "vpr_guard"}[role]
    who = {"core": "core vllm", "plugin": "plugin vpr-test-plugin", "guard": "guard vpr-guard"}
    copied = tmp_path / "copied"
    shutil.copytree(guarded["site"] / name, copied / name,
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    init = copied / name / "__init__.py"
    init.write_text(init.read_text() + "\n# changed beside the certified files\n")
    if where == "on PYTHONPATH":
        cwd, env, by = tmp_path, {"PYTHONPATH": str(copied)}, where
    else:
        cwd, env, by = copied, {}, "the working folder"
    lines = refused_lines(start(guarded["venv"], "enforce", cwd, **env))
    print(f"\n[{drift}] refused:\n" + "\n".join(lines))
    expected = f"  - {who[role]}: Python imports {name} from {init} ({by}"
    assert any(line.startswith(expected) for line in lines), (expected, lines)
    warned = start(guarded["venv"], "warn", cwd, **env)
    assert warned.returncode == 0 and "vLLM started" in warned.stdout, warned.stderr


def _egg(folder: Path, zipped: bool) -> Path:
    """vpr-egg 1.0 as setuptools' easy_install left it: an egg folder, or a zipped egg."""
    files = {"EGG-INFO/PKG-INFO": "Metadata-Version: 1.1\nName: vpr-egg\nVersion: 1.0\n",
             "vpr_egg/__init__.py": "EGG = 1\n"}  # fmt: skip
    egg = folder / "vpr_egg-1.0-py3.11.egg"
    if zipped:
        folder.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(egg, "w") as zf:
            for path, text in files.items():
                zf.writestr(path, text)
    else:
        for path, text in files.items():
            (egg / path).parent.mkdir(parents=True, exist_ok=True)
            (egg / path).write_text(text)
    return egg


@pytest.mark.parametrize(
    "drift", ["wheel on PYTHONPATH", "wheel named by a .pth", "egg named by a .pth",
              "zipped egg on PYTHONPATH"],
)  # fmt: skip
def test_a_distribution_from_a_zip_or_an_egg_refuses_to_start(
    guarded: dict, tmp_path: Path, drift: str
) -> None:
    """Under enforce no distribution may come from a zip (a wheel put on sys.path), an egg,
    or a folder that is not the environment's site-packages: each is named with what put
    it on sys.path (PYTHONPATH, the .pth file), then the environment starts again."""
    if drift.startswith("wheel"):
        dist = write_wheel(tmp_path / "w", "vpr-zipped", "1.0", {"vpr_zipped.py": "Z = 1\n"})
        what = "extra vpr-zipped 1.0: in {} (a zip {}"
    else:
        dist = _egg(tmp_path / "eggs", zipped=drift.startswith("zipped"))
        what = "extra vpr-egg 1.0: in {} (an egg {}"
    env, pth = {}, guarded["site"] / "vpr-drift.pth"
    if drift.endswith("on PYTHONPATH"):
        env["PYTHONPATH"], by = str(dist), "on PYTHONPATH"
    else:
        pth.write_text(f"{dist}\n")
        by = f"named by {pth}"
    try:
        lines = refused_lines(start(guarded["venv"], "enforce", tmp_path, **env))
        print(f"\n[{drift}] refused:\n" + "\n".join(lines))
        expected = "  - " + what.format(dist, by) + "), outside the environment's site-packages"
        assert any(line.startswith(expected) for line in lines), (expected, lines)
        warned = start(guarded["venv"], "warn", tmp_path, **env)
        assert warned.returncode == 0 and "vLLM started" in warned.stdout, warned.stderr
    finally:
        pth.unlink(missing_ok=True)
    assert start(guarded["venv"], "enforce", tmp_path).returncode == 0
