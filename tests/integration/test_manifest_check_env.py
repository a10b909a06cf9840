"""check-env against a real venv with the pairing's wheels installed, then tampered with."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

from tests.pairing import make_pairing, store_key, typed, vpr
from vllm_plugin_release.core import attest
from vllm_plugin_release.core import manifestdoc as doc
from vllm_plugin_release.stages import manifest as mf
from vllm_plugin_release.stages.verify import check_environment


def _sign(path: Path, manifest: dict, key: object) -> None:
    """manifest.intoto.jsonl next to `path` (written already), signed with `key` (as `vpr
    manifest build`)."""
    statement = attest.build_statement(
        manifest, hashlib.sha256(path.read_bytes()).hexdigest(), {}, builder_id=attest.LOCAL_BUILDER
    )
    path.with_name(doc.STATEMENT_FILE).write_bytes(attest.signed_bytes(statement, key))


def test_check_env_matches_and_reports_every_mismatch(tmp_path: Path) -> None:
    dist = tmp_path / "ref"
    pins = make_pairing(dist)
    m = mf.build_manifest(pins, mf.read_records(dist))
    mpath = dist / "manifest.json"
    mpath.write_bytes(doc.manifest_bytes(m))
    _sign(mpath, m, store_key(tmp_path))  # check-env verifies the signature first
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
         "--no-index", "--disable-pip-version-check", *map(str, dist.glob("*.whl"))],
        check=True,
    )  # fmt: skip
    assert check_environment(typed(m), py, dist) == []
    ok = vpr("manifest", "check-env", "--manifest", str(mpath), "--python", str(py), cwd=tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # Tamper with an installed file and check against a manifest whose plugin moved on.
    site = Path(
        subprocess.run(
            [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    (site / "vllm" / "__init__.py").write_text("tampered = True\n")
    other = json.loads(json.dumps(m))
    other["plugin"]["wheel"]["version"] = "0.2.0"
    other["plugin"]["entry_points"]["vllm.platform_plugins"]["vpr_test"] = "elsewhere:register"
    problems = check_environment(typed(other), py, dist)
    text = "\n".join(problems)
    assert "vllm/__init__.py modified since installation" in text
    assert "installed files differ from the certified wheel" in text
    assert "vllm/__init__.py: installed sha256=" in text
    assert "version 0.1.0, manifest 0.2.0" in text
    assert "entry point [vllm.platform_plugins] vpr_test" in text
    mpath.write_bytes(doc.manifest_bytes(m))
    bad = vpr("manifest", "check-env", "--manifest", str(mpath), "--python", str(py), cwd=tmp_path)
    assert bad.returncode == 1
    assert "vllm/__init__.py" in bad.stdout
