"""Every `VPR_*` environment variable vpr reads: its default, its documentation, and the
one place it is read (`vpr settings` lists them; docs/settings.md is made from this); and
the folders two of them name: the cache (--cache-dir first) and the builds' scratch."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_plugin_release.core.errors import BadInput

if TYPE_CHECKING:
    from vllm_plugin_release.core.cache import Cache


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str  # how the value is read: a key of READERS
    default: str | float | None
    doc: str
    secret: bool = False  # `vpr settings` says whether it is set, never its value


# A number that does not parse (or is out of range for its kind) means the default; a
# `strict` one stops the command instead (exit 2, naming the variable).
SETTINGS: tuple[Setting, ...] = (
    Setting("VPR_CACHE_DIR", "text", ".vpr", "the cache folder when --cache-dir is not given"),
    Setting(
        "VPR_BUILD_SCRATCH",
        "text",
        "/dev/shm",
        "where local builds make their scratch (in memory by default); off, 0, no or an "
        "empty value: the cache's tmp/",
    ),
    Setting(
        "VPR_STORE",
        "text",
        None,
        "the manifest store (a folder or an http(s) URL) when --store is not given",
    ),
    Setting("VPR_STORE_TIMEOUT", "positive", 30.0, "seconds one read from an HTTP store may take"),
    Setting(
        "VPR_STORE_LOCK_TIMEOUT", "strict", 120.0, "seconds a writer waits for the store's lock"
    ),
    Setting("VPR_STORE_HEAD_DAYS", "positive", 30.0, "days a signed store head stays valid"),
    Setting("VPR_INDEX", "text", None, "the index `vpr publish` uploads to without --index"),
    Setting(
        "VPR_INDEX_ATTEMPTS",
        "count",
        3,
        "attempts at reading a package index (after a connection error, HTTP 5xx or 429)",
    ),
    Setting(
        "VPR_INDEX_BACKOFF",
        "backoff",
        0.5,
        "seconds before the second attempt at reading an index (doubling after)",
    ),
    Setting(
        "VPR_INDEX_RETRY_BUDGET",
        "number",
        120.0,
        "seconds a rate-limiting index (429, or 503 with Retry-After) is waited out",
    ),
    Setting("VPR_PUBLISH_ATTEMPTS", "count", 4, "attempts at an upload to the index"),
    Setting(
        "VPR_PUBLISH_BACKOFF",
        "backoff",
        2.0,
        "seconds before the second attempt at an upload (doubling after)",
    ),
    Setting("VPR_NET_TIMEOUT", "positive", 60.0, "seconds to wait for an answer from a server"),
    Setting(
        "VPR_NET_HEARTBEAT",
        "positive",
        15.0,
        "seconds between the lines saying vpr still waits for a server",
    ),
    Setting(
        "VPR_HEARTBEAT",
        "positive",
        15.0,
        "seconds between the lines saying a long step is still running (outside a terminal)",
    ),
    Setting(
        "VPR_FIND_LINKS",
        "text",
        None,
        "extra find-links for uv, separated by spaces (added to [build] find_links and pip's)",
    ),
    Setting(
        "VPR_INTERPRETER",
        "text",
        None,
        "the Python interpreter builds use when --interpreter is not given (else uv, pyenv, "
        "asdf/mise, /usr/bin)",
    ),
    Setting(
        "VPR_RUNTIME_ENV",
        "text",
        None,
        "the vendor runtime's Python environment on a hardware runner",
    ),
    Setting(
        "VPR_MESH_VALUE",
        "text",
        None,
        "the plan's mesh_device, set as the spec's mesh_variable unless the runner set that",
    ),
    Setting(
        "VPR_SIGNING_KEY",
        "text",
        None,
        "the ed25519 private key when --signing-key is not given (before [publish] "
        "signing_key and .vpr/keys/manifest-signing.key)",
    ),
    Setting(
        "VPR_SIGNING_KEY_PASSWORD",
        "text",
        None,
        "the passphrase of an encrypted signing key",
        secret=True,
    ),
    Setting(
        "VPR_BUILDER_ID",
        "text",
        None,
        "who ran the build, in signed records (else the GitHub workflow, or this machine)",
    ),
    Setting(
        "VPR_GUARD_SOURCE",
        "text",
        None,
        "the guard's source folder (else guard/ of this checkout of vllm-plugin-release)",
    ),
    Setting("VPR_DEBUG", "switch", None, "anything but empty or 0: print tracebacks, as --debug"),
    Setting(
        "VPR_UPSTREAM_PRERELEASES",
        "yes",
        None,
        "1, true or yes: `vpr upstream` also lists rc/beta/dev releases",
    ),
)
BY_NAME = {s.name: s for s in SETTINGS}


def _number(s: Setting, value: str | None) -> float:
    try:
        return float(value or "")
    except ValueError:
        return float(s.default or 0)


def _strict(s: Setting, value: str | None) -> float:
    if value is None:
        return float(s.default or 0)
    try:
        return float(value)
    except ValueError:
        raise BadInput(
            f"${s.name}={value!r}: not a number",
            hint=f"set ${s.name} to the {s.doc} (default {_plain(s.default or 0)}), or unset it",
        ) from None


def _positive(s: Setting, value: str | None) -> float:
    got = _number(s, value)
    return got if got > 0 else float(s.default or 0)


def _count(s: Setting, value: str | None) -> int:
    try:
        return max(1, int(value if value is not None else s.default or 0))
    except ValueError:
        return int(s.default or 0)


def _backoff(s: Setting, value: str | None) -> float:
    try:
        return max(0.0, float(value if value is not None else s.default or 0))
    except ValueError:
        return float(s.default or 0)


READERS = {
    "text": lambda s, value: s.default if value is None else value,
    "number": _number,
    "strict": _strict,
    "positive": _positive,
    "count": _count,
    "backoff": _backoff,
    "switch": lambda s, value: (value or "") not in ("", "0"),
    "yes": lambda s, value: (value or "").lower() in ("1", "true", "yes"),
}


def _read(name: str) -> object:
    s = BY_NAME[name]
    return READERS[s.kind](s, os.environ.get(name))


def text(name: str) -> str | None:
    """The value of `name` (a path, URL or word), else its default; empty counts as set."""
    value = _read(name)
    return None if value is None else str(value)


def number(name: str) -> float:
    """The number `name` sets (seconds, mostly), read by its kind."""
    return float(_read(name))  # type: ignore[arg-type]


def count(name: str) -> int:
    return int(_read(name))  # type: ignore[call-overload]


def flag(name: str) -> bool:
    return bool(_read(name))


def lines() -> list[str]:
    """`vpr settings`: each variable, its value here (or that the default holds), its doc."""
    out = []
    for s in SETTINGS:
        given = os.environ.get(s.name)
        if given is None:
            shown = "unset" if s.default is None else f"{_plain(s.default)} (the default)"
        else:
            shown = "set" if s.secret else repr(given)
        out += [f"{s.name} = {shown}", f"    {s.doc}"]
    return out


def markdown() -> str:
    """docs/settings.md: the table of every variable, its default and its doc."""
    rows = [
        f"| `{s.name}` | {'' if s.default is None else f'`{_plain(s.default)}`'} | {s.doc} |"
        for s in SETTINGS
    ]
    head = (
        "# Settings\n\nThe environment variables vpr reads (made by `vpr settings --markdown`; "
        "`vpr settings` shows\nthe values in effect). A number that is not one means the "
        "default, except for\n`VPR_STORE_LOCK_TIMEOUT` (exit 2). The guard installed beside "
        "a certified set reads\n"
        "`VPR_GUARD` in the environment it guards (docs/security.md).\n\n"
        "| variable | default | what it sets |\n|---|---|---|\n"
    )
    return head + "\n".join(rows) + "\n"


def _plain(value: str | float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def build_scratch_root(*, create: bool = True) -> Path | None:
    """This user's private folder for local builds' scratch (`core.cache.
    private_scratch_root` in $VPR_BUILD_SCRATCH, default /dev/shm), or None: `.vpr/tmp`."""
    from vllm_plugin_release.core.cache import private_scratch_root

    base = text("VPR_BUILD_SCRATCH") or ""
    if base.strip().lower() in ("", "off", "0", "no"):
        return None
    return private_scratch_root(Path(base), create=create)


def cache_from_env() -> Cache:
    """$VPR_CACHE_DIR, else .vpr."""
    return _opened(text("VPR_CACHE_DIR") or "")


def cache_from_args(args: Any) -> Cache:
    """--cache-dir, else $VPR_CACHE_DIR, else .vpr (every command the same way)."""
    given = getattr(args, "cache_dir", None)
    return _opened(given) if given else cache_from_env()


def _opened(root: Path | str) -> Cache:
    """The cache at `root`; what killed runs left in the build scratch goes too (the
    cache's own `tmp/` is swept by `Cache`)."""
    from vllm_plugin_release.core.cache import Cache, sweep_once  # the CLI's modules import us

    cache = Cache(root)
    sweep_once(build_scratch_root(create=False))
    return cache
