"""vpr-guard's comparison, policy and start-up hook against a synthetic environment (a
site folder of real .dist-info folders and files, a certified record written as `vpr
install` writes it). Each check: the untouched environment passes, each tampering is
named. The same guard against the real vLLM: tests/integration/test_guard.py."""

from __future__ import annotations

import ast
import base64
import hashlib
import importlib
import json
import os
import sys
from pathlib import Path

import pytest

from tests.pairing import ledger_manifest, write_wheel
from tests.support import REPO
from vllm_plugin_release.core import guardstate as gs
from vllm_plugin_release.core.wheelfacts import files_digest, installed_files, parse_record

GUARD_SRC = REPO / "guard" / "src"
sys.path.insert(0, str(GUARD_SRC))

import vpr_guard  # noqa: E402
from vpr_guard import check, scan  # noqa: E402

UNSPECIFIED = "vllm.platforms.interface.UnspecifiedPlatform"
PLATFORM = "vllm_reference_plugin.platform.ReferencePlatform"


def _b64(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install_dist(site: Path, name: str, version: str, files: dict[str, str]) -> Path:
    """A distribution as an installer leaves it: its files and a .dist-info with RECORD."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    rows = []
    for path, text in files.items():
        target = site / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        rows.append(f"{path},{_b64(text.encode())},{len(text)}")
    rows += [f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info


def _wheel(files: dict[str, str]) -> dict:
    digest = files_digest({p: _b64(t.encode()) for p, t in files.items()})
    return {"filename": "x.whl", "files_sha256": digest, "version": "1"}


CORE = {"vllm/__init__.py": "__version__ = '0.26.0+empty'\n", "vllm/platforms.py": "X = 1\n"}
PLUGIN = {"ref_plugin/__init__.py": "def register():\n    return None\n"}
# the guard's own modules: the start-up tests import it from the environment, as vLLM does
GUARD = {
    f"vpr_guard/{p.name}": p.read_text() for p in sorted((GUARD_SRC / "vpr_guard").glob("*.py"))
}


@pytest.fixture
def env(tmp_path: Path) -> dict:
    """An environment holding a certified pairing: core, plugin, guard, torch and a pin."""
    prefix = tmp_path / "env"
    site = prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    install_dist(site, "vllm", "0.26.0+empty", CORE)
    install_dist(site, "ref-plugin", "0.1.0", PLUGIN)
    install_dist(site, "vpr-guard", "1.0.0", GUARD)
    install_dist(site, "torch", "2.13.0+cpu", {"torch/__init__.py": "T = 1\n"})
    install_dist(site, "idna", "3.10", {"idna/__init__.py": "I = 1\n"})
    manifest = {
        "pairing_id": "ab" * 32,
        "core": {"name": "vllm", "version": "0.26.0", "wheel": _wheel(CORE)},
        "plugin": {"name": "ref-plugin", "version": "0.1.0", "commit": "c" * 40,
                   "wheel": _wheel(PLUGIN)},
        "guard": {"name": "vpr-guard", "version": "1.0.0", "wheel": _wheel(GUARD)},
        "conformance": {"verdict": "pilot"},
        "platform": {"resolved": UNSPECIFIED, "runner": "cpu"},
    }  # fmt: skip
    data = json.dumps(manifest, sort_keys=True).encode()
    typed = ledger_manifest(
        manifest["pairing_id"], ("0.26.0", None), ("ref-plugin", "c" * 40), "pilot", "1.0.0"
    )
    snapshot = scan.snapshot(gs.snapshot_roles(typed), [str(site)], [str(site)])
    recover = gs.recover_line(manifest["pairing_id"], "/srv/store", "/k.pub", str(prefix))
    snap = gs.parse_snapshot(snapshot)
    record = gs.certified_record(typed, hashlib.sha256(data).hexdigest(), snap, recover)
    folder = prefix / gs.STATE_DIR
    folder.mkdir()
    (folder / gs.MANIFEST).write_bytes(data)
    (folder / gs.CERTIFIED).write_text(json.dumps(record.to_json()))
    return {"prefix": prefix, "site": site, "folder": folder}


def findings(env: dict, *before: Path) -> list[str]:
    """What the guard finds on a sys.path of `before` then the environment's site-packages."""
    state = check.load_state(str(env["prefix"]))
    paths = [*map(str, before), str(env["site"])]
    return [f.text for f in check.compare(state, paths, [str(env["site"])])]


def test_the_certified_environment_has_no_finding(env: dict) -> None:
    assert findings(env) == []


def test_an_extra_distribution_is_named(env: dict) -> None:
    install_dist(env["site"], "six", "1.17.0", {"six.py": "S = 1\n"})
    assert findings(env) == ["extra six 1.17.0: installed, not in the certified set"]


def test_a_changed_version_is_named_with_its_role(env: dict) -> None:
    info = next(env["site"].glob("torch-*.dist-info"))
    info.rename(env["site"] / "torch-2.12.0.dist-info")
    install_dist(env["site"], "idna", "3.99", {"idna/core.py": "I = 2\n"})  # a second idna
    for old in env["site"].glob("idna-3.10.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    assert findings(env) == [
        "torch: installed 2.12.0, certified 2.13.0+cpu",
        "idna: installed 3.99, certified 3.10",
    ]


def test_a_swapped_plugin_wheel_is_not_the_signed_one(env: dict) -> None:
    site = env["site"]
    for f in sorted(site.glob("ref_plugin-0.1.0.dist-info/*")) + sorted(site.glob("ref_plugin/*")):
        f.unlink()
    (site / "ref_plugin-0.1.0.dist-info").rmdir()
    install_dist(site, "ref-plugin", "0.1.0", {"ref_plugin/__init__.py": "def register(): 1\n"})
    [text] = findings(env)
    assert text.startswith("plugin ref-plugin 0.1.0: its installed files are not those of the "
                           "certified wheel x.whl (files_sha256 ")  # fmt: skip
    record = site / "ref_plugin-0.1.0.dist-info" / "RECORD"
    assert f"(files_sha256 {scan.files_sha256(record.read_bytes())[:16]}," in text  # its own
    record.unlink()  # no RECORD at all: the same finding, never a crash
    [text] = findings(env)
    assert "not those of the certified wheel x.whl (files_sha256 None," in text


def test_another_build_of_a_pin_and_a_file_edited_in_place_are_named(env: dict) -> None:
    record = next(env["site"].glob("idna-*.dist-info")) / "RECORD"
    record.write_text(record.read_text().replace("idna/__init__.py", "idna/./__init__.py"))
    core_file = env["site"] / "vllm" / "platforms.py"
    core_file.write_text("X = 2  # patched in place\n")
    assert findings(env) == [
        "core vllm: 1 file(s) changed since vpr install (vllm/platforms.py)",
        "idna 3.10: another build is installed (its RECORD is not the one vpr install certified)",
    ]


def test_a_missing_pin_and_an_edited_manifest_are_named(env: dict) -> None:
    for f in sorted(env["site"].glob("idna*/*")):
        f.unlink()
    (env["site"] / "idna-3.10.dist-info").rmdir()
    assert findings(env) == ["idna 3.10: missing (certified, not installed)"]
    manifest = env["folder"] / gs.MANIFEST
    manifest.write_text(manifest.read_text().replace("pilot", "fleet"))
    [text] = findings(env)
    assert "manifest.json: sha256" in text and "is not the manifest vpr install verified" in text


def test_no_record_is_a_finding(tmp_path: Path) -> None:
    state = check.load_state(str(tmp_path))
    [finding] = check.compare(state, {})
    assert finding.kind == "state" and "no certified pairing here" in finding.text


def test_the_platform_is_compared_in_both_directions(env: dict) -> None:
    state = check.load_state(str(env["prefix"]))
    assert check.platform_finding(state, UNSPECIFIED, None) == []
    [moved] = check.platform_finding(state, PLATFORM, None)
    assert moved.text.startswith(f"platform: vLLM resolved {PLATFORM}, certified {UNSPECIFIED} (")
    state.manifest["platform"]["resolved"] = PLATFORM  # a fleet pairing on its hardware
    [fallback] = check.platform_finding(state, "vllm.platforms.cpu.CpuPlatform", None)
    assert f"resolved vllm.platforms.cpu.CpuPlatform, certified {PLATFORM} (" in fallback.text
    [raised] = check.platform_finding(state, None, "RuntimeError: no device")
    assert "raised RuntimeError: no device; certified" in raised.text
    state.manifest["platform"] = None  # a manifest from before the guard: not compared
    assert check.platform_finding(state, PLATFORM, None) == []
    state.manifest["platform"] = {"resolved": ""}  # none recorded
    assert check.platform_finding(state, PLATFORM, None) == []


def test_policy_from_the_variable_the_file_or_the_verdict(
    env: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VPR_GUARD", raising=False)
    state = check.load_state(str(env["prefix"]))
    assert check.resolve_policy(state) == ("warn", "the default for verdict pilot")
    state.manifest["conformance"]["verdict"] = "fleet"
    assert check.resolve_policy(state) == ("enforce", "the default for verdict fleet")
    (env["folder"] / gs.POLICY).write_text("off\n")
    assert check.resolve_policy(state)[0] == "off"
    monkeypatch.setenv("VPR_GUARD", "Warn")
    assert check.resolve_policy(state) == ("warn", "VPR_GUARD")
    monkeypatch.setenv("VPR_GUARD", "enforced")
    with pytest.raises(check.BadPolicy, match="VPR_GUARD='enforced' is not one of"):
        check.resolve_policy(state)
    (env["folder"] / gs.POLICY).unlink()
    monkeypatch.delenv("VPR_GUARD")
    state.manifest["conformance"] = None  # a verdict that is none of pilot and lab
    assert check.resolve_policy(state) == ("enforce", "the default for verdict None")
    certified = env["folder"] / gs.CERTIFIED
    certified.write_text(certified.read_text()[:100])  # truncated: the policy is enforce
    damaged = check.load_state(str(env["prefix"]))
    assert damaged.damaged == str(certified)
    assert check.resolve_policy(damaged)[0] == "enforce"
    [finding] = check.compare(damaged)
    assert finding.text.startswith(f"{certified}: truncated or not JSON (")
    (env["folder"] / gs.POLICY).write_text("strict\n")
    with pytest.raises(check.BadPolicy, match="'strict' is not one of enforce, warn, off"):
        check.resolve_policy(state)


def _start(env: dict, monkeypatch: pytest.MonkeyPatch, policy: str, resolved: str) -> None:
    """The start-up hook of the guard imported from the environment (where vLLM imports it
    from, and where the guard checks that it comes from), its platform `resolved`."""
    monkeypatch.setattr(sys, "prefix", str(env["prefix"]))
    monkeypatch.setattr(sys, "path", [str(env["site"])])
    for name in [m for m in sys.modules if m.split(".")[0] == "vpr_guard"]:
        monkeypatch.delitem(sys.modules, name)
    hook = importlib.import_module("vpr_guard.plugin")
    assert hook.__file__ == str(env["site"] / "vpr_guard" / "plugin.py")
    monkeypatch.setattr(hook, "resolved_platform", lambda: (resolved, None))
    monkeypatch.setenv("VPR_GUARD", policy)
    hook.check_at_startup()


def test_start_up_refuses_under_enforce_warns_under_warn(
    env: dict, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _start(env, monkeypatch, "enforce", UNSPECIFIED)  # the certified set: starts, silently
    assert capsys.readouterr().err == ""
    install_dist(env["site"], "six", "1.17.0", {"six.py": "S = 1\n"})
    with pytest.raises(SystemExit) as refused:
        _start(env, monkeypatch, "enforce", PLATFORM)
    assert type(refused.value).__name__ == "Refused"  # the environment's own guard's class
    text = str(refused.value.code)
    assert text.splitlines() == [
        f"vpr-guard: vLLM will not start: this environment is not the certified pairing "
        f"{'ab' * 8} (vllm 0.26.0 + ref-plugin 0.1.0 @ {'c' * 12}, verdict pilot):",
        "  - extra six 1.17.0: installed, not in the certified set",
        f"  - platform: vLLM resolved {PLATFORM}, certified {UNSPECIFIED} (what vLLM resolves "
        "follows what is importable: the vendor runtime, PYTHONPATH, VLLM_PLUGINS)",
        f"to get back to the certified set: vpr install {'ab' * 8} --store /srv/store --key "
        f"/k.pub --python-env {env['prefix']}",
        "(policy enforce, from VPR_GUARD; VPR_GUARD=warn starts it anyway with this warning, "
        "VPR_GUARD=off skips the check)",
    ]
    assert isinstance(refused.value, SystemExit)  # no traceback, exit status 1
    _start(env, monkeypatch, "warn", PLATFORM)
    err = capsys.readouterr().err
    assert err.startswith("vpr-guard: WARNING: vLLM starts in an environment that is not ")
    assert "  - extra six 1.17.0" in err and "VPR_GUARD=enforce refuses" in err
    _start(env, monkeypatch, "off", PLATFORM)
    assert capsys.readouterr().err == ""
    with pytest.raises(SystemExit, match="VPR_GUARD='maybe' is not one of"):
        _start(env, monkeypatch, "maybe", PLATFORM)


def test_files_sha256_is_the_one_check_env_computes(env: dict) -> None:
    """The guard's copy of the manifest's files digest agrees with core.wheelfacts."""
    for info in env["site"].glob("*.dist-info"):
        data = (info / "RECORD").read_bytes()
        assert scan.files_sha256(data) == files_digest(installed_files(parse_record(data.decode())))


def test_the_record_names_are_the_guards_own() -> None:
    for name in ("STATE_DIR", "MANIFEST", "STATEMENT", "LOCK", "CERTIFIED", "POLICY",
                 "CERTIFIED_KIND"):  # fmt: skip
        assert getattr(gs, name) == getattr(vpr_guard, name), name


def test_the_guard_imports_the_standard_library_only() -> None:
    allowed = set(sys.stdlib_module_names) | {"vpr_guard", "vllm", "__future__"}
    for path in (GUARD_SRC / "vpr_guard").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"
    assert "vllm_plugin_release" not in (GUARD_SRC / "vpr_guard" / "check.py").read_text()
    assert os.path.isfile(REPO / "guard" / "pyproject.toml")


def test_a_distributions_own_vendored_folder_on_sys_path_is_not_an_extra(tmp_path: Path) -> None:
    """setuptools (>= 71) puts its `_vendor` folder on sys.path when it is imported (torch,
    ttnn and vLLM import it at start-up); the dist-info folders in there are files of the
    setuptools wheel (its RECORD lists them, and the guard checks that RECORD), not
    distributions someone installed. Seen on the TT pairing (Python 3.10, setuptools 84):
    every vLLM start refused for zipp, jaraco-*, ... Known-bad: a folder inside
    site-packages that no distribution's RECORD covers still shows what it holds."""
    site = tmp_path / "site-packages"
    vendored = "setuptools/_vendor/zipp-3.23.0.dist-info"
    install_dist(site, "setuptools", "84.2.1", {
        "setuptools/__init__.py": "",
        f"{vendored}/METADATA": "Metadata-Version: 2.1\nName: zipp\nVersion: 3.23.0\n",
    })  # fmt: skip
    own = [str(site)]
    found = scan.distributions([str(site), str(site / "setuptools" / "_vendor")], own)
    assert sorted(found) == ["setuptools"]
    # `python -c` puts the working folder first, which may hold the environment
    paths = [str(tmp_path), str(site), str(site / "setuptools" / "_vendor")]
    found = scan.distributions(paths, own)
    assert sorted(found) == ["setuptools"] and "outside" not in found["setuptools"]
    stray = site / "added" / "extra-1.0.dist-info"
    stray.mkdir(parents=True)
    (stray / "METADATA").write_text("Metadata-Version: 2.1\nName: extra\nVersion: 1.0\n")
    found = scan.distributions([str(site), str(site / "added")], own)
    assert sorted(found) == ["extra", "setuptools"]
    (site / "setuptools" / "_vendor" / "extra-1.0.dist-info").mkdir()  # not in its RECORD
    found = scan.distributions([str(site), str(site / "setuptools" / "_vendor")], own)
    assert sorted(found) == ["extra", "setuptools"]


def test_code_and_distributions_from_outside_the_site_are_named(env: dict, tmp_path: Path) -> None:
    """Before the environment's site-packages on the path: a copy of the core's package (a
    source tree), a folder holding a distribution, a wheel. Known-good: a folder of plain
    modules there, and the core's own package named again after the site."""
    site = env["site"]
    plain = tmp_path / "plain"
    (plain / "helper").mkdir(parents=True)
    (plain / "helper" / "__init__.py").write_text("H = 1\n")
    assert findings(env, plain) == []
    tree = tmp_path / "tree"
    (tree / "vllm").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("# a source tree\n")
    assert findings(env, tree) == [
        f"core vllm: Python imports vllm from {tree}/vllm/__init__.py (on sys.path), not its "
        f"certified files in {site}"
    ]
    state = check.load_state(str(env["prefix"]))
    assert check.compare(state, [str(site), str(tree)], [str(site)]) == []  # the site's first
    added = tmp_path / "added"
    install_dist(added, "six", "1.17.0", {"six.py": "S = 1\n"})
    install_dist(added, "idna", "3.10", {"idna/__init__.py": "I = 1\n"})  # a certified one
    assert findings(env, added) == [
        f"idna 3.10: in {added}/idna-3.10.dist-info (a folder on sys.path), outside the "
        "environment's site-packages: take it off sys.path",
        f"extra six 1.17.0: in {added}/six-1.17.0.dist-info (a folder on sys.path), outside "
        "the environment's site-packages: take it off sys.path",
    ]
    wheel = write_wheel(tmp_path / "w", "vpr-zipped", "2.0", {"vpr_zipped.py": ""})
    assert findings(env, wheel) == [
        f"extra vpr-zipped 2.0: in {wheel} (a zip on sys.path), outside the environment's "
        "site-packages: take it off sys.path"
    ]


def test_what_follows_a_distribution_found_outside_the_site_is_still_checked(
    env: dict, tmp_path: Path
) -> None:
    """A certified and an extra distribution named for being outside the site do not end
    the checks of those after them: a changed certified version and an extra inside the
    site, both later in the order the guard checks, are still named."""
    added = tmp_path / "added"
    install_dist(added, "ref-plugin", "0.1.0", PLUGIN)  # certified (the plugin), outside
    install_dist(added, "six", "1.17.0", {"six.py": "S = 1\n"})  # an extra, outside
    install_dist(env["site"], "toml", "0.10.2", {"toml.py": ""})  # an extra after six
    info = next(env["site"].glob("torch-*.dist-info"))
    info.rename(env["site"] / "torch-2.12.0.dist-info")  # certified, checked after the plugin
    found = findings(env, added)
    assert "torch: installed 2.12.0, certified 2.13.0+cpu" in found, found
    assert "extra toml 0.10.2: installed, not in the certified set" in found, found
    assert sum("outside the environment's site-packages" in f for f in found) == 2, found


def test_the_top_level_modules_of_a_distribution() -> None:
    """What the guard resolves for a certified distribution: its packages (a folder of its
    files), its top-level modules (a source or an extension file); not its data."""
    files = ["vllm/__init__.py", "vllm/a/b.py", "vllm-0.26.0.data/scripts/x", "vllm.pth",
             "six.py", "_C.cpython-311-x86_64-linux-gnu.so", "vllm_ext/x.py", "README"]  # fmt: skip
    assert scan.top_level(files) == ["_C", "six", "vllm", "vllm_ext"]
    assert scan.top_level(dict.fromkeys(reversed(files))) == ["_C", "six", "vllm", "vllm_ext"]
