"""A wheel stage's cached result and its delivery into dist/NAME, and a warm `vpr build-core`:
what the last full run checked, remembered, a hit only where all of it still holds."""

from __future__ import annotations

import hashlib
import json
import shutil
import stat
import string
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.buildspec.model import project_root
from vllm_plugin_release.core import bounded, progress, records
from vllm_plugin_release.core.buildrecord import BuildRecord
from vllm_plugin_release.core.buildrecord import parse as parse_record
from vllm_plugin_release.core.cache import (
    TREE_MANIFEST,
    Cache,
    atomic_copy,
    key_of,
    sha256_file,
    stamps_digest,
    tree_stamps,
    walk,
    write_json,
)
from vllm_plugin_release.core.errors import BadInput, RecordProblem
from vllm_plugin_release.edges.proc import can_unshare_network

if TYPE_CHECKING:
    from vllm_plugin_release.buildspec.model import Spec
    from vllm_plugin_release.edges.interpreters import Interpreter

STAGE = "build-core"  # stages/build_core.STAGE (a stage is not imported here: it is heavy)
RECORD = records.BUILD_CORE
MEMOS = "build-core-memo"  # .vpr/stages/build-core-memo/<memo>.json
MEMO_VERSION = 2
MAX_MEMO = 64 << 10
PACKAGE = Path(__file__).resolve().parent.parent
_HEX = frozenset(string.hexdigits.lower())

_TEXTS = ("name", "python", "lock", "lock_sha256", "source_sha256", "tree_stamps")
_SHAPE = bounded.shape(
    (
        ("memo", (int,)),
        *((key, (str,)) for key in (*_TEXTS, "network_isolation")),
        ("isolated", (bool,)),
        ("stage_key", (str,)),
        ("record_sha256", (str,)),
    )
)


class StageResult(NamedTuple):
    """A wheel stage's result, delivered into dist/NAME, and the cache entry it came from (a named
    tuple: a warm build-core does not load `dataclasses`)."""

    wheel: Path
    record: Path
    data: BuildRecord  # the record, typed
    cached: bool
    stage_dir: Path | None = None


def deliver(
    stage_dir: Path, dist: Path, record: BuildRecord, record_name: str
) -> tuple[Path, Path]:
    """Copy a finished stage's wheel and record into dist/NAME atomically, without older wheels."""
    name = record.wheel.filename
    prefix = name.split("-", 1)[0] + "-"
    dist.mkdir(parents=True, exist_ok=True)
    for old in dist.glob(f"{prefix}*.whl"):
        if old.name != name:
            old.unlink()
    dest = dist / name
    if not dest.exists() or sha256_file(dest) != record.wheel.sha256:
        atomic_copy(stage_dir / name, dest)
    atomic_copy(stage_dir / record_name, dist / record_name)
    return dest, dist / record_name


def reuse(
    stage_dir: Path,
    dist: Path,
    record_name: str,
    stage: str,
    named: tuple[Interpreter, str] | None = None,
) -> StageResult | None:
    """The cached result of a wheel stage, delivered into dist/NAME; None when there is none, or
    when `named` is not the interpreter it was built with (said; the stage builds with it)."""
    if not (stage_dir / record_name).exists():
        return None
    # A truncated or emptied cache entry is named, with the way out (never a KeyError).
    record = records.build_record(
        stage_dir, record_name, f"rm -r {stage_dir}` and `vpr {stage} --spec SPEC"
    )
    if named is not None and not _built_with(record, named, stage):
        return None
    cached = stage_dir / record.wheel.filename
    if not cached.is_file() or sha256_file(cached) != record.wheel.sha256:
        # Never delivered: the cached wheel no longer matches its own record.
        progress.warn(f"{stage}: cached {cached.name} does not match its record; rebuilding")
        shutil.rmtree(stage_dir, ignore_errors=True)
        return None
    wheel, rec = deliver(stage_dir, dist, record, record_name)
    progress.info(f"{stage}: cached result reused ({wheel.name})")
    return StageResult(wheel, rec, record, cached=True, stage_dir=stage_dir)


def _built_with(record: BuildRecord, named: tuple[Interpreter, str], stage: str) -> bool:
    """Whether the cached `record` was built with the interpreter `named` (said when not)."""
    wanted, source = named
    made = record.interpreter
    if made is not None and made.sha256 == wanted.sha256:
        return True
    was = (
        f"CPython {made.version} at {made.path} (fingerprint {made.sha256[:12]})"
        if made
        else "an interpreter it does not record"
    )
    progress.warn(
        f"{stage}: the cached result was built with {was}; {source} names {wanted.path} "
        f"(CPython {wanted.version}, fingerprint {wanted.sha256[:12]}): building with it"
    )
    return False


class Ask(NamedTuple):
    """What the command line asks for: the spec as given, `--backend`, `--interpreter`."""

    spec: Path
    backend: str | None = None
    interpreter: str | None = None

    @property
    def named(self) -> tuple[str, str] | None:
        from vllm_plugin_release.edges.interpreters import named_by

        return named_by(self.interpreter)


def memo_name(ask: Ask) -> str | None:
    """The memo's name for this command line and code; None when the spec cannot be read."""
    try:
        spec = ask.spec.resolve()
        text = bounded.read_file(spec, bounded.MAX_SPEC, "buildspec")
    except (OSError, BadInput):
        return None
    return key_of(
        {
            "memo": MEMO_VERSION,
            "spec": str(spec),
            "root": str(project_root(spec)),
            "spec_sha256": hashlib.sha256(text).hexdigest(),
            "backend": ask.backend,
            "interpreter": ask.named,
            "python": [sys.version, sys.executable],
            "code": code_stamps(),
        }
    )


def code_stamps() -> list[list[Any]]:
    """[path, size, mtime_ns] of every source file of this package: edited code, another memo."""
    stamps = []
    for rel, entry in walk(PACKAGE, frozenset({"__pycache__"})):
        if rel.endswith((".py", ".json")):
            st = entry.stat(follow_symlinks=False)
            stamps.append([rel, st.st_size, st.st_mtime_ns])
    return stamps


def _memo_path(cache: Cache, name: str) -> Path:
    return cache.root / "stages" / MEMOS / f"{name}.json"


def _hex(value: str, length: int = 64) -> bool:
    return len(value) == length and set(value) <= _HEX


def _plain_name(value: str) -> bool:
    """A file or folder name, nothing that reaches outside the folder it is joined to."""
    return bool(value) and "/" not in value and "\0" not in value and value not in (".", "..")


def _read_memo(cache: Cache, name: str) -> dict[str, Any] | None:
    """The memo, when there is one of the shape this code writes; else None."""
    # the standard library's parser: importing orjson would cost a warm run more than it saves
    try:
        memo = json.loads(bounded.read_file(_memo_path(cache, name), MAX_MEMO, "memo"))
    except (OSError, BadInput, ValueError, RecursionError):
        return None
    if bounded.shape_problem(memo, _SHAPE) or memo["memo"] != MEMO_VERSION:
        return None
    hexes = ("lock_sha256", "source_sha256", "tree_stamps", "stage_key", "record_sha256")
    if not all(_hex(memo[k]) for k in hexes) or not _plain_name(memo["name"]):
        return None
    return memo


def _isolation_holds(memo: dict[str, Any]) -> bool:
    """Whether the runner would isolate the builds as the remembered run did (`unshare -n`
    probed again unless the spec turns isolation off)."""
    if memo["network_isolation"] == "off":
        return memo["isolated"] is False
    return can_unshare_network() is memo["isolated"]


def _inputs_hold(cache: Cache, memo: dict[str, Any]) -> bool:
    """The lock's bytes and the source tree's stamps, as the remembered run found them."""
    try:
        lock = bounded.read_file(Path(memo["lock"]), bounded.MAX_DOCUMENT, "lock")
    except (OSError, BadInput):
        return False
    if hashlib.sha256(lock).hexdigest() != memo["lock_sha256"]:
        return False
    try:
        stamps = tree_stamps(cache.src_dir(memo["source_sha256"]))
    except OSError:
        return False
    return stamps_digest(stamps) == memo["tree_stamps"]


def _record_at(stage_dir: Path) -> tuple[bytes, BuildRecord] | None:
    """The cached record's bytes and typed value, checked as the full path's reader checks it
    (a bare *.whl name, a sha256); None when unreadable or no build record."""
    try:
        data = bounded.read_file(stage_dir / RECORD, records.MAX_RECORD, "record")
        record = json.loads(data)
        return (data, parse_record(record, RECORD)) if isinstance(record, dict) else None
    except (OSError, BadInput, ValueError, RecursionError, RecordProblem):
        return None


def _cached_record(stage_dir: Path, memo: dict[str, Any]) -> BuildRecord | None:
    """The cached record when its bytes are the remembered ones and its wheel holds its sha256."""
    found = _record_at(stage_dir)
    if found is None or hashlib.sha256(found[0]).hexdigest() != memo["record_sha256"]:
        return None
    typed = found[1]
    wheel = stage_dir / typed.wheel.filename
    try:  # a regular file (as `is_file` says on the full path): never a fifo or a device
        if not stat.S_ISREG(wheel.stat().st_mode) or sha256_file(wheel) != typed.wheel.sha256:
            return None
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return None
    return typed


def _named_holds(named: tuple[str, str] | None, memo: dict[str, Any], made: Any) -> bool:
    """Whether the interpreter named is still of the spec's version and the cached wheel's
    fingerprint."""
    if named is None:
        return True
    from vllm_plugin_release.core.errors import VprError
    from vllm_plugin_release.edges.interpreters import explicit

    try:
        found = explicit(named[0], memo["python"], named[1])
    except VprError:
        return False
    return made is not None and made.sha256 == found.sha256


def warm_hit(
    cache: Cache, name: str, dist_root: Path, named: tuple[str, str] | None = None
) -> StageResult | None:
    """The cached build-core result delivered into dist/NAME when all memo `name` remembers
    still holds, the interpreter `named` included; None (nothing written) otherwise."""
    memo = _read_memo(cache, name)
    if memo is None or not _isolation_holds(memo) or not _inputs_hold(cache, memo):
        return None
    stage_dir = cache.stage_dir(STAGE, memo["stage_key"])
    record = _cached_record(stage_dir, memo)
    if record is None or not _named_holds(named, memo, record.interpreter):
        return None
    wheel, rec = deliver(stage_dir, records.dist_dir(dist_root, memo["name"]), record, RECORD)
    progress.note(f"{STAGE}: cached result reused ({wheel.name})")
    return StageResult(wheel, rec, record, cached=True, stage_dir=stage_dir)


def remember(cache: Cache, name: str, spec: Spec, result: StageResult) -> bool:
    """Write memo `name` for a full run of `spec` that ended in `result`; False (nothing written)
    where a warm run could not check it all (another backend, a git source, no stamps...)."""
    from vllm_plugin_release.buildspec.model import SdistSource

    source, stage_dir, data = spec.core.source, result.stage_dir, result.data
    if spec.build.backend != "local" or not isinstance(source, SdistSource) or not stage_dir:
        return False
    lock = spec.resolve(spec.build.constraints).absolute()
    try:
        lock_sha = sha256_file(lock)
    except OSError:
        return False
    tree = _checked_stamps(cache.src_dir(source.sha256))
    found = _record_at(stage_dir)
    if (
        tree is None
        or found is None
        or found[1] != data  # the cached record no longer says what the full run delivered
        or stage_dir != cache.stage_dir(STAGE, stage_dir.name)
        or data.build_env is None
        or data.build_env.lock_sha256 != lock_sha  # the lock the stage key was made of
        or data.isolated is None
    ):
        return False
    memo = {
        "memo": MEMO_VERSION,
        "name": spec.name,
        "python": spec.build.python,
        "lock": str(lock),
        "lock_sha256": lock_sha,
        "source_sha256": source.sha256,
        "tree_stamps": tree,
        "network_isolation": spec.build.network_isolation,
        "isolated": data.isolated,
        "stage_key": stage_dir.name,
        "record_sha256": hashlib.sha256(found[0]).hexdigest(),
    }
    try:
        write_json(_memo_path(cache, name), memo)
    except OSError:  # a read-only cache: every run takes the full path
        return False
    return True


def _checked_stamps(root: Path) -> str | None:
    """`stamps_digest` of the tree at `root` when its stamps are still its manifest's, else None."""
    try:
        manifest = bounded.loads(
            bounded.read_file(root / TREE_MANIFEST, bounded.MAX_INDEX, "tree manifest")
        )
        now = tree_stamps(root)
    except (OSError, ValueError, BadInput):
        return None
    if not isinstance(manifest, dict) or manifest.get("stamps") != now:
        return None
    return stamps_digest(now)
