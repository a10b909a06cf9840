"""build-plugin against git repositories made by the test, env bad input, the hardware runner."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support import REFERENCE_SPEC, REPO, git, vpr

PYPROJECT = """[build-system]
requires = ["setuptools>=77.0.3,<81", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "vllm-toy-plugin"
version = "0.3.0"
dependencies = []

[tool.setuptools.packages.find]
where = ["src"]
{entry_points}"""
ENTRY_POINTS = """
[project.entry-points."vllm.platform_plugins"]
toy = "vllm_toy_plugin:platform_plugin"

[project.entry-points."vllm.general_plugins"]
toy_register = "vllm_toy_plugin:register"
"""


def toy_repo(tmp_path: Path, *, entry_points: bool = True) -> tuple[Path, str]:
    repo = tmp_path / "toy"
    (repo / "src" / "vllm_toy_plugin").mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        PYPROJECT.format(entry_points=ENTRY_POINTS if entry_points else "")
    )
    (repo / "src" / "vllm_toy_plugin" / "__init__.py").write_text(
        "def platform_plugin():\n    return None\n\n\ndef register():\n    pass\n"
    )
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "toy", cwd=repo, date="2026-08-01T12:00:00+00:00")
    git("tag", "v0.3.0", cwd=repo)
    return repo, git("rev-parse", "HEAD", cwd=repo)


def toy_spec(tmp_path: Path, commit: str, tag: str | None = None) -> Path:
    text = REFERENCE_SPEC.read_text().split("\n[plugin]")[0]
    text = text.replace(
        'constraints = "constraints/build-core-py311.txt"',
        f'constraints = "{REPO / "constraints" / "build-core-py311.txt"}"',
    )
    text += (
        '\n[plugin]\nname = "vllm-toy-plugin"\n\n[plugin.source]\nkind = "git"\n'
        f'url = "https://example.invalid/toy.git"\ncommit = "{commit}"\n'
        + (f'tag = "{tag}"\n' if tag else "")
    )
    spec = tmp_path / "toy.toml"
    spec.write_text(text)
    return spec


def build(tmp_path: Path, spec: Path, source: Path, cache_root: Path, check: bool = True):
    return vpr(
        "build-plugin",
        "--spec",
        str(spec),
        "--plugin-source",
        str(source),
        "--dist",
        str(tmp_path / "dist"),
        "--cache-dir",
        str(cache_root),
        check=check,
    )


def test_plugin_from_a_local_checkout(tmp_path: Path, cache_root: Path) -> None:
    repo, commit = toy_repo(tmp_path)
    build(tmp_path, toy_spec(tmp_path, commit, tag="v0.3.0"), repo, cache_root)
    record = json.loads((tmp_path / "dist" / "reference" / "build-plugin.json").read_text())
    assert record["plugin"]["commit"] == commit
    assert record["reproducible"] is True
    assert record["source_date_epoch"] == 1785585600  # the commit time
    assert record["entry_points"]["vllm.platform_plugins"] == {
        "toy": "vllm_toy_plugin:platform_plugin"
    }
    assert record["wheel"]["filename"] == "vllm_toy_plugin-0.3.0-py3-none-any.whl"


def test_commit_not_found_is_bad_input(tmp_path: Path, cache_root: Path) -> None:
    repo, _ = toy_repo(tmp_path)
    done = build(tmp_path, toy_spec(tmp_path, "1" * 40), repo, cache_root, check=False)
    assert done.returncode == 2, done.stderr
    assert f"commit {'1' * 40} not found" in done.stderr
    assert not (tmp_path / "dist").exists()


def test_moved_tag_is_a_gate(tmp_path: Path, cache_root: Path) -> None:
    repo, commit = toy_repo(tmp_path)
    (repo / "README").write_text("later\n")
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "later", cwd=repo)
    git("tag", "-f", "v0.3.0", cwd=repo)
    done = build(tmp_path, toy_spec(tmp_path, commit, tag="v0.3.0"), repo, cache_root, False)
    assert done.returncode == 1, done.stderr
    assert "resolves to" in done.stderr


def test_missing_platform_entry_point_fails(tmp_path: Path, cache_root: Path) -> None:
    repo, commit = toy_repo(tmp_path, entry_points=False)
    done = build(tmp_path, toy_spec(tmp_path, commit), repo, cache_root, check=False)
    assert done.returncode == 1, done.stderr
    assert "declares no 'vllm.platform_plugins' entry point" in done.stderr
    assert not list((tmp_path / "dist").rglob("*.whl"))


def test_not_a_checkout_is_bad_input(tmp_path: Path, cache_root: Path) -> None:
    spec = toy_spec(tmp_path, "2" * 40)
    (tmp_path / "plain").mkdir()
    done = build(tmp_path, spec, tmp_path / "plain", cache_root, check=False)
    assert done.returncode == 2 and "not a git checkout" in done.stderr


def test_unknown_runner_is_bad_input(tmp_path: Path) -> None:
    done = vpr(
        "env",
        "--spec",
        str(REFERENCE_SPEC),
        "--site",
        "gpu",
        "--dist",
        str(tmp_path),
        check=False,
    )
    assert done.returncode == 2
    assert "invalid choice: 'gpu'" in done.stderr and "Traceback" not in done.stderr


def test_impossible_override_is_a_clear_resolver_error(tmp_path: Path, cache_root: Path) -> None:
    text = REFERENCE_SPEC.read_text()
    text = text.replace('path = "plugin/reference"', f'path = "{REPO / "plugin" / "reference"}"')
    text = text.replace(
        'constraints = "constraints/build-core-py311.txt"',
        f'constraints = "{tmp_path / "build.txt"}"',
    )
    text = text.replace(
        '[env]\nrequirements = ["pytest"]',
        f'[env]\nconstraints = "{tmp_path / "env.txt"}"\nrequirements = ["pytest"]\n'
        'overrides = ["numpy==0.0.1"]',
    )
    assert "numpy==0.0.1" in text
    spec = tmp_path / "impossible.toml"
    spec.write_text(text)
    done = vpr("lock", "--spec", str(spec), "--cache-dir", str(cache_root), check=False)
    assert done.returncode == 2, done.stderr
    assert "no set of versions satisfies" in done.stderr
    assert "numpy" in done.stderr
    assert not (tmp_path / "env.txt").exists()


# -- the hardware runner with and without a runtime -------------------------------------


def _copy_records(session_dist: Path, tmp_path: Path) -> Path:
    import shutil

    dist = tmp_path / "dist"
    shutil.copytree(session_dist / "reference", dist / "reference")
    (dist / "reference" / "env.json").unlink()
    return dist


def test_hardware_runner_without_runtime_is_outside_failure(
    reference_env: dict, session_dist: Path, tmp_path: Path, cache_root: Path
) -> None:
    dist = _copy_records(session_dist, tmp_path)
    done = vpr(
        "env",
        "--spec",
        str(REFERENCE_SPEC),
        "--site",
        "hardware",
        "--dist",
        str(dist),
        "--cache-dir",
        str(cache_root),
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "vendor runtime 'reference-runtime' is not available" in done.stderr
    assert not (dist / "reference" / "env.json").exists()


def test_hardware_runner_with_a_runtime_env(
    reference_env: dict, session_dist: Path, tmp_path: Path, cache_root: Path
) -> None:
    """--runtime-env: an existing environment that has the runtime (here the labelled stand-in
    `refrt`, installed for real into a venv the test makes)."""
    import subprocess

    from vllm_plugin_release.edges.uv import uv_bin

    runtime = tmp_path / "runtime-env"
    subprocess.run([uv_bin(), "venv", "--quiet", "--python", "3.11", str(runtime)], check=True)
    subprocess.run(
        [
            uv_bin(),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(runtime / "bin" / "python"),
            "--no-deps",
            str(REPO / "plugin" / "reference" / "runtime"),
        ],
        check=True,
    )
    dist = _copy_records(session_dist, tmp_path)
    vpr(
        "env",
        "--spec",
        str(REFERENCE_SPEC),
        "--site",
        "hardware",
        "--runtime-env",
        str(runtime),
        "--dist",
        str(dist),
        "--cache-dir",
        str(cache_root),
    )
    record = json.loads((dist / "reference" / "env.json").read_text())
    assert record["runner"] == "hardware"
    assert record["runtime"]["status"] == "present"
    assert record["platform_class"] == "vllm_reference_plugin.platform.ReferencePlatform"
    checks = {c["name"]: c["status"] for c in record["checks"]}
    assert checks["platform_plugin() runtime present"] == "pass"
    assert checks["runtime modules"] == "pass"
    assert "deferred" not in checks.values()


def test_platform_plugin_that_ignores_its_runtime_fails_the_env_gate(
    tmp_path: Path, cache_root: Path
) -> None:
    """Known-bad: platform_plugin() answers a class path although no runtime is installed."""
    import shutil

    repo, _ = toy_repo(tmp_path)
    (repo / "src" / "vllm_toy_plugin" / "__init__.py").write_text(
        "def platform_plugin():\n    return 'vllm_toy_plugin.Nope'\n\n\ndef register():\n    pass\n"
    )
    git("commit", "-q", "-am", "always claim the platform", cwd=repo)
    commit = git("rev-parse", "HEAD", cwd=repo)
    spec = toy_spec(tmp_path, commit)
    lock = tmp_path / "build-core.txt"
    shutil.copy(REPO / "constraints" / "build-core-py311.txt", lock)
    text = spec.read_text().replace(
        f'constraints = "{REPO / "constraints" / "build-core-py311.txt"}"',
        f'constraints = "{lock}"',
    )
    spec.write_text(
        text + f'\n[env]\nconstraints = "{tmp_path / "env.txt"}"\nrequirements = []\n'
        '\n[runtime]\nname = "toy-runtime"\nmodule = "toyrt"\n'
    )
    common = ["--spec", str(spec), "--cache-dir", str(cache_root)]
    vpr("lock", *common, "--plugin-source", str(repo))
    dist = ["--dist", str(tmp_path / "dist")]
    vpr("build-core", *common, *dist)
    vpr("build-plugin", *common, *dist, "--plugin-source", str(repo))
    done = vpr("env", *common, *dist, "--plugin-source", str(repo), check=False)
    assert done.returncode == 1, done.stderr
    assert "platform_plugin() runtime absent" in done.stderr
    record = json.loads((tmp_path / "dist" / "reference" / "env.json").read_text())
    check = next(c for c in record["checks"] if c["name"] == "platform_plugin() runtime absent")
    assert check["status"] == "fail" and "expected None" in check["detail"]


def test_a_cached_build_needs_no_interpreter(
    tmp_path: Path, cache_root: Path, monkeypatch, capsys
) -> None:
    """A warm `vpr build-plugin` reuses its result without looking for the spec's Python
    (`uv python find`, a subprocess): as build-core, it is asked only when building."""
    from vllm_plugin_release.cli import main
    from vllm_plugin_release.core.errors import PythonUnavailable
    from vllm_plugin_release.edges.runner import LocalRunner

    repo, commit = toy_repo(tmp_path)
    spec = toy_spec(tmp_path, commit, tag="v0.3.0")
    build(tmp_path, spec, repo, cache_root)

    def missing(self, version: str) -> None:
        raise PythonUnavailable(f"no CPython {version} (this test's stand-in for a lookup)")

    monkeypatch.setattr(LocalRunner, "interpreter", missing)
    argv = ["build-plugin", "--spec", str(spec), "--plugin-source", str(repo)]
    argv += ["--dist", str(tmp_path / "dist"), "--cache-dir", str(cache_root)]
    assert main(argv) == 0
    assert "cached result reused" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 3  # building: the interpreter is asked for
