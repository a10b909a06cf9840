"""vllm-plugin-release: the release pipeline between vLLM core and a hardware plugin."""

__version__ = "0.1.0"
