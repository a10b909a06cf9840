"""Every committed buildspec is valid and its locks are current: `vpr spec check` and
`vpr lock --check`, as CI runs them, with the real core sdists. A spec whose plugin
source cannot be reached here (GitHub) is checked with the plugin's inputs its locks
recorded; a stale, edited or missing lock fails (exit 2)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC, REPO, vpr

SPECS = sorted(p.name for p in (REPO / "buildspec").glob("*.toml"))


@pytest.mark.parametrize("name", SPECS)
def test_every_committed_spec_is_valid_and_its_locks_current(name: str, cache_root: Path) -> None:
    spec = REPO / "buildspec" / name
    vpr("spec", "check", str(spec))
    done = vpr("lock", "--check", "--spec", str(spec), "--cache-dir", str(cache_root))
    assert "is current" in done.stderr


def _project(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of tt's spec and locks whose plugin source cannot be reached (a commit no
    cache holds, at a URL that refuses the connection)."""
    proj = tmp_path / "proj"
    (proj / "buildspec").mkdir(parents=True)
    (proj / "constraints").mkdir()
    text = (REPO / "buildspec" / "tt.toml").read_text()
    text = re.sub(r'url = "https://github.com/[^"]+"', 'url = "https://127.0.0.1:9/plugin"', text)
    text = re.sub(r'commit = "[0-9a-f]{40}"', f'commit = "{"0" * 40}"', text)
    spec = proj / "buildspec" / "tt.toml"
    spec.write_text(text)
    for lock in ("build-core-py310.txt", "env-tt-py310.txt"):
        shutil.copy(REPO / "constraints" / lock, proj / "constraints" / lock)
    return spec, proj / "constraints" / "env-tt-py310.txt"


def test_unreachable_plugin_is_checked_with_the_recorded_inputs(
    tmp_path: Path, cache_root: Path
) -> None:
    spec, env_lock = _project(tmp_path)
    args = ("lock", "--check", "--spec", str(spec), "--cache-dir", str(cache_root))
    done = vpr(*args)
    assert "the plugin source is not reachable" in done.stderr
    assert "(the plugin's inputs as recorded in it)" in done.stderr
    # known-bad: the recorded inputs edited (the body hash still holds: only the inputs)
    good = env_lock.read_text()
    env_lock.write_text(good.replace('["tblib>=3.1.0"]', '["tblib>=3.0"]'))
    done = vpr(*args, check=False)
    assert done.returncode == 2 and "lock is stale" in done.stderr
    # a lock that records none cannot be checked without the source: said, exit 2
    env_lock.write_text(re.sub(r"^# plugin-dependencies: .*\n", "", good, flags=re.M))
    done = vpr(*args, check=False)
    assert done.returncode == 2 and "records no 'plugin-dependencies:' line" in done.stderr
    # a missing lock (as tt's was): exit 2 naming it
    env_lock.unlink()
    done = vpr(*args, check=False)
    assert done.returncode == 2 and "env-tt-py310.txt: lock file not found" in done.stderr
    assert "Traceback" not in done.stderr


def _locks() -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((REPO / "constraints").iterdir())}


def test_the_commands_that_read_the_locks_leave_constraints_byte_for_byte(
    reference_env: dict, session_dist: Path, cache_root: Path
) -> None:
    """The reference pairing, as a person runs it in this checkout: `vpr lock --check`,
    `vpr lock` (every lock current: none resolved again), `vpr release --graph`, and the
    stages that read a lock (build-core, build-plugin, env; cached after the session's
    fixtures); constraints/ is then what was committed, byte for byte. Re-resolving a current
    lock took newer releases and this machine's find-links (a `# file: torch ...` line naming
    pip's local wheel folder), a lock `vpr lock --check` still called current."""
    before = _locks()
    common = ("--spec", str(REFERENCE_SPEC), "--cache-dir", str(cache_root))
    dist = ("--dist", str(session_dist))
    try:
        vpr("lock", "--check", *common)
        done = vpr("lock", *common)
        assert done.stderr.count("is current; left as it is") == 2, done.stderr
        vpr("release", "--graph", *common, *dist)
        for stage in ("build-core", "build-plugin", "env"):
            vpr(stage, *common, *dist)
        assert _locks() == before
    finally:  # a checkout is never left with a lock rewritten by this test
        for name, data in before.items():
            if (REPO / "constraints" / name).read_bytes() != data:
                (REPO / "constraints" / name).write_bytes(data)
