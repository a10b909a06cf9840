"""The `workload` check: the request mix's features asked of the plugin; the models in its docs."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.workload import check, schema

CHECK = CheckDef(
    "workload",
    "the request mix's features (speculative decoding, sampling on the device or the "
    "host, structured output, ...) asked of the plugin as vLLM asks at startup; the "
    "models its docs show",
    check.run,
    schema.TABLES,
    ("plugin_root", "env"),
    needs=("env", "runtime"),
)
