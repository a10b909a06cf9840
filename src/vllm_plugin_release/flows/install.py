"""`vpr install`: one certified pairing from the manifest store into a Python environment.

In order, each step a gate for the next:
  1. find the pairing in the store's index (by id or id prefix, or the best entry for
     `--core` and `--plugin`);
  2. copy its manifest and signed statement aside and verify the signature with the
     publisher's public key (nothing is installed from an unverified entry); only
     fleet and pilot verdicts are installed unless `allow_uncertified`;
  3. read the pairing's hash lock from the store: its sha256 must be the manifest's
     signed environment.lock_sha256;
  4. when the environment exists and already matches every pin (as `vpr manifest
     check-env`), stop: nothing to do;
  5. else create it (`uv venv`, the certified Python) and `uv pip sync --require-hashes`
     the lock plus the two certified wheels, found in the store's embedded index
     (`wheels/`); `--offline` uses only that index and uv's cache;
  6. check the result against the manifest and every pin.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.core import progress
from vllm_plugin_release.core import storeindex as si
from vllm_plugin_release.core.errors import BadInput, GateFailed
from vllm_plugin_release.edges import store as st
from vllm_plugin_release.edges import uv
from vllm_plugin_release.stages import verify

CERTIFIED = ("fleet", "pilot")


@dataclass
class Installed:
    pairing_id: str
    verdict: str | None
    python: str
    status: str  # "installed" | "unchanged"
    pins: int
    store: str
    keyid: str | None


def pick(
    index: dict[str, Any], pairing: str | None, core: str | None, plugin: str | None
) -> dict[str, Any]:
    """The store entry for an id (or unique prefix of 8+ characters), else the best entry for
    core and plugin (newest core, best verdict, as `vpr manifest query` orders them)."""
    if pairing:
        if len(pairing) < 8 or any(c not in "0123456789abcdef" for c in pairing):
            raise BadInput(f"{pairing!r}: a pairing id is 8 to 64 hexadecimal characters")
        hits = [e for pid, e in index["pairings"].items() if pid.startswith(pairing)]
        if len(hits) != 1:
            raise BadInput(
                f"pairing {pairing}: {'no' if not hits else len(hits)} store entries match",
                hint="`vpr manifest query` lists the pairings and their ids",
            )
        return hits[0]
    if not (core and plugin):
        raise BadInput(
            "name the pairing: PAIRING_ID, or --core VERSION and --plugin NAME",
            hint="`vpr manifest query` lists the pairings in the store",
        )
    hits = si.query(index, core=core, plugin=plugin)
    if not hits:
        raise GateFailed(f"no pairing of core {core} with plugin {plugin} in the store")
    return hits[0]


def _verified(store: st.Store, entry: dict[str, Any], key: Path, work: Path) -> Any:
    """The entry's manifest and statement copied into `work` and verified there."""
    if not entry.get("statement"):
        raise GateFailed(f"pairing {entry['pairing_id'][:16]}: the store holds no signed statement")
    pid = entry["pairing_id"]
    manifest_path = work / f"{pid}.json"
    manifest_path.write_bytes(store.read_bytes(entry["manifest"]))
    (work / f"{pid}.intoto.jsonl").write_bytes(store.read_bytes(entry["statement"]))
    return verify.verify_files(manifest_path, key, manifest_only=True)


def check_stored_wheels(store: st.Store, manifest: dict[str, Any]) -> None:
    """A folder store's wheel copies have the signed sha256 (uv checks them again by hash;
    this names the file plainly). Over HTTP only uv's check applies."""
    if not isinstance(store, st.DirStore):
        return
    from vllm_plugin_release.core.cache import sha256_file

    for role in ("core", "plugin"):
        wheel = manifest[role]["wheel"]
        path = store.root / si.WHEELS / wheel["filename"]
        if path.is_file() and sha256_file(path) != wheel["sha256"]:
            raise GateFailed(
                f"{path}: sha256 {sha256_file(path)}, but the signed manifest certifies "
                f"{wheel['sha256']}",
                hint="the store's copy was changed after publishing; nothing was installed",
            )


def requirements_text(manifest: dict[str, Any], lock_text: str) -> str:
    """The lock, then the certified core and plugin wheels pinned by sha256."""
    lines = [lock_text.rstrip("\n"), "# the certified wheels (vpr install)"]
    for role in ("core", "plugin"):
        part = manifest[role]
        lines.append(
            f"{part['name']}=={part['wheel']['version']} --hash=sha256:{part['wheel']['sha256']}"
        )
    return "\n".join(lines) + "\n"


def install(
    store_location: str,
    *,
    key: Path,
    env_dir: Path,
    scratch: Path,
    pairing: str | None = None,
    core: str | None = None,
    plugin: str | None = None,
    offline: bool = False,
    allow_uncertified: bool = False,
) -> Installed:
    store = st.open_store(store_location)
    entry = pick(store.read_index(), pairing, core, plugin)
    pid = entry["pairing_id"]
    if not entry.get("requirements"):
        raise BadInput(
            f"pairing {pid[:16]}: its store entry carries no pairing lock (published before "
            "locks were stored)",
            hint="publish the pairing again (`vpr publish`) to store its lock",
        )
    scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="install-", dir=scratch))
    try:
        verified = _verified(store, entry, key, work)
        manifest = verified.manifest
        verdict = manifest["conformance"]["verdict"]
        if verdict not in CERTIFIED and not allow_uncertified:
            raise GateFailed(
                f"pairing {pid[:16]}: verdict {verdict or 'absent'}; only fleet and pilot "
                "pairings are installed",
                hint="pass --allow-uncertified to install it anyway",
            )
        check_stored_wheels(store, manifest)
        lock_path = entry["requirements"]["path"]
        lock_text = si.check_lock(manifest, store.read_bytes(lock_path), lock_path)
        pins = len(verify.lock_pins(manifest, lock_text))
        python = env_dir / "bin" / "python"
        result = Installed(pid, verdict, str(python), "unchanged", pins, store.location,
                           verified.keyid)  # fmt: skip
        if python.exists() and not verify.check_environment(manifest, python, None, lock_text):
            return result
        requirements = work / "requirements.txt"
        requirements.write_text(requirements_text(manifest, lock_text))
        _sync(manifest, env_dir, requirements, [store.find_links()], pins, offline=offline)
        problems = verify.check_environment(manifest, python, None, lock_text)
        if problems:
            raise GateFailed(
                f"{env_dir}: after the install the environment does not match pairing "
                f"{pid[:16]}:\n  " + "\n  ".join(problems)
            )
        result.status = "installed"
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _sync(
    manifest: dict[str, Any],
    env_dir: Path,
    requirements: Path,
    find_links: list[str],
    pins: int,
    *,
    offline: bool,
) -> None:
    """Create the environment when it is not there, then make it hold exactly `requirements`."""
    python = env_dir / "bin" / "python"
    if not python.exists():
        version = ".".join(manifest["core"]["python"].split(".")[:2])
        progress.info(f"creating a Python {version} environment at {env_dir}")
        uv.create_venv(env_dir, version, offline=offline)
    with progress.status(f"installing {pins} pins with --require-hashes into {env_dir}"):
        uv.sync_locked(python, requirements, find_links, offline=offline)
