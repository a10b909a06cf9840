"""Publish: the wheels (core, plugin, vpr-guard) to a package index, proven by an install,
then the manifest to the manifest store; each step a gate for the next."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.buildrecord import RunnerFacts
from vllm_plugin_release.core.cache import Cache
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure
from vllm_plugin_release.core.manifestdoc import MANIFEST_FILE
from vllm_plugin_release.core.manifestmodel import Manifest
from vllm_plugin_release.core.storeindex import PublishedAt, check_lock
from vllm_plugin_release.edges import keys, proc
from vllm_plugin_release.edges.index import (
    IndexTarget,
    LocalIndex,
    Transient,
    redact,
    remote_sha256,
    retry_policy,
    retrying,
    simple_url_for,
)
from vllm_plugin_release.edges.publisher import (
    install_with_hashes,
    make_venv,
    targets_from_environ,
    twine_check,
    twine_check_command,
    twine_check_verdict,
    twine_upload,
)
from vllm_plugin_release.edges.runner import LocalRunner, Runner
from vllm_plugin_release.edges.store import DirStore, Extras, HttpStore, open_store, utc_now
from vllm_plugin_release.stages.verify import Verified, check_environment, verify_files
from vllm_plugin_release.stages.wheelbuild import runner_for

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

CERTIFIED = ("fleet", "pilot")
LOCK_HINT = "the lock changed since `vpr env`; run the pairing again (vpr release) first"

Wheels = list[tuple[str, Path, str]]  # (project, wheel file, sha256): core, plugin, guard


def ensure_on_index(target: IndexTarget, wheels: Wheels) -> dict[str, str]:
    """Each wheel on the index, by file name: 'present' or 'uploaded' (the absent ones, in one
    `twine upload`). Another file under one of the names is GateFailed before any upload."""
    attempts, backoff = retry_policy()
    uploaded: set[str] = set()
    missing = [w.name for _, w, _ in wheels]  # not known to be on the index yet

    def look_up() -> list[tuple[Path, str | None]]:
        found = [(w, remote_sha256(target.simple_url, p, w.name)) for p, w, _ in wheels]
        for (wheel, remote), (_, _, sha) in zip(found, wheels):
            if remote is None or remote == sha:
                continue
            if wheel.name in uploaded:  # this call's upload: not the file it sent
                raise GateFailed(
                    f"{redact(target.simple_url)}: {wheel.name}: the index holds sha256 "
                    f"{remote} after upload, expected {sha}",
                    hint="the index changed the file, or another publisher uploaded other "
                    "bytes under its name meanwhile; check the index before publishing again",
                )
            raise GateFailed(
                f"{redact(target.simple_url)}: {wheel.name} is already on the index "
                f"with sha256 {remote}, but this build's wheel is {sha}",
                hint="a published file can never be replaced; bump the version (or a "
                "local label) and rebuild, or check why the build is not reproducible",
            )
        return found

    def attempt() -> dict[str, str]:
        absent = [wheel for wheel, remote in look_up() if remote is None]
        missing[:] = [w.name for w in absent]
        if absent:
            uploaded.update(missing)
            twine_upload(target, absent)
            still = [wheel.name for wheel, remote in look_up() if remote is None]
            if still:
                missing[:] = still
                raise Transient(f"{', '.join(still)} not listed on the index after upload")
        return {w.name: "uploaded" if w.name in uploaded else "present" for _, w, _ in wheels}

    try:
        return retrying(attempt, attempts=attempts, backoff=backoff)
    except Transient as exc:
        raise OutsideFailure(
            f"{redact(target.upload_url)}: giving up on {', '.join(missing)} after "
            f"{attempts} attempts: {exc}",
            hint="the index is down or failing; re-run `vpr publish` later (files already "
            "uploaded with the same sha256 count as done)",
        )


# twine check, started ahead: within `vpr release`, once the wheels are built (they
# are final then), at the lowest CPU priority, so that it runs in the time conform and
# the manifest leave a core idle. Publish takes its answer for the very same files and
# bytes; a run still going then is stopped and the check run again at normal priority.

TWINE_CHECK = "twine-check"


def _check_key(wheels: list[tuple[Path, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((str(wheel.resolve()), sha) for wheel, sha in wheels)  # in order


def start_check_ahead(ahead: proc.Ahead, wheels: list[tuple[Path, str]], cache: Cache) -> None:
    """Start `twine check --strict` of `wheels` (each with its sha256) for publish to take."""
    ahead.cancel(TWINE_CHECK)
    scratch = contextlib.ExitStack()
    try:
        folder = scratch.enter_context(cache.scratch("twine-check-"))
        command = twine_check_command([wheel for wheel, _ in wheels])
        started = proc.Started(command, what="twine check", folder=folder, background=True)
    except OutsideFailure:
        scratch.close()  # publish runs the check itself, and says what is wrong
        return
    except BaseException:
        scratch.close()
        raise
    ahead.add(TWINE_CHECK, _check_key(wheels), started, scratch)


def _twine_check(wheels: Wheels, ahead: proc.Ahead | None) -> None:
    """Gate 2: `twine check --strict` of the wheels; the run started ahead for these very
    files and bytes when it has ended, else a run now."""
    key = _check_key([(wheel, sha) for _, wheel, sha in wheels])
    taken = None if ahead is None else ahead.take(TWINE_CHECK, key, ended=True)  # others stop
    if taken is not None:
        try:
            done = taken.started.finish()
        finally:
            taken.close()
        progress.info("twine check --strict (run while the pairing was checked)")
        twine_check_verdict(done)
        return
    progress.info("twine check --strict")
    twine_check([wheel for _, wheel, _ in wheels])


def prove_install(
    target: IndexTarget,
    manifest: Manifest,
    wheels_dir: Path,
    workdir: Path,
    runner: Runner,
) -> None:
    """Install the wheels from the index with --require-hashes into a scratch venv on `runner`, then
    check it against the manifest. GateFailed on any mismatch."""
    certified = ".".join((manifest.core.python or "").split(".")[:2]) or None  # X.Y
    python = make_venv(workdir / "venv", runner, certified)
    requirements = workdir / "requirements.txt"
    lines = [
        f"{p.name}=={p.wheel.version} --hash=sha256:{p.wheel.sha256}" for p in manifest.parts()
    ]
    requirements.write_text("\n".join(lines) + "\n")
    done = install_with_hashes(python, target.simple_url, requirements, runner)
    if done.returncode != 0:
        out = redact((done.stdout + done.stderr).strip())
        raise GateFailed(
            "install proof failed: installing the wheels from "
            f"{redact(target.simple_url)} with --require-hashes did not work:\n"
            + "\n".join(out.splitlines()[-15:]),
            hint="nothing was added to the manifest store",
        )
    problems = check_environment(manifest, python, wheels_dir)
    if problems:
        raise GateFailed(
            "install proof failed: the installed wheels do not match the manifest:\n  "
            + "\n  ".join(problems),
            hint="nothing was added to the manifest store",
        )


@dataclass
class PublishResult:
    index: str
    wheels: dict[str, str] = field(default_factory=dict)  # filename -> uploaded | present
    install_proven: bool = False
    proven_in: RunnerFacts | None = None  # where the install proof ran (Runner.describe)
    store: str = ""
    store_status: str = ""
    pairing_id: str = ""
    verdict: str | None = None
    certified_at: str = ""


@dataclass(frozen=True)
class Target:
    """Where to publish: the index's upload URL (None: a local pypiserver over `index_root`),
    its simple API (None: the upload URL's) and the manifest store."""

    store: str
    index_root: Path
    index: str | None = None
    simple_index: str | None = None


@dataclass(frozen=True)
class Proof:
    """The install proof: whether it runs (None: with the local index only), the folder its
    scratch venvs go under, and what makes the runner it runs on (None: this machine)."""

    scratch_root: Path
    verify_install: bool | None = None
    runner: Callable[[], Runner] | None = None


@dataclass(frozen=True)
class Gates:
    """What the folder is checked with before any upload (public key None: digests only);
    `signer`, the manifest key, signs the store's head."""

    public_key: Path | None = None
    allow_uncertified: bool = False
    project_root: Path | None = None
    signer: Ed25519PrivateKey | None = None


@dataclass(frozen=True)
class Options:
    """`vpr publish --spec FILE`'s options; an index, store or key left None comes from the
    environment, then the spec's [publish] table."""

    index: str | None = None
    store: str | None = None
    simple_index: str | None = None
    public_key: str | Path | None = None
    signing_key: str | Path | None = None
    verify_install: bool | None = None
    allow_uncertified: bool = False
    dist_root: Path | str = "dist"


@dataclass(frozen=True)
class _Ready:
    """A folder that passed the gates before upload: what is published, and where to."""

    dist_dir: Path
    manifest_path: Path
    verified: Verified
    wheels: Wheels
    lock: bytes | None
    store: DirStore


def resolve_targets(
    spec: Spec, index: str | None, store: str | None, cache_root: Path
) -> tuple[str | None, str]:
    """(index upload URL or None for the local default, store location)."""
    env_index, env_store = targets_from_environ()
    index = index or env_index or spec.publish.index
    store = store or env_store or spec.publish.store
    if store and "://" not in store and not Path(store).is_absolute():
        store = str(spec.root / store)
    return index, store or str(cache_root / "store")


PROOFS = ".vpr-proofs"  # in the index folder (pypiserver serves no dot folder)


def _proof_marker(index_root: Path, wheels: Wheels, runner: Runner) -> Path:
    """Where a proof of these wheels on this runner is noted: beside the files it speaks of."""
    from vllm_plugin_release.core.cache import key_of

    key = key_of({"wheels": sorted(sha for _, _, sha in wheels), "runner": runner.env_key})
    return index_root / PROOFS / f"{key}.json"


class ProofNote(NamedTuple):
    """A proof marker: the wheels (file name -> sha256) an install proof installed, and where."""

    wheels: Mapping[str, str]
    ran_in: RunnerFacts

    def to_json(self) -> dict[str, object]:
        return {"wheels": dict(self.wheels), "ran_in": self.ran_in.to_json()}


def parse_proof_note(data: Any) -> ProofNote | None:
    """A proof marker's note, typed; None when it is not one (the proof runs again)."""
    from vllm_plugin_release.core import buildrecord

    wheels = data.get("wheels") if isinstance(data, dict) else None
    if not isinstance(wheels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in wheels.items()
    ):
        return None
    try:
        return ProofNote(wheels, buildrecord.parse_runner(data.get("ran_in")))
    except ValueError:
        return None


def _already_proven(index_root: Path, wheels: Wheels, runner: Runner) -> RunnerFacts | None:
    """Where an earlier proof ran, when the wheels sit in the local index folder with the
    right sha256 and it installed exactly them on a runner of this kind and image; else None."""
    from vllm_plugin_release.core.cache import sha256_file

    marker = _proof_marker(index_root, wheels, runner)
    noted = records.read_object(marker, parse_proof_note)  # bounded; None when unusable
    want = {w.name: sha for _, w, sha in wheels}
    if noted is None or noted.wheels != want:
        return None
    for _, wheel, sha in wheels:
        served = index_root / wheel.name
        if not served.is_file() or sha256_file(served) != sha:
            return None
    return noted.ran_in


def _note_proof(index_root: Path, wheels: Wheels, runner: Runner) -> None:
    from vllm_plugin_release.core.cache import write_json

    marker = _proof_marker(index_root, wheels, runner)
    marker.parent.mkdir(parents=True, exist_ok=True)
    note = ProofNote({w.name: sha for _, w, sha in wheels}, runner.describe())
    write_json(marker, note.to_json())


def _writable_store(store: str) -> DirStore:
    target_store = open_store(store)
    if isinstance(target_store, HttpStore):
        raise BadInput(
            f"--store {target_store.location}: an HTTP manifest store is read-only",
            hint="publish to the folder that is served (--store PATH)",
        )
    return target_store


NIGHTLY_MARK = "-nightly"  # `vpr nightly` names its pairing NAME-nightly


def _verified_for_publishing(
    manifest_path: Path, public_key: Path | None, allow_uncertified: bool
) -> Verified:
    """Gate 1: the manifest folder verifies and its verdict is fleet or pilot."""
    if public_key is None:
        progress.warn("no public key at hand: checking subject digests, not the signature")
    verified = verify_files(manifest_path, public_key)
    if verified.manifest.name.endswith(NIGHTLY_MARK):
        raise GateFailed(
            f"{manifest_path}: {verified.manifest.name} is a nightly pairing (a core git "
            "commit); nightly manifests are never published as release pairings",
            hint="publish the release pairing (`vpr release --spec FILE`)",
        )
    verdict = verified.manifest.verdict
    if verdict not in CERTIFIED and not allow_uncertified:
        raise GateFailed(
            f"{manifest_path}: conformance verdict is {verdict or 'absent'}; only fleet and "
            "pilot pairings are published",
            hint="run `vpr conform` and fix the failing checks, or pass --allow-uncertified",
        )
    return verified


def _open_index(
    stack: contextlib.ExitStack,
    result: PublishResult,
    local: LocalIndex | None,
    where: Target,
) -> IndexTarget:
    """The index to publish to; the local one is started (under its lock) on `stack`."""
    if local is None:
        index, simple_index = where.index, where.simple_index
        assert index is not None
        target = IndexTarget(upload_url=index, simple_url=simple_index or simple_url_for(index))
        result.index = redact(target.upload_url)
        return target
    from filelock import FileLock

    # One local publisher at a time over .vpr/index/ (each runs its own server).
    local.root.parent.mkdir(parents=True, exist_ok=True)
    stack.enter_context(FileLock(str(local.root.parent / "index.lock"), timeout=600))
    target = stack.enter_context(local)
    result.index = f"local pypiserver over {local.root} ({target.upload_url})"
    return target


def _prove_in_scratch(
    target: IndexTarget,
    manifest: Manifest,
    dist_dir: Path,
    scratch_root: Path,
    runner: Runner,
) -> None:
    import shutil
    import tempfile

    scratch_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="install-proof-", dir=scratch_root))
    try:
        where = "" if runner.kind == "local" else " in the pinned image"
        with progress.status(f"install proof: uv pip --require-hashes into a scratch venv{where}"):
            prove_install(target, manifest, dist_dir, work, runner)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _upload_and_prove(
    result: PublishResult,
    ready: _Ready,
    where: Target,
    proof: Proof,
    local: LocalIndex | None,
) -> None:
    """Gates 3 and 4: each wheel on the index, then (when `proof.verify_install`) the install
    proof on `proof.runner()`; the local index is stopped again before this returns."""
    wheels = ready.wheels
    with contextlib.ExitStack() as stack:
        target = _open_index(stack, result, local, where)
        names = " and ".join(w.name for _, w, _ in wheels)
        with progress.status(f"publishing {names} to {result.index}"):
            result.wheels = ensure_on_index(target, wheels)
        for name, status in result.wheels.items():
            progress.info(f"{name}: {status} on {result.index}")
        if proof.verify_install:
            assert proof.runner is not None
            proof_runner = proof.runner()
            _prove_in_scratch(
                target, ready.verified.manifest, ready.dist_dir, proof.scratch_root, proof_runner
            )
            result.install_proven = True
            result.proven_in = proof_runner.describe()
            if local is not None:
                _note_proof(local.root, wheels, proof_runner)


def _read_lock(manifest: Manifest, root: Path | None) -> bytes | None:
    """The pairing lock the manifest names (environment.lock_file under the project root),
    read before anything is uploaded; None when the manifest names no environment."""
    env = manifest.environment
    if root is None or not (env.lock_file and env.lock_sha256):
        return None
    lock = root / env.lock_file
    try:
        data = lock.read_bytes()
    except FileNotFoundError:
        raise BadInput(
            f"{lock}: the pairing lock named by the manifest (environment.lock_file) is missing",
            hint="run `vpr lock --spec FILE` and the pairing again (vpr release)",
        )
    check_lock(manifest, data, str(lock), hint=LOCK_HINT)
    return data


def _record_certification(dist_dir: Path, result: PublishResult) -> None:
    """run.json's `publish` section: when the pairing was certified into which store."""
    from vllm_plugin_release.core.cache import write_json
    from vllm_plugin_release.core.manifestdoc import RUN_FILE

    publish = {
        "certified_at": result.certified_at,
        "store": result.store,
        "store_status": result.store_status,
        "pairing_id": result.pairing_id,
        "verdict": result.verdict,
        "install_proof_ran_in": None if result.proven_in is None else result.proven_in.to_json(),
    }
    kept = records.run_file(dist_dir)  # bounded; the other sections as written
    write_json(dist_dir / RUN_FILE, {**kept.raw, "publish": publish})


def _ready_to_publish(dist_dir: Path, where: Target, gates: Gates) -> _Ready:
    """Gate 1 and every other check before any upload: the manifest, a writable store, a
    certified verdict that verifies, a signing key and the pairing lock the manifest names."""
    manifest_path = dist_dir / MANIFEST_FILE
    if not manifest_path.exists():
        raise BadInput(
            f"{manifest_path}: no manifest to publish",
            hint="run `vpr manifest build --spec FILE` first",
        )
    target_store = _writable_store(where.store)
    verified = _verified_for_publishing(manifest_path, gates.public_key, gates.allow_uncertified)
    if gates.signer is None:
        raise BadInput(
            f"{manifest_path}: publishing signs the manifest store's head, and no signing key "
            "was given",
            hint="pass --signing-key (or set $VPR_SIGNING_KEY or [publish] signing_key): the "
            "key the manifest was signed with",
        )
    target_store.signer = gates.signer
    manifest = verified.manifest
    wheels: Wheels = [
        (p.name, dist_dir / p.wheel.filename, p.wheel.sha256) for p in manifest.parts()
    ]
    lock = _read_lock(manifest, gates.project_root)  # gate: before anything is uploaded
    return _Ready(dist_dir, manifest_path, verified, wheels, lock, target_store)


def _take_earlier_proof(
    result: PublishResult,
    index_root: Path,
    wheels: Wheels,
    proven: RunnerFacts,
    ahead: proc.Ahead | None,
) -> None:
    """The same bytes were uploaded and install-proven on this runner by an earlier run: the local
    index is a folder we own, so checking the files on disk is the whole answer."""
    if ahead is not None:
        ahead.cancel(TWINE_CHECK)
    progress.info("twine check --strict: passed by the run that proved these wheels")
    result.index = (
        f"local index {index_root} (files verified on disk; install proven by an earlier run)"
    )
    result.wheels = {w.name: "present" for _, w, _ in wheels}
    result.install_proven = True
    result.proven_in = proven


def _onto_index(
    result: PublishResult,
    ready: _Ready,
    where: Target,
    proof: Proof,
    local: LocalIndex | None,
    ahead: proc.Ahead | None,
) -> None:
    """Gates 2 to 4, unless an earlier run proved these very wheels in the local index;
    `ahead`: the walk's runs started ahead, its twine check among them."""
    verify_install = local is not None if proof.verify_install is None else proof.verify_install
    make = proof.runner or (lambda: LocalRunner("off"))
    # made and entered at most once (a container runner then connects and checks its
    # image), and only when needed; left (its engine client closed) once the proof is done
    with contextlib.ExitStack() as entered:
        make_runner = functools.cache(lambda: entered.enter_context(make()))
        proven = (
            _already_proven(where.index_root, ready.wheels, make_runner())
            if local is not None and verify_install
            else None
        )
        if proven is not None:
            _take_earlier_proof(result, where.index_root, ready.wheels, proven, ahead)
        else:
            _twine_check(ready.wheels, ahead)
            resolved = dataclasses.replace(proof, verify_install=verify_install, runner=make_runner)
            _upload_and_prove(result, ready, where, resolved, local)


def _into_store(result: PublishResult, ready: _Ready, where: Target, local: bool) -> None:
    """Gate 5: the manifest into the store, with its lock, wheels and history line; then
    run.json's `publish` section."""
    at = PublishedAt("local")
    if not local:
        at = PublishedAt("remote", redact(where.simple_index or simple_url_for(str(where.index))))
    wheels = tuple(w for _, w, _ in ready.wheels)
    extras = Extras(lock=ready.lock, wheels=wheels, index=at, time=utc_now())
    added = ready.store.add(ready.manifest_path, ready.verified.statement_path, extras)
    result.store, result.store_status = added.store, added.status
    result.certified_at = added.entry.certified_at or ""
    _record_certification(ready.dist_dir, result)


def publish_folder(
    dist_dir: Path, where: Target, proof: Proof, gates: Gates, ahead: proc.Ahead | None = None
) -> PublishResult:
    """Publish dist_dir's wheels and manifest to `where`; `ahead`: the walk's runs started ahead
    (`vpr release`), its twine check among them."""
    ready = _ready_to_publish(dist_dir, where, gates)
    manifest = ready.verified.manifest
    result = PublishResult(index="", pairing_id=manifest.pairing_id, verdict=manifest.verdict)
    local = LocalIndex(where.index_root) if where.index is None else None
    _onto_index(result, ready, where, proof, local, ahead)
    _into_store(result, ready, where, local is not None)
    return result


def publish_spec(
    spec: Spec, options: Options, *, cache: Cache, ahead: proc.Ahead | None = None
) -> PublishResult:
    """`vpr publish --spec FILE`: the defaults resolved from the spec and the environment
    (`ahead`: as `publish_folder`'s)."""
    index, store_location = resolve_targets(spec, options.index, options.store, cache.root)
    key_path, _ = keys.resolve_key_path(
        options.signing_key,
        spec.publish.signing_key,
        root=spec.root,
        cache_root=cache.root,
    )
    pub = Path(options.public_key) if options.public_key else None
    if pub is None:  # the signing key's public half, when it is where the build left it
        candidate = keys.public_path(key_path)
        pub = candidate if candidate.exists() else None
    dist = Path(options.dist_root) / spec.name  # dist/NAME/, as `vpr manifest build` writes it
    where = Target(
        store=store_location,
        index_root=cache.root / "index",
        index=index,
        simple_index=options.simple_index,
    )
    proof = Proof(
        scratch_root=cache.tmp,
        verify_install=options.verify_install,
        # The install proof runs where the pairing's stages ran: the spec's runner.
        runner=lambda: runner_for(spec, cache, folders=(dist.resolve(),)),
    )
    gates = Gates(
        public_key=pub,
        allow_uncertified=options.allow_uncertified,
        project_root=spec.root,
        signer=keys.load_private_key(key_path),
    )
    return publish_folder(dist, where, proof, gates, ahead)
