"""Scheduler replay inside the pairing environment: real vLLM V1 schedulers stepped on a
request mix with no model, a simulated clock advanced by the per-step cost model."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import importlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:  # staged beside this script (edges/envrun.stage_module), or the package (tests)
    import vpr_inenv_steploop as steploop  # type: ignore[import-not-found]
    import vpr_inenv_workload as workload  # type: ignore[import-not-found]
except ImportError:
    from vllm_plugin_release.inenv import steploop, workload

# The exit protocol and loaders shared with the workload script; callers reach them here.
BadRequest, ImportFailure = workload.BadRequest, workload.ImportFailure
load_object, write_model_dir = workload.load_object, workload.write_model_dir
step_loop, encode_timelines = steploop.step_loop, steploop.encode_timelines

# Calls run side by side in forked children after the caller's imports, so the children
# share vLLM's import, and each ends with everything it changed gone.


def forked(
    calls: list[Callable[[], dict[str, Any]]], errors: tuple[type[Exception], ...] = ()
) -> list[dict[str, Any]]:
    """Each call in its own forked child, all at once; their results (JSON objects) in
    order. An exception of `errors` raised in a child is raised here, as that class; a
    child that fails otherwise, or dies, is a RuntimeError."""
    sys.stdout.flush()
    sys.stderr.flush()
    kids = []
    for call in calls:
        fd, path = tempfile.mkstemp(prefix="vpr-forked-", suffix=".json")
        pid = os.fork()
        if pid == 0:  # the child never leaves this block: it ends here, whatever happens
            try:
                with contextlib.suppress(Exception):  # dies with the caller (PDEATHSIG)
                    ctypes.CDLL(None).prctl(1, signal.SIGKILL)
                try:
                    text = json.dumps({"ok": call()}, separators=(",", ":"))
                except errors as exc:
                    text = json.dumps({"raise": type(exc).__name__, "message": str(exc)})
                except BaseException:
                    text = json.dumps({"raise": "", "message": traceback.format_exc()})
                with os.fdopen(fd, "w") as f:
                    f.write(text)
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(0)  # no interpreter teardown in the child
        os.close(fd)
        kids.append((pid, Path(path)))
    outs = []
    try:
        for pid, path in kids:
            _, status = os.waitpid(pid, 0)
            text = path.read_text()
            outs.append(json.loads(text) if text else {"raise": "", "message": f"status {status}"})
    finally:  # the result files go, whatever happened while waiting
        for _, path in kids:
            path.unlink(missing_ok=True)
    by_name = {cls.__name__: cls for cls in errors}
    for out in outs:
        if "raise" in out:
            raise by_name.get(out["raise"], RuntimeError)(out["message"])
    return [out["ok"] for out in outs]


# Model types whose TT generator can resume a prefill from a chunk boundary; the TT
# platform keeps token-chunked prefill for these and disables it for every other type.
TT_CHUNKED_PREFILL_MODEL_TYPES = frozenset({"gemma4", "gemma4_unified"})

SCHEDULER_BASE = "vllm.v1.core.sched.interface:SchedulerInterface"


# Configuration policies: what the platform would do to the scheduler config. A policy
# edits (scheduler_config, model_config) in place and returns one sentence per change.

POLICY_FUNCTIONS = {"reference": "vllm_reference_plugin.policy:apply_scheduler_policy"}

# Scheduler settings a policy may change; compared before and after it runs.
WATCHED = (
    "scheduler_cls",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "max_num_scheduled_tokens",
    "long_prefill_token_threshold",
    "max_num_partial_prefills",
    "max_long_partial_prefills",
    "max_num_seqs",
    "async_scheduling",
)


def tt_policy(scheduler_config: Any, model_config: Any, model_type: str) -> list[str]:
    """The TT platform's scheduler-config policy, written from its documented behaviour."""
    reasons: list[str] = []
    sc = scheduler_config
    if sc.enable_chunked_prefill and model_type not in TT_CHUNKED_PREFILL_MODEL_TYPES:
        sc.enable_chunked_prefill = False
        reasons.append(
            f"enable_chunked_prefill: True -> False (model_type {model_type!r} cannot resume "
            f"a prefill on TT; chunking is kept only for "
            f"{', '.join(sorted(TT_CHUNKED_PREFILL_MODEL_TYPES))})"
        )
        max_model_len = model_config.max_model_len
        if sc.max_num_batched_tokens < max_model_len:
            reasons.append(
                f"max_num_batched_tokens: {sc.max_num_batched_tokens} -> {max_model_len} "
                "(chunked prefill is off, so a whole prompt must fit in one step's budget)"
            )
            sc.max_num_batched_tokens = max_model_len
    if sc.long_prefill_token_threshold:
        reasons.append(
            f"long_prefill_token_threshold: {sc.long_prefill_token_threshold} -> 0 (vLLM "
            "splits a prefill at this threshold even with chunked prefill off)"
        )
        sc.long_prefill_token_threshold = 0
    return reasons


def _snapshot(sc: Any) -> dict[str, Any]:
    out = {}
    for key in WATCHED:
        value = getattr(sc, key, None)
        if value is not None and not isinstance(value, (bool, int, float, str)):
            value = f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', value)}"
        out[key] = value
    return out


def apply_policy(policy: str, vllm_config: Any, model_type: str) -> dict[str, Any]:
    """Run `policy` on the config as the platform would; say what changed and why."""
    sc = vllm_config.scheduler_config
    before = _snapshot(sc)
    reasons: list[str]
    if policy == "none":
        reasons = []
    elif policy.startswith(PLATFORM_PREFIX):
        reasons = platform_hook(policy[len(PLATFORM_PREFIX) :], vllm_config)
    elif policy == "tt":
        reasons = tt_policy(sc, vllm_config.model_config, model_type)
    else:
        function = load_object(POLICY_FUNCTIONS.get(policy, policy), what="policy")
        try:
            reasons = list(function(sc, vllm_config.model_config) or [])
        except Exception as exc:
            raise BadRequest(f"policy {policy!r} failed: {type(exc).__name__}: {exc}") from None
    after = _snapshot(sc)
    changes = []
    for key in WATCHED:
        if before[key] != after[key]:
            why = next((str(r) for r in reasons if str(r).startswith(f"{key}:")), "")
            changes.append({"key": key, "from": before[key], "to": after[key], "why": why})
    return {
        "name": policy,
        "model_type": model_type,
        "changes": changes,
        "reasons": [str(r) for r in reasons],
    }


PLATFORM_PREFIX = "platform:"
PLATFORM_BASE = "vllm.platforms.interface:Platform"


def platform_hook(path: str, vllm_config: Any) -> list[str]:
    """The plugin's `Platform.check_and_update_config(vllm_config)` (`path`:
    `platform:module:Class`); BadRequest when the class is not a vLLM Platform."""
    load_class(path, "platform", PLATFORM_BASE).check_and_update_config(vllm_config)
    return [f"{path}.check_and_update_config applied"]


def load_class(path: str, what: str, base_path: str) -> type:
    """Import `module:Class` and check it is a vLLM `what` (a class deriving from `base_path`)."""
    cls = load_object(path, what=what)
    base_module, _, base_name = base_path.partition(":")
    # A real scheduler class has imported vLLM's interface module already, so a wrong path
    # fails without vLLM's slow import; a platform's base is imported for it.
    imported = what == "scheduler"
    module = sys.modules.get(base_module) if imported else importlib.import_module(base_module)
    base = getattr(module, base_name, None)
    if base is None or not (isinstance(cls, type) and issubclass(cls, base)):
        raise BadRequest(
            f"{what} {path!r} is not a vLLM {what}: it must be a class deriving from "
            f"{base_path.replace(':', '.')}"
        )
    return cls


def _vllm_config(
    model_dir: Path, max_model_len: int, settings: dict[str, Any], block_size: int, num_blocks: int
) -> Any:
    """vLLM's config for `settings`, as the engine builds it; BadRequest when vLLM refuses."""
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig

    try:
        model_config = ModelConfig(
            model=str(model_dir),
            skip_tokenizer_init=True,
            max_model_len=max_model_len,
            dtype="float32",
            seed=0,
        )
        scheduler_config = SchedulerConfig(
            max_num_seqs=int(settings["max_num_seqs"]),
            max_num_batched_tokens=int(settings["max_num_batched_tokens"]),
            max_model_len=max_model_len,
            enable_chunked_prefill=bool(settings["enable_chunked_prefill"]),
            long_prefill_token_threshold=int(settings["long_prefill_token_threshold"]),
            is_encoder_decoder=False,
            async_scheduling=False,
        )
        cache_config = CacheConfig(
            block_size=block_size,
            enable_prefix_caching=bool(settings["enable_prefix_caching"]),
        )
        cache_config.num_gpu_blocks = num_blocks
        vllm_config = VllmConfig(
            model_config=model_config,
            scheduler_config=scheduler_config,
            cache_config=cache_config,
            device_config=DeviceConfig(device="cpu"),
        )
    except ValueError as exc:  # pydantic ValidationError derives from ValueError
        raise BadRequest(f"vLLM refuses the scheduler settings {settings}: {exc}") from None
    return vllm_config


def _effective_settings(
    vllm_config: Any, settings: dict[str, Any], block_size: int, num_blocks: int
) -> dict[str, Any]:
    """The settings the scheduler runs with, once the policy has run."""
    sc = vllm_config.scheduler_config
    return {
        "max_num_seqs": sc.max_num_seqs,
        "max_num_batched_tokens": sc.max_num_batched_tokens,
        "max_num_scheduled_tokens": sc.max_num_scheduled_tokens,
        "enable_chunked_prefill": sc.enable_chunked_prefill,
        "long_prefill_token_threshold": sc.long_prefill_token_threshold,
        "block_size": block_size,
        "num_gpu_blocks": num_blocks,
        "enable_prefix_caching": bool(settings["enable_prefix_caching"]),
        "max_model_len": vllm_config.model_config.max_model_len,
    }


def _kv_cache_config(num_blocks: int, block_size: int) -> Any:
    """One full-attention layer over `num_blocks` blocks: all the scheduler looks at."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    return KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(
                ["layers.0.self_attn"],
                FullAttentionSpec(
                    block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
                ),
            )
        ],
    )


def build_scheduler(
    cls: type,
    model_dir: Path,
    max_model_len: int,
    settings: dict[str, Any],
    policy: str,
    model_type: str,
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Construct `cls` as EngineCore would, with the platform policy applied."""
    from vllm.v1.structured_output import StructuredOutputManager

    block_size = int(settings["block_size"])
    num_blocks = int(settings["num_gpu_blocks"])
    vllm_config = _vllm_config(model_dir, max_model_len, settings, block_size, num_blocks)

    policy_report = apply_policy(policy, vllm_config, model_type)
    effective = _effective_settings(vllm_config, settings, block_size, num_blocks)
    # As EngineCore constructs it. A scheduler that fails here is incompatible with this
    # vLLM: the caller reports that as the scheduler's failure, not as bad input.
    offered = {
        "vllm_config": vllm_config,
        "kv_cache_config": _kv_cache_config(num_blocks, block_size),
        "structured_output_manager": StructuredOutputManager(vllm_config),
        "block_size": block_size,
        "hash_block_size": block_size,
        "log_stats": False,
    }
    scheduler = cls(**accepted(cls, offered))
    return scheduler, effective, policy_report


def accepted(cls: type, offered: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `offered` that `cls` takes (the nearest class in its MRO whose
    constructor names its parameters), as its vLLM's EngineCore passes them."""
    import inspect

    for klass in cls.__mro__:  # a subclass taking **kwargs hands them to its base's
        if "__init__" not in vars(klass):
            continue
        params = inspect.signature(klass.__init__).parameters
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            return {k: v for k, v in offered.items() if k in params}
    return dict(offered)


# The replay: the step loop (steploop.py) on one scheduler.


@dataclass(frozen=True)
class Mix:
    """The request mix, column by column: arrival second, prompt and output tokens."""

    arrival: list[float]
    prompt: list[int]
    output: list[int]


@dataclass(frozen=True)
class Bounds:
    """The model length and the limits every scheduler's replay runs under."""

    max_model_len: int
    model_type: str
    max_steps: int
    timeout_s: float


def replay_one(scheduler: Any, mix: Mix, bounds: Bounds, cost: dict[str, float]) -> dict[str, Any]:
    """Replay the mix through one scheduler: per-step records, token timelines, timings."""
    admitted, rejected = steploop.split_by_length(mix.arrival, mix.prompt, bounds.max_model_len)
    feed = steploop.Arrivals(scheduler, mix.arrival, mix.prompt, mix.output, admitted)
    loop = step_loop(scheduler, feed, cost, bounds.max_steps, bounds.timeout_s)
    t0 = time.perf_counter()
    tokens = encode_timelines(loop.timeline)
    encode_s = time.perf_counter() - t0
    return {
        "steps": loop.steps,
        "tokens": tokens,
        "rejected": rejected,
        "unfinished": scheduler.get_num_unfinished_requests() if loop.stopped else 0,
        "one_token_prompt_chunks": loop.one_token_chunks,
        "stopped": loop.stopped,
        "timing": {
            "scheduler_s": loop.scheduler_s,
            "add_request_s": feed.add_s,
            "loop_wall_s": loop.wall_s,
            "encode_s": encode_s,
        },
    }


def replay_entry(
    entry: dict[str, Any],
    cls: type,
    model_dir: Path,
    mix: Mix,
    bounds: Bounds,
    cost_model: dict[str, float],
) -> dict[str, Any]:
    """Build one scheduler and replay the mix through it; a crash is a finding, kept."""
    settings = dict(entry["settings"])
    settings.setdefault("long_prefill_token_threshold", 0)
    settings.setdefault("enable_prefix_caching", False)
    policy = entry.get("policy", "none")
    head: dict[str, Any] = {
        "scheduler": entry["cls"],
        "scheduler_class": f"{cls.__module__}.{cls.__qualname__}",
        "settings_requested": dict(entry["settings"]),
    }
    stage = "construction"
    try:
        t0 = time.perf_counter()
        with frozen_after():
            scheduler, effective, policy_report = build_scheduler(
                cls, model_dir, bounds.max_model_len, settings, policy, bounds.model_type
            )
        build_s = time.perf_counter() - t0
        head["policy"] = policy_report
        head["settings_effective"] = effective
        stage = "replay"
        result = replay_one(scheduler, mix, bounds, cost_model)
    except (BadRequest, ImportFailure):
        raise
    except Exception as exc:  # the scheduler under test failed: report it, do not hide it
        tail = traceback.format_exc().strip().splitlines()[-12:]
        return {**head, "crashed": f"{stage}: {type(exc).__name__}: {exc}", "traceback": tail}
    result["timing"]["build_s"] = build_s
    with contextlib.suppress(Exception):  # a scheduler's shutdown is not measured
        scheduler.shutdown()
    return {**head, **result}


@contextlib.contextmanager
def frozen_after() -> Iterator[None]:
    """No cyclic garbage collection meanwhile, and what was made meanwhile frozen after, as
    vLLM's EngineCore freezes its startup heap: the collector would otherwise scan vLLM's
    import's objects again and again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def run(request: dict[str, Any]) -> dict[str, Any]:
    for folder in request.get("sys_path", []):
        sys.path.insert(0, folder)
    mix, bounds = _mix_and_bounds(request)
    # Check every class before spending time on any replay.
    t_import = time.perf_counter()
    with frozen_after():
        classes = _scheduler_classes(request["schedulers"])
        import vllm
        import vllm.config
        import vllm.v1.outputs
        import vllm.v1.request  # here, so that its import time is counted once

    import_s = time.perf_counter() - t_import
    # each request's slow path and its price
    paths = workload.request_paths(request["paths"]) if request.get("paths") else {}
    model_dir = write_model_dir(bounds.max_model_len)
    plain, priced = request["cost_model"], {**request["cost_model"], **paths.get("cost", {})}

    def call(e: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        cost = priced if e.get("slow_path_cost") else plain
        return functools.partial(replay_entry, e, classes[e["label"]], model_dir, mix, bounds, cost)

    calls = {e["label"]: call(e) for e in request["schedulers"]}
    try:
        if request.get("side_by_side") and len(calls) > 1:
            results = dict(zip(calls, forked(list(calls.values()), (BadRequest, ImportFailure))))
        else:
            results = {label: call() for label, call in calls.items()}
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    return {
        "vllm_version": getattr(vllm, "__version__", "unknown"),
        "python": sys.version.split()[0],
        "import_s": import_s,
        "results": results,
        **({"paths": paths["marks"]} if paths else {}),
    }


def _mix_and_bounds(request: dict[str, Any]) -> tuple[Mix, Bounds]:
    model = request["model"]
    mix = request["requests"]
    arrival = [float(x) for x in mix["arrival"]]
    prompt = [int(x) for x in mix["prompt"]]
    output = [int(x) for x in mix["output"]]
    limits = request.get("limits", {})
    total_tokens = sum(prompt) + sum(output)
    bounds = Bounds(
        max_model_len=int(model["max_model_len"]),
        model_type=str(model.get("model_type", "llama")),
        max_steps=int(limits.get("max_steps") or (total_tokens + 4 * len(arrival) + 1000)),
        timeout_s=float(limits.get("timeout_s") or 900.0),
    )
    return Mix(arrival, prompt, output), bounds


def _scheduler_classes(entries: list[dict[str, Any]]) -> dict[str, type]:
    """Each entry's scheduler class by label; BadRequest for a policy that names none."""
    classes = {}
    for entry in entries:
        policy = entry.get("policy", "none")
        if policy not in ("none", "tt") and ":" not in POLICY_FUNCTIONS.get(policy, policy):
            raise BadRequest(
                f"policy {policy!r}: expected none, tt, reference, 'module:function' or "
                "'platform:module:Class'"
            )
        classes[entry["label"]] = load_class(entry["cls"], "scheduler", SCHEDULER_BASE)
    return classes


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m vllm_plugin_release.inenv.replay REQUEST.json OUT.json")
        return 2
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    # No platform plugin may touch the configs: the replay applies the plugin's
    # policy itself, to the plugin's scheduler only, and says what it changed.
    os.environ["VLLM_PLUGINS"] = ""
    return workload.serve(run, argv)


if __name__ == "__main__":
    workload.exit_now(main(sys.argv))
