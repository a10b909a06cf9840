"""The `api` check: the served OpenAPI surface of the pairing against a client contract."""

from vllm_plugin_release.conform.checkdef import CheckDef
from vllm_plugin_release.conform.checks.api import check, schema

CHECK = CheckDef(
    "api",
    "the served OpenAPI surface of the pairing against a client contract",
    check.run,
    schema.TABLES,
    ("env",),
    needs=("env",),
    without_env=check.without_env,
)
