"""`vpr plugin-tests`: the plugin's own tests in the pairing env, optionally against a baseline.

The baseline is the same plugin on another core version (`--baseline VERSION`, or
`auto`: the version the plugin's installer pins); tests that pass there and fail
here are regressions.
"""

from __future__ import annotations

from pathlib import Path

from vllm_plugin_release.buildspec.model import Spec
from vllm_plugin_release.conform.checks import plugin_tests as pt
from vllm_plugin_release.conform.lib import installscan
from vllm_plugin_release.core import progress, records
from vllm_plugin_release.core.errors import BadInput
from vllm_plugin_release.core.records import dist_dir
from vllm_plugin_release.flows.baseline import baseline_env
from vllm_plugin_release.flows.sources import Inputs


def run_plugin_tests(inputs: Inputs, dist_root: Path, runner: str, baseline: str | None) -> int:
    """Run the tests, write the record and JUnit XML, print the outcome; the exit code."""
    spec, cache = inputs.spec, inputs.cache
    dist = dist_dir(dist_root, spec.name)
    env_file = dist / records.ENV
    env = records.env_record(dist, hint=f"vpr env --spec {spec.path}")
    if env.runner != runner:
        raise BadInput(
            f"{env_file}: the environment is for runner {env.runner!r}, not {runner!r}",
            hint=f"run `vpr env --spec {spec.path} --site {runner}` first",
        )
    cfg = pt.settings_for(spec)
    root = inputs.plugin.root
    with cache.scratch("plugin-tests-") as tmp:
        run = pt.run_in_env(env, root, cfg, tmp / "junit.xml")
        (dist / f"plugin-tests-{runner}.xml").write_bytes((tmp / "junit.xml").read_bytes())
        base_run = None
        version = None
        if baseline:
            version = installer_pin(spec, root) if baseline == "auto" else baseline
            base_env = baseline_env(spec, version, cache=cache, dist=dist, plugin=inputs.plugin)
            base_run = pt.run_in_env(base_env, root, cfg, tmp / "baseline.xml")
    record = pt.write_record(dist, run, base_run, version, spec.core.version)
    _report(runner, run, base_run, version, record)
    return 1 if run.failing or record.regressions else 0


def _report(
    runner: str,
    run: pt.TestRun,
    base_run: pt.TestRun | None,
    version: str | None,
    record: pt.TestsRecord,
) -> None:
    c = run.counts
    progress.info(
        f"plugin-tests ({runner}): {c['passed']} passed, {c['failed']} failed, "
        f"{c['error']} errors, {c['skipped']} skipped, {c['deferred']} deferred (need the runtime)"
    )
    for test in run.failing:
        progress.info(f"  failing: {test}")
    for path in run.deferred:
        progress.info(f"  deferred to the hardware runner: {path}")
    if base_run is not None:
        progress.info(f"  regressions vs vLLM {version}: {len(record.regressions)}")
        for test in record.regressions:
            progress.info(f"    {test}")


def installer_pin(spec: Spec, root: Path) -> str:
    """The core version the plugin's installer pins exactly (read by the pinning check)."""
    options = installscan.pinning_options(spec)
    files = installscan.input_files(spec, options.files)
    report = installscan.scan(root, files, spec.core.name, options.build_args)
    pin = report.core_pin
    if not pin or not pin.get("exact") or not pin.get("version"):
        raise BadInput(
            f"{root}: the plugin's installer pins no exact {spec.core.name} version",
            hint="pass --baseline VERSION",
        )
    return str(pin["version"])
