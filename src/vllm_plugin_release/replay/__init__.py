"""Scheduler replay and the live mixed-load test: request mixes, the replay's config, cost
model and metrics on this side; the schedulers stepped in the pairing environment."""

from vllm_plugin_release.replay.config import REPLAY_SCHEMA
from vllm_plugin_release.replay.mix import REQUEST_MIX_SCHEMA

__all__ = ["REPLAY_SCHEMA", "REQUEST_MIX_SCHEMA"]
