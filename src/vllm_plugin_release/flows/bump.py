"""Moving a pairing to a new core release: `vpr bump` writes the spec for the next core
version (through tomlkit, so comments and order survive), with the API coupling gate and
its approval, and the migration report comparing the two cores (as Markdown)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from vllm_plugin_release.buildspec.load import load_spec, read_document, validate
from vllm_plugin_release.buildspec.model import GitSource, SdistSource, Spec, from_data
from vllm_plugin_release.conform.registry import spec_schema
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import Cache, atomic_write_text
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput, GateFailed, OutsideFailure, VprError
from vllm_plugin_release.core.lockfile import pins, read_build_requires
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.edges.fetch import ArchiveLimits, Fetcher, index_files, source_tree
from vllm_plugin_release.edges.git import git, refuse_option
from vllm_plugin_release.edges.plugin_source import PluginSource
from vllm_plugin_release.edges.uv import compile_lock
from vllm_plugin_release.flows.baseline import baseline_env
from vllm_plugin_release.flows.sources import Inputs
from vllm_plugin_release.flows.upstream import file_version, releases_from_files
from vllm_plugin_release.stages.lock import pairing_locks

COMMON_REQUIREMENTS = "requirements/common.txt"

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
    listing = [f for f in index_files(old.index, spec.core.name) if not f.yanked]
    wanted = _replace_version(old.filename, spec.core.version, version)
    sdists = [f for f in listing if not f.filename.endswith(".whl")]
    same = [f for f in sdists if file_version(spec.core.name, f.filename) == Version(version)]
    entry = next((f for f in listing if f.filename == wanted), None) or next(iter(same), None)
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
    tree = fetcher.source_tree(source, spec.core.name, ArchiveLimits.of(spec.fetch))
    return NewSource(
        source, tree, sdist_epoch(archive), f"newest file time inside {entry.filename}"
    )


def tag_commit(url: str, tag: str) -> str:
    """The commit a tag points at (annotated tags peeled), from `git ls-remote`."""
    refuse_option(url, "[core.source] url")
    refuse_option(tag, "[core.source] tag")
    done = git("ls-remote", "--tags", "--", url, f"refs/tags/{tag}", f"refs/tags/{tag}^{{}}")
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
    refuse_option(old.url, f"{spec.path}: [core.source] url")
    new_tag = refuse_option(
        tag or _replace_version(old.tag, spec.core.version, version),
        "--tag" if tag else f"{spec.path}: [core.source] tag",
    )
    if new_tag == old.tag:
        raise BadInput(
            f"{spec.path}: [core.source] tag {old.tag!r} does not contain the version "
            f"{spec.core.version}",
            hint="pass the new tag with --tag",
        )
    source = GitSource(url=old.url, tag=new_tag, commit=tag_commit(old.url, new_tag))
    tree = fetcher.git(source)  # cloned at the tag, HEAD verified against the commit
    done = git("log", "-1", "--format=%ct", source.commit, cwd=tree)
    if done.returncode != 0 or not done.stdout.strip().isdigit():
        raise OutsideFailure(f"{tree}: cannot read the commit time of {source.commit}")
    return NewSource(source, tree, int(done.stdout.strip()), f"commit time of {new_tag}")


# The spec edit


def _utc(epoch: int) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


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


def python_move(spec: Spec, version: str, tree: Path) -> dict[str, Any]:
    """The report's `python` part: the new core's Python floor (its `Requires-Python`) and
    the Python the bumped spec pairs on (the spec's while accepted, else the newest of
    `[runtime] python` it accepts); BadInput when none fits, before anything is resolved."""
    from vllm_plugin_release.flows.baseline import python_for, requires_python

    requires = requires_python(tree)
    choice = python_for(spec, requires, version)
    if choice.python is None:
        raise BadInput(
            f"{spec.path}: {spec.core.name} {version} cannot be paired: {choice.why}",
            hint="a Python the core accepts must be in [runtime] python and [build] torch",
        )
    move: dict[str, Any] = {
        "requires": requires,
        "from": spec.build.python,
        "to": choice.python,
        "why": choice.why,
        "review": [],
    }
    if choice.python != spec.build.python and spec.build.base_image:
        move["review"].append(
            f"[build] base_image (and image_python_sha256) pin an image for Python "
            f"{spec.build.python}: make one for {choice.python} with `vpr build-image --spec "
            "NEW_SPEC --write-spec`"
        )
    return move


def edit_python(document: tomlkit.TOMLDocument, spec: Spec, move: dict[str, Any]) -> dict[str, Any]:
    """Move `[build] python` (and the lock files named for it) to the Python the new core
    needs; what changed (old -> new). `[build] torch` already pins that Python."""
    old, new = move["from"], move["to"]
    if old == new:
        return {}
    changed: dict[str, Any] = {"build.python": {"from": old, "to": new}}
    document["build"]["python"] = new
    for table in ("build", "env"):
        section = document.get(table)
        if section is not None and "constraints" in section:
            before = str(section["constraints"])
            after = before.replace(f"py{old.replace('.', '')}", f"py{new.replace('.', '')}")
            if after != before:
                section["constraints"] = after
                changed[f"{table}.constraints"] = {"from": before, "to": after}
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


# Optional analyses (a pairing environment per core)


def _not_run(reason: str) -> dict[str, Any]:
    return {"status": "not run", "reason": reason}


def pairing_envs(
    spec: Spec, version: str, *, cache: Cache, dist_root: Path, plugin: PluginSource
) -> tuple[EnvRecord, EnvRecord]:
    """A pairing environment (cpu) for the pinned core and one for `version`, same plugin."""
    if not spec.plugin:
        raise BadInput(f"{spec.path}: no [plugin]; a pairing environment needs one")
    if not isinstance(spec.core.source, SdistSource):
        raise BadInput(f"{spec.path}: pairing environments for a bump need an sdist core source")
    dist = dist_dir(dist_root, spec.name)
    if not (dist / records.BUILD_PLUGIN).exists():
        raise BadInput(
            f"{dist / records.BUILD_PLUGIN}: not found",
            hint=f"run `vpr build-plugin --spec {spec.path}` first",
        )
    old = baseline_env(spec, spec.core.version, cache=cache, dist=dist, plugin=plugin)
    new = baseline_env(spec, version, cache=cache, dist=dist, plugin=plugin)
    return old, new


def api_diff(spec: Spec, old_python: Path, new_python: Path) -> dict[str, Any]:
    """The served API of the old core vs the new one (the `api` check's capture, twice)."""
    from vllm_plugin_release.conform.checks import api

    cfg = api.api_config(spec)
    contracts = []
    for python in (old_python, new_python):
        captured = api.capture(
            python, cfg.tasks, None, endpoint_plugins=cfg.endpoint_plugins, timeout=None
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
    old_env: EnvRecord,
    new_env: EnvRecord,
    *,
    cache: Cache,
    plugin_root: Path,
) -> dict[str, Any]:
    """Plugin tests that pass on the pinned core and fail on the new one (cpu runner)."""
    from vllm_plugin_release.conform.checks import plugin_tests as pt

    cfg = pt.settings_for(spec)
    with cache.scratch("bump-tests-") as tmp:
        base = pt.run_in_env(old_env, plugin_root, cfg, tmp / "old.xml")
        run = pt.run_in_env(new_env, plugin_root, cfg, tmp / "new.xml")
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
    blocked: VprError | None = None  # --dry-run: what would stop the bump (an approval)

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


@dataclass(frozen=True)
class BumpOptions:
    """What `vpr bump` is asked for beyond the edit itself (its flags)."""

    out: Path | None = None
    dry_run: bool = False
    with_api: bool = False
    with_tests: bool = False
    bisect: bool = False
    tag: str | None = None
    plugin_source: Path | None = None
    dist_root: Path = Path("dist")


@dataclass(frozen=True)
class _Run:
    """One bump: the pinned spec, the target and its verified source, handed to each step."""

    spec: Spec
    spec_path: Path
    version: str
    new_path: Path
    new: NewSource
    before_tree: Path
    cache: Cache
    options: BumpOptions
    inputs: Inputs
    locker: Locker | None
    errors: list[VprError] = field(default_factory=list)


def bump(
    spec_path: Path,
    version: str,
    *,
    cache: Cache,
    options: BumpOptions = BumpOptions(),
    locker: Locker | None = None,
    approval: Approval | None = None,
) -> BumpResult:
    """Plan, check and (unless `options.dry_run`) write the bump of `spec_path` to core
    `version`. A breaking change of the core API the plugin uses needs `approval` (else
    GateFailed, nothing written; `--dry-run` reports it in `blocked`)."""
    spec = load_spec(spec_path)
    # The plugin is resolved once (when a step needs it) and handed to every step.
    inputs = Inputs(spec, cache, options.plugin_source)
    document, old_text = read_document(spec_path)
    version, new_path = _target(spec, spec_path, version, options.out)
    before_tree, new = _sources(spec, version, Fetcher(cache), options.tag)
    run = _Run(spec, spec_path, version, new_path, new, before_tree, cache, options, inputs, locker)
    coupling, table = _coupling(run, approval)
    blocked = approval_stop(coupling)
    if blocked is not None and not options.dry_run:
        raise blocked  # before the locks: nothing is resolved or written
    python = python_move(spec, version, new.tree)
    changed = edit_document(document, spec, version, new)
    changed.update(edit_python(document, spec, python))
    changed.update(edit_approval(document, table))
    new_text, review = refresh_comments(tomlkit.dumps(document), spec, new)
    data = tomlkit.parse(new_text).unwrap()  # validated and typed, nothing written yet
    validate(data, new_path, new_text, spec_schema())
    new_spec = from_data(data, new_path)
    report = _report_head(run, changed)
    report["python"] = python
    report.update(_dependency_diffs(spec, version, before_tree, new.tree))
    report["api_coupling"] = coupling
    report["comments_to_review"] = review
    written = _resolve_and_write(run, new_spec, new_text, report)
    report["spec"]["written"] = written
    return BumpResult(spec_path, new_path, old_text, new_text, report, written, run.errors, blocked)


def _resolve_and_write(run: _Run, new_spec: Spec, new_text: str, report: dict[str, Any]) -> bool:
    """Locks resolved into hidden files, the analyses run, then (unless --dry-run) the locks moved
    in and the spec written, last: a stop on the way leaves nothing written. Written or not."""
    pending: list[tuple[Path, Path]] = []
    try:
        report["locks"] = _locks(run, new_spec, pending)
        report.update(_analyses(run))
        if run.options.bisect:
            report["bisect"] = _bisect(run, report)
        if run.options.dry_run:
            return False
        _write(pending, run.new_path, new_text)
        return True
    finally:
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)


def _coupling(run: _Run, approval: Approval | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The report's `api_coupling` part (the core API the plugin uses, old vs new) and the
    approval table the new spec gets. A diff that cannot run stops the bump: its gate cannot
    be passed unchecked."""
    from vllm_plugin_release.conform.lib.apicoupling import coupling as diff

    spec = run.spec
    if not spec.plugin:
        coupling: dict[str, Any] = {"status": "not run", "reason": "the spec has no [plugin]"}
    else:
        root = run.inputs.plugin.root
        with progress.status("bump: the core API the plugin uses, old vs new"):
            try:
                coupling = diff(root, run.before_tree, run.new.tree,
                                versions=(spec.core.version, run.version),
                                cache_dir=run.cache.root / "coupling").to_json()  # fmt: skip
            except OSError as exc:
                raise BadInput(f"{root}: cannot read the plugin's source ({exc})")
    table = decide_approval(coupling, approval, run.spec_path, spec.core.version, run.version)
    return coupling, table


def _target(spec: Spec, spec_path: Path, version: str, out: Path | None) -> tuple[str, Path]:
    """The new version (normalised; newer than the pin) and the new spec's path."""
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
    # in place, unless the file name carries the old version (then the name is bumped)
    stem = _replace_version(spec_path.stem, spec.core.version, version)
    new_path = out or spec_path.with_name(stem + spec_path.suffix)
    if new_path.resolve() != spec_path.resolve() and new_path.exists():
        raise BadInput(
            f"{new_path}: already exists", hint="pass --out PATH, or remove the file first"
        )
    return version, new_path


def _sources(spec: Spec, version: str, fetcher: Fetcher, tag: str | None) -> tuple[Path, NewSource]:
    """The pinned core's verified source tree, and the new core's source, verified."""
    with progress.status(f"bump: verifying the {spec.core.name} {spec.core.version} source"):
        before_tree = source_tree(spec, fetcher)
    with progress.status(f"bump: resolving {spec.core.name} {version}"):
        if isinstance(spec.core.source, SdistSource):
            new = _sdist_source(spec, version, fetcher)
        else:
            new = _git_source(spec, version, fetcher, tag)
    return before_tree, new


def _report_head(run: _Run, changed: dict[str, Any]) -> dict[str, Any]:
    """The report's `core`, `spec` and `source` parts."""
    spec, new, root = run.spec, run.new, run.spec.root
    return {
        "core": {"name": spec.core.name, "from": spec.core.version, "to": run.version},
        "spec": {
            "from": _rel(run.spec_path, root),
            "to": _rel(run.new_path, root),
            "changed": changed,
            "dry_run": run.options.dry_run,
        },
        "source": {
            "kind": new.source.kind,
            **{k: v for k, v in dataclasses.asdict(new.source).items() if k != "kind"},
            "source_date_epoch": new.epoch,
            "source_date_epoch_utc": _utc(new.epoch),
            "source_date_epoch_origin": new.epoch_origin,
        },
    }


def _dependency_diffs(
    spec: Spec, version: str, before_tree: Path, new_tree: Path
) -> dict[str, Any]:
    """The report's `requirements` (runtime) and `build_requires` parts, old vs new."""
    old_common, new_common = before_tree / COMMON_REQUIREMENTS, new_tree / COMMON_REQUIREMENTS
    if old_common.exists() and new_common.exists():
        requirements = {
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
        requirements = _not_run(f"{missing}: not in the verified source")
    return {
        "requirements": requirements,
        "build_requires": {
            "file": "pyproject.toml [build-system].requires",
            **requirements_diff(read_build_requires(before_tree), read_build_requires(new_tree)),
        },
    }


def _locks(run: _Run, new_spec: Spec, pending: list[tuple[Path, Path]]) -> list[dict[str, Any]]:
    """The new spec's locks resolved into hidden files (added to `pending`); none with --dry-run."""
    root = run.spec.root
    if run.options.dry_run:
        files = [("build-core", new_spec.resolve(new_spec.build.constraints))]
        if new_spec.plugin:
            files.append((f"env-{new_spec.name}", new_spec.resolve(new_spec.env_constraints)))
        return [
            {"file": _rel(dest, root), "name": name, "status": "not resolved (--dry-run)"}
            for name, dest in files
        ]
    lock_report: list[dict[str, Any]] = []
    plugin_root = run.inputs.plugin.root if new_spec.plugin else None
    for request, dest in pairing_locks(new_spec, run.new.tree, plugin_root):
        tmp = dest.with_name(f".{dest.name}.bump")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        with progress.status(f"bump: resolving {request.name} for {run.version}"):
            text = (run.locker or compile_lock)(request, tmp, new_spec.build.find_links)
        pending.append((tmp, dest))
        lock_report.append(
            {
                "file": _rel(dest, root),
                "name": request.name,
                "status": "written",
                "pins": _pins_diff(dest, text),
            }
        )
    return lock_report


def _analyses(run: _Run) -> dict[str, Any]:
    """The report's `api` and `plugin_tests` parts: they need a pairing environment for each
    core, so they run only when asked for; what could not run is added to `errors`."""
    need = "needs a pairing environment for each core (minutes)"
    out: dict[str, Any] = {
        "api": _not_run(f"{need}; pass --with-api"),
        "plugin_tests": _not_run(f"{need}; pass --with-tests"),
    }
    spec, cache, opts, errors = run.spec, run.cache, run.options, run.errors
    asked = (("api", opts.with_api), ("plugin_tests", opts.with_tests))
    wanted = [key for key, yes in asked if yes]
    if not wanted:
        return out
    try:
        plugin = run.inputs.plugin  # resolved here: a spec without one is this error
        old_env, new_env = pairing_envs(
            spec, run.version, cache=cache, dist_root=opts.dist_root, plugin=plugin
        )
    except VprError as exc:
        errors.append(exc)
        reason = f"could not build the pairing environments: {exc.message}"
        out.update({key: {"status": "error", "reason": reason} for key in wanted})
        return out
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        "api": lambda: api_diff(spec, old_env.python, new_env.python),
        "plugin_tests": lambda: plugin_test_regressions(
            spec, old_env, new_env, cache=cache, plugin_root=plugin.root
        ),
    }
    for key in wanted:
        try:
            out[key] = runs[key]()
        except VprError as exc:
            errors.append(exc)
            out[key] = {"status": "error", "reason": exc.message}
    return out


def _bisect(run: _Run, report: dict[str, Any]) -> dict[str, Any]:
    """With regressions: the first published version between the pin and `version` that
    breaks the plugin's tests (`vpr bisect` over the index), for the migration report."""
    from vllm_plugin_release.flows import bisect

    tests = report.get("plugin_tests") or {}
    if tests.get("status") != "run":
        return _not_run("needs the plugin tests (--with-tests)")
    if not tests.get("regressions"):
        return _not_run("no regression to bisect")
    spec = run.spec
    opts = bisect.Options(
        cache=run.cache,
        dist_root=run.options.dist_root,
        plugin_source=run.inputs.plugin_source,
    )
    try:
        report = bisect.bisect_report(spec, spec.core.version, run.version, opts)
        return {"status": "run", **report.to_json()}
    except VprError as exc:
        run.errors.append(exc)
        return {"status": "error", "reason": exc.message}


def _write(pending: list[tuple[Path, Path]], new_path: Path, new_text: str) -> None:
    """Move the resolved locks in and write the new spec (after everything else ran)."""
    for tmp, dest in pending:
        os.replace(tmp, dest)
    pending.clear()
    atomic_write_text(new_path, new_text)


def _pins_diff(old_lock: Path, new_text: str) -> dict[str, Any]:
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


# The API coupling gate: the plugin's uses of the core API against both cores, and the
# approval on record a breaking change needs before the bump goes on (`[core.api_approval]`,
# signed into the manifest); a bump with no breaking change drops a stale approval.


@dataclass(frozen=True)
class Approval:
    """What `--approve-by`, `--approve-why` and `--approve ID` said."""

    by: str
    why: str
    changes: tuple[str, ...]


def approval_from(by: str | None, why: str | None, ids: list[str] | None) -> Approval | None:
    """The approval the command line gives, or None; BadInput when it is incomplete."""
    if not (by or why or ids):
        return None
    missing = [flag for flag, value in (("--approve-by", by), ("--approve-why", why),
                                        ("--approve", ids)) if not value]  # fmt: skip
    if missing or not (by or "").strip() or not (why or "").strip():
        raise BadInput(
            f"an approval needs who, why and which changes: {', '.join(missing) or 'a value'} "
            "missing",
            hint="--approve-by 'NAME <EMAIL>' --approve-why 'WHAT THE PLUGIN DID' --approve ID "
            "(one --approve per change the migration report lists)",
        )
    return Approval(str(by).strip(), str(why).strip(), tuple(sorted(set(ids or ()))))


def decide_approval(
    report: dict[str, Any], approval: Approval | None, spec_path: Path, old: str, new: str
) -> dict[str, Any] | None:
    """The `[core.api_approval]` table the new spec gets (None: none). Sets the report's
    `approval` part. GateFailed naming what to approve when a breaking change has no
    approval; BadInput when the approval names a change this bump does not have."""
    breaking = [c["id"] for c in report.get("changes") or []]
    if approval is not None:
        unknown = sorted(set(approval.changes) - set(breaking))
        if unknown:
            raise BadInput(
                f"--approve {', '.join(unknown)}: not a breaking change of this bump ("
                + (", ".join(breaking) or "it has none")
                + ")",
                hint="approve the ids the migration report's API coupling section lists",
            )
    if not breaking:
        report["approval"] = {"status": "not needed"}
        return None
    missing = sorted(set(breaking) - set(approval.changes if approval else ()))
    if missing:
        approve = " ".join(f"--approve {shlex.quote(i)}" for i in missing)
        command = (
            f"vpr bump --spec {shlex.quote(str(spec_path))} --core {new} --approve-by "
            f"'NAME <EMAIL>' --approve-why 'WHAT THE PLUGIN DID ABOUT IT' {approve}"
        )
        report["approval"] = {"status": "missing", "needed": missing, "command": command}
        return None
    assert approval is not None
    table = {"from": old, "to": new, "by": approval.by, "why": approval.why,
             "changes": list(approval.changes)}  # fmt: skip
    report["approval"] = {"status": "approved", **table}
    return table


def approval_stop(report: dict[str, Any]) -> GateFailed | None:
    """The error that stops the bump when a breaking change lacks its approval."""
    approval = report.get("approval") or {}
    if approval.get("status") != "missing":
        return None
    changes = {c["id"]: c for c in report.get("changes") or []}
    lines = [
        f"{cid}: {changes[cid]['detail']} (plugin: {', '.join(changes[cid]['uses'][:3])})"
        for cid in approval["needed"]
    ]
    return GateFailed(
        f"the new core breaks the core API the plugin uses in {len(lines)} way(s); the bump "
        "needs an approval on record before it can publish (nothing was written):\n  "
        + "\n  ".join(lines),
        hint=f"after reviewing them (and fixing the plugin): {approval['command']}",
    )


def edit_approval(document: tomlkit.TOMLDocument, table: dict[str, Any] | None) -> dict[str, Any]:
    """Put the approval into the spec's [core] (or take a stale one out); what changed."""
    core = document["core"]
    before = core.get("api_approval")
    before = before.unwrap() if hasattr(before, "unwrap") else before
    if table is None:
        if before is None:
            return {}
        del core["api_approval"]
        return {"core.api_approval": {"from": before, "to": None}}
    new = tomlkit.table()
    for key in ("from", "to", "by", "why"):
        new[key] = table[key]
    changes = tomlkit.array()
    changes.extend(table["changes"])
    changes.multiline(True)
    new["changes"] = changes
    core["api_approval"] = new
    return {"core.api_approval": {"from": before, "to": table}}


# The migration report as Markdown (`vpr bump` prints it; `--report` writes it)


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


def _coupling_section(c: dict[str, Any] | None) -> list[str]:
    """The core API the plugin uses: breaking, to review, unresolvable, and the approval."""
    out = ["", "### Core API the plugin uses", ""]
    if not c or c.get("status") != "run":
        return [*out, f"not run: {(c or {}).get('reason', 'no plugin')}"]
    review = c.get("review") or []
    unresolved = c.get("unresolved") or []
    out.append(
        f"{c['symbols']} core symbols used (imports, attributes, calls, subclasses, "
        f"overrides); {c['breaking']} breaking change(s) for the plugin"
        + (f"; {len(review)} to review" if review else "")
        + (f"; {len(unresolved)} not resolvable statically" if unresolved else "")
    )
    if c["changes"]:
        out += ["", "| breaking | what changed | plugin |", "|---|---|---|"]
        out += [_change_row(ch) for ch in c["changes"]]
    if review:
        out += ["", "To review (not breaking: the plugin still imports and runs):", "",
                "| review | what changed | plugin |", "|---|---|---|"]  # fmt: skip
        out += [_change_row(ch) for ch in review]
    if unresolved:
        out += ["", "<details><summary>Not resolvable statically "
                f"({len(unresolved)})</summary>", ""]  # fmt: skip
        for u in unresolved:
            if isinstance(u, dict):
                where = ", ".join(u.get("uses", [])[:2])
                out.append(f"- `{_md(u['symbol'])}`: {_md(u['reason'])}"
                           + (f" ({_md(where)})" if where else ""))  # fmt: skip
            else:
                out.append(f"- `{_md(u)}`")
        out += ["", "</details>"]
    approval = c.get("approval") or {}
    if approval.get("status") == "approved":
        out += ["", f"**Approved** by {_md(approval['by'])}: {_md(approval['why'])} "
                f"({len(approval['changes'])} change(s), recorded in the spec as "
                "`[core.api_approval]`)"]  # fmt: skip
    elif approval.get("status") == "missing":
        out += ["", f"**Not approved**: the bump stops until {len(approval['needed'])} "
                f"change(s) are approved on record: `{_md(approval['command'])}`"]  # fmt: skip
    return out


def _change_row(ch: dict[str, Any]) -> str:
    uses = ch["uses"]
    more = f" and {len(uses) - 3} more" if len(uses) > 3 else ""
    return f"| `{_md(ch['id'])}` | {_md(ch['detail'])} | {_md(', '.join(uses[:3]))}{more} |"


def render_markdown(result: BumpResult) -> str:
    r = result.report
    core = r["core"]
    out = [
        f"## Migration report: {core['name']} {core['from']} → {core['to']}",
        "",
        f"Spec: `{r['spec']['from']}` → `{r['spec']['to']}` "
        + ("(written)" if result.written else "(not written: --dry-run)"),
        "",
    ]
    out += _source_section(r["source"])
    out += _python_section(r.get("python"))
    out += _req_section(f"Runtime dependencies ({COMMON_REQUIREMENTS})", r["requirements"])
    out += _req_section("Build requirements ([build-system].requires)", r["build_requires"])
    out += _locks_section(r.get("locks", []))
    out += _coupling_section(r.get("api_coupling"))
    out += _api_section(r["api"])
    out += _tests_section(r["plugin_tests"], core)
    out += _bisect_section(r.get("bisect"))
    if r["comments_to_review"]:
        out += ["", f"### Comments that still name {core['from']} (review by hand)", ""]
        out += [f"- line {c['line']}: `{_md(c['text'])}`" for c in r["comments_to_review"]]
    return "\n".join(out) + "\n"


def _python_section(move: dict[str, Any] | None) -> list[str]:
    if not move:
        return []
    floor = f"Requires-Python `{move['requires']}`" if move["requires"] else "no Requires-Python"
    out = ["### Python", ""]
    if move["from"] == move["to"]:
        out.append(f"{floor}: the spec's Python {move['from']} stays.")
    else:
        out.append(
            f"**The Python floor moved past the spec's {move['from']}** ({floor}): the bumped "
            f"spec pairs on {move['to']} ({_md(move['why'])}); `[build] python` and the lock "
            "files named for it move with it, the locks below are resolved for it."
        )
    out += [f"- review: {_md(item)}" for item in move.get("review", [])]
    return [*out, ""]


def _source_section(src: dict[str, Any]) -> list[str]:
    if src["kind"] == "sdist":
        out = [
            f"Source: `{src['filename']}` sha256 `{src['sha256']}` from {src['index']} "
            "(verified on download)"
        ]
    else:
        out = [f"Source: {src['url']} tag `{src['tag']}` commit `{src['commit']}` (verified)"]
    return [
        *out,
        "",
        f"SOURCE_DATE_EPOCH: {src['source_date_epoch']} ({src['source_date_epoch_utc']} UTC, "
        f"{src['source_date_epoch_origin']})",
        "",
    ]


def _locks_section(locks: list[dict[str, Any]]) -> list[str]:
    out = ["### Locks", ""]
    for lock in locks:
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
    return out


def _api_section(api: dict[str, Any]) -> list[str]:
    out = ["", "### Served API", ""]
    if api["status"] != "run":
        return [*out, f"{api['status']}: {api['reason']}"]
    out.append(f"{api['breaking']} breaking, {api['additive']} additive change(s)")
    for c in api["changes"]:
        if c["breaking"]:
            out.append(f"- BREAKING {c['kind']} `{_md(c['location'])}`: {_md(c['detail'])}")
    return out


def _tests_section(tests: dict[str, Any], core: dict[str, Any]) -> list[str]:
    out = ["", "### Plugin tests", ""]
    if tests["status"] != "run":
        return [*out, f"{tests['status']}: {tests['reason']}"]
    out.append(
        f"{len(tests['regressions'])} regression(s) on {core['to']} "
        f"(passed on {core['from']}); {len(tests['fixed'])} fixed"
    )
    return [*out, *(f"- regressed: `{t}`" for t in tests["regressions"])]


def _bisect_section(bisected: dict[str, Any] | None) -> list[str]:
    if bisected and bisected.get("status") == "run":
        from vllm_plugin_release.core.bisect import parse_report
        from vllm_plugin_release.core.bisect import render_markdown as render_bisect

        try:
            report = parse_report(bisected)
        except ValueError as exc:
            return ["", "### Bisection", "", f"error: the report cannot be read ({exc})"]
        return ["", render_bisect(report).rstrip("\n")]
    if bisected and bisected.get("status") == "error":
        return ["", "### Bisection", "", f"error: {bisected['reason']}"]
    return []
