"""Input from outside, bounded: only regular files, never past a size cap; JSON with a depth
cap, TOML with the one reader; and the package's own JSON files."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.errors import BadInput, OutsideFailure

MiB = 1 << 20
MAX_DOCUMENT = 16 * MiB  # a manifest, statement, lock, store head, pointer or schedule
MAX_INDEX = 256 * MiB  # index.json or the ledger
MAX_DEPTH = 64  # the deepest store document (a manifest) nests 7 levels
MAX_SPEC = 1 * MiB  # a buildspec is a few KiB
MAX_KEY = 64 << 10  # a PEM key is a few hundred bytes


class TooLarge(BadInput):
    """More bytes than the cap allows for what was being read."""


def too_large(where: str, limit: int) -> TooLarge:
    size = f"{limit // MiB} MiB" if limit >= MiB and limit % MiB == 0 else f"{limit} bytes"
    return TooLarge(
        f"{where}: larger than {size} ({limit} bytes), the most read for this file",
        hint="this is not a file vpr wrote; check where it comes from",
    )


def read_file(path: Path, limit: int, what: str) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes. FileNotFoundError passes
    through; anything else unreadable is BadInput naming the path."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the {what} ({exc.strerror})")
    try:
        mode = os.fstat(fd)
        if stat.S_ISDIR(mode.st_mode):
            raise BadInput(f"{path}: the {what} is a folder, not a file")
        if not stat.S_ISREG(mode.st_mode):
            raise BadInput(f"{path}: the {what} is not a regular file (a device, fifo or socket)")
        if mode.st_size > limit:
            raise too_large(str(path), limit)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, min(MiB, limit + 1 - total)):
            total += len(chunk)
            if total > limit:  # it grew while being read
                raise too_large(str(path), limit)
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the {what} ({exc.strerror})")
    finally:
        os.close(fd)


def read_text(path: Path, limit: int, what: str, *, missing_hint: str | None = None) -> str:
    """`read_file`'s bytes as UTF-8; a missing file or bad bytes is BadInput naming the path."""
    try:
        data = read_file(path, limit, what)
    except FileNotFoundError:
        raise BadInput(f"{path}: {what} not found", hint=missing_hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: the {what} is not UTF-8 text ({exc.reason} at byte {exc.start})")


class TooDeep(json.JSONDecodeError):
    """A document nested deeper than the cap (a JSONDecodeError, for callers naming the line)."""


def loads(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """JSON from outside: strict (orjson: no NaN or Infinity, valid UTF-8 only, integers
    of at most 64 bits) and at most `max_depth` levels deep. Errors are JSONDecodeError."""
    import orjson

    value = orjson.loads(data)
    if deeper_than(value, max_depth):
        raise TooDeep(f"nested deeper than {max_depth} levels", "", 0)
    return value


def deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests more than `limit` containers deep (no recursion)."""
    stack = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        items = node.values() if isinstance(node, dict) else node
        stack.extend((item, depth + 1) for item in items if isinstance(item, dict | list))
    return False


NONE = type(None)  # in a shape: the key may be null or absent


def shape(keys: tuple[tuple[str, tuple[type, ...]], ...]) -> tuple[Any, ...]:
    """A shape for `shape_problem`: (dotted key, allowed types) pairs, split once."""
    return tuple((dotted, dotted.split("."), kinds) for dotted, kinds in keys)


def shape_problem(value: Any, paths: tuple[Any, ...]) -> str | None:
    """The first key (dotted) of a document missing or of another type than `shape`'s, or None."""
    if not isinstance(value, dict):
        return "not an object"
    for dotted, path, kinds in paths:
        node: Any = value
        for key in path:
            if not isinstance(node, dict):
                return f"{dotted.rsplit('.', 1)[0]!r} is not an object"
            node = node.get(key)
        if not isinstance(node, kinds):
            names = " or ".join("null" if k is NONE else k.__name__ for k in kinds)
            return f"{dotted!r} is {shown(node)}, expected {names}"
    return None


def shown(value: Any) -> str:
    """A value from outside as a message may show it: short, its type when it is large."""
    text = repr(value) if isinstance(value, str | int | float | bool | NONE) else None
    return text[:80] if text is not None else f"a {type(value).__name__}"


# Data files shipped inside the package (`schemas/*.json`), read where it is installed.


def packaged_json_object(relpath: str) -> dict[str, Any]:
    """The JSON object in the package's file `relpath`; exit 3 (reinstall) when unreadable."""
    from importlib.resources import files

    where = f"vllm_plugin_release/{relpath}"
    try:
        data = json.loads(files("vllm_plugin_release").joinpath(relpath).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise OutsideFailure(
            f"{where}: a file of the installed package cannot be read ({exc})",
            hint="reinstall vllm-plugin-release",
        )
    if not isinstance(data, dict):
        raise OutsideFailure(
            f"{where}: not a JSON object in the installed package",
            hint="reinstall vllm-plugin-release",
        )
    return data


def __getattr__(name: str) -> Any:
    """`tomllib` (tomli on 3.10), imported when a reader first asks: most commands read none."""
    if name != "tomllib":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib
