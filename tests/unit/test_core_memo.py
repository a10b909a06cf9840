"""The warm build-core path (stages/corememo): a memo of a full run, a hit only where every
part of it still holds. Real files, real hashes: a cache entry, a source tree with its
manifest, a lock and a spec as a full run leaves them; each mutation must miss."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from tests.support import REFERENCE_SPEC
from vllm_plugin_release.buildspec.load import load_spec
from vllm_plugin_release.core import records
from vllm_plugin_release.core.buildrecord import parse
from vllm_plugin_release.core.cache import Cache, write_json, write_tree_manifest
from vllm_plugin_release.edges import proc
from vllm_plugin_release.stages import corememo
from vllm_plugin_release.stages.corememo import reuse

WHEEL = "vllm-0.26.0+empty-cp311-cp311-linux_x86_64.whl"


class Setup:
    """What a full `vpr build-core` leaves: spec, lock, verified tree, stage entry, memo."""

    def __init__(
        self, tmp_path: Path, *, isolation: str = "off", interpreter: dict | None = None
    ) -> None:
        project = tmp_path / "project"
        (project / "buildspec").mkdir(parents=True)
        (project / "constraints").mkdir()
        self.spec_path = project / "buildspec" / "warm.toml"
        text = REFERENCE_SPEC.read_text().replace(
            'network_isolation = "auto"', f'network_isolation = "{isolation}"'
        )
        self.spec_path.write_text(text)
        self.spec = load_spec(self.spec_path)
        self.lock = project / "constraints" / "build-core-py311.txt"
        self.lock.write_text("# a lock\nwheel==0.45.1\n")
        self.cache = Cache(tmp_path / ".vpr")
        self.tree = self.cache.src_dir(self.spec.core.source.sha256)
        (self.tree / "vllm-0.26.0" / "vllm").mkdir(parents=True)
        (self.tree / "vllm-0.26.0" / "pyproject.toml").write_text("[build-system]\n")
        (self.tree / "vllm-0.26.0" / "vllm" / "__init__.py").write_text("X = 1\n")
        write_tree_manifest(self.tree)
        self.stage_dir = self.cache.stage_dir("build-core", "ab" * 32)
        self.stage_dir.mkdir(parents=True)
        wheel = b"PK\x03\x04 a wheel's bytes"
        (self.stage_dir / WHEEL).write_bytes(wheel)
        isolated = isolation != "off" and proc.can_unshare_network()
        self.record = {
            "stage": "build-core",
            "core": {"name": "vllm", "version": "0.26.0"},
            "wheel": {"filename": WHEEL, "sha256": hashlib.sha256(wheel).hexdigest()},
            "isolated": isolated,
            "build_env": {"lock_sha256": hashlib.sha256(self.lock.read_bytes()).hexdigest()},
            **({"interpreter": interpreter} if interpreter else {}),
        }
        write_json(self.stage_dir / records.BUILD_CORE, self.record)
        self.dist = tmp_path / "dist"
        self.full = reuse(self.stage_dir, self.dist / "reference", records.BUILD_CORE, "build-core")
        assert self.full is not None
        self.ask = corememo.Ask(self.spec_path)
        self.name = corememo.memo_name(self.ask)
        assert self.name
        assert corememo.remember(self.cache, self.name, self.spec, self.full)

    def hit(self, dist: Path | None = None, named: tuple[str, str] | None = None):
        return corememo.warm_hit(self.cache, self.name, dist or self.dist, named)

    def memo_file(self) -> Path:
        return self.cache.root / "stages" / corememo.MEMOS / f"{self.name}.json"


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    return Setup(tmp_path)


def test_a_warm_hit_delivers_the_full_paths_bytes(setup: Setup, tmp_path: Path) -> None:
    dist = tmp_path / "other-dist"
    result = setup.hit(dist)
    assert result is not None and result.cached
    out = dist / "reference"
    assert result.wheel == out / WHEEL
    for name in (WHEEL, records.BUILD_CORE):
        assert (out / name).read_bytes() == (setup.dist / "reference" / name).read_bytes()
    assert json.loads(result.record.read_text()) == setup.record
    # and again, over its own output (the wheel there is checked, not copied twice)
    assert setup.hit(dist) is not None


def test_an_edited_spec_names_another_memo(setup: Setup) -> None:
    setup.spec_path.write_text(setup.spec_path.read_text() + "# a comment\n")
    name = corememo.memo_name(setup.ask)
    assert name and name != setup.name
    assert corememo.warm_hit(setup.cache, name, setup.dist) is None


def test_the_command_line_and_the_code_are_in_the_name(
    setup: Setup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert corememo.memo_name(corememo.Ask(setup.spec_path, backend="docker")) != setup.name
    assert corememo.memo_name(corememo.Ask(setup.spec_path, interpreter="/x")) != setup.name
    assert corememo.memo_name(corememo.Ask(tmp_path / "absent.toml")) is None
    code = tmp_path / "code"
    code.mkdir()
    (code / "stage.py").write_text("KEY = 1\n")
    monkeypatch.setattr(corememo, "PACKAGE", code)
    before = corememo.memo_name(setup.ask)
    (code / "stage.py").write_text("KEY = 22\n")  # an edited module
    assert corememo.memo_name(setup.ask) != before


def test_an_edited_lock_misses(setup: Setup) -> None:
    setup.lock.write_text(setup.lock.read_text() + "setuptools==80.0.0\n")
    assert setup.hit() is None
    setup.lock.unlink()
    assert setup.hit() is None


@pytest.mark.parametrize("change", ["rewrite", "add", "remove", "link"])
def test_a_changed_source_tree_misses(setup: Setup, change: str) -> None:
    init = setup.tree / "vllm-0.26.0" / "vllm" / "__init__.py"
    if change == "rewrite":  # same size, mtime put back: ctime still shows it
        st = init.stat()
        init.write_text("X = 2\n")
        os.utime(init, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif change == "add":
        (init.parent / "extra.py").write_text("")
    elif change == "remove":
        init.unlink()
    else:
        init.unlink()
        init.symlink_to("/etc/hostname")
    assert setup.hit() is None


def test_a_tampered_cached_wheel_misses_and_writes_nothing(setup: Setup, tmp_path: Path) -> None:
    (setup.stage_dir / WHEEL).write_bytes(b"PK\x03\x04 another wheel")
    dist = tmp_path / "fresh"
    assert setup.hit(dist) is None
    assert not dist.exists()
    (setup.stage_dir / WHEEL).unlink()
    assert setup.hit(dist) is None
    os.mkfifo(setup.stage_dir / WHEEL)  # never opened: a read would wait for a writer
    assert setup.hit(dist) is None
    assert not dist.exists()


def test_a_tampered_cached_record_misses(setup: Setup) -> None:
    record = setup.stage_dir / records.BUILD_CORE
    data = json.loads(record.read_text())
    data["core"]["version"] = "0.27.0"  # still a well-formed record naming the same wheel
    write_json(record, data)
    assert setup.hit() is None


def _record_with(setup: Setup, **wheel: str) -> bytes:
    return json.dumps({**setup.record, "wheel": {**setup.record["wheel"], **wheel}}).encode()


@pytest.mark.parametrize(
    "record",
    [
        b"[]",
        b'{"wheel": {}}',
        "nul",
        "escape",
        "not-a-wheel",
        "bad-sha",
    ],
)
def test_a_hostile_record_the_memo_vouches_for_misses(setup: Setup, record: bytes | str) -> None:
    """The memo and the record are both in the cache: a record whose bytes the memo names
    is still checked as the full path's reader checks it, and never raises."""
    data = {
        "nul": lambda: _record_with(setup, filename="vllm\0.whl"),
        "escape": lambda: _record_with(setup, filename="../../" + WHEEL),
        "not-a-wheel": lambda: _record_with(setup, filename=records.BUILD_CORE),
        "bad-sha": lambda: _record_with(setup, sha256="../" * 21 + "a"),
    }.get(record, lambda: record)()
    assert isinstance(data, bytes)
    (setup.stage_dir / records.BUILD_CORE).write_bytes(data)
    memo = json.loads(setup.memo_file().read_text())
    memo["record_sha256"] = hashlib.sha256(data).hexdigest()
    write_json(setup.memo_file(), memo)
    assert setup.hit() is None


@pytest.mark.parametrize(
    "memo",
    [
        b"not json",
        b"[]",
        b"{}",
        b'{"memo": 1}',
        "stage_key=../../../../etc",
        "name=../../outside",
        "memo=1",
        "isolated=flip",
        b"{" * 100000,
        b" " * (corememo.MAX_MEMO + 1),
    ],
)
def test_a_hostile_memo_misses(setup: Setup, memo: bytes | str) -> None:
    path = setup.memo_file()
    if isinstance(memo, str):  # one key of the real memo changed
        key, value = memo.split("=")
        data = json.loads(path.read_text())
        data[key] = not data[key] if value == "flip" else int(value) if value.isdigit() else value
        memo = json.dumps(data).encode()
    path.write_bytes(memo)
    assert setup.hit() is None


def test_a_memo_that_is_not_a_file_misses(setup: Setup) -> None:
    path = setup.memo_file()
    path.unlink()
    assert setup.hit() is None
    path.mkdir()
    assert setup.hit() is None
    path.rmdir()
    os.mkfifo(path)
    assert stat.S_ISFIFO(path.lstat().st_mode)
    assert setup.hit() is None


def test_isolation_is_probed_again(tmp_path: Path) -> None:
    """With isolation on, the memo holds what `unshare -n` gave; a memo that says otherwise
    (another machine's, or a probe that now answers differently) misses."""
    setup = Setup(tmp_path, isolation="auto")
    assert setup.hit() is not None
    data = json.loads(setup.memo_file().read_text())
    data["isolated"] = not data["isolated"]
    setup.memo_file().write_text(json.dumps(data))
    assert setup.hit() is None


def test_nothing_is_remembered_that_a_warm_run_could_not_check(setup: Setup) -> None:
    docker = setup.spec.with_backend("docker")
    assert not corememo.remember(setup.cache, setup.name, docker, setup.full)
    # the tree changed after the full run checked it
    (setup.tree / "vllm-0.26.0" / "new.py").write_text("")
    assert not corememo.remember(setup.cache, setup.name, setup.spec, setup.full)
    (setup.tree / "vllm-0.26.0" / "new.py").unlink()
    write_tree_manifest(setup.tree)
    assert corememo.remember(setup.cache, setup.name, setup.spec, setup.full)
    # the lock changed after the run made its key of it
    setup.lock.write_text("# another lock\n")
    assert not corememo.remember(setup.cache, setup.name, setup.spec, setup.full)


def test_a_fresh_builds_record_is_remembered(setup: Setup) -> None:
    """A fresh build's record (`store`) holds tuples where its JSON has lists: the same
    record all the same (the cold run of `vpr build-core --force` writes the memo)."""
    data = {**setup.record, "builds": ("a", "b")}
    write_json(setup.stage_dir / records.BUILD_CORE, data)
    fresh = setup.full._replace(data=parse(data, records.BUILD_CORE))
    assert corememo.remember(setup.cache, setup.name, setup.spec, fresh)
    assert setup.hit() is not None


def test_the_unshare_probe_can_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for code, expected in ((0, True), (1, False)):
        tool = tmp_path / str(code) / "unshare"
        tool.parent.mkdir()
        tool.write_text(f"#!/bin/sh\nexit {code}\n")
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", str(tool.parent))
        proc.can_unshare_network.cache_clear()
        assert proc.can_unshare_network() is expected
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    proc.can_unshare_network.cache_clear()
    assert proc.can_unshare_network() is False
    proc.can_unshare_network.cache_clear()


def test_the_interpreter_variable_is_in_the_name(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VPR_INTERPRETER", "/nonexistent/python3.11")
    assert corememo.memo_name(setup.ask) != setup.name  # never a hit made without it


def test_a_named_interpreter_must_still_be_the_one_the_wheel_was_built_with(
    tmp_path: Path,
) -> None:
    """The named path is asked again on a warm run: still the spec's CPython with the
    fingerprint the cached wheel records, else a miss (the full path says why)."""
    import sys

    from vllm_plugin_release.edges import interpreters

    python = load_spec(REFERENCE_SPEC).build.python
    if f"{sys.version_info.major}.{sys.version_info.minor}" != python:
        pytest.skip(f"needs CPython {python} to run the tests")
    named = tmp_path / "named" / "python"
    named.parent.mkdir()
    named.symlink_to(os.path.realpath(sys.executable))
    found = interpreters.explicit(str(named), python, "--interpreter")
    setup = Setup(tmp_path, interpreter=found.record())
    assert setup.hit(named=(str(named), "--interpreter")) is not None
    assert setup.hit(named=(str(named), "VPR_INTERPRETER")) is not None
    other = tmp_path / "other"  # another program at the named path now
    other.write_text("#!/bin/sh\necho 3.11\n")
    other.chmod(0o755)
    named.unlink()
    named.symlink_to(other)
    assert setup.hit(named=(str(named), "--interpreter")) is None
    named.unlink()  # nothing there
    assert setup.hit(named=(str(named), "--interpreter")) is None
    # the record names another interpreter's fingerprint: a miss, the same path notwithstanding
    named.symlink_to(os.path.realpath(sys.executable))
    made = Setup(tmp_path / "made", interpreter={**found.record(), "sha256": "0" * 64})
    assert made.hit(named=(str(named), "--interpreter")) is None
    assert made.hit() is not None  # none named: the search's answer is not asked for


def test_a_cached_wheel_of_another_interpreter_is_not_reused_silently(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    from vllm_plugin_release.edges.interpreters import _interpreter, probe

    answer = probe(os.path.realpath(sys.executable)) or {}
    here = _interpreter(os.path.realpath(sys.executable), answer, "explicit")
    setup = Setup(tmp_path, interpreter={**here.record(), "sha256": "0" * 64})
    dist = tmp_path / "named-dist"
    named = (here, "--interpreter")
    assert reuse(setup.stage_dir, dist, records.BUILD_CORE, "build-core", named) is None
    said = capsys.readouterr()
    assert "built with CPython" in said.out + said.err
    assert f"--interpreter names {here.path}" in said.out + said.err
    assert not dist.exists()  # nothing delivered
    same = Setup(tmp_path / "same", interpreter=here.record())
    assert reuse(same.stage_dir, dist, records.BUILD_CORE, "build-core", named) is not None
