"""The `hardware` check: the live part on the hardware runner (`vpr hardware live`)."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.hardware import schema

CHECK = CheckDef(
    "hardware",
    "the live part on the hardware runner: the parallelism probe and a mixed-load "
    "test against `vllm serve`",
    None,
    schema.TABLES,
    ("env",),
    needs=("env", "runtime", "device"),
    runner="hardware",
)
