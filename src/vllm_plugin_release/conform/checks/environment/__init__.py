"""The `environment` check: the pairing environment's own checks (`vpr env`), summarised."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.environment import check, schema

CHECK = CheckDef(
    "environment",
    "the pairing environment's own checks (vpr env), summarised",
    check.run,
    schema.TABLES,
    ("env",),
    needs=("env", "runtime"),
)
