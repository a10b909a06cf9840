"""The `pinning` check: how the plugin's installer builds vLLM (version, device, hashes)."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.pinning import check, schema

CHECK = CheckDef(
    "pinning",
    "how the plugin's installer builds vLLM: version, target device, hashes",
    check.run,
    schema.TABLES,
    ("plugin_root",),
)
