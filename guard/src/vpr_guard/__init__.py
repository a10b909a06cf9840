"""vpr-guard: vLLM refuses, at start-up, an environment that is not its certified pairing.

Standard library only, and nothing of vllm-plugin-release: it runs inside the pairing
environment, in every process vLLM starts. `vpr_guard.plugin.check_at_startup` is the
`vllm.general_plugins` entry point; `python -m vpr_guard` the same check from a shell.
"""

__version__ = "1.0.0"

STATE_DIR = "vpr-guard"  # under the environment's prefix: what `vpr install` certified
MANIFEST = "manifest.json"  # the verified manifest, byte for byte as the store serves it
STATEMENT = "manifest.intoto.jsonl"  # its signed statement (for `vpr manifest check-env`)
LOCK = "manifest.lock.txt"  # the pairing's hash lock (where `vpr manifest check-env` looks)
CERTIFIED = "certified.json"  # the snapshot vpr install took, with the manifest's sha256
POLICY = "policy"  # enforce | warn | off (optional; VPR_GUARD overrides it)
POLICY_ENV = "VPR_GUARD"
POLICIES = ("enforce", "warn", "off")
CERTIFIED_KIND = "vpr-guard/certified"
