"""The `scheduler` check: the plugin's scheduling docs against its scheduler in the replay."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.scheduler import check, schema

CHECK = CheckDef(
    "scheduler",
    "what the plugin's docs say about scheduling against what its scheduler does in the replay",
    check.run,
    schema.TABLES,
    ("plugin_root", "env", "replay"),
    needs=("env",),
)
