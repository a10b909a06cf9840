"""The flags several commands share, each declared once as a parent parser (`parents=`),
and what they become: the spec, the store read through its signed head, the key."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from vllm_plugin_release.edges import settings

T = TypeVar("T")

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from vllm_plugin_release.edges.trust import Trusted


def store_location(args: argparse.Namespace) -> str:
    return (
        getattr(args, "store", None)
        or settings.text("VPR_STORE")
        or str(settings.cache_from_args(args).root / "store")
    )


def flow_options(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """An options dataclass from the flags of the same names (`cache` from --cache-dir,
    `dist_root` from --dist); `given` for the fields whose flag differs."""
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in given:
            continue
        if f.name == "cache":
            given["cache"] = settings.cache_from_args(args)
        elif f.name == "dist_root":
            given["dist_root"] = Path(args.dist)
        elif hasattr(args, f.name):
            given[f.name] = getattr(args, f.name)
    return cls(**given)


def _parent(flag: str, **options: Any) -> argparse.ArgumentParser:
    """A parser holding one shared flag, for `parents=`."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(flag, **options)
    return parent


SPEC = _parent(
    "--spec",
    default="buildspec/reference.toml",
    metavar="FILE",
    help="buildspec file (default: buildspec/reference.toml)",
)
DIST = _parent(
    "--dist", default="dist", help="output root; a pairing's files are in DIST/NAME (default: dist)"
)
CACHE = _parent(
    "--cache-dir",
    metavar="DIR",
    help="cache folder (default: $VPR_CACHE_DIR or .vpr)",
)
PLUGIN_SOURCE = _parent(
    "--plugin-source",
    type=Path,
    metavar="PATH",
    help="a local git checkout of the plugin (must contain the pinned commit), "
    "used instead of [plugin.source] url",
)
# The sites a pairing is checked for (core.envrecord.SITES; a test keeps them equal):
# written out, because importing it would load the records for every command line.
# Argparse refuses another before anything is fetched.
SITES = ("cpu", "hardware")
SITE = _parent(
    "--site",
    dest="runner",
    default="cpu",
    choices=SITES,
    help="cpu (default: no accelerator, runtime checks deferred) or hardware",
)
BACKEND = _parent(
    "--backend",
    dest="runner_backend",
    choices=("local", "docker"),
    help="where the stages run: local (this machine) or docker (the pinned "
    "[build] base_image); default: the spec's [build] backend",
)
INTERPRETER = _parent(
    "--interpreter",
    metavar="PATH",
    help="the CPython to build and check with (it must be the spec's [build] "
    "python); default: $VPR_INTERPRETER, else uv, pyenv, asdf/mise, /usr/bin in that order",
)
RUNTIME_ENV = _parent(
    "--runtime-env",
    type=Path,
    metavar="PATH",
    help="an existing vendor runtime's Python environment, e.g. TT-Metal's "
    "python_env (default for `vpr hardware`: $VPR_RUNTIME_ENV)",
)
STORE = _parent(
    "--store",
    metavar="PATH|URL",
    help="the manifest store, a folder or http(s) URL (default: $VPR_STORE, the "
    "spec's [publish] store where a spec is read, else .vpr/store)",
)
KEY_HELP = (
    "the publisher's ed25519 public key (KEY.pub), distributed out of band (default: the "
    ".pub beside the signing key: --signing-key, $VPR_SIGNING_KEY, else "
    ".vpr/keys/manifest-signing.key)"
)
KEY = _parent("--key", metavar="KEY.pub", help=KEY_HELP)
SIGNING_KEY = _parent(
    "--signing-key",
    metavar="KEY",
    help="the ed25519 private key that signs (default: $VPR_SIGNING_KEY, the spec's "
    "[publish] signing_key where a spec is read, else .vpr/keys/manifest-signing.key, "
    "made on first use)",
)
INDEX = _parent("--index", metavar="URL", help="simple API URL (default: the spec's index)")
ALLOW_UNCERTIFIED = _parent(
    "--allow-uncertified",
    action="store_true",
    help="go on with a pairing that is not certified (verdict lab, or conformance "
    "not run): publish it, the manifest saying so, or install it",
)
FORCE = _parent("--force", action="store_true", help="ignore the cached result")
JSON_HELP = "print the result as JSON"
JSON = _parent("--json", action="store_true", help=JSON_HELP)


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
    from vllm_plugin_release.core.errors import BadInput
    from vllm_plugin_release.edges import keys

    path = key_path(args)
    if not path.exists():
        raise BadInput(
            f"--key {path}: public key not found",
            hint="pass the publisher's public key (--key KEY.pub), distributed out of band",
        )
    return keys.load_public_key(path)


def trusted(args: argparse.Namespace, **options: Any) -> Trusted:
    """The store of `args`, read through its signed head with `args`'s key; the newest head
    seen is remembered under the cache folder (rollback)."""
    from vllm_plugin_release.edges.store import open_store
    from vllm_plugin_release.edges.trust import TRUST_DIR, Trusted

    store = open_store(store_location(args))  # a --store that does not parse: said first
    memory = settings.cache_from_args(args).root / TRUST_DIR
    return Trusted(store, public_key(args), memory=memory, **options)


def load_spec_for(args: argparse.Namespace):
    """The spec `--spec` names, with `--backend` and `--interpreter` applied; the interpreter
    `--interpreter` or $VPR_INTERPRETER names is checked at once (`named_interpreter`)."""
    from vllm_plugin_release.buildspec.load import load_spec

    spec = load_spec(args.spec).with_backend(getattr(args, "runner_backend", None))
    spec = spec.with_interpreter(getattr(args, "interpreter", None))
    named_interpreter(spec)
    return spec


def named_interpreter(spec):
    """The interpreter `--interpreter` or $VPR_INTERPRETER names, checked by every command that
    takes them (exit 2 naming the flag or variable and the path); None when neither names one."""
    from vllm_plugin_release.core.errors import OutsideFailure
    from vllm_plugin_release.edges import interpreters, uv

    if interpreters.named_by(spec.build.interpreter) is None:
        return None
    try:
        found_with = uv.uv_bin()
    except OutsideFailure:  # not needed for a named interpreter
        found_with = None
    return interpreters.find(spec.build.python, spec.build.interpreter, found_with)


def refuse_other_env(inputs, args: argparse.Namespace) -> None:
    """Exit 2 when `--interpreter` or $VPR_INTERPRETER names another interpreter than the one the
    recorded pairing environment was made from (local backend)."""
    from vllm_plugin_release.edges.interpreters import named_by

    spec = inputs.spec
    named = named_by(spec.build.interpreter)
    if named is None or spec.build.backend != "local":
        return
    ctx = inputs.context(args.runner, Path(args.dist))
    ctx.refuse_other_interpreter(named_interpreter(spec), named[1])
