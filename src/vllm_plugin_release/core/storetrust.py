"""What a consumer may take from a manifest store, as data (pure; the reads are
`edges.trust`'s): ids and store paths validated before any use.

A pairing id is a 64-hex sha256. A store path is relative, normalised and stays inside
the store: segments of letters, digits and `._+!-`, none empty, none `.` or `..`, none
hidden, no scheme, no leading `/`, no backslash, no `%`: it cannot name a local file, a
parent folder or another origin, and its URL is the store's URL plus the path itself.
"""

from __future__ import annotations

import re
from typing import Any

from vllm_plugin_release.core.errors import BadInput

_PID = re.compile(r"[0-9a-f]{64}")
_SEGMENT = re.compile(r"[A-Za-z0-9_+!-][A-Za-z0-9._+!-]*")


def check_pid(value: Any, where: str) -> str:
    """`value` when it is a pairing id (64 lowercase hex characters); BadInput otherwise."""
    if isinstance(value, str) and _PID.fullmatch(value):
        return value
    shown = repr(value)[:80] if isinstance(value, str) else type(value).__name__
    raise BadInput(
        f"{where}: pairing id {shown} is not a sha256 (64 hexadecimal characters)",
        hint="the store index is damaged or hostile; nothing was read or written for it",
    )


def store_path(value: Any, where: str) -> str:
    """`value` when it is a safe store path (see the module's docstring); BadInput naming
    it otherwise."""
    parts = value.split("/") if isinstance(value, str) and 0 < len(value) <= 512 else [""]
    if all(_SEGMENT.fullmatch(part) for part in parts):
        return value
    shown = repr(value)[:120] if isinstance(value, str) else type(value).__name__
    raise BadInput(
        f"{where}: {shown} is not a path inside the store (a relative path of plain names, "
        "no '..', no scheme, no leading '/')",
        hint="a store names its files relative to itself; nothing was read for it",
    )
