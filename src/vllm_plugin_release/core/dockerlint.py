"""Static rules for our Dockerfiles (pure text): every base pinned by digest, nothing
fetched unpinned; the docker backend refuses a file that breaks one, naming the line."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

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
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
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
