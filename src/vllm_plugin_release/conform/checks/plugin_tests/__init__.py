"""The `plugin_tests` check: the plugin's own test suite in the pairing environment."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.plugin_tests import check, schema

CHECK = CheckDef(
    "plugin_tests",
    "the plugin's own test suite in the pairing environment",
    check.run,
    schema.TABLES,
    ("plugin_root", "env"),
    needs=("env", "runtime"),
)
