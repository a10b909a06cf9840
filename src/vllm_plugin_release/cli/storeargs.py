"""The options every command that reads a manifest store shares (`--store`, `--key`), and
the one way they become a store read through its signed head (`edges.trust`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.edges import settings

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from vllm_plugin_release.edges.trust import Trusted

KEY_HELP = (
    "the publisher's ed25519 public key (KEY.pub), distributed out of band (default: the "
    ".pub of $VPR_SIGNING_KEY, else of .vpr/keys/manifest-signing.key)"
)


def add_store_arguments(parser: argparse.ArgumentParser, *, key: bool = True) -> None:
    parser.add_argument(
        "--store",
        default=None,
        metavar="PATH|URL",
        help="folder or http(s) URL (default: $VPR_STORE, else .vpr/store)",
    )
    if key:
        parser.add_argument("--key", default=None, metavar="KEY.pub", help=KEY_HELP)


def store_location(args: argparse.Namespace) -> str:
    return (
        getattr(args, "store", None)
        or settings.text("VPR_STORE")
        or str(settings.cache_from_args(args).root / "store")
    )


def key_path(args: argparse.Namespace) -> Path:
    """--key, else the public half of the signing key this machine would sign with."""
    from vllm_plugin_release.edges import keys

    if getattr(args, "key", None):
        return Path(args.key)
    cache = settings.cache_from_args(args)
    private, _ = keys.resolve_key_path(None, None, root=Path.cwd(), cache_root=cache.root)
    return keys.public_path(private)


def public_key(args: argparse.Namespace) -> Ed25519PublicKey:
    """The key a store's signatures are checked with; exit 2 naming it when it is missing."""
    from vllm_plugin_release.edges import keys

    path = key_path(args)
    if not path.exists():
        raise _missing(path)
    return keys.load_public_key(path)


def _missing(path: Path) -> Exception:
    from vllm_plugin_release.core.errors import BadInput

    return BadInput(
        f"--key {path}: public key not found",
        hint="pass the publisher's public key (--key KEY.pub), distributed out of band",
    )


def trusted(args: argparse.Namespace, **options: Any) -> Trusted:
    """The store of `args`, read through its signed head with `args`'s key; the newest head
    seen is remembered under the cache folder (rollback)."""
    from vllm_plugin_release.edges.store import open_store
    from vllm_plugin_release.edges.trust import TRUST_DIR, Trusted

    store = open_store(store_location(args))  # a --store that does not parse: said first
    memory = settings.cache_from_args(args).root / TRUST_DIR
    return Trusted(store, public_key(args), memory=memory, **options)
