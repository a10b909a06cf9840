"""Workload features asked of the plugin the way vLLM asks at start-up (engine config, a
request's checks, the spec's slow paths), inside the pairing environment."""

from __future__ import annotations

import copy
import enum
import importlib
import inspect
import json
import logging
import operator
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# The exit protocol every script staged with this one shares (envrun.COMPANIONS): a
# JSON request in argv[1], the result in argv[2]; exit 0, 2 bad input, 3 not importable.


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
    """`job(request)` from argv[1] into argv[2]; exit 2 or 3 with {"error": ...}."""
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
    """Exit without interpreter teardown (torch's is slow; the result is written)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


PROBE_PROCESSOR = "probe"  # replay/mix.PROBE_PROCESSOR: the no-op processor below
PREDICATE = "slow path predicate"
VOCAB = 300  # the tiny tokenizer's size (the model config keeps its own vocab_size)


def relative(path: str) -> str:
    """`path` relative to the sys.path entry that holds it (site-packages, the script's
    folder): `vllm_tt_plugin/platform.py`, never a machine's folder."""
    best = ""
    for entry in sys.path:
        entry = os.path.abspath(entry or ".")
        if path.startswith(entry.rstrip("/") + "/") and len(entry) > len(best):
            best = entry
    if best:
        return path[len(best.rstrip("/")) + 1 :]
    return os.path.basename(path)


def code_at(obj: Any) -> dict[str, Any] | None:
    """{file, line, name} of a function's definition (unwrapped), or None."""
    try:
        func = inspect.unwrap(getattr(obj, "__func__", obj))
        file = inspect.getsourcefile(func)
        line = inspect.getsourcelines(func)[1]
    except (TypeError, OSError):
        return None
    return {"file": relative(file or "?"), "line": line, "name": func.__qualname__}


def error_of(exc: BaseException, package: str) -> dict[str, Any]:
    """An exception as data: type, message, and where it was raised: the innermost frame
    in the plugin's package when one is on the stack, else the innermost frame."""
    original = _unwrapped(exc)
    frames = traceback.extract_tb(original.__traceback__)
    ours = [f for f in frames if package and relative(f.filename).split("/")[0] == package]
    frame = (ours or frames or [None])[-1]
    message = str(original).strip() or type(original).__name__
    out: dict[str, Any] = {
        "type": type(original).__name__,
        "message": message.splitlines()[0][:500],
        "by": "plugin" if ours else "vllm",
    }
    if frame is not None:
        out["where"] = {"file": relative(frame.filename), "line": frame.lineno, "name": frame.name}
    return out


def _unwrapped(exc: BaseException) -> BaseException:
    """The error a pydantic ValidationError wraps (vLLM's configs are pydantic dataclasses:
    an error in __post_init__, the platform hook's included, arrives wrapped)."""
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":
        try:
            inner = (errors()[0].get("ctx") or {}).get("error")
        except Exception:
            inner = None
        if isinstance(inner, BaseException):
            return inner
    return exc


# Watching code that runs: which line changed a value, which line decided.


_NO_COPY = object()
_SCALARS = (type(None), bool, int, float, str, bytes)  # exactly these types: no subclass


def _plain_data(value: Any, depth: int = 0) -> bool:
    """Made only of what `==` compares as `_plain` does: exact scalars, enum members, lists,
    tuples and dicts of them, dataclasses with the generated `==` over every field. Not sets:
    two equal sets may list their items in another order."""
    if depth > 32:
        return False
    if type(value) in _SCALARS or isinstance(value, enum.Enum):
        return True
    if type(value) in (list, tuple):
        return all(_plain_data(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(
            _plain_data(k, depth + 1) and _plain_data(v, depth + 1) for k, v in value.items()
        )
    fields = getattr(type(value), "__dataclass_fields__", None)
    eq = getattr(type(value), "__eq__", None)
    generated = getattr(getattr(eq, "__code__", None), "co_filename", "") == "<string>"
    return (
        bool(fields)
        and generated
        and all(f.compare for f in fields.values())  # a field `==` skips may still change
        and all(_plain_data(getattr(value, name, None), depth + 1) for name in fields)
    )


def _reading(read: Callable[[], Any]) -> tuple[Any, Any]:
    """(the value's JSON-ready form, or what made it unreadable; a deep copy of the value
    where it is plain data (`_plain_data`), else _NO_COPY)."""
    try:
        value = read()
    except Exception as exc:
        return f"<unreadable: {type(exc).__name__}>", _NO_COPY
    try:
        plain = _plain(value)
    except Exception as exc:
        return f"<unreadable: {type(exc).__name__}>", _NO_COPY
    try:
        return plain, copy.deepcopy(value) if _plain_data(value) else _NO_COPY
    except Exception:
        return plain, _NO_COPY


def _same_as(read: Callable[[], Any], kept: Any) -> bool:
    """The value reads equal (==) to the copy kept at the last reading, so it is unchanged;
    False whenever that cannot be told (the full reading decides)."""
    if kept is _NO_COPY:
        return False
    try:
        return (read() == kept) is True
    except Exception:
        return False


def _plain(value: Any) -> Any:
    """A JSON-ready, comparable form of a watched value."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    fields = getattr(value, "__dataclass_fields__", None)
    if fields:
        return {k: _plain(getattr(value, k, None)) for k in fields if not k.startswith("_")}
    return repr(value)


def _an_import(frame: Any) -> bool:
    """The frame is the import system loading a module not imported yet (what `import`,
    `from ... import` and `importlib.import_module` call): finding it, running its body."""
    code = frame.f_code
    return code.co_name == "_find_and_load" and code.co_filename.startswith("<frozen importlib")


class Watch:
    """Runs a function with a line tracer that reads the watched values at every event; a
    value that differs from the last reading was changed by the line that ran last. Also
    keeps the warnings logged meanwhile (vLLM's and the plugin's), with their lines."""

    def __init__(self, reads: dict[str, Callable[[], Any]]) -> None:
        self.reads = reads
        readings = {k: _reading(r) for k, r in reads.items()}
        self.before = {k: plain for k, (plain, _) in readings.items()}
        self.now = dict(self.before)
        # A copy of each value as last read: a value equal to it is unchanged, without
        # making its JSON-ready form again at every line (the check's main cost).
        self.kept = {k: kept for k, (_, kept) in readings.items()}
        self.where: dict[str, dict[str, Any]] = {}
        self.last: tuple[str, int, str] | None = None
        self.importing = False
        self.warnings: list[dict[str, Any]] = []

    def _poll(self) -> None:
        for key, read in self.reads.items():
            if _same_as(read, self.kept[key]):
                continue
            value, self.kept[key] = _reading(read)
            if value != self.now[key]:
                self.now[key] = value
                if self.last is not None:
                    file, line, name = self.last
                    self.where[key] = {"file": relative(file), "line": line, "name": name}

    def _trace(self, frame: Any, event: str, arg: Any) -> Any:
        if self.importing:
            return None
        self._poll()
        if event == "call" and _an_import(frame):
            # An import is not traced: a module's body cannot reach the watched values (made
            # before it), and tracing it is slow. A change found after it is the importing
            # line's.
            self.importing = True
            frame.f_trace_lines = False
            return self._imported
        self.last = (frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        return self._trace

    def _imported(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "return":  # also when the module's body raised
            self.importing = False
        return self._imported

    def run(self, func: Callable[..., Any], *args: Any) -> Any:
        handler = _Capture(self.warnings)
        loggers = [logging.getLogger(), logging.getLogger("vllm")]
        for logger in loggers:
            logger.addHandler(handler)
        previous = sys.gettrace()
        sys.settrace(self._trace)
        try:
            return func(*args)
        finally:
            sys.settrace(previous)
            self._poll()
            for logger in loggers:
                logger.removeHandler(handler)

    def changes(self) -> list[dict[str, Any]]:
        return [
            {"field": k, "from": self.before[k], "to": self.now[k], "where": self.where.get(k)}
            for k in self.reads
            if self.before[k] != self.now[k]
        ]


class _Capture(logging.Handler):
    """Warnings logged while a hook runs (one record once, however many loggers saw it)."""

    def __init__(self, into: list[dict[str, Any]]) -> None:
        super().__init__(logging.WARNING)
        self.into = into
        self.seen: set[int] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if id(record) in self.seen:
            return
        self.seen.add(id(record))
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:  # the cause, in one line
            exc = record.exc_info[1]
            message += f": {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        self.into.append(
            {
                "message": message[:400],
                "where": {"file": relative(record.pathname), "line": record.lineno},
            }
        )


def deciding_line(lines: list[int]) -> int | None:
    """The line of a predicate that decided, from the lines it ran: its last statement, or
    in a multi-line `return (a or b or ...)` the last condition it evaluated (the operand
    lines after the `return` line; the first of them recurs as the `or` jumps' line)."""
    if not lines:
        return None
    final = lines[-1]
    start = max((i for i, n in enumerate(lines[:-1]) if n <= final), default=-1)
    tail = lines[start + 1 : -1]
    if not tail:
        return final
    rest = [n for n in tail if n != tail[0]]
    return (rest or tail)[-1]


def decide(predicate: Callable[..., Any], params: Any, args: dict[str, Any]) -> dict[str, Any]:
    """Call a slow-path predicate; whether it says the path is taken, and the deciding line."""
    func = inspect.unwrap(getattr(predicate, "__func__", predicate))
    code = getattr(func, "__code__", None)
    lines: list[int] = []

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code is not code:
            return None
        if event == "line":
            lines.append(frame.f_lineno)
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        taken = bool(predicate(params, **args))
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        sys.settrace(previous)
    out: dict[str, Any] = {"taken": taken}
    at = code_at(predicate)
    line = deciding_line(lines)
    if at and line:
        out["where"] = {**at, "line": line}
    return out


def write_tokenizer(folder: Path) -> None:
    """A tiny word-level tokenizer (tokenizer.json and its config), stdlib only: requests
    that need a tokenizer (structured output, allowed token ids) are checked offline."""
    special = [("<unk>", 0), ("<s>", 1), ("</s>", 2)]
    vocab = {**dict(special), **{f"t{i}": i for i in range(len(special), VOCAB)}}
    flags = dict.fromkeys(("single_word", "lstrip", "rstrip", "normalized"), False)
    added = [{"id": i, "content": c, **flags, "special": True} for c, i in special]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config))


def probe_processor() -> type:
    """A no-op custom logits processor (a vLLM LogitsProcessor subclass)."""
    from vllm.v1.sample.logits_processor import LogitsProcessor

    class ProbeLogitsProcessor(LogitsProcessor):
        def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
            pass

        def is_argmax_invariant(self) -> bool:
            return True

        def update_state(self, batch_update: Any) -> None:
            return None

        def apply(self, logits: Any) -> Any:
            return logits

    return ProbeLogitsProcessor


# Engine settings the platform hook is watched on: (name, read from the VllmConfig).
ENGINE_WATCH: dict[str, Callable[[Any], Any]] = {
    "speculative_config": lambda c: (
        None
        if c.speculative_config is None
        else {
            "method": c.speculative_config.method,
            "num_speculative_tokens": c.speculative_config.num_speculative_tokens,
        }
    ),
    **{
        name: operator.attrgetter(name)
        for name in (
            "model_config.max_logprobs",
            "model_config.logits_processors",
            "structured_outputs_config.backend",
            "structured_outputs_config.disable_any_whitespace",
            "structured_outputs_config.disable_additional_properties",
        )
    },
}


class Engine:
    """Builds engine configs as `vllm serve` does, the platform hook watched."""

    def __init__(self, platform: Any, model_dir: Path, base: dict[str, Any], package: str):
        self.platform = platform
        self.model_dir = model_dir
        self.base = base
        self.package = package
        self.hook = platform.check_and_update_config  # the plugin's, bound

    def build(self, engine: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """(the config as the hook left it, or None; what happened)."""
        from vllm.engine.arg_utils import EngineArgs

        kwargs = {**self.base, **engine}
        if PROBE_PROCESSOR in (kwargs.get("logits_processors") or []):
            kwargs["logits_processors"] = [
                probe_processor() if p == PROBE_PROCESSOR else p
                for p in kwargs["logits_processors"]
            ]
        seen: dict[str, Any] = {"hook": "not reached"}

        def watched(vllm_config: Any) -> None:
            watch = Watch({k: (lambda r=r: r(vllm_config)) for k, r in ENGINE_WATCH.items()})
            seen["config"] = vllm_config
            try:
                watch.run(self.hook, vllm_config)
            except BaseException as exc:
                seen.update(hook="raised", error=error_of(exc, self.package))
                raise
            finally:
                seen["changes"] = watch.changes()
                seen["warnings"] = watch.warnings
                seen["after"] = dict(watch.now)
            seen["hook"] = "returned"

        self.platform.check_and_update_config = watched
        try:
            config = EngineArgs(model=str(self.model_dir), **kwargs).create_engine_config()
        except BaseException as exc:
            if seen["hook"] == "returned":  # vLLM stopped after the hook: said, kept going
                seen["after_hook"] = error_of(exc, self.package)
            elif seen["hook"] == "not reached":
                seen["error"] = error_of(exc, self.package)
            # The config as the hook left it (None when vLLM refused before the hook).
            config = seen.get("config")
        finally:
            self.platform.check_and_update_config = self.hook
        out = {k: v for k, v in seen.items() if k != "config"}
        if config is not None:
            out["model_classes"] = model_classes(config)
        return config, out


def model_classes(config: Any) -> dict[str, str]:
    """Where vLLM's registry loads the architectures from, after the plugin's hook."""
    from vllm.model_executor.models.registry import ModelRegistry

    out = {}
    for arch in getattr(config.model_config.hf_config, "architectures", None) or []:
        entry = getattr(ModelRegistry, "models", {}).get(arch)
        module, name = getattr(entry, "module_name", None), getattr(entry, "class_name", None)
        if module and name:
            out[arch] = f"{module}:{name}"
    return out


def sampling_params(kwargs: dict[str, Any]) -> Any:
    """vLLM's SamplingParams from JSON-ready keyword arguments."""
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    kwargs = dict(kwargs)
    if "structured_outputs" in kwargs:
        kwargs["structured_outputs"] = StructuredOutputsParams(**kwargs["structured_outputs"])
    if "logit_bias" in kwargs:
        kwargs["logit_bias"] = {int(k): float(v) for k, v in kwargs["logit_bias"].items()}
    return SamplingParams(**kwargs)


def probe_request(
    platform: Any, config: Any, tokenizer: Any, kwargs: dict[str, Any], package: str
) -> tuple[Any, dict[str, Any]]:
    """(the params, or None; what happened) for one request through SamplingParams, vLLM's
    verify and the platform's validate_request, as the InputProcessor runs them."""
    from vllm.inputs.engine import tokens_input

    try:
        params = sampling_params(kwargs)
    except Exception as exc:
        return None, {"accepted": False, "stage": "SamplingParams", "error": error_of(exc, "")}
    watch = Watch({k: (lambda k=k: getattr(params, k)) for k in kwargs})
    stage = "verify"
    try:
        watch.run(
            params.verify,
            config.model_config,
            config.speculative_config,
            config.structured_outputs_config,
            tokenizer,
        )
        stage = "validate_request"
        watch.run(platform.validate_request, tokens_input(list(range(3, 19))), params)
    except Exception as exc:
        out = {"accepted": False, "stage": stage, "error": error_of(exc, package)}
        return None, {**out, "changes": watch.changes(), "warnings": watch.warnings}
    return params, {"accepted": True, "changes": watch.changes(), "warnings": watch.warnings}


def hooks(platform: Any) -> dict[str, Any]:
    """Where the code that decides lives: the platform's hooks and the InputProcessor's
    calls of them (found by reading vLLM's source here: no line is hard-coded)."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.engine.input_processor import InputProcessor

    out: dict[str, Any] = {
        "check_and_update_config": code_at(type(platform).check_and_update_config),
        "validate_request": code_at(type(platform).validate_request),
        "verify": code_at(SamplingParams.verify),
    }
    for name, needle, method in (
        ("verify_call", "params.verify(", InputProcessor._validate_params),
        ("validate_request_call", "validate_request(", InputProcessor.process_inputs),
    ):
        at = code_at(method)
        try:
            lines, first = inspect.getsourcelines(method)
        except (OSError, TypeError):
            continue
        hit = next((first + i for i, text in enumerate(lines) if needle in text), None)
        if at and hit:
            out[name] = {**at, "line": hit}
    return out


def run(request: dict[str, Any]) -> dict[str, Any]:
    for folder in request.get("sys_path", []):
        sys.path.insert(0, folder)
    import vllm
    from vllm.platforms import current_platform  # resolved first: a plugin imports it
    from vllm.tokenizers.registry import cached_tokenizer_from_config

    slow_paths = request.get("slow_paths", [])
    predicates = {p["name"]: load_object(p["predicate"], what=PREDICATE) for p in slow_paths}
    args = {p["name"]: p.get("args") or {} for p in slow_paths}
    platform = current_platform
    model = request["model"]
    model_dir = write_model_dir(
        int(model["max_model_len"]), model.get("architecture"), model.get("model_type")
    )
    write_tokenizer(model_dir)
    try:
        engine = Engine(
            platform,
            model_dir,
            {
                "max_model_len": int(model["max_model_len"]),
                "dtype": "float32",
                "seed": 0,
                **request.get("engine", {}),
            },
            type(platform).__module__.split(".")[0],
        )
        base_config, base = engine.build({})
        tokenizer = cached_tokenizer_from_config(base_config.model_config) if base_config else None
        probes = {
            probe["id"]: _probe(probe, engine, base_config, tokenizer, predicates, args)
            for probe in request.get("probes", [])
        }
        combos = [_paths(kwargs, predicates, args) for kwargs in request.get("combos", [])]
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    cls = type(platform)
    return {
        "platform": f"{cls.__module__}.{cls.__qualname__}",
        "vllm_version": getattr(vllm, "__version__", "unknown"),
        "python": sys.version.split()[0],
        "hooks": hooks(platform),
        "base": base,
        "probes": probes,
        "combos": combos,
        "predicates": {name: code_at(p) for name, p in predicates.items()},
    }


def _probe(
    probe: dict[str, Any],
    engine: Engine,
    base_config: Any,
    tokenizer: Any,
    predicates: dict[str, Any],
    args: dict[str, Any],
) -> dict[str, Any]:
    """One feature: its own engine config when it needs one, then its request."""
    out: dict[str, Any] = {}
    config = base_config
    if probe.get("engine"):
        config, out["engine"] = engine.build(probe["engine"])
    if probe.get("params") is None or config is None:
        return out
    from vllm.tokenizers.registry import cached_tokenizer_from_config

    if config is not base_config:
        tokenizer = cached_tokenizer_from_config(config.model_config)
    params, out["request"] = probe_request(
        engine.platform, config, tokenizer, probe["params"], engine.package
    )
    if params is not None:
        out["paths"] = _paths(probe["params"], predicates, args)["paths"]
    return out


def _paths(
    kwargs: dict[str, Any], predicates: dict[str, Any], args: dict[str, Any]
) -> dict[str, Any]:
    """Which slow paths a request with these SamplingParams takes (as the client sent them)."""
    try:
        params = sampling_params(kwargs)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300], "paths": {}}
    return {"paths": {name: decide(p, params, args[name]) for name, p in predicates.items()}}


def request_paths(spec: dict[str, Any]) -> dict[str, Any]:
    """For the replay: the slow path of each request and the seconds each adds per sampled
    token, {"marks": {"per_request" | "error"}, "cost": {"per_request": [...]}}. A request
    takes the first path its combination of SamplingParams takes; a path marked `everyone`
    (an engine-level feature the plan uses) takes every request."""
    from vllm.platforms import current_platform  # noqa: F401  (resolved before a plugin)

    slow_paths = spec["slow_paths"]
    try:
        predicates = [
            (p["name"], load_object(p["predicate"], what=PREDICATE), p.get("args") or {})
            for p in slow_paths
        ]
    except (BadRequest, ImportFailure) as exc:
        return {"marks": {"error": str(exc)}}
    everyone = {p["name"] for p in slow_paths if p.get("everyone")}
    taken: list[str | None] = []
    for kwargs in spec["combos"]:
        params = sampling_params(kwargs)
        found = (n for n, p, a in predicates if n in everyone or decide(p, params, a).get("taken"))
        taken.append(next(found, None))
    per_request = [taken[c] for c in spec["request_combo"]]
    price = spec.get("cost") or {}
    seconds = [float(price.get(p, 0.0)) if p else 0.0 for p in per_request]
    cost = {"per_request": seconds} if any(seconds) else {}
    return {"marks": {"per_request": per_request}, "cost": cost}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python workload.py REQUEST.json OUT.json")
        return 2
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ.setdefault(name, "1")
    return serve(run, argv)


if __name__ == "__main__":
    exit_now(main(sys.argv))
