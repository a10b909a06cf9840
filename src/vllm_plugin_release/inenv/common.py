"""What the inenv scripts share: their exit protocol, imports by name, a tiny model folder.

Standard library only (see envrun.py); staged beside the scripts that import it
(`envrun.COMPANIONS`). A script reads a JSON request from argv[1] and writes its result
to argv[2]: exit 0 with the result, 2 with {"error"} for bad input (`BadRequest`), 3 with
{"error"} for a module that exists but does not import here (`ImportFailure`).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any


class ImportFailure(Exception):
    """A named module that exists but cannot be imported in this environment (a missing
    dependency, a broken build): an outside failure, exit 3 with {"error": ...}."""


class BadRequest(Exception):
    """Bad input: reported as {"error": ...} with exit code 2."""


def load_object(path: str, *, what: str) -> Any:
    """Import `module:attr` (or `module.attr`)."""
    if ":" in path:
        module_name, _, attr = path.partition(":")
    else:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise BadRequest(f"{what} {path!r}: expected 'module:Name'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise BadRequest(  # the name itself is wrong
                f"{what} {path!r}: module {module_name!r} does not import "
                f"({type(exc).__name__}: {exc}); check the name and that the plugin is "
                f"installed in this environment"
            ) from None
        raise ImportFailure(f"{what} {path!r}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # the module exists, its import fails in this environment
        raise ImportFailure(
            f"{what} {path!r}: module {module_name!r} exists but its import fails here "
            f"({type(exc).__name__}: {exc})"
        ) from None
    obj = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise BadRequest(f"{what} {path!r}: module {module_name!r} has no {attr!r}")
    return obj


def write_model_dir(
    max_model_len: int, architecture: str = "LlamaForCausalLM", model_type: str = "llama"
) -> Path:
    """A local model folder holding only a small config.json (no hub access)."""
    folder = Path(tempfile.mkdtemp(prefix="vpr-replay-model-"))
    config = {
        "architectures": [architecture],
        "model_type": model_type,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": 1,
        "vocab_size": 32000,
        "max_position_embeddings": max_model_len,
        "torch_dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def serve(job: Any, argv: list[str]) -> int:
    """`job(request)` on argv[1]'s JSON, its result into argv[2]: exit 0; bad input (exit 2)
    or an import that fails here (exit 3) as {"error": ...}."""
    request = json.loads(Path(argv[1]).read_text())
    out = Path(argv[2])
    try:
        result = job(request)
    except (BadRequest, ImportFailure) as exc:
        out.write_text(json.dumps({"error": str(exc)}))
        return 2 if isinstance(exc, BadRequest) else 3
    out.write_text(json.dumps(result, separators=(",", ":")))
    return 0


def exit_now(code: int) -> None:
    """Exit without interpreter teardown (torch's takes seconds; the result is written)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
