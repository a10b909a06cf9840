"""Moving a pairing to a new core release: `vpr upstream` and `vpr bump`.

`upstream` lists the core releases on the spec's index that are newer than the
pinned one (PEP 691/503 simple API; final releases unless asked otherwise), each
with its upload time, sdist file name and sha256, so CI can fan out one job per
new tag.

`bump` writes the spec for the next core version. The edit goes through tomlkit,
so every comment and the order of the file survive; it changes only what a new
core changes: `[core] version`, the source pin (the sdist's sha256 from the index,
or the tag's commit from git), `source_date_epoch` (the newest file time in the new
sdist, or the commit time), the spec name and description where they carry the old
version, and the one comment that states where the epoch came from. Both sources are
fetched and verified; the migration report compares them:

* the core's runtime dependencies (`requirements/common.txt`) and build requirements
  (`[build-system].requires`), old vs new: added, removed, re-pinned;
* the locks: re-resolved for the new core (after the bump; `--dry-run` resolves none);
* optionally the served API (`--with-api`) and the plugin's tests (`--with-tests`),
  both of which need a pairing environment for each core and take minutes.

The new spec replaces the old file, unless the file name carries the old version
(`buildspec/tt-0.25.1.toml`), in which case the new one is written next to it with
the version replaced (`buildspec/tt-0.26.0.toml`); `--out` chooses another path.
Nothing is written before every part that can fail has run; `--dry-run` writes
nothing outside the download cache.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from vllm_plugin_release.core import progress
from vllm_plugin_release.core.cache import Cache, atomic_write_text
from vllm_plugin_release.core.errors import BadInput, OutsideFailure, VprError
from vllm_plugin_release.edges.fetch import Fetcher, IndexFile, index_files
from vllm_plugin_release.spec.model import (
    GitSource,
    SdistSource,
    Spec,
    from_data,
    read_document,
    validate,
)

DEFAULT_INDEX = "https://pypi.org/simple"
COMMON_REQUIREMENTS = "requirements/common.txt"

# ---------------------------------------------------------------------------
# Releases on the index


@dataclass(frozen=True)
class Release:
    """One core release as the index lists it."""

    version: str
    upload_time: str | None
    filename: str | None  # the sdist, when there is one
    sha256: str | None
    prerelease: bool
    files: int = 0

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _file_version(project: str, filename: str) -> Version | None:
    """The version of one of `project`'s files, or None for anything else."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidSdistFilename, InvalidWheelFilename, InvalidVersion):
        return None
    return version if name == canonicalize_name(project) else None


def releases_from_files(project: str, files: list[IndexFile]) -> list[Release]:
    """Releases (oldest first) from an index listing; yanked files are left out."""
    by_version: dict[Version, list[IndexFile]] = {}
    for f in files:
        if f.yanked:
            continue
        version = _file_version(project, f.filename)
        if version is not None:
            by_version.setdefault(version, []).append(f)
    out: list[Release] = []
    for version in sorted(by_version):
        group = by_version[version]
        sdist = next((f for f in group if not f.filename.endswith(".whl")), None)
        times = sorted(f.upload_time for f in group if f.upload_time)
        out.append(
            Release(
                version=str(version),
                upload_time=(sdist.upload_time if sdist and sdist.upload_time else None)
                or (times[0] if times else None),
                filename=sdist.filename if sdist else None,
                sha256=sdist.sha256 if sdist else None,
                prerelease=version.is_prerelease,
                files=len(group),
            )
        )
    return out


def spec_index(spec: Spec, index: str | None = None) -> str:
    if index:
        return index.rstrip("/")
    src = spec.core.source
    return src.index if isinstance(src, SdistSource) else DEFAULT_INDEX


def newer_releases(
    spec: Spec,
    *,
    index: str | None = None,
    include_prereleases: bool = False,
    only: str | None = None,
) -> list[Release]:
    """Core releases newer than the pinned one (oldest first)."""
    pinned = Version(spec.core.version)
    url = spec_index(spec, index)
    found = releases_from_files(spec.core.name, index_files(url, spec.core.name))
    if only:
        try:
            wanted = Version(only)
        except InvalidVersion:
            raise BadInput(f"--version {only!r} is not a PEP 440 version (e.g. 0.26.0)")
        if wanted <= pinned:
            raise BadInput(
                f"--version {only}: not newer than the pinned {spec.core.name} {pinned} "
                f"({spec.path})"
            )
        match = [r for r in found if Version(r.version) == wanted]
        if not match:
            raise BadInput(
                f"{url}/{canonicalize_name(spec.core.name)}/: no release {only}",
                hint="`vpr upstream --spec FILE` lists the releases newer than the pin",
            )
        return match
    return [
        r
        for r in found
        if Version(r.version) > pinned and (include_prereleases or not r.prerelease)
    ]


def render_releases(spec: Spec, found: list[Release], index: str, prereleases: bool) -> str:
    kind = "releases" if prereleases else "final releases"
    head = f"{spec.core.name} {kind} newer than {spec.core.version} on {index}"
    if not found:
        return f"{head}: none ({spec.path} pins the newest)"
    lines = [f"{head}:"]
    width = max(len(r.version) for r in found)
    for r in found:
        day = (r.upload_time or "?")[:10]
        sdist = f"{r.filename}  sha256:{r.sha256}" if r.filename else "no sdist (cannot be pinned)"
        tag = "  (pre-release)" if r.prerelease else ""
        lines.append(f"  {r.version:<{width}}  {day:<10}  {sdist}{tag}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Requirement diffs


def requirement_lines(path: Path) -> list[str]:
    """Requirement lines of a requirements file (comments, blanks, options dropped)."""
    out: list[str] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            out.append(line)
    return out


def _grouped(lines: list[str], where: str) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise BadInput(f"{where}: not a requirement: {line!r} ({exc})")
        groups.setdefault(canonicalize_name(req.name), []).append(str(req))
    return {name: sorted(reqs) for name, reqs in groups.items()}


def requirements_diff(
    old: list[str], new: list[str], old_where: str = "old", new_where: str = "new"
) -> dict[str, Any]:
    """Added, removed and re-pinned requirements (by distribution name)."""
    a, b = _grouped(old, old_where), _grouped(new, new_where)
    return {
        "added": [req for name in sorted(set(b) - set(a)) for req in b[name]],
        "removed": [req for name in sorted(set(a) - set(b)) for req in a[name]],
        "changed": [
            {"name": name, "from": a[name], "to": b[name]}
            for name in sorted(set(a) & set(b))
            if a[name] != b[name]
        ],
        "unchanged": sum(1 for name in set(a) & set(b) if a[name] == b[name]),
    }


def build_requires(tree: Path) -> list[str]:
    from vllm_plugin_release.stages.lock import read_build_requires

    return read_build_requires(tree)


# ---------------------------------------------------------------------------
# Resolving the new source


@dataclass(frozen=True)
class NewSource:
    source: SdistSource | GitSource
    tree: Path
    epoch: int
    epoch_origin: str  # "newest file time inside X" | "commit time of X"


def _replace_version(text: str, old: str, new: str) -> str:
    """`old` replaced by `new` where it stands as a version (not inside 0.25.10 or 10.25.1)."""
    pattern = re.compile(rf"(?<![\d.]){re.escape(old)}(?!\.?\d)")
    return pattern.sub(new, text)


def _sdist_source(spec: Spec, version: str, fetcher: Fetcher) -> NewSource:
    from vllm_plugin_release.flows.baseline import sdist_epoch

    old = spec.core.source
    assert isinstance(old, SdistSource)
    listing = index_files(old.index, spec.core.name)
    wanted = _replace_version(old.filename, spec.core.version, version)
    entry = next((f for f in listing if f.filename == wanted and not f.yanked), None)
    if entry is None:
        entry = next(
            (
                f
                for f in listing
                if not f.yanked
                and not f.filename.endswith(".whl")
                and _file_version(spec.core.name, f.filename) == Version(version)
            ),
            None,
        )
    if entry is None:
        newer = [r.version for r in releases_from_files(spec.core.name, listing)][-5:]
        raise BadInput(
            f"{old.index}/{canonicalize_name(spec.core.name)}/: no sdist for "
            f"{spec.core.name} {version}",
            hint=f"newest releases there: {', '.join(newer) or 'none'}; "
            "`vpr upstream --spec FILE` lists the ones after the pin",
        )
    if not entry.sha256:
        raise BadInput(
            f"{old.index}: {entry.filename} is listed without a sha256",
            hint="use an index that publishes hashes (PEP 503 #sha256= or PEP 691 hashes)",
        )
    source = SdistSource(index=old.index, filename=entry.filename, sha256=entry.sha256)
    archive = fetcher.sdist(source, spec.core.name)  # verified against the listed sha256
    tree = fetcher.source_tree(source, spec.core.name)
    return NewSource(
        source, tree, sdist_epoch(archive), f"newest file time inside {entry.filename}"
    )


def _git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    try:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        raise OutsideFailure("git is not installed", hint="install git")


def tag_commit(url: str, tag: str) -> str:
    """The commit a tag points at (annotated tags peeled), from `git ls-remote`."""
    done = _git("ls-remote", "--tags", url, f"refs/tags/{tag}", f"refs/tags/{tag}^{{}}")
    if done.returncode != 0:
        message = (done.stderr.strip().splitlines() or ["git ls-remote failed"])[-1]
        raise OutsideFailure(f"{url}: cannot list tags ({message})", hint="check the source url")
    refs = dict(
        reversed(line.split("\t", 1)) for line in done.stdout.strip().splitlines() if "\t" in line
    )
    commit = refs.get(f"refs/tags/{tag}^{{}}") or refs.get(f"refs/tags/{tag}")
    if not commit:
        raise BadInput(f"{url}: no tag {tag!r}", hint="pass the new tag with --tag")
    return commit


def _git_source(spec: Spec, version: str, fetcher: Fetcher, tag: str | None) -> NewSource:
    old = spec.core.source
    assert isinstance(old, GitSource)
    new_tag = tag or _replace_version(old.tag, spec.core.version, version)
    if new_tag == old.tag:
        raise BadInput(
            f"{spec.path}: [core.source] tag {old.tag!r} does not contain the version "
            f"{spec.core.version}",
            hint="pass the new tag with --tag",
        )
    source = GitSource(url=old.url, tag=new_tag, commit=tag_commit(old.url, new_tag))
    tree = fetcher.git(source)  # cloned at the tag, HEAD verified against the commit
    done = _git("log", "-1", "--format=%ct", source.commit, cwd=tree)
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise OutsideFailure(f"{tree}: cannot read the commit time of {source.commit}")
    return NewSource(source, tree, int(done.stdout.strip()), f"commit time of {new_tag}")


def old_tree(spec: Spec, fetcher: Fetcher) -> Path:
    from vllm_plugin_release.stages.build_core import source_tree

    return source_tree(spec, fetcher)


# ---------------------------------------------------------------------------
# The spec edit


def _utc(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def default_out(path: Path, old_version: str, new_version: str) -> Path:
    """In place, unless the file name carries the old version (then the name is bumped)."""
    stem = _replace_version(path.stem, old_version, new_version)
    return path if stem == path.stem else path.with_name(stem + path.suffix)


def edit_document(
    document: tomlkit.TOMLDocument, spec: Spec, version: str, new: NewSource
) -> dict[str, Any]:
    """Apply the bump to the parsed spec in place; returns what changed (old -> new)."""
    changed: dict[str, Any] = {}

    def put(table: Any, key: str, value: Any, label: str) -> None:
        before = table.get(key)
        before = before.unwrap() if hasattr(before, "unwrap") else before
        if before != value:
            table[key] = value
            changed[label] = {"from": before, "to": value}

    old_version = spec.core.version
    name = _replace_version(spec.name, old_version, version)
    put(document, "name", name, "name")
    if "description" in document:
        text = str(document["description"])
        put(document, "description", _replace_version(text, old_version, version), "description")
    core = document["core"]
    put(core, "version", version, "core.version")
    put(core, "source_date_epoch", new.epoch, "core.source_date_epoch")
    source = core["source"]
    if isinstance(new.source, SdistSource):
        if "filename" in source or new.source.filename != f"{spec.core.name}-{version}.tar.gz":
            put(source, "filename", new.source.filename, "core.source.filename")
        put(source, "sha256", new.source.sha256, "core.source.sha256")
    else:
        put(source, "tag", new.source.tag, "core.source.tag")
        put(source, "commit", new.source.commit, "core.source.commit")
    return changed


def refresh_comments(text: str, spec: Spec, new: NewSource) -> tuple[str, list[dict[str, Any]]]:
    """Update the comment that says where the epoch came from; list others naming the old
    version (they state facts about it: a person reviews them)."""
    old = spec.core.source
    old_label = old.filename if isinstance(old, SdistSource) else old.tag
    new_label = new.source.filename if isinstance(new.source, SdistSource) else new.source.tag
    old_when, new_when = _utc(spec.core.source_date_epoch), _utc(new.epoch)
    pattern = re.compile(rf"(?<![\d.]){re.escape(spec.core.version)}(?!\.?\d)")
    lines = text.splitlines(keepends=True)
    review: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        hash_at = line.find("#")
        if hash_at < 0:
            continue
        code, comment = line[:hash_at], line[hash_at:]
        if code.count('"') % 2 or code.count("'") % 2:
            continue  # the '#' is inside a string
        if old_label in comment and old_when in comment:
            comment = comment.replace(old_label, new_label).replace(old_when, new_when)
            lines[number - 1] = code + comment
        elif pattern.search(comment):
            review.append({"line": number, "text": line.strip()})
    return "".join(lines), review


# ---------------------------------------------------------------------------
# Optional analyses (a pairing environment per core)


def _not_run(reason: str) -> dict[str, Any]:
    return {"status": "not run", "reason": reason}


def pairing_pythons(
    spec: Spec, version: str, *, cache: Cache, dist_root: Path, plugin_source: Path | None
) -> tuple[Path, Path]:
    """A pairing environment (cpu) for the pinned core and one for `version`, same plugin."""
    from vllm_plugin_release.flows.baseline import baseline_python
    from vllm_plugin_release.stages.build_plugin import RECORD as PLUGIN_RECORD

    if not spec.plugin:
        raise BadInput(f"{spec.path}: no [plugin]; a pairing environment needs one")
    if not isinstance(spec.core.source, SdistSource):
        raise BadInput(f"{spec.path}: pairing environments for a bump need an sdist core source")
    dist = dist_root / spec.name
    if not (dist / PLUGIN_RECORD).exists():
        raise BadInput(
            f"{dist / PLUGIN_RECORD}: not found",
            hint=f"run `vpr build-plugin --spec {spec.path}` first",
        )
    old = baseline_python(
        spec, spec.core.version, cache=cache, dist=dist, plugin_source=plugin_source
    )
    new = baseline_python(spec, version, cache=cache, dist=dist, plugin_source=plugin_source)
    return old, new


def api_diff(spec: Spec, old_python: Path, new_python: Path) -> dict[str, Any]:
    """The served API of the old core vs the new one (the `api` check's capture, twice)."""
    from vllm_plugin_release.conform import api

    cfg = api.api_config(spec)
    contracts = []
    for python in (old_python, new_python):
        captured = api.capture(
            python, cfg["tasks"], None, endpoint_plugins=cfg["endpoint_plugins"], timeout=None
        )
        contracts.append(api.contract_from_capture(captured))
    changes = api.diff_contracts(contracts[0], contracts[1])
    return {
        "status": "run",
        "breaking": sum(c.breaking for c in changes),
        "additive": sum(not c.breaking for c in changes),
        "changes": [c.to_json() for c in changes],
    }


def plugin_test_regressions(
    spec: Spec,
    old_python: Path,
    new_python: Path,
    *,
    cache: Cache,
    plugin_source: Path | None,
) -> dict[str, Any]:
    """Plugin tests that pass on the pinned core and fail on the new one (cpu runner)."""
    from vllm_plugin_release.conform import plugin_tests as pt
    from vllm_plugin_release.edges.plugin_source import resolve

    cfg = pt.settings(spec.conformance, str(spec.path))
    root = resolve(spec, cache, plugin_source).root
    module = spec.runtime.get("module")
    with cache.scratch("bump-tests-") as tmp:
        base = pt.run_tests(old_python, root, "cpu", cfg, tmp / "old.xml", module)
        run = pt.run_tests(new_python, root, "cpu", cfg, tmp / "new.xml", module)
    return {
        "status": "run",
        "old": base.counts,
        "new": run.counts,
        "regressions": pt.regressions(base, run),
        "fixed": sorted(
            t
            for t, o in run.outcomes.items()
            if o == "passed" and base.outcomes.get(t) in ("failed", "error")
        ),
    }


# ---------------------------------------------------------------------------
# The bump


Locker = Callable[..., str]


@dataclass
class BumpResult:
    old_path: Path
    new_path: Path
    old_text: str
    new_text: str
    report: dict[str, Any]
    written: bool
    errors: list[VprError] = field(default_factory=list)

    @property
    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.old_text.splitlines(keepends=True),
                self.new_text.splitlines(keepends=True),
                fromfile=str(self.old_path),
                tofile=str(self.new_path),
            )
        )


def _rel(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def bump(
    spec_path: Path,
    version: str,
    *,
    cache: Cache,
    out: Path | None = None,
    dry_run: bool = False,
    with_api: bool = False,
    with_tests: bool = False,
    tag: str | None = None,
    plugin_source: Path | None = None,
    dist_root: Path = Path("dist"),
    locker: Locker | None = None,
) -> BumpResult:
    """Plan, check and (unless `dry_run`) write the bump of `spec_path` to core `version`."""
    from vllm_plugin_release.spec.model import load

    spec = load(spec_path)
    document, old_text = read_document(spec_path)
    try:
        target = Version(version)
    except InvalidVersion:
        raise BadInput(f"--core {version!r} is not a PEP 440 version (e.g. 0.26.0)")
    version = str(target)
    if target <= Version(spec.core.version):
        raise BadInput(
            f"{spec_path}: pins {spec.core.name} {spec.core.version}; "
            f"--core {version} is not newer",
            hint="a bump moves forward; use `vpr spec set` for anything else",
        )
    new_path = out or default_out(spec_path, spec.core.version, version)
    if new_path.resolve() != spec_path.resolve() and new_path.exists():
        raise BadInput(
            f"{new_path}: already exists", hint="pass --out PATH, or remove the file first"
        )

    fetcher = Fetcher(cache)
    with progress.status(f"bump: verifying the {spec.core.name} {spec.core.version} source"):
        before_tree = old_tree(spec, fetcher)
    with progress.status(f"bump: resolving {spec.core.name} {version}"):
        if isinstance(spec.core.source, SdistSource):
            new = _sdist_source(spec, version, fetcher)
        else:
            new = _git_source(spec, version, fetcher, tag)

    changed = edit_document(document, spec, version, new)
    new_text, review = refresh_comments(tomlkit.dumps(document), spec, new)
    data = tomlkit.parse(new_text).unwrap()
    validate(data, new_path, new_text)
    new_spec = from_data(data, new_path)

    root = spec.root
    old_common, new_common = before_tree / COMMON_REQUIREMENTS, new.tree / COMMON_REQUIREMENTS
    report: dict[str, Any] = {
        "core": {"name": spec.core.name, "from": spec.core.version, "to": version},
        "spec": {
            "from": _rel(spec_path, root),
            "to": _rel(new_path, root),
            "changed": changed,
            "dry_run": dry_run,
        },
        "source": {
            "kind": new.source.kind,
            **{k: v for k, v in dataclasses.asdict(new.source).items() if k != "kind"},
            "source_date_epoch": new.epoch,
            "source_date_epoch_utc": _utc(new.epoch),
            "source_date_epoch_origin": new.epoch_origin,
        },
    }
    if old_common.exists() and new_common.exists():
        report["requirements"] = {
            "file": COMMON_REQUIREMENTS,
            **requirements_diff(
                requirement_lines(old_common),
                requirement_lines(new_common),
                f"{spec.core.version}:{COMMON_REQUIREMENTS}",
                f"{version}:{COMMON_REQUIREMENTS}",
            ),
        }
    else:
        missing = old_common if not old_common.exists() else new_common
        report["requirements"] = _not_run(f"{missing}: not in the verified source")
    report["build_requires"] = {
        "file": "pyproject.toml [build-system].requires",
        **requirements_diff(build_requires(before_tree), build_requires(new.tree)),
    }
    report["comments_to_review"] = review

    # Locks: resolved into hidden files next to their destinations, moved in at the end.
    pending: list[tuple[Path, Path]] = []
    lock_report: list[dict[str, Any]] = []
    errors: list[VprError] = []
    try:
        if dry_run:
            lock_report = [
                {"file": _rel(dest, root), "name": name, "status": "not resolved (--dry-run)"}
                for name, dest in _lock_files(new_spec)
            ]
        for request, dest in (
            [] if dry_run else _lock_requests(new_spec, new.tree, cache, plugin_source)
        ):
            tmp = dest.with_name(f".{dest.name}.bump")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            with progress.status(f"bump: resolving {request.name} for {version}"):
                text = (locker or _compile)(request, tmp, new_spec.build.find_links)
            pending.append((tmp, dest))
            lock_report.append(
                {
                    "file": _rel(dest, root),
                    "name": request.name,
                    "status": "written",
                    "pins": _pins_diff(dest, text),
                }
            )
        report["locks"] = lock_report

        # Optional analyses: they need a pairing environment for each core.
        need = "needs a pairing environment for each core (minutes)"
        report["api"] = _not_run(f"{need}; pass --with-api")
        report["plugin_tests"] = _not_run(f"{need}; pass --with-tests")
        if with_api or with_tests:
            try:
                old_py, new_py = pairing_pythons(
                    spec, version, cache=cache, dist_root=dist_root, plugin_source=plugin_source
                )
            except VprError as exc:
                errors.append(exc)
                reason = f"could not build the pairing environments: {exc.message}"
                for key, wanted in (("api", with_api), ("plugin_tests", with_tests)):
                    if wanted:
                        report[key] = {"status": "error", "reason": reason}
            else:
                for key, wanted, run in (
                    ("api", with_api, lambda: api_diff(spec, old_py, new_py)),
                    (
                        "plugin_tests",
                        with_tests,
                        lambda: plugin_test_regressions(
                            spec, old_py, new_py, cache=cache, plugin_source=plugin_source
                        ),
                    ),
                ):
                    if not wanted:
                        continue
                    try:
                        report[key] = run()
                    except VprError as exc:
                        errors.append(exc)
                        report[key] = {"status": "error", "reason": exc.message}

        written = False
        if not dry_run:
            for tmp, dest in pending:
                os.replace(tmp, dest)
            pending.clear()
            atomic_write_text(new_path, new_text)
            written = True
    finally:
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)
    report["spec"]["written"] = written
    return BumpResult(spec_path, new_path, old_text, new_text, report, written, errors)


def _compile(request: Any, dest: Path, find_links: tuple[str, ...]) -> str:
    from vllm_plugin_release.stages.lock import compile_lock

    return compile_lock(request, dest, find_links)


def _lock_files(spec: Spec) -> list[tuple[str, Path]]:
    files = [("build-core", spec.resolve(spec.build.constraints))]
    if spec.plugin:
        files.append((f"env-{spec.name}", spec.resolve(spec.env_constraints)))
    return files


def _lock_requests(
    spec: Spec, tree: Path, cache: Cache, plugin_source: Path | None
) -> list[tuple[Any, Path]]:
    from vllm_plugin_release.stages.build_core import lock_request

    request, _ = lock_request(spec, tree)
    locks: list[tuple[Any, Path]] = [(request, spec.resolve(spec.build.constraints))]
    if spec.plugin:
        from vllm_plugin_release.edges.plugin_source import resolve
        from vllm_plugin_release.stages.pairing_env import env_lock_request, runtime_plan

        src = resolve(spec, cache, plugin_source)
        plan = runtime_plan(spec, "cpu", None)
        locks.append(
            (env_lock_request(spec, tree, src.root, plan), spec.resolve(spec.env_constraints))
        )
    return locks


def _pins_diff(old_lock: Path, new_text: str) -> dict[str, Any]:
    from vllm_plugin_release.stages.lock import pins

    try:
        before = pins(old_lock.read_text(encoding="utf-8"))
    except OSError:
        before = {}
    after = pins(new_text)
    return {
        "added": {k: after[k] for k in sorted(set(after) - set(before))},
        "removed": {k: before[k] for k in sorted(set(before) - set(after))},
        "changed": {
            k: {"from": before[k], "to": after[k]}
            for k in sorted(set(before) & set(after))
            if before[k] != after[k]
        },
    }


# ---------------------------------------------------------------------------
# Rendering


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|")


def _req_section(title: str, diff: dict[str, Any]) -> list[str]:
    out = [f"### {title}", ""]
    if diff.get("status") == "not run":
        return [*out, f"not run: {diff['reason']}", ""]
    if not (diff["added"] or diff["removed"] or diff["changed"]):
        return [*out, f"no change ({diff['unchanged']} requirements)", ""]
    out += ["| change | requirement |", "|---|---|"]
    out += [f"| added | `{_md(r)}` |" for r in diff["added"]]
    out += [f"| removed | `{_md(r)}` |" for r in diff["removed"]]
    for c in diff["changed"]:
        before, after = "; ".join(c["from"]), "; ".join(c["to"])
        out.append(f"| re-pinned | `{_md(before)}` → `{_md(after)}` |")
    out += ["", f"{diff['unchanged']} unchanged.", ""]
    return out


def render_markdown(result: BumpResult) -> str:
    r = result.report
    core = r["core"]
    src = r["source"]
    out = [
        f"## Migration report: {core['name']} {core['from']} → {core['to']}",
        "",
        f"Spec: `{r['spec']['from']}` → `{r['spec']['to']}` "
        + ("(written)" if result.written else "(not written: --dry-run)"),
        "",
    ]
    if src["kind"] == "sdist":
        out.append(
            f"Source: `{src['filename']}` sha256 `{src['sha256']}` from {src['index']} "
            "(verified on download)"
        )
    else:
        out.append(f"Source: {src['url']} tag `{src['tag']}` commit `{src['commit']}` (verified)")
    out += [
        "",
        f"SOURCE_DATE_EPOCH: {src['source_date_epoch']} ({src['source_date_epoch_utc']} UTC, "
        f"{src['source_date_epoch_origin']})",
        "",
    ]
    out += _req_section(f"Runtime dependencies ({COMMON_REQUIREMENTS})", r["requirements"])
    out += _req_section("Build requirements ([build-system].requires)", r["build_requires"])
    out += ["### Locks", ""]
    for lock in r.get("locks", []):
        line = f"- `{lock['file']}` ({lock['name']}): {lock['status']}"
        pins = lock.get("pins")
        if pins:
            line += (
                f"; {len(pins['changed'])} re-pinned, {len(pins['added'])} added, "
                f"{len(pins['removed'])} removed"
            )
        out.append(line)
        for name, change in (pins or {}).get("changed", {}).items():
            out.append(f"  - {name} {change['from']} → {change['to']}")
    out += ["", "### Served API", ""]
    api = r["api"]
    if api["status"] != "run":
        out.append(f"{api['status']}: {api['reason']}")
    else:
        out.append(f"{api['breaking']} breaking, {api['additive']} additive change(s)")
        for c in api["changes"]:
            if c["breaking"]:
                out.append(f"- BREAKING {c['kind']} `{_md(c['location'])}`: {_md(c['detail'])}")
    out += ["", "### Plugin tests", ""]
    tests = r["plugin_tests"]
    if tests["status"] != "run":
        out.append(f"{tests['status']}: {tests['reason']}")
    else:
        out.append(
            f"{len(tests['regressions'])} regression(s) on {core['to']} "
            f"(passed on {core['from']}); {len(tests['fixed'])} fixed"
        )
        out += [f"- regressed: `{t}`" for t in tests["regressions"]]
    if r["comments_to_review"]:
        out += ["", f"### Comments that still name {core['from']} (review by hand)", ""]
        out += [f"- line {c['line']}: `{_md(c['text'])}`" for c in r["comments_to_review"]]
    return "\n".join(out) + "\n"
