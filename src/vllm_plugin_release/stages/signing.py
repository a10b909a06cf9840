"""The signing stage: sign the manifest in a dist/NAME/ folder.

Writes `manifest.intoto.jsonl` next to `manifest.json`: an in-toto Statement v1
with an SLSA provenance v1 predicate (subjects: both wheels and the manifest, as
the bytes on disk), in a DSSE envelope signed with an ed25519 key.

`vpr manifest build` writes and signs in one step (`stages.manifest.write_signed`);
this stage re-signs a manifest that is already written, without rebuilding it.
The statement and envelope are `core.attest`; key files and the builder identity
are `edges.keys`; verification is `stages.verify`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_plugin_release.core import attest
from vllm_plugin_release.core.cache import atomic_write_bytes
from vllm_plugin_release.core.manifestdoc import MANIFEST_FILE, STATEMENT_FILE, read_json, validate
from vllm_plugin_release.edges import keys


@dataclass(frozen=True)
class Signed:
    statement_path: Path
    keyid: str


def sign_folder(dist_dir: Path, pins: dict[str, Any], key_path: Path) -> Signed:
    """Sign dist_dir/manifest.json as it is on disk with the key at `key_path`."""
    manifest_path = dist_dir / MANIFEST_FILE
    manifest = read_json(manifest_path, what="manifest")
    validate(manifest, str(manifest_path))
    key = keys.load_private_key(key_path)
    statement = attest.build_statement(
        manifest,
        hashlib.sha256(manifest_path.read_bytes()).hexdigest(),
        pins,
        builder_id=keys.builder_id(),
        invocation_id=keys.invocation_id(),
    )
    statement_path = dist_dir / STATEMENT_FILE
    atomic_write_bytes(statement_path, attest.signed_bytes(statement, key))
    return Signed(statement_path=statement_path, keyid=attest.keyid(key.public_key()))
