"""`edges/settings.py`: the one reader of every VPR_* variable, `vpr settings`, and the
docs/settings.md it makes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support import REPO, vpr
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.edges import httpio, index, settings

SRC = REPO / "src" / "vllm_plugin_release"
# An environment read: os.environ.get/[]/getenv, or a settings lookup, of a name
READ = re.compile(r"""(?:environ(?:\.get)?\(?\[?|getenv\()\s*f?["'](VPR_[A-Z_]*)""")
# Names vpr does not read itself: vpr-guard reads these in the environment it guards, and
# __VPR_SUB<n>__ is a placeholder of the installer-script scanner
NOT_SETTINGS = {"VPR_GUARD", "VPR_GUARD_TIMING", "VPR_SUB"}


def _env_reads(text: str) -> list[str]:
    return READ.findall(text)


def test_the_scanner_finds_each_way_of_reading_the_environment() -> None:
    # known-bad: every spelling of a read outside settings.py is caught
    code = (
        'os.environ.get("VPR_A")\nos.environ["VPR_B"]\nos.getenv("VPR_C", "")\n'
        "os.environ.get(f'VPR_D_{x}')\n"
    )
    assert _env_reads(code) == ["VPR_A", "VPR_B", "VPR_C", "VPR_D_"]
    assert _env_reads('help="default: $VPR_STORE"') == []


def test_no_module_but_settings_reads_a_vpr_variable() -> None:
    found = [
        f"{path.relative_to(SRC)}: {name}"
        for path in sorted(SRC.rglob("*.py"))
        if path.name != "settings.py" or path.parent.name != "edges"
        for name in _env_reads(path.read_text(encoding="utf-8"))
    ]
    assert found == [], "read these through edges/settings.py"


def test_every_vpr_name_in_the_package_is_in_the_table() -> None:
    named = set()
    for path in SRC.rglob("*"):
        if path.suffix in (".py", ".json"):
            named |= set(re.findall(r"VPR_[A-Z_]*[A-Z]", path.read_text(encoding="utf-8")))
    prefixes = {"VPR_PUBLISH", "VPR_INDEX"}  # index.retry_policy's f"{prefix}_ATTEMPTS"
    assert named - NOT_SETTINGS - set(settings.BY_NAME) - prefixes == set()
    assert len(settings.SETTINGS) == len(settings.BY_NAME) == 25


def test_the_docs_page_is_made_from_the_table() -> None:
    page = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    assert page == settings.markdown(), (
        "docs/settings.md is stale: run `vpr settings --markdown > docs/settings.md`"
    )
    for s in settings.SETTINGS:
        assert f"| `{s.name}` |" in page


def test_readers_keep_their_defaults_and_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VPR_NET_TIMEOUT", "VPR_INDEX_ATTEMPTS", "VPR_INDEX_BACKOFF", "VPR_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert httpio.timeout() == 60.0 and settings.text("VPR_CACHE_DIR") == ".vpr"
    assert index.retry_policy("VPR_INDEX") == (3, 0.5)
    monkeypatch.setenv("VPR_NET_TIMEOUT", "0")  # not positive: the default
    assert httpio.timeout() == 60.0
    monkeypatch.setenv("VPR_NET_TIMEOUT", "2.5")
    assert httpio.timeout() == 2.5
    monkeypatch.setenv("VPR_INDEX_ATTEMPTS", "x")  # not a number: the default, alone
    monkeypatch.setenv("VPR_INDEX_BACKOFF", "-1")  # below zero: zero
    assert index.retry_policy("VPR_INDEX") == (3, 0.0)
    monkeypatch.setenv("VPR_CACHE_DIR", "")  # empty is a value for a path
    assert settings.text("VPR_CACHE_DIR") == ""


def test_a_strict_setting_refuses_a_bad_value_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VPR_STORE_LOCK_TIMEOUT", "two minutes")
    with pytest.raises(BadInput, match=r"\$VPR_STORE_LOCK_TIMEOUT='two minutes': not a number"):
        settings.number("VPR_STORE_LOCK_TIMEOUT")
    monkeypatch.setenv("VPR_STORE_LOCK_TIMEOUT", "5")
    assert settings.number("VPR_STORE_LOCK_TIMEOUT") == 5.0


def test_a_bad_value_is_exit_2_naming_the_variable(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    done = vpr(
        "manifest", "query", "--store", str(store), cwd=tmp_path,
        env={"VPR_STORE_LOCK_TIMEOUT": "soon"}, check=False,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "VPR_STORE_LOCK_TIMEOUT='soon': not a number" in out and "Traceback" not in out


def test_vpr_settings_shows_values_and_hides_the_passphrase(tmp_path: Path) -> None:
    done = vpr(
        "settings", cwd=tmp_path,
        env={"VPR_NET_TIMEOUT": "7", "VPR_SIGNING_KEY_PASSWORD": "hunter2"},
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert "VPR_NET_TIMEOUT = '7'" in lines
    assert "VPR_SIGNING_KEY_PASSWORD = set" in lines and "hunter2" not in done.stdout
    shown = [line.split(" = ")[0] for line in lines if not line.startswith(" ")]
    assert shown == [s.name for s in settings.SETTINGS]
    assert lines[lines.index("VPR_NET_TIMEOUT = '7'") + 1].strip() == (
        settings.BY_NAME["VPR_NET_TIMEOUT"].doc
    )
