"""Buildspec loading, errors that name file/line/key, and round-trip editing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, vpr
from vllm_plugin_release.buildspec import load
from vllm_plugin_release.buildspec import model as specmod
from vllm_plugin_release.buildspec.load import load_spec, set_value
from vllm_plugin_release.buildspec.model import render
from vllm_plugin_release.conform.registry import spec_schema
from vllm_plugin_release.core.errors import BadInput, OutsideFailure

REFERENCE = REPO / "buildspec" / "reference.toml"


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def mutate(old: str, new: str) -> str:
    text = REFERENCE.read_text()
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.mark.parametrize("name", ["reference.toml", "tt.toml"])
def test_shipped_specs_load(name: str) -> None:
    spec = load_spec(REPO / "buildspec" / name)
    assert spec.core.version == "0.26.0"
    assert spec.core.target_device == "empty"
    assert isinstance(spec.core.source, specmod.SdistSource)
    assert len(spec.core.source.sha256) == 64
    assert spec.build.base_image and "@sha256:" in spec.build.base_image


def test_typed_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, mutate('torch = "2.13.0+cpu"\n', ""))
    spec = load_spec(path)
    assert spec.build.torch == "2.13.0+cpu"
    assert spec.core.source.index == "https://pypi.org/simple"


def test_malformed_toml_names_line(tmp_path: Path) -> None:
    path = write(tmp_path, mutate('version = "0.26.0"', "version = 0.26.0.x"))
    with pytest.raises(BadInput) as err:
        load_spec(path)
    line = REFERENCE.read_text().splitlines().index('version = "0.26.0"') + 1
    assert f"{path}:{line}:" in str(err.value)
    assert "malformed TOML" in str(err.value)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("old", "new", "needle", "expect"),
    [
        ('version = "0.26.0"', 'version = "0.26.x"', 'version = "0.26.x"', "not a PEP 440 version"),
        ('backend = "local"', 'backend = "podman"', 'backend = "podman"', "must be one of"),
        (
            "network_isolation",
            'colour = "blue"\nnetwork_isolation',
            "colour",
            "unknown key 'colour' in [build]",
        ),
        ('sha256 = "23e9', 'sha256 = "XYZ', 'sha256 = "XYZ', "64 lowercase hex"),
        ('target_device = "empty"', 'target_device = "cuda"', "target_device", "must be 'empty'"),
        ("source_date_epoch = 1784975730", "source_date_epoch = 5", "source_date_epoch", ">= 1980"),
    ],
)
def test_bad_values_name_file_line_key(
    tmp_path: Path, old: str, new: str, needle: str, expect: str
) -> None:
    text = mutate(old, new)
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as err:
        load_spec(path)
    message = str(err.value)
    assert f"{path}:{_line_of(text, needle)}:" in message, message
    assert expect in message


def test_missing_key_names_table(tmp_path: Path) -> None:
    text = mutate(
        'sha256 = "23e9fa19d7e20ce7dcc1c074d41503e2116d23f19e688f5d5ea91b741f958502"\n', ""
    )
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as err:
        load_spec(path)
    assert "missing key 'sha256' in [core.source]" in str(err.value)
    assert f"{path}:{_line_of(text, '[core.source]')}:" in str(err.value)


def test_docker_backend_needs_digest_pinned_base(tmp_path: Path) -> None:
    text = mutate('backend = "local"', 'backend = "docker"')
    text = text.replace("@sha256:2e32f7d3", ":3.11-slim#", 1).replace(
        "slim#", "slim"
    )  # a tag, not a digest
    text = (
        text.split("base_image = ")[0]
        + 'base_image = "python:3.11-slim"\n'
        + text.split("base_image = ")[1].split("\n", 1)[1]
    )
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as err:
        load_spec(path)
    assert "base_image" in str(err.value)


def test_set_value_keeps_comments_and_order(tmp_path: Path) -> None:
    path = write(tmp_path, REFERENCE.read_text())
    set_value(path, "core.version", '"0.26.1"')
    new = path.read_text()
    assert 'version = "0.26.1"' in new
    old_lines = REFERENCE.read_text().splitlines()
    new_lines = new.splitlines()
    assert len(old_lines) == len(new_lines)
    changed = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
    assert changed == [('version = "0.26.0"', 'version = "0.26.1"')]


def test_set_value_refuses_invalid_result_and_writes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, REFERENCE.read_text())
    before = path.read_bytes()
    with pytest.raises(BadInput):
        set_value(path, "build.backend", '"podman"')
    assert path.read_bytes() == before


def test_locate_handles_inline_and_dotted_keys() -> None:
    text = '[core]\nversion = "1"\nsource = { kind = "sdist", sha256 = "x" }\n[build]\na.b = 1\n'
    assert specmod.locate(text, ("core", "version")) == 2
    assert specmod.locate(text, ("core", "source", "sha256")) == 3
    assert specmod.locate(text, ("build", "a", "b")) == 5
    assert specmod.locate(text, ("build", "zzz")) == 4


def test_docs_page_matches_schema() -> None:
    page = (REPO / "docs" / "buildspec.md").read_text()
    assert page == render(spec_schema()), (
        "docs/buildspec.md is stale: run `vpr spec docs > docs/buildspec.md`"
    )


def test_packaged_schema_is_the_registry_schema() -> None:
    """Specs are validated against the schema the package ships (so that reading one loads
    no check module); it must be exactly what `vpr spec schema` prints from the registry."""
    shipped = REPO / "src" / "vllm_plugin_release" / load.PACKAGED_SCHEMA
    assert shipped.read_text() == json.dumps(spec_schema(), indent=2, sort_keys=True) + "\n", (
        f"{shipped.relative_to(REPO)} is stale: run "
        f"`vpr spec schema > src/vllm_plugin_release/{load.PACKAGED_SCHEMA}`"
    )
    assert load.packaged_schema() == spec_schema()


def test_a_stale_packaged_schema_is_what_validation_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Known-bad: a shipped schema that lacks a table the registry has refuses that table,
    so the test above is what keeps the two equal."""
    stale = json.loads(json.dumps(load.packaged_schema()))
    del stale["properties"]["conformance"]["properties"]["isolation"]
    monkeypatch.setattr(load, "packaged_schema", lambda: stale)
    spec = tmp_path / "s.toml"
    spec.write_text((REPO / "buildspec" / "reference.toml").read_text())
    with pytest.raises(BadInput, match="isolation"):
        load.load_spec(spec)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]"])
def test_an_unreadable_packaged_schema_is_an_outside_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    import importlib.resources

    (tmp_path / "schemas").mkdir()
    (tmp_path / load.PACKAGED_SCHEMA).write_text(content)
    monkeypatch.setattr(importlib.resources, "files", lambda package: tmp_path)
    load.packaged_schema.cache_clear()
    try:
        with pytest.raises(OutsideFailure, match="reinstall"):
            load.load_spec(REFERENCE)
    finally:
        load.packaged_schema.cache_clear()


def test_reading_a_spec_loads_no_check_module() -> None:
    code = (
        "import sys\n"
        "from vllm_plugin_release.buildspec.load import load_spec\n"
        f"load_spec({str(REPO / 'buildspec' / 'reference.toml')!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith('vllm_plugin_release.conform')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO
    )
    assert done.stdout.strip() == "[]"


def run_cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_plugin_release", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_cli_bad_spec_exit_2_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, mutate('version = "0.26.0"', 'version = "nope"'))
    done = run_cli("spec", "check", str(path))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "not a PEP 440 version" in done.stderr


def test_cli_missing_spec_file_exit_2(tmp_path: Path) -> None:
    done = run_cli("build-core", "--spec", str(tmp_path / "nope.toml"))
    assert done.returncode == 2
    assert "spec file not found" in done.stderr


def test_cli_unknown_command_exit_2() -> None:
    assert run_cli("frobnicate").returncode == 2


def test_cli_good_spec_exit_0() -> None:
    done = run_cli("spec", "check", str(REFERENCE))
    assert done.returncode == 0, done.stderr


def _tt_with_build_python(tmp_path: Path, python: str) -> Path:
    text = (REPO / "buildspec" / "tt.toml").read_text()
    old = 'python = "3.10"\nbackend'
    assert old in text
    return write(tmp_path, text.replace(old, f'python = "{python}"\nbackend', 1), "tt.toml")


def test_build_python_must_be_one_the_runtime_loads(tmp_path: Path) -> None:
    # The shipped tt spec builds for 3.10, which ttnn ships wheels for.
    assert load_spec(REPO / "buildspec" / "tt.toml").build.python in ("3.10", "3.12")
    assert load_spec(_tt_with_build_python(tmp_path, "3.12")).build.python == "3.12"
    path = _tt_with_build_python(tmp_path, "3.11")
    with pytest.raises(BadInput) as err:
        load_spec(path)
    text = path.read_text()
    message = str(err.value)
    # Both keys named, each with its line.
    build_line = _line_of(text, 'python = "3.11"')
    runtime_line = _line_of(text, "python = [")
    assert f"{path}:{build_line}: [build] python = '3.11'" in message
    assert f"[runtime] python = ['3.10', '3.12'] ({path}:{runtime_line})" in message


def test_spec_check_cli_refuses_a_runtime_unloadable_python(tmp_path: Path) -> None:
    path = _tt_with_build_python(tmp_path, "3.11")
    done = vpr("spec", "check", str(path), check=False)
    assert done.returncode == 2, done.stderr
    assert "[build] python = '3.11'" in done.stderr and "[runtime] python" in done.stderr
    assert "Traceback" not in done.stderr
    assert vpr("spec", "check", str(REPO / "buildspec" / "tt.toml"), check=False).returncode == 0


def test_the_fast_reader_gives_tomlkits_data_for_every_committed_spec() -> None:
    """load() reads with tomllib (3.11+); the data must be what tomlkit gave."""
    from vllm_plugin_release.buildspec.load import read_data, read_document

    root = Path(__file__).resolve().parents[2]
    specs = sorted((root / "buildspec").glob("*.toml")) + sorted(root.glob("tests/**/*.toml"))
    assert len(specs) >= 4
    for path in specs:
        data, text = read_data(path)
        document, same = read_document(path)
        assert text == same and data == document.unwrap(), path


def test_a_malformed_spec_still_names_its_line_and_column(tmp_path: Path) -> None:
    from vllm_plugin_release.buildspec.load import read_data

    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[core]\nversion = \n')
    with pytest.raises(BadInput, match=r"bad\.toml:3:\d+: malformed TOML"):
        read_data(bad)
    twice = tmp_path / "twice.toml"
    twice.write_text('name = "x"\nname = "y"\n')
    with pytest.raises(BadInput, match=r"twice\.toml:2:\d+: malformed TOML"):
        read_data(twice)
