"""A tampered cache is never used, and two runs on a cold cache take turns."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support import Index, make_sdist
from vllm_plugin_release.buildspec.model import SdistSource
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.edges.fetch import Fetcher
from vllm_plugin_release.edges.interpreters import Interpreter
from vllm_plugin_release.stages import corememo, wheelbuild

RECORD = "build-core.json"
VERSION_PY = b'__version__ = "0.0.1"\n'


@pytest.fixture
def fetched(tmp_path: Path):
    """A tiny core sdist served on loopback, fetched and extracted into a fresh cache."""
    index = Index()
    data = make_sdist({"setup.py": b"print(1)\n", "vllm/version.py": VERSION_PY})
    index.files["vllm-0.0.1.tar.gz"] = data
    src = SdistSource(
        index=index.url, filename="vllm-0.0.1.tar.gz", sha256=hashlib.sha256(data).hexdigest()
    )
    fetcher = Fetcher(Cache(tmp_path / ".vpr"))
    fetcher.source_tree(src, "vllm")
    yield fetcher, src, data, index
    index.close()


def test_tampered_cas_file_is_downloaded_again(fetched, capsys) -> None:
    fetcher, src, data, index = fetched
    cas = fetcher.cache.cas_path(src.sha256)
    broken = bytearray(cas.read_bytes())
    broken[len(broken) // 2] ^= 0x01
    cas.write_bytes(bytes(broken))
    shutil.rmtree(fetcher.cache.src_dir(src.sha256))
    hits = len(index.hits)
    tree = fetcher.source_tree(src, "vllm")
    assert cas.read_bytes() == data  # the bad copy was discarded, never extracted
    assert len(index.hits) > hits
    assert (tree / "vllm" / "version.py").read_bytes() == VERSION_PY
    assert "fails its sha256" in capsys.readouterr().err


def test_intact_cas_file_is_not_rehashed_each_time(fetched, monkeypatch) -> None:
    fetcher, src, _, _ = fetched
    from vllm_plugin_release.core import cache as cache_mod

    monkeypatch.setattr(cache_mod, "sha256_file", lambda path: pytest.fail("re-hashed"))
    assert fetcher.sdist(src, "vllm") == fetcher.cache.cas_path(src.sha256)


def test_tampered_extracted_tree_is_extracted_again(fetched, capsys) -> None:
    fetcher, src, _, _ = fetched
    tree = fetcher.source_tree(src, "vllm")
    with (tree / "vllm" / "version.py").open("a") as f:
        f.write("import os; os.system('curl evil')\n")
    tree = fetcher.source_tree(src, "vllm")
    assert (tree / "vllm" / "version.py").read_bytes() == VERSION_PY
    assert "differs from its manifest; re-extracting" in capsys.readouterr().err


def test_intact_extracted_tree_is_not_rehashed_each_time(fetched, monkeypatch) -> None:
    """The stamps recorded with the last full check vouch for an untouched tree."""
    fetcher, src, _, _ = fetched
    from vllm_plugin_release.core import cache as cache_mod

    monkeypatch.setattr(cache_mod, "sha256_file", lambda path: pytest.fail("re-hashed"))
    tree = fetcher.source_tree(src, "vllm")
    assert (tree / "vllm" / "version.py").read_bytes() == VERSION_PY


def test_rewrite_that_keeps_size_and_mtime_is_caught(fetched, capsys) -> None:
    """Same length, mtime set back: only the content (and the ctime) differ."""
    fetcher, src, _, _ = fetched
    tree = fetcher.source_tree(src, "vllm")
    target = tree / "vllm" / "version.py"
    st = target.stat()
    target.write_bytes(VERSION_PY.replace(b"0.0.1", b"6.6.6"))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    tree = fetcher.source_tree(src, "vllm")
    assert (tree / "vllm" / "version.py").read_bytes() == VERSION_PY
    assert "differs from its manifest; re-extracting" in capsys.readouterr().err


def test_file_added_to_extracted_tree_is_caught(fetched) -> None:
    fetcher, src, _, _ = fetched
    tree = fetcher.source_tree(src, "vllm")
    (tree / "vllm" / "sitecustomize.py").write_text("print('hi')\n")
    tree = fetcher.source_tree(src, "vllm")
    assert not (tree / "vllm" / "sitecustomize.py").exists()


def _stage(tmp_path: Path) -> tuple[Path, dict]:
    stage_dir = tmp_path / "cache" / "stages" / "build-core" / "k"
    stage_dir.mkdir(parents=True)
    wheel = stage_dir / "vllm-0.0.1-py3-none-any.whl"
    wheel.write_bytes(b"PK wheel bytes")
    record = {
        "core": {"name": "vllm", "version": "0.0.1"},
        "wheel": {
            "filename": wheel.name,
            "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        },
    }
    (stage_dir / RECORD).write_text(json.dumps(record))
    return stage_dir, record


def test_intact_stage_wheel_is_reused(tmp_path: Path) -> None:
    stage_dir, _ = _stage(tmp_path)
    result = corememo.reuse(stage_dir, tmp_path / "dist", RECORD, "build-core")
    assert result is not None and result.cached
    assert result.wheel.read_bytes() == b"PK wheel bytes"


def test_tampered_stage_wheel_is_discarded_not_delivered(tmp_path: Path, capsys) -> None:
    stage_dir, record = _stage(tmp_path)
    wheel = stage_dir / record["wheel"]["filename"]
    data = bytearray(wheel.read_bytes())
    data[3] ^= 0x01
    wheel.write_bytes(bytes(data))
    dist = tmp_path / "dist"
    assert corememo.reuse(stage_dir, dist, RECORD, "build-core") is None
    assert not stage_dir.exists()  # discarded: the next run rebuilds instead of re-delivering
    assert not (dist / wheel.name).exists()
    assert "does not match its record; rebuilding" in capsys.readouterr().err


def test_delivery_puts_the_records_wheel_in_dist_alone(tmp_path: Path) -> None:
    """dist/NAME ends with the cached wheel's bytes under its name, whatever it held: a
    wheel of that name changed there is replaced, an earlier pin's wheel removed, another
    distribution's wheel kept."""
    stage_dir, record = _stage(tmp_path)
    dist = tmp_path / "dist" / "ref"  # made with its parents on first delivery
    name = record["wheel"]["filename"]
    assert corememo.reuse(stage_dir, dist, RECORD, "build-core") is not None
    (dist / name).write_bytes(b"PK another build")
    (dist / "vllm-0.0.0-py3-none-any.whl").write_bytes(b"PK an earlier pin")
    (dist / "plugin-1.0-py3-none-any.whl").write_bytes(b"PK the plugin")
    result = corememo.reuse(stage_dir, dist, RECORD, "build-core")
    assert result is not None and result.wheel == dist / name
    assert (dist / name).read_bytes() == b"PK wheel bytes"
    assert sorted(p.name for p in dist.glob("*.whl")) == ["plugin-1.0-py3-none-any.whl", name]


def test_a_cached_file_without_a_marker_is_hashed(tmp_path: Path) -> None:
    """`verified_file`: no marker (a first run, or one removed): the file is hashed, a good
    one gets its marker, a bad one is refused (and never raises for the absent marker)."""
    from vllm_plugin_release.core.cache import verified_file

    path = tmp_path / "file"
    path.write_bytes(b"pinned bytes")
    good = hashlib.sha256(b"pinned bytes").hexdigest()
    marker = tmp_path / "file.verified.json"
    assert not verified_file(path, "0" * 64) and not marker.exists()
    assert verified_file(path, good) and marker.exists()
    assert not verified_file(path, "0" * 64) and not marker.exists()


# -- two runs creating one cache entry at once ---------------------------------------------


# What the stand-in runner says it makes environments from (never run).
INTERPRETER = Interpreter(
    path="/usr/bin/python3.11",
    version="3.11.2",
    implementation="CPython",
    sha256="0" * 64,
    found_by="system",
)


class _SlowRunner:
    """Stands in for the local runner: records who ran, and takes its time."""

    env_key = None  # a local environment: keyed by lock and Python only
    uv = "uv"  # the commands are recorded, never run

    def __init__(self, venv: Path, log: Path) -> None:
        self.venv, self.log = venv, log

    def interpreter(self, version: str) -> Interpreter:
        return INTERPRETER

    def run(self, command, log) -> None:
        with self.log.open("a") as f:
            f.write(f"{os.getpid()}\n")
        (self.venv / "bin").mkdir(parents=True, exist_ok=True)
        (self.venv / "bin" / "python").write_text("")
        time.sleep(0.4)


def _create_env(root: str, log: str, start: float) -> None:
    cache = Cache(root)
    spec = SimpleNamespace(build=SimpleNamespace(python="3.11", find_links=[]))
    identity = {
        "lock": "k",
        "python": "3.11",
        "bytecode": wheelbuild.BYTECODE,
        "interpreter": INTERPRETER.identity(),
    }
    venv = cache.env_dir("build-core", wheelbuild.key_of(identity))
    time.sleep(max(0.0, start - time.time()))
    wheelbuild.ensure_build_env(spec, Path("lock.txt"), "k", cache, _SlowRunner(venv, Path(log)))


def test_two_runs_on_a_cold_cache_create_the_build_env_once(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    ctx = multiprocessing.get_context("fork")
    start = time.time() + 0.3
    procs = [
        ctx.Process(target=_create_env, args=(str(tmp_path / "cache"), str(log), start))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(set(log.read_text().split())) == 1  # one process built it, the other reused it


# -- a lock's body ----------------------------------------------------------------------

LOCK_BODY = "torch==2.13.0+cpu \\\n    --hash=sha256:" + "1" * 64 + "\n    # via -r build-core.in\n"


def _lock(tmp_path: Path, body: str = LOCK_BODY):
    from vllm_plugin_release.core.lockfile import LockRequest, header

    request = LockRequest(name="build-core", requirements=("torch==2.13.0+cpu",), python="3.11")
    path = tmp_path / "build-core-py311.txt"
    path.write_text("\n".join(header(request, body)) + "\n" + body)
    return request, path


def test_untouched_lock_is_current(tmp_path: Path) -> None:
    from vllm_plugin_release.core.lockfile import check_lock, pins

    request, path = _lock(tmp_path)
    assert pins(check_lock(path, request)) == {"torch": "2.13.0+cpu"}


def test_lock_with_a_swapped_pin_and_valid_hashes_is_refused(tmp_path: Path) -> None:
    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.core.lockfile import check_lock

    request, path = _lock(tmp_path)
    swapped = LOCK_BODY.replace("2.13.0+cpu", "2.12.0+cpu").replace("1" * 64, "2" * 64)
    text = path.read_text()
    path.write_text(text[: text.index(LOCK_BODY)] + swapped)
    with pytest.raises(BadInput, match="lock body was edited") as info:
        check_lock(path, request)
    assert str(path) in str(info.value)


def test_lock_without_a_body_digest_is_refused(tmp_path: Path) -> None:
    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.core.lockfile import check_lock

    request, path = _lock(tmp_path)
    path.write_text(
        "".join(line for line in path.read_text().splitlines(True) if "body-" not in line)
    )
    with pytest.raises(BadInput, match="written by an older vpr"):
        check_lock(path, request)


def test_a_missing_lock_is_bad_input(tmp_path: Path) -> None:
    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.core.lockfile import check_lock

    request, path = _lock(tmp_path)
    path.unlink()
    with pytest.raises(BadInput, match="lock file not found"):
        check_lock(path, request)


def test_lock_check_via_cli(tmp_path: Path) -> None:
    """`vpr lock --check`, as CI and a reviewer run it: a current lock passes and is left
    as it is; an edited or stale one is exit 2 naming the file, and is not rewritten."""
    from tests.integration.test_build_core import tiny_spec
    from tests.support import vpr

    index = Index()
    try:
        spec = tiny_spec(tmp_path, index, stamp='"STAMP = 1\\n"')
        common = ("--spec", str(spec), "--cache-dir", str(tmp_path / ".vpr"))
        wrote = vpr("lock", *common, cwd=tmp_path).stderr
        lock = Path(wrote.split("lock: wrote ", 1)[1].split()[0])
        before = lock.stat()
        done = vpr("lock", *common, "--check", cwd=tmp_path)
        assert f"lock: {lock} is current" in done.stderr
        after = lock.stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
        text = lock.read_text()
        pin = next(line for line in text.splitlines() if line.startswith("setuptools=="))
        edited = text.replace(pin, "setuptools==1.0 \\")
        key = text.split("# inputs-sha256: ", 1)[1][:64]
        stale = text.replace(key, key[::-1])  # as after an input changed
        for bad, why in ((edited, "lock body was edited"), (stale, "lock is stale")):
            lock.write_text(bad)
            done = vpr("lock", *common, "--check", cwd=tmp_path, check=False)
            assert done.returncode == 2, done.stderr
            assert f"{lock}: {why}" in done.stderr
            assert "Traceback" not in done.stderr
            assert lock.read_text() == bad  # checked, never rewritten
    finally:
        index.close()


def test_vpr_lock_leaves_a_current_lock_and_writes_a_stale_one(tmp_path: Path) -> None:
    """`vpr lock` over current locks resolves nothing again (the file is not even
    replaced); a stale or edited lock is written again, saying why; --upgrade resolves a
    current one again on purpose."""
    from tests.integration.test_build_core import tiny_spec
    from tests.support import vpr

    index = Index()
    try:
        spec = tiny_spec(tmp_path, index, stamp='"STAMP = 1\\n"')
        common = ("--spec", str(spec), "--cache-dir", str(tmp_path / ".vpr"))
        wrote = vpr("lock", *common, cwd=tmp_path).stderr
        assert "(lock file not found)" in wrote
        lock = Path(wrote.split("lock: wrote ", 1)[1].split()[0])
        before, text = lock.stat(), lock.read_text()
        again = vpr("lock", *common, cwd=tmp_path).stderr
        assert f"lock: {lock} is current; left as it is" in again and "wrote" not in again
        after = lock.stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
        key = text.split("# inputs-sha256: ", 1)[1][:64]
        lock.write_text(text.replace(key, key[::-1]))  # as after an input changed
        assert "(lock is stale" in vpr("lock", *common, cwd=tmp_path).stderr
        assert lock.read_text() == text  # the same inputs resolve to the same pins here
        # A second name keeps the old file's inode taken: a freed inode may be handed to the
        # new file, and comparing numbers alone would then say "not written" by chance.
        held = tmp_path / "held-lock"
        os.link(lock, held)
        upgraded = vpr("lock", "--upgrade", *common, cwd=tmp_path).stderr
        assert f"lock: wrote {lock} (--upgrade)" in upgraded
        assert not lock.samefile(held)  # written again
    finally:
        index.close()


@pytest.mark.parametrize("name", ["build-core-py311", "env-reference-py311"])
def test_committed_locks_carry_a_matching_body_digest(name: str) -> None:
    from tests.support import REPO
    from vllm_plugin_release.core.lockfile import BODY_LINE, body_sha256

    text = (REPO / "constraints" / f"{name}.txt").read_text(encoding="utf-8")
    m = BODY_LINE.search(text)
    assert m and m.group(1) == body_sha256(text[m.end() :])


def test_tampered_plugin_tree_is_made_again(tmp_path: Path, capsys) -> None:
    from tests.support import git
    from vllm_plugin_release.edges import plugin_source

    repo = tmp_path / "repo"
    (repo / "plugin" / "demo").mkdir(parents=True)
    (repo / "plugin" / "demo" / "__init__.py").write_text("X = 1\n")
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "plugin", cwd=repo, date="2026-07-25T00:00:00Z")
    spec = SimpleNamespace(path=repo / "spec.toml", fetch={})  # [fetch]: the default limits
    cache = Cache(tmp_path / ".vpr")
    first = plugin_source._from_repo_path(spec, repo / "plugin", cache)
    with (first.root / "demo" / "__init__.py").open("a") as f:
        f.write("import os\n")
    again = plugin_source._from_repo_path(spec, repo / "plugin", cache)
    assert (again.root / "demo" / "__init__.py").read_text() == "X = 1\n"
    assert "plugin tree differs from its manifest" in capsys.readouterr().err


def test_untouched_git_plugin_tree_is_reused(tmp_path: Path, capsys) -> None:
    """A pinned-commit checkout is cloned once; later runs reuse it (the clone's own
    completion marker is not mistaken for a tampered file)."""
    from tests.support import git
    from vllm_plugin_release.edges import plugin_source

    repo = tmp_path / "repo"
    (repo / "demo").mkdir(parents=True)
    (repo / "demo" / "__init__.py").write_text("X = 1\n")
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "plugin", cwd=repo, date="2026-07-25T00:00:00Z")
    commit = git("rev-parse", "HEAD", cwd=repo)
    from vllm_plugin_release.buildspec.model import PluginSourceSpec, PluginSpec

    source = PluginSourceSpec("git", url=str(repo), commit=commit)
    spec = SimpleNamespace(path=repo / "spec.toml", plugin=PluginSpec("demo", source))
    cache = Cache(tmp_path / ".vpr")
    first = plugin_source.resolve(spec, cache)
    inode = (first.root / "demo" / "__init__.py").stat().st_ino
    again = plugin_source.resolve(spec, cache)
    assert (again.root / "demo" / "__init__.py").stat().st_ino == inode  # not cloned again
    assert "differs from its manifest" not in capsys.readouterr().err


@pytest.mark.parametrize("meta", ["[1, 2]", '{"url": 5}', "{", '"just a string"'])
def test_tampered_download_metadata_is_not_a_traceback(tmp_path: Path, meta: str) -> None:
    """The URL a cached sdist came from is informational: tampered metadata is dropped."""
    from vllm_plugin_release.buildspec.model import SdistSource
    from vllm_plugin_release.edges.fetch import Fetcher

    cache = Cache(tmp_path / ".vpr")
    source = SdistSource(
        index="https://example.invalid/simple", filename="v.tar.gz", sha256="e" * 64
    )
    cas = cache.cas_path(source.sha256)
    cas.parent.mkdir(parents=True)
    cas.with_name(cas.name + ".json").write_text(meta)
    assert Fetcher(cache).sdist_url(source) is None
