"""The `cadence` check: how far the plugin trails vLLM releases (it reads the network)."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.cadence import check, schema

CHECK = CheckDef(
    "cadence",
    "how far the plugin trails vLLM releases (minor releases and days behind)",
    check.run,
    schema.TABLES,
    ("plugin_root",),
    needs=("network",),
)
