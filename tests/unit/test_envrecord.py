"""core/envrecord + records.env_record: the pairing environment's record (env.json) as a
typed, frozen value.

A record as `vpr env` writes it reads into its fields, which write it back unchanged; a
record missing its python or runner, or holding a key of another type, is bad input
(exit 2) naming the file and the key and the command that writes it. The writer writes
the same bytes as ever and refuses a record no reader would accept."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from vllm_plugin_release.core import records
from vllm_plugin_release.core.buildrecord import MadeWith, RunnerFacts, WheelRef
from vllm_plugin_release.core.cache import write_json
from vllm_plugin_release.core.envrecord import EnvRecord
from vllm_plugin_release.core.errors import BadInput

SHA = "ab" * 32
PY = "/root/.vpr/envs/pair-reference-0123456789abcdef/bin/python"


def _real() -> dict[str, Any]:
    """dist/reference/env.json of a cold `vpr release` of the reference pairing, its checks
    and modules shortened."""
    return {
        "stage": "env",
        "runner": "cpu",
        "python": PY,
        "platform_class": "vllm_reference_plugin.platform.ReferencePlatform",
        "lock_file": "constraints/env-py311.txt",
        "lock_sha256": "cd" * 32,
        "core_wheel": {
            "filename": "vllm-0.26.0+empty-cp311-cp311-linux_x86_64.whl",
            "sha256": SHA,
            "platform_tag": "cp311-cp311-linux_x86_64",
        },
        "plugin_wheel": {"filename": "vllm_reference_plugin-0.1.0-py3-none-any.whl", "sha256": SHA},
        "runtime": {
            "name": "reference-runtime",
            "module": "reference_runtime",
            "reason": "no wheel for this machine",
            "status": "absent",
            "commit": "abc123",
            "requirement": "reference-runtime==1.0",
            "left_out": {"requirements": ["torch"], "reason": "provided by the vendor image"},
            "stand_in": {
                "path": "plugin/stand_in_runtime",
                "wheel_sha256": SHA,
                "status": "checked in an overlay environment (test double)",
                "python": "/root/.vpr/envs/pair-reference-0123/stand-in-overlay/bin/python",
            },
        },
        "checks": [
            {"name": "import vllm", "status": "pass", "detail": "0.26.0+empty"},
            {"name": "platform activation", "status": "pass", "detail": "x", "value": "P"},
            {
                "name": "platform_plugin() runtime absent",
                "status": "pass",
                "detail": "None",
                "value": None,
            },
            {"name": "runtime modules", "status": "fail", "detail": "1", "finding": "plugin"},
        ],
        "runtime_modules": [{"module": "reference_runtime", "status": "absent"}],
        "plugin_modules": [{"module": "vllm_reference_plugin", "status": "imported"}],
        "backend": {"kind": "local", "python": "3.11"},
        "interpreter": {
            "implementation": "CPython",
            "version": "3.11.9",
            "path": "/usr/bin/python3.11",
            "sha256": "ef" * 32,
            "found_by": "system",
        },
    }


def _write(folder: Path, data: Any) -> Path:
    path = folder / records.ENV
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_a_real_record_reads_typed_and_frozen(tmp_path: Path) -> None:
    _write(tmp_path, _real())
    rec = records.env_record(tmp_path, "buildspec/reference.toml")
    assert isinstance(rec, EnvRecord)
    assert rec.python == Path(PY) and rec.runner == "cpu"
    assert rec.platform_class == "vllm_reference_plugin.platform.ReferencePlatform"
    assert (rec.lock_file, rec.lock_sha256) == ("constraints/env-py311.txt", "cd" * 32)
    assert rec.core_wheel == WheelRef("vllm-0.26.0+empty-cp311-cp311-linux_x86_64.whl", SHA)
    assert rec.plugin_wheel == WheelRef("vllm_reference_plugin-0.1.0-py3-none-any.whl", SHA)
    assert rec.runtime.status == "absent" and not rec.runtime_present
    assert rec.runtime.to_json() == _real()["runtime"]  # written back unchanged
    assert rec.stand_in_python == Path(_real()["runtime"]["stand_in"]["python"])
    assert [c.name for c in rec.checks][:2] == ["import vllm", "platform activation"]
    assert [c.to_json() for c in rec.checks] == _real()["checks"]  # written back unchanged
    assert rec.runtime_modules[0].module == "reference_runtime"
    assert rec.plugin_modules[0].status == "imported"
    assert rec.backend == RunnerFacts("local", python="3.11")
    assert rec.interpreter is not None
    assert rec.interpreter[:3] == MadeWith("/usr/bin/python3.11", "3.11.9", "ef" * 32)[:3]
    assert rec.interpreter.to_json() == _real()["interpreter"]  # written back unchanged
    assert rec.backend.to_json() == _real()["backend"]  # written back unchanged
    with pytest.raises(AttributeError):  # frozen
        rec.python = Path("/elsewhere/bin/python")  # type: ignore[misc]
    with pytest.raises(AttributeError):  # frozen
        rec.core_wheel.sha256 = "0" * 64  # type: ignore[misc,union-attr]


def test_the_optional_parts_may_be_absent(tmp_path: Path) -> None:
    """A record of `vpr env --site hardware` with a --runtime-env: no interpreter, no
    stand-in; only python and runner are required."""
    _write(tmp_path, {"runner": "hardware", "python": "/opt/env/bin/python"})
    rec = records.env_record(tmp_path)
    assert (rec.runner, rec.core_wheel, rec.backend, rec.platform_class) == (
        "hardware",
        None,
        None,
        None,
    )
    assert (rec.runtime.to_json(), list(rec.checks), rec.stand_in_python) == ({}, [], None)
    assert (rec.runtime.name, rec.runtime.status, rec.runtime_present) == (None, None, False)


def _without(key: str) -> dict[str, Any]:
    data = _real()
    del data[key]
    return data


def _with(dotted: str, value: Any) -> dict[str, Any]:
    data = _real()
    *path, last = dotted.split(".")
    node: Any = data
    for key in path:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return data


# (the record, the key the message must name)
HOSTILE: dict[str, tuple[dict[str, Any], str]] = {
    "no python": (_without("python"), "'python'"),
    "python empty": (_with("python", ""), "'python'"),
    "python a number": (_with("python", 3), "'python'"),
    "python a list": (_with("python", ["/x/bin/python"]), "'python'"),
    "python relative": (_with("python", "envs/pair/bin/python"), "'python'"),
    "python with a NUL": (_with("python", "/x\x00/bin/python"), "'python'"),
    "no runner": (_without("runner"), "'runner'"),
    "runner unknown": (_with("runner", "gpu"), "'runner'"),
    "runner a number": (_with("runner", 1), "'runner'"),
    "platform_class a list": (_with("platform_class", ["P"]), "'platform_class'"),
    "lock_sha256 a number": (_with("lock_sha256", 7), "'lock_sha256'"),
    "core_wheel text": (_with("core_wheel", "vllm.whl"), "'core_wheel'"),
    "core_wheel sha short": (_with("core_wheel.sha256", "ab"), "'core_wheel.sha256'"),
    "plugin_wheel a path": (_with("plugin_wheel.filename", "../x.whl"), "'plugin_wheel.filename'"),
    "runtime a list": (_with("runtime", ["absent"]), "'runtime'"),
    "checks an object": (_with("checks", {"import vllm": "pass"}), "'checks'"),
    "a check of text": (_with("checks", ["import vllm"]), "'checks'"),
    "a check without status": (_with("checks.1", {"name": "x"}), "'checks[1].status'"),
    "a check's detail a list": (_with("checks.0.detail", ["x"]), "'checks[0].detail'"),
    "a check's finding a number": (_with("checks.0.finding", 1), "'checks[0].finding'"),
    "runtime_modules text": (_with("runtime_modules", "torch"), "'runtime_modules'"),
    "a module without name": (
        _with("runtime_modules.0", {"status": "x"}),
        "'runtime_modules[0].module'",
    ),
    "a module's reason a list": (
        _with("plugin_modules.0.reason", ["x"]),
        "'plugin_modules[0].reason'",
    ),
    "backend text": (_with("backend", "local"), "'backend'"),
    "backend without kind": (_with("backend", {"python": "3.11"}), "'backend'"),
    "backend of an unknown key": (_with("backend.where", "here"), "'backend'"),
    "backend's python a number": (_with("backend.python", 3.11), "'backend'"),
    "runtime status a list": (_with("runtime.status", ["present"]), "'runtime.status'"),
    "runtime name a number": (_with("runtime.name", 1), "'runtime.name'"),
    "stand_in text": (_with("runtime.stand_in", "yes"), "'stand_in'"),
    "stand_in python a number": (
        _with("runtime.stand_in.python", 3),
        "'runtime.stand_in.python'",
    ),
    "left_out requirements text": (
        _with("runtime.left_out.requirements", "torch"),
        "'runtime.left_out.requirements'",
    ),
}


def test_the_kept_findings_are_written_back_from_their_fields() -> None:
    """`.vpr-env.json` (what the checks found, and the interpreter): a later run reuses it
    as env.json's part, written from the typed fields, the same object."""
    from vllm_plugin_release.core.envrecord import parse_found

    real = _real()
    kept = {k: real[k] for k in ("runtime", "checks", "runtime_modules", "plugin_modules")}
    kept["interpreter"] = real["interpreter"]
    assert parse_found(kept).to_json() == kept


@pytest.mark.parametrize("data,key", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_record_is_bad_input_naming_file_and_key(
    tmp_path: Path, data: dict[str, Any], key: str
) -> None:
    path = _write(tmp_path, data)
    with pytest.raises(BadInput) as info:
        records.env_record(tmp_path, "buildspec/reference.toml")
    said = f"{info.value} {info.value.hint}"
    assert str(path) in said and key in said
    assert "vpr env --spec buildspec/reference.toml" in said
    assert info.value.exit_code == 2
    # a look that must never fail says there is none
    assert records.env_record_at(tmp_path) is None


@pytest.mark.parametrize("body", ["", "[]", "{", '"python"', "{}"], ids=repr)
def test_no_object_is_bad_input_too(tmp_path: Path, body: str) -> None:
    _write(tmp_path, body)
    with pytest.raises(BadInput) as info:
        records.env_record(tmp_path)
    assert str(tmp_path / records.ENV) in str(info.value) and info.value.exit_code == 2
    assert records.env_record_at(tmp_path) is None


def test_missing_record_names_vpr_env(tmp_path: Path) -> None:
    with pytest.raises(BadInput) as info:
        records.env_record(tmp_path, "s.toml")
    assert "not found" in str(info.value) and "vpr env --spec s.toml" in (info.value.hint or "")
    assert records.env_record_at(tmp_path) is None


def test_the_stages_check_reads_as_every_reader_and_refuses_what_none_accepts(
    tmp_path: Path,
) -> None:
    ours = tmp_path / "ours"
    ours.mkdir()
    rec = records.parse_env(ours / records.ENV, _real())
    write_json(ours / records.ENV, _real())  # as the env stage writes it
    assert rec == records.env_record(ours) and records.env_record_at(ours) == rec
    bad = copy.deepcopy(_real())
    bad["python"] = "relative/bin/python"
    refused = tmp_path / "refused"
    refused.mkdir()
    with pytest.raises(BadInput, match="'python'"):
        records.parse_env(refused / records.ENV, bad)
    assert not (refused / records.ENV).exists()


@pytest.mark.parametrize("name", ["no python", "python relative", "runner unknown"])
def test_the_cli_says_which_key_exit_2_no_traceback(tmp_path: Path, name: str) -> None:
    """`vpr replay` reads the env's python from env.json before anything else."""
    from tests.support import REFERENCE_SPEC, vpr

    dist = tmp_path / "dist"
    (dist / "reference").mkdir(parents=True)
    data, key = HOSTILE[name]
    path = _write(dist / "reference", data)
    done = vpr("replay", "--spec", str(REFERENCE_SPEC), "--dist", str(dist), check=False)
    assert done.returncode == 2, done.stderr
    assert str(path) in done.stderr and key in done.stderr
    assert "Traceback" not in done.stderr
