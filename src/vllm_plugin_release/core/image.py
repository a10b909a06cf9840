"""A container image as a `docker save` archive, written byte for byte from its inputs
(sorted keys, a fixed `created` time, no host facts), so the same layers give the same
image ID on any engine that loads it. Pure file work: nothing here talks to an engine."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.cache import sha256_file

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def file_layer(dest: Path, files: Mapping[str, tuple[bytes, int]], *, epoch: int) -> Path:
    """A layer tar holding `files` ({path: (bytes, mode)}), parents included, owner root,
    every time set to `epoch`; entries sorted, so the bytes depend on the files only."""
    dirs = sorted({str(Path(name).parent) for name in files} - {"."})
    parents = sorted({str(p) for d in dirs for p in [Path(d), *Path(d).parents]} - {"."})
    with tarfile.open(dest, "w", format=tarfile.GNU_FORMAT) as tf:
        for name in parents:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            tf.addfile(info)
        for name in sorted(files):
            data, mode = files[name]
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, epoch
            tf.addfile(info, io.BytesIO(data))
    return dest


def tree_layer(
    dest: Path,
    root: Path,
    members: Sequence[str],
    *,
    at: str,
    epoch: int,
    links: Mapping[str, Path] | None = None,
) -> Path:
    """A layer tar holding `members` (paths relative to `root`: files, folders, symbolic
    links, in any order) under `at` in the image, and the symbolic `links` ({path in the
    image: target}), owner root, every time `epoch`, modes kept; entries sorted, parents
    included, so the bytes depend on the files only."""
    base = at.strip("/")
    names = {base + "/" + m.strip("/") for m in members}
    extra = {k.strip("/"): str(v) for k, v in (links or {}).items()}
    parents = {str(p) for n in [*names, *extra] for p in Path(n).parents} - {"."}
    with tarfile.open(dest, "w", format=tarfile.GNU_FORMAT) as tf:
        for name in sorted(parents | names | set(extra)):
            if name in extra:
                info = tarfile.TarInfo(name)
                info.type, info.mode, info.mtime = tarfile.SYMTYPE, 0o777, epoch
                info.linkname = extra[name]
                tf.addfile(info)
                continue
            rel = name[len(base) + 1 :] if name.startswith(base + "/") else None
            path = root / rel if rel else None
            info = tarfile.TarInfo(name)
            info.mtime = epoch
            if path is None or (path.is_dir() and not path.is_symlink()):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tf.addfile(info)
            elif path.is_symlink():
                info.type, info.mode = tarfile.SYMTYPE, 0o777
                info.linkname = str(Path(path.readlink()))
                tf.addfile(info)
            else:
                info.size, info.mode = path.stat().st_size, path.stat().st_mode & 0o755
                with path.open("rb") as fh:
                    tf.addfile(info, fh)
    return dest


def image_config(
    diff_ids: Sequence[str], *, epoch: int, labels: Mapping[str, str], env: Sequence[str] = ()
) -> dict[str, Any]:
    created = datetime.fromtimestamp(epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "Env": [f"PATH={PATH}", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "TZ=UTC", *env],
            "Cmd": ["/bin/sh"],
            "WorkingDir": "/",
            "Labels": dict(sorted(labels.items())),
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{d}" for d in diff_ids]},
        "history": [{"created": created, "created_by": "vpr image build"} for _ in diff_ids],
    }


def write_archive(
    dest: Path, layers: Sequence[Path], *, repo_tag: str, epoch: int, labels: Mapping[str, str]
) -> str:
    """Write a `docker save` archive of `layers` (uncompressed tars, bottom first) to `dest`;
    returns the image ID (sha256 hex of the config)."""
    diff_ids = [sha256_file(layer) for layer in layers]
    config = canonical(image_config(diff_ids, epoch=epoch, labels=labels))
    image_id = hashlib.sha256(config).hexdigest()
    manifest = [
        {
            "Config": f"{image_id}.json",
            "RepoTags": [repo_tag],
            "Layers": [f"{d}/layer.tar" for d in diff_ids],
        }
    ]
    with tarfile.open(dest, "w", format=tarfile.GNU_FORMAT) as tf:

        def add_bytes(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, epoch
            tf.addfile(info, io.BytesIO(data))

        add_bytes(f"{image_id}.json", config)
        for diff_id, layer in zip(diff_ids, layers):
            info = tf.gettarinfo(str(layer), arcname=f"{diff_id}/layer.tar")
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            with layer.open("rb") as fh:
                tf.addfile(info, fh)
        add_bytes("manifest.json", canonical(manifest))
    return image_id
