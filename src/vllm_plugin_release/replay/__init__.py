"""Scheduler replay and live mixed-load test.

- `mix`: request mixes from `[conformance.request_mix]` (pure, seeded);
- `config`: `[conformance.replay]` resolved into a `ReplayConfig` (pure);
- `model`: cost model, per-scheduler metrics and the replay.json report (pure);
- `runner`: sends the replay to the pairing environment (`inenv/replay.py`);
- `plots`: PNGs of step composition and ITL;
- `cmd`: `vpr replay` and `vpr loadtest`.
"""

from vllm_plugin_release.replay.config import REPLAY_SCHEMA
from vllm_plugin_release.replay.mix import REQUEST_MIX_SCHEMA

__all__ = ["REPLAY_SCHEMA", "REQUEST_MIX_SCHEMA"]
