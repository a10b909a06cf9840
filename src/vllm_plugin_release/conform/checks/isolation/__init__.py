"""The `isolation` check: no vendor symbols in the vLLM core source tree or wheel."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.isolation import check, schema

CHECK = CheckDef(
    "isolation",
    "no vendor symbols in the vLLM core source tree or wheel",
    check.run,
    schema.TABLES,
    ("core_tree", "core_wheel"),
)
