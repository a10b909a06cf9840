"""The `hardware_docs` check: the spec's hardware expectations against the plugin's docs."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.hardware_docs import check, schema

CHECK = CheckDef(
    "hardware_docs",
    "the spec's hardware expectations (parallelism, mesh variable, device nodes) against "
    "the plugin's docs [specs with a hardware part]",
    check.run,
    schema.TABLES,
    ("plugin_root",),
    applies=check.applies,
)
