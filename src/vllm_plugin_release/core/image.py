"""The container runner's image as pure data: its Dockerfile's rules (bases pinned by digest,
nothing fetched unpinned), and a byte-stable `docker save` archive."""

from __future__ import annotations

import hashlib
import io
import json
import re
import shlex
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from vllm_plugin_release.core.cache import sha256_file

# -- the Dockerfile's rules: the docker backend refuses a file that breaks one, naming the line

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
ARG_LINE = re.compile(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(.*))?$", re.I)
VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")


@dataclass(frozen=True)
class Problem:
    line: int
    message: str


def logical_lines(text: str) -> list[tuple[int, str]]:
    """Instructions with continuations joined; each with its first line number."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("#") or not (buf or stripped):
            continue
        if not buf:
            start = number
        if stripped.endswith("\\"):
            buf.append(stripped[:-1])
            continue
        buf.append(stripped)
        out.append((start, " ".join(buf)))
        buf = []
    if buf:
        out.append((start, " ".join(buf)))
    return out


def _pip_install_unpinned(words: list[str]) -> list[str]:
    """Requirement arguments of a `pip install` that are neither pinned nor hash-checked."""
    if "--require-hashes" in words:
        return []
    try:
        at = words.index("install")
    except ValueError:
        return []
    bad: list[str] = []
    skip = False
    for word in words[at + 1 :]:
        if skip:
            skip = False
            continue
        if word in ("-r", "-c", "--requirement", "--constraint", "-e", "--index-url", "-i"):
            skip = True
            if word in ("-r", "--requirement"):
                bad.append("-r (no --require-hashes)")
            continue
        if word.startswith("-") or word in ("&&", "||", ";", "|"):
            if word in ("&&", "||", ";", "|"):
                break
            continue
        if "==" not in word and not word.startswith(("/", ".")):
            bad.append(word)
    return bad


def lint(text: str, build_args: dict[str, str] | None = None) -> list[Problem]:
    problems: list[Problem] = []
    args: dict[str, str] = {}
    for number, line in logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "ARG":
            m = ARG_LINE.match(line)
            if m:
                args[m.group(1)] = (build_args or {}).get(m.group(1), (m.group(2) or "").strip('"'))
        elif keyword == "FROM":
            words = [w for w in rest.split() if not w.startswith("--")]
            image = words[0] if words else ""
            resolved = VAR.sub(lambda m: args.get(m.group(1), m.group(0)), image)
            if resolved == "scratch":
                continue
            if not DIGEST.search(resolved):
                problems.append(
                    Problem(number, f"FROM {image} is not pinned by digest (name@sha256:...)")
                )
            if re.search(r":latest(@|$)", resolved):
                problems.append(Problem(number, f"FROM {image} uses the tag 'latest'"))
        elif keyword == "RUN":
            if re.search(r"\b(curl|wget)\b[^|]*\|\s*(ba|z|da)?sh\b", rest):
                problems.append(Problem(number, "RUN pipes a download into a shell (curl | sh)"))
            if any(w == "--mount" or w.startswith("--mount=") for w in rest.split()[:3]):
                problems.append(
                    Problem(number, "RUN --mount needs BuildKit; the SDK cannot use it")
                )
            try:
                words = shlex.split(rest, comments=False)
            except ValueError:
                words = rest.split()
            for i, word in enumerate(words):
                if (
                    word in ("pip", "pip3")
                    or word.endswith("/pip")
                    or (word == "-m" and i + 1 < len(words) and words[i + 1] == "pip")
                ):
                    for req in _pip_install_unpinned(words[i:]):
                        problems.append(Problem(number, f"RUN pip install of unpinned {req!r}"))
                    break
    return problems


def lint_file(path: Path, build_args: dict[str, str] | None = None) -> list[Problem]:
    return lint(path.read_text(encoding="utf-8"), build_args)


# -- the image as an archive (sorted keys, a fixed `created` time, no host facts)

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _member(
    name: str, epoch: int, mode: int, kind: bytes = tarfile.REGTYPE, size: int = 0, link: str = ""
) -> tarfile.TarInfo:
    """A layer's tar entry, owned by root, every time `epoch`."""
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime, info.size, info.linkname = kind, mode, epoch, size, link
    return info


def file_layer(dest: Path, files: Mapping[str, tuple[bytes, int]], *, epoch: int) -> Path:
    """A layer tar of `files` ({path: (bytes, mode)}) whose bytes depend on the files only."""
    dirs = sorted({str(Path(name).parent) for name in files} - {"."})
    parents = sorted({str(p) for d in dirs for p in [Path(d), *Path(d).parents]} - {"."})
    with tarfile.open(dest, "w", format=tarfile.GNU_FORMAT) as tf:
        for name in parents:
            tf.addfile(_member(name, epoch, 0o755, tarfile.DIRTYPE))
        for name in sorted(files):
            data, mode = files[name]
            tf.addfile(_member(name, epoch, mode, size=len(data)), io.BytesIO(data))
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
    """A layer tar of `members` (paths under `root`) at `at` in the image, and `links` ({path in
    the image: target}), modes kept, whose bytes depend on the files only."""
    base = at.strip("/")
    names = {base + "/" + m.strip("/") for m in members}
    extra = {k.strip("/"): str(v) for k, v in (links or {}).items()}
    parents = {str(p) for n in [*names, *extra] for p in Path(n).parents} - {"."}
    with tarfile.open(dest, "w", format=tarfile.GNU_FORMAT) as tf:
        for name in sorted(parents | names | set(extra)):
            if name in extra:
                tf.addfile(_member(name, epoch, 0o777, tarfile.SYMTYPE, link=extra[name]))
                continue
            rel = name[len(base) + 1 :] if name.startswith(base + "/") else None
            path = root / rel if rel else None
            if path is None or (path.is_dir() and not path.is_symlink()):
                tf.addfile(_member(name, epoch, 0o755, tarfile.DIRTYPE))
            elif path.is_symlink():
                target = str(Path(path.readlink()))
                tf.addfile(_member(name, epoch, 0o777, tarfile.SYMTYPE, link=target))
            else:
                st = path.stat()
                with path.open("rb") as fh:
                    tf.addfile(_member(name, epoch, st.st_mode & 0o755, size=st.st_size), fh)
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
    """Write a `docker save` archive of `layers` (bottom first) to `dest`; the image ID."""
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
            tf.addfile(_member(name, epoch, 0o644, size=len(data)), io.BytesIO(data))

        add_bytes(f"{image_id}.json", config)
        for diff_id, layer in zip(diff_ids, layers):
            info = tf.gettarinfo(str(layer), arcname=f"{diff_id}/layer.tar")
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            with layer.open("rb") as fh:
                tf.addfile(info, fh)
        add_bytes("manifest.json", canonical(manifest))
    return image_id
