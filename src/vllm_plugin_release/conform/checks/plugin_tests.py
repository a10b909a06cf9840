"""The `plugin_tests` check: the plugin's own test suite run in the pairing environment
(`[conformance.plugin_tests]`), its JUnit report judged against the baseline."""

from __future__ import annotations

import contextlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform import CheckDef, CheckResult, Context, Evidence
from vllm_plugin_release.conform.lib.testscan import (
    NETWORK_SIGNATURES,
    OFFLINE_ENV,
    option_folders,
    runtime_importers,
)
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.cache import Cache, write_json
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import (
    BadInput,
    JobFailed,
    OutsideFailure,
    TimedOut,
    output_tail,
)
from vllm_plugin_release.edges import proc
from vllm_plugin_release.edges.container import runner_of

PLUGIN_TESTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The plugin's own test suite, run in the pairing environment.",
    "additionalProperties": False,
    "properties": {
        "cpu": {
            "type": "array",
            "items": {"type": "string"},
            "default": ["tests"],
            "description": "Test paths (relative to the plugin source) run on the cpu runner.",
        },
        "hardware": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Test paths run on the hardware runner (default: the cpu paths).",
        },
        "ignore": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Paths never collected on the cpu runner (they need the runtime); "
            "reported as deferred.",
        },
        "timeout": {
            "type": "integer",
            "minimum": 1,
            "default": 1800,
            "description": "Seconds one pytest run may take.",
        },
        "absence_signatures": {
            "type": "array",
            "items": {"type": "string", "minLength": 3},
            "default": [],
            "description": "Text in a failure that means the vendor runtime is absent, "
            "besides `No module named '<runtime module>'` (e.g. the runtime's own "
            "exception name): such failures are deferred on the cpu runner.",
        },
        "scan_imports": {
            "type": "boolean",
            "default": True,
            "description": "On the cpu runner with the runtime absent, leave out (and defer) "
            "the test files that import the runtime at import time, found by reading them.",
        },
    },
}

TABLES: dict[str, dict[str, Any]] = {"plugin_tests": PLUGIN_TESTS_SCHEMA}


# The per-file table's columns (the scorecard's, of details.by_module).
OUTCOMES = ("passed", "failed", "error", "skipped", "deferred")


RECORD = records.PLUGIN_TESTS
INI_FILES = ("pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


@dataclass
class TestRun:
    runner: str
    paths: list[str]
    counts: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed|failed|...
    exit_code: int = 0
    deferred: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)  # deferred, skipped, found: why

    @property
    def failing(self) -> list[str]:
        return sorted(t for t, o in self.outcomes.items() if o in ("failed", "error"))

    def by_module(self) -> dict[str, dict[str, int]]:
        """Outcome counts per test file (`tests/test_x.py`): what the scorecard shows."""
        table: dict[str, dict[str, int]] = {}
        for test, outcome in self.outcomes.items():
            row = table.setdefault(test_module(test), {})
            row[outcome] = row.get(outcome, 0) + 1
        return dict(sorted(table.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "runner": self.runner,
            "paths": self.paths,
            "counts": self.counts,
            "failing": self.failing,
            "pytest_exit_code": self.exit_code,
            "deferred": self.deferred,
            "outcomes": dict(sorted(self.outcomes.items())),
            "by_module": self.by_module(),
            "deferred_tests": self.with_outcome("deferred"),
            "import_findings": self.with_outcome("failed"),
        }

    def with_outcome(self, outcome: str) -> dict[str, str]:
        """test id -> reason of the tests of `outcome`, sorted."""
        return {t: r for t, r in sorted(self.reasons.items()) if self.outcomes.get(t) == outcome}

    def without_paths(self, env: Path, root: Path) -> None:
        """Reasons without this machine's folders: the same wherever the run was."""
        for test, why in self.reasons.items():
            self.reasons[test] = why.replace(f"{env}/", "<env>/").replace(f"{root}/", "")

    def count_import_findings(self, failed_modules: dict[str, str]) -> None:
        """A skip because a plugin module does not import counts as a failure."""
        for test, outcome in list(self.outcomes.items()):
            said = self.reasons.get(test, "")
            if outcome != "skipped" or not said:
                continue
            hit = next(
                (m for m, err in failed_modules.items() if m in said or (err and err in said)),
                None,
            )
            if hit is None:
                continue
            self.outcomes[test] = "failed"
            self.reasons[test] = f"skipped because {hit} does not import: {failed_modules[hit]}"
            self.counts["skipped"] -= 1
            self.counts["failed"] = self.counts.get("failed", 0) + 1


@dataclass(frozen=True, slots=True)
class TestSettings:
    """`[conformance.plugin_tests]`, defaults filled in, and the runtime's no-device errors."""

    cpu: tuple[str, ...] = ("tests",)
    hardware: tuple[str, ...] = ("tests",)
    ignore: tuple[str, ...] = ()
    timeout: int = 1800
    absence_signatures: tuple[str, ...] = ()
    scan_imports: bool = True
    no_device: tuple[str, ...] = ()

    def paths(self, runner: str) -> list[str]:
        """The test paths of `runner` ("cpu" or "hardware")."""
        if runner not in ("cpu", "hardware"):
            raise BadInput(f"no test paths for the runner {runner!r}", hint="cpu or hardware")
        return list(self.cpu if runner == "cpu" else self.hardware)

    def key(self) -> str:
        """The settings as one text: part of the key a run started ahead is taken by."""
        return json.dumps(asdict(self), sort_keys=True)


def settings(table: Mapping[str, object], no_device: object = ()) -> TestSettings:
    """`TestSettings` of the table and `[runtime] no_device`; BadInput naming a wrong key."""
    cpu = _texts(table.get("cpu", ["tests"]), "cpu")
    return TestSettings(
        cpu=cpu,
        hardware=_texts(table["hardware"], "hardware") if "hardware" in table else cpu,
        ignore=_texts(table.get("ignore", []), "ignore"),
        timeout=_seconds(table.get("timeout", 1800)),
        absence_signatures=_texts(table.get("absence_signatures", []), "absence_signatures"),
        scan_imports=bool(table.get("scan_imports", True)),
        no_device=_texts(no_device, "no_device", "[runtime]"),
    )


def _seconds(value: object) -> int:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise BadInput(
            f"[conformance.plugin_tests] timeout: expected seconds, got {value!r:.80}",
            hint="check the spec",
        )
    return int(value)


def _texts(value: object, key: str, table: str = "[conformance.plugin_tests]") -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise BadInput(
            f"{table} {key}: expected a list of text, got {value!r:.80}", hint="check the spec"
        )
    return tuple(value)


def settings_for(spec: Spec) -> TestSettings:
    """The spec's `TestSettings`."""
    table = spec.conformance("plugin_tests") or {}
    return settings(table, list(spec.runtime.no_device) if spec.runtime else [])


def deferrals(root: Path, cfg: TestSettings, runner: str, module: str | None) -> Deferrals:
    """What defers a failing test on the cpu runner (none on the hardware runner)."""
    if runner != "cpu":
        return Deferrals()
    absent = (*absence_signatures(module), *cfg.absence_signatures) if module else ()
    folders = option_folders(root, list(cfg.cpu))
    return Deferrals(
        absent=tuple(absent),
        no_device=cfg.no_device,
        option_folders=tuple((k, tuple(v)) for k, v in sorted(folders.items())),
        runtime_module=module or "",
    )


def absence_signatures(runtime_module: str) -> list[str]:
    """How an absent runtime shows in a failure, a missing parent package of a dotted one too."""
    parts = runtime_module.split(".")
    parents = [f"No module named '{'.'.join(parts[:i])}'" for i in range(1, len(parts))]
    return [*parents, f"No module named '{runtime_module}"]


@dataclass(frozen=True)
class Deferrals:
    """What makes a failing test the hardware runner's, not a failure: the absent runtime, a
    device the machine does not have, or options the plugin's conftest requires that the cpu
    runner never passes. Each keyed on what the test did, never on a list of tests."""

    absent: tuple[str, ...] = ()
    no_device: tuple[str, ...] = ()
    option_folders: tuple[tuple[str, tuple[str, ...]], ...] = ()
    runtime_module: str = ""

    def reason(self, test_id: str, text: str) -> str | None:
        """Why the failing test `test_id` (its failure `text`) is deferred, or None."""
        if found := next((m for m in self.absent if m in text), None):
            return f"needs the runtime {self.runtime_module or ''}: {found}".replace("  ", " ")
        if found := next((m for m in self.no_device if m in text), None):
            return f"needs a device: {found}"
        module = test_module(test_id)
        for folder, options in self.option_folders:
            if module.startswith(folder.rstrip("/") + "/"):
                return (
                    f"needs {', '.join(options)}, which {folder}/conftest.py requires (a live "
                    "server: given on the hardware runner)"
                )
        return None


def test_module(test_id: str) -> str:
    """The test file of a JUnit test id (`tests.a.test_x.T::t` -> `tests/a/test_x.py`)."""
    parts = test_id.split("::", 1)[0].split(".")
    last = max(
        (i for i, p in enumerate(parts) if p.startswith("test_") or p.endswith("_test")),
        default=len(parts) - 1,
    )
    return "/".join(parts[: last + 1]) + ".py"


def classify_junit(
    path: Path, deferrals: Deferrals
) -> tuple[dict[str, int], dict[str, str], dict[str, str]]:
    """Counts, per-test outcomes (deferred and network too) and why each deferred test is."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as exc:  # garbage where pytest's report should be
        raise JobFailed(f"the plugin's pytest run wrote an unreadable report ({exc})")
    outcomes: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        test_id = f"{classname}::{case.get('name', '?')}" if classname else case.get("name", "?")
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        text = (
            ((problem.get("message") or "") + (problem.text or "")) if problem is not None else ""
        )
        why = deferrals.reason(test_id, text) if problem is not None else None
        skipped = case.find("skipped")
        if why:
            outcome = "deferred"
            reasons[test_id] = why
        elif problem is not None and any(m in text for m in NETWORK_SIGNATURES):
            outcome = "network"
        elif problem is not None:
            outcome = "failed" if problem.tag == "failure" else "error"
        elif skipped is not None:
            outcome = "skipped"
            reasons[test_id] = (skipped.get("message") or "").strip()[:300]
        else:
            outcome = "passed"
        outcomes[test_id] = outcome
    counts = dict.fromkeys(OUTCOMES, 0)
    for outcome in outcomes.values():
        counts[outcome] = counts.get(outcome, 0) + 1  # "network" only when there is one
    # collection errors appear as testsuite errors without a testcase on some versions:
    # those beyond the testcases that carry an <error> (whatever they were classified as)
    suite_errors = sum(int(s.get("errors", 0)) for s in root.iter("testsuite"))
    with_error = sum(1 for case in root.iter("testcase") if case.find("error") is not None)
    counts["error"] += max(0, suite_errors - with_error)
    counts["total"] = len(outcomes)
    return counts, outcomes, reasons


# `python -m pytest ARGS` as `python -c PYTEST_MAIN ARGS`: the same pytest run, then
# os._exit with its code once its reports are written, skipping the interpreter's teardown
# after vLLM and torch, which nothing needs and which is slow.
PYTEST_MAIN = """\
import os, runpy, sys
sys.path[0] = os.getcwd()
try:
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)
    code = 0
except SystemExit as exc:
    code = exc.code
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
for stream in (sys.stdout, sys.stderr):
    stream.flush()
os._exit(code or 0)
"""


def pytest_command(python: Path, root: Path, paths: list[str], ignore: list[str], junit: Path):
    """The plugin's pytest run: `python -c PYTEST_MAIN ARGS` (argv[3:] are pytest's own)."""
    argv = [
        str(python),
        "-c",
        PYTEST_MAIN,
        *paths,
        f"--junitxml={junit}",
        "-o",
        "junit_family=xunit2",
        "-p",
        "no:cacheprovider",
        "-q",
        "--continue-on-collection-errors",
        "--rootdir",
        str(root),
    ]
    for candidate in INI_FILES:  # keep pytest from climbing into an unrelated ini file
        if (root / candidate).exists():
            argv += ["-c", str(root / candidate)]
            break
    for path in ignore:
        argv.append(f"--ignore={path}")
    return argv


def _test_env() -> dict[str, str]:
    # bytecode is cached in the pairing env, so a later import of vLLM and torch skips compiling
    env = proc.inherited(drop=("PYTHONDONTWRITEBYTECODE",))
    env.update(OFFLINE_ENV)  # no hub downloads and their retries: those tests are classified
    return env


@dataclass(frozen=True)
class Suite:
    """Which tests a run is of; `module`: the runtime's when it is absent."""

    root: Path
    runner: str
    cfg: TestSettings
    module: str | None

    def planned(self) -> tuple[list[str], list[str]]:
        """(the test paths, the paths left out) of the run; BadInput for a path not there."""
        root, paths = self.root, self.cfg.paths(self.runner)
        missing = [p for p in paths if not (root / p).exists()]
        if missing:
            raise BadInput(
                f"{root}: test paths not found: {', '.join(missing)}",
                hint="check [conformance.plugin_tests]",
            )
        # The hand list and the import scan apply only where the runtime is absent: with it
        # present, every host test runs, and what needs a device shows in the run itself.
        module = self.module if self.runner == "cpu" else None
        ignore = list(self.cfg.ignore) if module else []
        if module and self.cfg.scan_imports:
            ignore += runtime_importers(root, paths, ignore, module)
        return paths, ignore


def _outcome(
    done: Any,  # subprocess.CompletedProcess[str]
    junit: Path,
    suite: Suite,
    plan: tuple[list[str], list[str]],
) -> TestRun:
    if done.returncode not in (0, 1, 2, 5) or not junit.exists():
        # pytest died (a test crashed its process) or broke: the plugin's code ran there
        tail = output_tail(done.stdout + done.stderr, 20)
        how = proc.ended(done.returncode) + ("" if junit.exists() else ", without a report")
        raise JobFailed(f"the plugin's pytest run {how}:\n{tail}", log=tail)
    runner, cfg = suite.runner, suite.cfg
    paths, ignore = plan
    counts, outcomes, reasons = classify_junit(
        junit, deferrals(suite.root, cfg, runner, suite.module)
    )
    run = TestRun(runner, paths, counts, outcomes, done.returncode, reasons=reasons)
    if runner == "cpu":
        run.deferred = sorted(set(cfg.hardware) - set(paths)) + list(ignore)
    return run


def run_tests(python: Path, suite: Suite, junit: Path) -> TestRun:
    plan = suite.planned()
    argv = pytest_command(python, suite.root, *plan, junit)
    progress.info(f"plugin-tests: {' '.join(argv[3:])}")
    # Where the pairing env was made: this machine, or its pinned container image.
    timeout = suite.cfg.timeout
    with progress.working("plugin tests"), _timed_out(timeout):
        done = runner_of(python).call(argv, env=_test_env(), cwd=suite.root, timeout=timeout)
    return _outcome(done, junit, suite, plan)


@contextlib.contextmanager
def _timed_out(timeout: float) -> Iterator[None]:
    """Tests past their time are the plugin's failure (JobFailed), not an outside one."""
    try:
        yield
    except TimedOut as exc:
        tail = output_tail(exc.output, 20)
        late = f"the plugin's pytest run did not finish within {timeout:g} s"
        raise JobFailed(f"{late}:\n{tail}", log=tail) from None


# Started ahead: within `vpr release`, the plugin's tests start as soon as the pairing
# env's wheels are in, and the conformance check waits for that very run (same command,
# environment and files). The walk holds the run and stops it if nobody took it.

PLUGIN_TESTS = "plugin-tests"


def _key(python: Path, suite: Suite) -> tuple[str, ...]:
    return (str(python), str(suite.root), suite.runner, suite.cfg.key(), str(suite.module))


def start_ahead(ahead: proc.Ahead, cache: Cache, python: Path, suite: Suite) -> bool:
    """Start the tests now for `tests_run` (only on this machine); whether started."""
    if runner_of(python).kind != "local":
        return False
    scratch = contextlib.ExitStack()
    try:
        tmp = scratch.enter_context(cache.scratch("conform-tests-"))
        plan = suite.planned()
        argv = pytest_command(python, suite.root, *plan, tmp / "j.xml")
        progress.info(f"plugin-tests, started while the env is checked: {' '.join(argv[3:])}")
        started = proc.Started(
            argv, what="plugin tests", folder=tmp, cwd=suite.root, env=_test_env()
        )
    except (BadInput, OutsideFailure):
        scratch.close()  # conform runs them itself, and says what is wrong
        return False
    except BaseException:
        scratch.close()
        raise
    ahead.add(PLUGIN_TESTS, _key(python, suite), started, scratch, (tmp / "j.xml", plan))
    return True


def tests_run(cache: Cache, python: Path, suite: Suite, ahead: proc.Ahead | None) -> TestRun:
    """The run started ahead in `ahead` with this very command, once it ends; else a run now."""
    taken = None if ahead is None else ahead.take(PLUGIN_TESTS, _key(python, suite))
    if taken is None:
        with cache.scratch("conform-tests-") as tmp:
            return run_tests(python, suite, tmp / "j.xml")
    try:
        with (
            progress.working("plugin tests (started while the env was checked)"),
            _timed_out(suite.cfg.timeout),
        ):
            done = taken.started.finish(suite.cfg.timeout)
        junit, plan = taken.data
        return _outcome(done, junit, suite, plan)
    finally:
        taken.close()


def regressions(baseline: TestRun, new: TestRun) -> list[str]:
    """Tests that pass on the baseline core and fail (or error) on the new one."""
    return sorted(
        t
        for t, o in new.outcomes.items()
        if o in ("failed", "error") and baseline.outcomes.get(t) == "passed"
    )


@dataclass(frozen=True, slots=True)
class TestsRecord:
    """plugin-tests.json: the run, and the baseline run with its regressions (if any)."""

    core_version: str
    run: TestRun
    baseline: TestRun | None = None
    base_version: str | None = None

    @property
    def regressions(self) -> list[str]:
        """Tests that pass on the baseline and fail on the new core ([] without one)."""
        return [] if self.baseline is None else regressions(self.baseline, self.run)

    def to_json(self) -> dict[str, Any]:
        """The record as written: these keys, in this order."""
        record: dict[str, Any] = {
            "stage": "plugin-tests",
            "core_version": self.core_version,
            **self.run.to_json(),
        }
        if self.baseline is not None:
            record["baseline"] = {"core_version": self.base_version, **self.baseline.to_json()}
            record["regressions"] = self.regressions
        return record


def write_record(
    dist: Path, run: TestRun, baseline: TestRun | None, base_version: str | None, core_version: str
) -> TestsRecord:
    """Write plugin-tests.json (`TestsRecord.to_json`); the record."""
    record = TestsRecord(core_version, run, baseline, base_version)
    write_json(dist / RECORD, record.to_json())
    return record


class Baseline(NamedTuple):
    """plugin-tests.json's `baseline`: the run and its core's version (None if not text)."""

    run: TestRun
    core_version: str | None


def parse_baseline(data: Any, runner: str, path: Path, hint: str) -> Baseline | None:
    """The `baseline` for `runner` (None without one); BadInput naming `path` and key."""
    b = data.get("baseline") if isinstance(data, dict) else None
    if not b or not isinstance(b, dict) or b.get("runner") != runner:
        return None
    kinds = {"paths": (list, str), "counts": (dict, int), "outcomes": (dict, str)}
    for key, (kind, item) in kinds.items():
        value = b.get(key)
        items = value.values() if isinstance(value, dict) else value
        if not isinstance(value, kind) or not all(
            isinstance(v, item) and not isinstance(v, bool) for v in items
        ):
            raise BadInput(
                f"{path}: key 'baseline.{key}' is missing or of the wrong kind",
                hint=f"run `{hint}` again",
            )
    version = b.get("core_version")
    return Baseline(
        TestRun(runner, b["paths"], b["counts"], b["outcomes"]),
        version if isinstance(version, str) else None,
    )


def _recorded_baseline(dist: Path, runner: str) -> tuple[TestRun | None, str | None]:
    """The baseline run recorded for this runner and its core version, or (None, None)."""
    previous = dist / RECORD
    if not previous.exists():
        return None, None
    hint = "vpr plugin-tests --baseline"
    # bounded, a JSON object, its baseline checked
    b = records.read_with(
        dist, RECORD, lambda data: parse_baseline(data, runner, previous, hint), hint
    )
    return (None, None) if b is None else (b.run, b.core_version)


def _status_and_summary(run: TestRun) -> tuple[str, str]:
    """pass only when the whole suite ran: tests or paths left to the hardware runner keep
    the check at deferred; a failing test, or no test at all, fails it."""
    c = run.counts
    if run.failing or c.get("total", 0) == 0:
        status = "fail"
    elif c.get("deferred") or c.get("network") or run.deferred:
        status = "deferred"
    else:
        status = "pass"
    summary = (
        f"{c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped,"
        f" {c.get('deferred', 0)} deferred to the hardware runner"
        + (f", {c['network']} need the network (run offline)" if c.get("network") else "")
        + (f"; deferred paths: {', '.join(run.deferred)}" if run.deferred else "")
    )
    return status, summary


def _evidence(record: TestsRecord) -> list[Evidence]:
    run, base_version = record.run, record.base_version
    found = run.with_outcome("failed")
    evidence = [
        Evidence(note=f"failing: {t}" + (f" ({found[t]})" if t in found else ""), source="pytest")
        for t in run.failing
    ]
    evidence += [
        Evidence(note=f"deferred: {t}: {why}", source="pytest")
        for t, why in run.with_outcome("deferred").items()
    ]
    evidence += [
        Evidence(note=f"regression vs vLLM {base_version}: {t}", source="baseline")
        for t in record.regressions
    ]
    evidence += [
        Evidence(note=f"deferred to the hardware runner: {p}", source="spec") for p in run.deferred
    ]
    return evidence


def absent_runtime(env: EnvRecord) -> str | None:
    """The runtime module when the environment lacks it: only then does a hand list or an
    import scan leave tests out (a present runtime never excuses a failure)."""
    return None if env.runtime_present else env.runtime.module


def failed_imports(env: EnvRecord) -> dict[str, str]:
    """The plugin's modules that do not import in the environment, with their errors."""
    return {m.module: m.reason or "" for m in env.plugin_modules if m.status == "failed"}


def _as_reported(run: TestRun, env: EnvRecord, root: Path) -> TestRun:
    """`run` without this machine's folders, a skip on a plugin module's failed import failed."""
    run.without_paths(Path(env.python).parent.parent, root)
    run.count_import_findings(failed_imports(env))
    return run


def run_in_env(env: EnvRecord, root: Path, cfg: TestSettings, junit: Path) -> TestRun:
    """The plugin's tests in a pairing environment, chosen and classified as the check does."""
    suite = Suite(root, env.runner, cfg, absent_runtime(env))
    return _as_reported(run_tests(env.python, suite, junit), env, root)


def run(ctx: Context) -> CheckResult:
    """The `plugin_tests` check: the plugin's tests in the pairing env, with a recorded baseline."""
    cfg = settings_for(ctx.spec)
    suite = Suite(ctx.plugin_root, ctx.runner, cfg, absent_runtime(ctx.env))
    run = _as_reported(
        tests_run(ctx.cache, ctx.env.python, suite, ctx.ahead), ctx.env, ctx.plugin_root
    )
    # A baseline recorded by `vpr plugin-tests --baseline` stays, compared with this run.
    base_run, base_version = _recorded_baseline(ctx.dist, ctx.runner)
    record = write_record(ctx.dist, run, base_run, base_version, ctx.spec.core.version)
    status, summary = _status_and_summary(run)
    return CheckResult(
        "plugin_tests",
        status,
        summary,
        _evidence(record),
        threshold={"paths": cfg.paths(ctx.runner)},  # type: ignore[arg-type]
        details={"counts": run.counts, "by_module": run.by_module()},
    )


CHECK = CheckDef(
    "plugin_tests",
    "the plugin's own test suite in the pairing environment",
    run,
    TABLES,
    ("plugin_root", "env"),
    needs=("env", "runtime"),
)
