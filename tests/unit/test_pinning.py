"""`pinning`: the installer parser and the check, each way (a good installer and mutations)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import shell_commands, spec_head
from vllm_plugin_release.buildspec import model as specmod
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.conform.checks import pinning
from vllm_plugin_release.conform.lib.installscan import InputFile, PinningOptions, pinning_options
from vllm_plugin_release.core.errors import BadInput

SHA = "a" * 64

PLUGIN_TABLES = """
[plugin]
name = "vllm-demo-plugin"
{plugin_keys}

[plugin.source]
kind = "path"
path = "plugin"
{extra}
"""

# A synthetic installer in the shape plugin installers take: a requirements list
# fetched for the pinned core, a hash check, then vLLM from source for the empty target.
GOOD_INSTALLER = """\
#!/usr/bin/env bash
# Installs vLLM core for the empty target, then this plugin.
set -euo pipefail
VLLM_VERSION=0.26.0
REQS="$(mktemp -d)/common.txt"
curl -fsSL \\
    "https://mirror.example.invalid/vllm/v${VLLM_VERSION}/common.txt" \\
    -o "$REQS" ||
    # a comment inside the || continuation
    { echo "cannot fetch the core requirements"; exit 1; }
echo "0123abcd  $REQS" | sha256sum -c -
uv pip install --override overrides.txt \\
    -r "$REQS"   # trailing comment after a continuation
export VLLM_TARGET_DEVICE=empty
uv pip install --no-deps --no-binary vllm "vllm==${VLLM_VERSION}"
uv pip install --no-deps dist/vllm_demo_plugin-1.0-py3-none-any.whl
"""

GOOD_OVERRIDES = """\
# Overrides for the core's requirements.
numpy==1.26.4
opencv-python-headless==4.11.0.86
"""


def make(
    tmp_path: Path,
    installer: str = GOOD_INSTALLER,
    *,
    core: str = "0.26.0",
    installer_name: str = "scripts/install.sh",
    overrides: str | None = GOOD_OVERRIDES,
    extra: str = "",
    files: dict[str, str] | None = None,
    write_overrides_key: bool = True,
) -> tuple[specmod.Spec, Path]:
    root = tmp_path / "plugin"
    (root / installer_name).parent.mkdir(parents=True, exist_ok=True)
    (root / installer_name).write_text(installer)
    if overrides is not None:
        (root / "overrides.txt").write_text(overrides)
    for name, text in (files or {}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    keys = f'installer = "{installer_name}"'
    if write_overrides_key:
        keys += '\noverrides = "overrides.txt"'
    spec_file = tmp_path / "spec.toml"
    spec_file.write_text(
        spec_head(core=core, sha=SHA) + PLUGIN_TABLES.format(plugin_keys=keys, extra=extra)
    )
    return load_spec(spec_file), root


# ---------------------------------------------------------------------------
# The shell parser.


def test_shell_structure() -> None:
    script = (
        "A=1 B='two words' cmd --flag \\\n"
        "    value   # comment\n"
        "X=$(mktemp)\n"
        "curl -fsSL https://x.invalid/f \\\n"
        '    -o "$X" ||\n'
        "    # comment inside the list\n"
        "    { echo 'no'; return 1; }\n"
        "make && make install; ls | wc -l\n"
        "echo '# not a comment' \"a;b\" done\n"
    )
    cmds = shell_commands(script, "s.sh")
    got = [(c.line, c.op, c.argv) for c in cmds]
    assert got == [
        (1, None, ["cmd", "--flag", "value"]),
        (3, None, ["mktemp"]),
        (4, ";", ["curl", "-fsSL", "https://x.invalid/f", "-o", "$X"]),
        (7, "||", ["echo", "no"]),
        (7, ";", ["return", "1"]),
        (8, ";", ["make"]),
        (8, "&&", ["make", "install"]),
        (8, ";", ["ls"]),
        (8, "|", ["wc", "-l"]),
        (9, ";", ["echo", "# not a comment", "a;b", "done"]),
    ]
    assert cmds[0].prefix == {"A": "1", "B": "two words"}


def test_shell_variables_exports_and_redirections() -> None:
    script = (
        "V=0.26.0\n"
        "export VLLM_TARGET_DEVICE=empty\n"
        'pip install "vllm==${V}" 2>&1 >/tmp/log\n'
        "LOCAL=cpu pip install x\n"
        "bash -c 'pip install y==1.0'\n"
        "cat <<EOF > notes.txt\n"
        "pip install not-a-command\n"
        "EOF\n"
        "echo after\n"
    )
    cmds = shell_commands(script, "s.sh")
    argvs = [c.argv for c in cmds]
    assert ["pip", "install", "vllm==0.26.0"] in argvs
    assert ["pip", "install", "y==1.0"] in argvs
    assert ["pip", "install", "not-a-command"] not in argvs
    assert argvs[-1] == ["echo", "after"]
    first = next(c for c in cmds if c.argv[-1] == "vllm==0.26.0")
    assert first.env["VLLM_TARGET_DEVICE"].value == "empty"
    second = next(c for c in cmds if c.argv[-1] == "x")
    assert second.prefix == {"LOCAL": "cpu"}


def test_shell_runs_what_a_shell_reads_from_a_heredoc() -> None:
    script = "export V=0.26.0\nbash <<EOF\npip install vllm==$V\nEOF\necho after\n"
    argvs = [c.argv for c in shell_commands(script, "s.sh")]
    assert argvs == [["bash"], ["pip", "install", "vllm==0.26.0"], ["echo", "after"]]


# ---------------------------------------------------------------------------
# The check: a good installer passes ...


def test_good_installer_passes(tmp_path: Path) -> None:
    spec, root = make(tmp_path)
    result = pinning.check(spec, root)
    assert result.status == "pass", result.summary
    d = result.details
    assert d["core_pin"]["version"] == "0.26.0"
    assert d["core_pin"]["exact"] is True
    assert (d["core_pin"]["file"], d["core_pin"]["line"]) == ("scripts/install.sh", 15)
    assert d["target_device"]["value"] == "empty"
    assert d["target_device"]["line"] == 14
    assert d["from_source"]["value"] is True
    assert d["from_source"]["how"] == "--no-binary vllm"
    assert d["unhashed_fetches"] == []
    assert d["editable_installs"] == []
    assert d["unpinned"] == []
    assert "overrides.txt" in d["files_read"]


# ... and each mutation fails (or warns) for the right reason.


def test_installer_pinning_another_version_fails_naming_both(tmp_path: Path) -> None:
    spec, root = make(
        tmp_path, GOOD_INSTALLER.replace("VLLM_VERSION=0.26.0", "VLLM_VERSION=0.25.1")
    )
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "0.25.1" in result.summary and "0.26.0" in result.summary
    assert "scripts/install.sh:15" in result.summary


def test_unhashed_fetch_warns_by_default_and_fails_when_configured(tmp_path: Path) -> None:
    mutated = GOOD_INSTALLER.replace('echo "0123abcd  $REQS" | sha256sum -c -\n', "")
    spec, root = make(tmp_path, mutated)
    result = pinning.check(spec, root)
    assert result.status == "warn"
    fetch = result.details["unhashed_fetches"]
    assert len(fetch) == 1
    assert fetch[0]["url"] == "https://mirror.example.invalid/vllm/v0.26.0/common.txt"
    assert fetch[0]["line"] == 6 and fetch[0]["tool"] == "curl"
    assert fetch[0]["used_as"].startswith("requirement file")
    spec, root = make(tmp_path, mutated, extra='\n[conformance.pinning]\nunhashed_fetch = "fail"\n')
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "mirror.example.invalid" in result.summary


def test_hash_check_of_another_file_does_not_count(tmp_path: Path) -> None:
    mutated = GOOD_INSTALLER.replace('$REQS" | sha256sum', 'other.txt" | sha256sum')
    spec, root = make(tmp_path, mutated)
    assert pinning.check(spec, root).details["unhashed_fetches"]


def test_redirected_download_and_pipe_to_shell(tmp_path: Path) -> None:
    tail = "VLLM_TARGET_DEVICE=empty pip install --no-binary vllm vllm==0.26.0\n"
    verified = (
        "curl -fsSL https://example.invalid/tool.tar.gz > tool.tar.gz\n"
        'echo "0123abcd  tool.tar.gz" | sha256sum --check\n' + tail
    )
    spec, root = make(tmp_path, verified, overrides=None, write_overrides_key=False)
    assert pinning.check(spec, root).status == "pass"
    piped = "curl -fsSL https://example.invalid/get.sh | sh\n" + tail
    spec, root = make(tmp_path, piped, overrides=None, write_overrides_key=False)
    result = pinning.check(spec, root)
    assert result.status == "warn"
    assert result.details["unhashed_fetches"][0]["note"].startswith("piped into sh")


def test_inexact_pin_fails(tmp_path: Path) -> None:
    mutated = GOOD_INSTALLER.replace('"vllm==${VLLM_VERSION}"', '"vllm>=0.26"')
    spec, root = make(tmp_path, mutated)
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "not pinned exactly" in result.summary


def test_wrong_or_unexported_target_fails(tmp_path: Path) -> None:
    spec, root = make(tmp_path, GOOD_INSTALLER.replace("DEVICE=empty", "DEVICE=cuda"))
    result = pinning.check(spec, root)
    assert result.status == "fail" and "VLLM_TARGET_DEVICE=cuda" in result.summary
    spec, root = make(tmp_path, GOOD_INSTALLER.replace("export VLLM_TARGET", "VLLM_TARGET"))
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "not exported" in result.summary
    spec, root = make(tmp_path, GOOD_INSTALLER.replace("export VLLM_TARGET_DEVICE=empty\n", ""))
    result = pinning.check(spec, root)
    assert result.status == "fail" and "never set" in result.summary


def test_prefix_assignment_sets_the_target(tmp_path: Path) -> None:
    mutated = GOOD_INSTALLER.replace("export VLLM_TARGET_DEVICE=empty\n", "").replace(
        "uv pip install --no-deps --no-binary",
        "VLLM_TARGET_DEVICE=empty uv pip install --no-deps --no-binary",
    )
    spec, root = make(tmp_path, mutated)
    result = pinning.check(spec, root)
    assert result.status == "pass", result.summary
    assert result.details["target_device"]["line"] == 14


def test_binary_wheel_fails(tmp_path: Path) -> None:
    spec, root = make(tmp_path, GOOD_INSTALLER.replace("--no-binary vllm ", ""))
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "not built from source" in result.summary
    spec, root = make(
        tmp_path,
        GOOD_INSTALLER.replace("--no-binary vllm ", ""),
        extra="\n[conformance.pinning]\nrequire_from_source = false\n",
    )
    assert pinning.check(spec, root).status == "pass"


def test_editable_install_and_unpinned_dependencies(tmp_path: Path) -> None:
    mutated = GOOD_INSTALLER.replace(
        "uv pip install --no-deps dist/vllm_demo_plugin-1.0-py3-none-any.whl",
        "uv pip install -e .",
    )
    pyproject = (
        '[project]\nname = "vllm-demo-plugin"\nversion = "1.0"\n'
        'dependencies = ["tblib>=3.1.0", "msgspec==0.19.0"]\n'
    )
    overrides = GOOD_OVERRIDES + "numpy>=1.24.4,<2\n"
    spec, root = make(tmp_path, mutated, overrides=overrides, files={"pyproject.toml": pyproject})
    result = pinning.check(spec, root)
    assert result.status == "warn"
    assert result.details["editable_installs"] == [
        {"target": ".", "file": "scripts/install.sh", "line": 16}
    ]
    unpinned = {(u["requirement"], u["file"], u["line"]) for u in result.details["unpinned"]}
    assert unpinned == {
        ("tblib>=3.1.0", "pyproject.toml", 4),
        ("numpy<2,>=1.24.4", "overrides.txt", 4),
    }
    spec, root = make(
        tmp_path,
        mutated,
        overrides=overrides,
        files={"pyproject.toml": pyproject},
        extra='\n[conformance.pinning]\neditable_install = "fail"\nunpinned = "ignore"\n',
    )
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "editable" in result.summary and "tblib" not in result.summary


def test_missing_installer_or_overrides_fails_naming_the_file(tmp_path: Path) -> None:
    spec, root = make(tmp_path)
    (root / "scripts/install.sh").unlink()
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "scripts/install.sh is missing ([plugin] installer)" in result.summary
    spec, root = make(tmp_path, overrides=None)
    (root / "overrides.txt").unlink(missing_ok=True)
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "overrides.txt is missing ([plugin] overrides)" in result.summary


def test_core_pinned_in_requirements_file(tmp_path: Path) -> None:
    installer = (
        "#!/bin/sh\n"
        "export VLLM_TARGET_DEVICE=empty\n"
        "python3 -m pip install -r requirements/core.txt\n"
    )
    reqs = "--no-binary vllm\nvllm==0.26.0 \\\n    --hash=sha256:" + "b" * 64 + "\n"
    spec, root = make(
        tmp_path,
        installer,
        files={"requirements/core.txt": reqs},
        overrides=None,
        write_overrides_key=False,
    )
    result = pinning.check(spec, root)
    assert result.status == "pass", result.summary
    pin = result.details["core_pin"]
    assert (pin["file"], pin["line"], pin["via"]) == ("requirements/core.txt", 2, "requirements")


def test_git_checkout_of_the_core(tmp_path: Path) -> None:
    installer = (
        "git clone --depth 1 --branch v0.26.0 https://github.com/vllm-project/vllm.git\n"
        "cd vllm && VLLM_TARGET_DEVICE=empty pip install --no-build-isolation .\n"
    )
    spec, root = make(tmp_path, installer, overrides=None, write_overrides_key=False)
    result = pinning.check(spec, root)
    assert result.status == "warn", result.summary  # a tag is not a commit
    assert result.details["core_pin"]["version"] == "0.26.0"
    assert result.details["from_source"]["how"].startswith("git checkout v0.26.0")
    assert result.details["unhashed_fetches"][0]["kind"] == "git-ref"


def test_requirements_fetched_for_another_core_version_fail(tmp_path: Path) -> None:
    installer = (
        "curl -fsSLo common.txt "
        "https://raw.githubusercontent.com/vllm-project/vllm/v0.25.1/requirements/common.txt\n"
        "pip install -r common.txt\n"
        "VLLM_TARGET_DEVICE=empty pip install --no-binary vllm vllm==0.26.0\n"
    )
    spec, root = make(tmp_path, installer, overrides=None, write_overrides_key=False)
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "vLLM 0.25.1" in result.summary and "0.26.0" in result.summary


def test_dockerfile(tmp_path: Path) -> None:
    dockerfile = (
        "FROM python:3.11-slim@sha256:" + "c" * 64 + "\n"
        "ARG VLLM_VERSION=0.26.0\n"
        "ENV VLLM_TARGET_DEVICE=empty \\\n"
        "    UV_NO_CACHE=1\n"
        "ADD --checksum=sha256:" + "d" * 64 + " https://example.invalid/a.tar.gz /tmp/\n"
        "RUN pip install uv==0.8.0 \\\n"
        "# a comment line inside the continuation\n"
        "    && uv pip install --system --no-binary vllm \\\n"
        "        vllm==${VLLM_VERSION}\n"
        'RUN ["pip", "install", "--no-deps", "/wheels/vllm_demo_plugin-1.0-py3-none-any.whl"]\n'
    )
    spec, root = make(
        tmp_path,
        dockerfile,
        installer_name="docker/Dockerfile",
        overrides=None,
        write_overrides_key=False,
    )
    result = pinning.check(spec, root)
    assert result.status == "pass", result.summary
    # The core install starts on line 8 (after `&&`, the comment line dropped).
    assert (result.details["core_pin"]["file"], result.details["core_pin"]["line"]) == (
        "docker/Dockerfile",
        8,
    )
    assert result.details["target_device"]["line"] == 3
    mutated = dockerfile.replace("--checksum=sha256:" + "d" * 64 + " ", "").replace(
        "ARG VLLM_VERSION=0.26.0", "ARG VLLM_VERSION=0.25.1"
    )
    spec, root = make(
        tmp_path,
        mutated,
        installer_name="docker/Dockerfile",
        overrides=None,
        write_overrides_key=False,
    )
    result = pinning.check(spec, root)
    assert result.status == "fail"
    assert "0.25.1" in result.summary
    assert result.details["unhashed_fetches"][0]["tool"] == "ADD"


def test_sourced_script_is_followed(tmp_path: Path) -> None:
    installer = "source scripts/versions.sh\npip install --no-binary vllm vllm==$CORE\n"
    versions = "export VLLM_TARGET_DEVICE=empty\nCORE=0.26.0\n"
    spec, root = make(
        tmp_path,
        installer,
        files={"scripts/versions.sh": versions},
        overrides=None,
        write_overrides_key=False,
    )
    result = pinning.check(spec, root)
    assert result.status == "pass", result.summary
    assert result.details["target_device"]["file"] == "scripts/versions.sh"


def test_bad_options_name_the_key(tmp_path: Path) -> None:
    # The spec loader rejects them: the check's schema is part of the spec's (the check
    # registry), so a check only ever sees validated options.
    for table, needle in (
        ('unhashed_fetch = "maybe"', r"spec\.toml:\d+: unhashed_fetch must be one of"),
        ("hashes = true", r"spec\.toml:\d+: unknown key 'hashes' in \[conformance\.pinning\]"),
    ):
        with pytest.raises(BadInput, match=needle):
            make(tmp_path, extra=f"\n[conformance.pinning]\n{table}\n")
    spec, _ = make(tmp_path, extra='\n[conformance.pinning]\nunhashed_fetch = "warn"\n')
    assert pinning_options(spec) == PinningOptions(unhashed_fetch="warn")


def test_pinning_options_typed_with_their_defaults(tmp_path: Path) -> None:
    """`[conformance.pinning]` read once into its record: a path or {path, kind} in files,
    the build arguments, the levels; the defaults where the table says nothing."""
    spec, _ = make(tmp_path)
    assert pinning_options(spec) == PinningOptions()
    extra = (
        "\n[conformance.pinning]\n"
        'files = ["a.txt", {path = "docker/Dockerfile", kind = "dockerfile"}]\n'
        'build_args = {VERSION = "1"}\nunpinned = "fail"\nrequire_from_source = false\n'
    )
    spec, _ = make(tmp_path, extra=extra)
    options = pinning_options(spec)
    key = "[conformance.pinning] files"
    assert options.files == (
        InputFile("a.txt", "", "requirements", key),
        InputFile("docker/Dockerfile", "dockerfile", "requirements", key),
    )
    assert options.build_args == {"VERSION": "1"}
    assert (options.unpinned, options.unhashed_fetch, options.require_from_source) == (
        "fail",
        "warn",
        False,
    )
