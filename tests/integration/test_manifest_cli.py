"""The manifest commands end to end in a scratch project: `vpr manifest build` (twice: same
bytes), `manifest schema`, a missing record, `vpr keygen` and `manifest verify`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.pairing import flip_byte, make_pairing, vpr, write_spec
from vllm_plugin_release.edges import keys


def test_cli_build_schema_and_missing_record(tmp_path: Path) -> None:
    spec = write_spec(tmp_path)
    dist = tmp_path / "dist" / "ref"
    make_pairing(dist)
    done = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first = (dist / "manifest.json").read_bytes()
    statement = (dist / "manifest.intoto.jsonl").read_bytes()
    run = json.loads((dist / "run.json").read_text())
    assert "host" in run["manifest"]
    assert (tmp_path / ".vpr" / "keys" / "manifest-signing.key").exists()
    key_text = (tmp_path / ".vpr" / "keys" / "manifest-signing.key").read_text()
    assert key_text.splitlines()[1] not in done.stdout + done.stderr
    again = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (dist / "manifest.json").read_bytes() == first
    assert (dist / "manifest.intoto.jsonl").read_bytes() == statement

    schema = vpr("manifest", "schema", cwd=tmp_path)
    assert schema.returncode == 0
    assert json.loads(schema.stdout)["properties"]["schema_version"]["enum"] == [1, 2, 3]

    (dist / "build-core.json").unlink()
    missing = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path)
    assert missing.returncode == 2
    assert "build-core.json" in missing.stderr and "vpr build-core" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_cli_keys_build_verify(tmp_path: Path) -> None:
    keyfile = tmp_path / "secrets" / "sign.key"
    gen = vpr("keygen", "--out", str(keyfile), cwd=tmp_path)
    assert gen.returncode == 0, gen.stderr
    secret_line = keyfile.read_text().splitlines()[1]
    spec = write_spec(tmp_path, publish={"signing_key": "secrets/sign.key"})
    dist = tmp_path / "dist" / "ref"
    make_pairing(dist)
    built = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    pub = str(keyfile) + ".pub"
    ok = vpr("manifest", "verify", str(dist / "manifest.json"), "--key", pub, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "OK" in ok.stdout
    as_json = vpr("manifest", "verify", str(dist), "--key", pub, "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout)["ok"] is True

    original = flip_byte(dist / "manifest.json", 100)
    bad = vpr("manifest", "verify", str(dist / "manifest.json"), "--key", pub, cwd=tmp_path)
    assert bad.returncode == 1
    assert "manifest.json" in bad.stderr and "does not match the signed subject" in bad.stderr
    assert "Traceback" not in bad.stderr
    (dist / "manifest.json").write_bytes(original)

    # The key from the environment wins over the spec; an unreadable key never shows its bytes.
    broken = tmp_path / "broken.key"
    broken.write_text("-----BEGIN PRIVATE KEY-----\nTOPSECRETMATERIAL\n-----END PRIVATE KEY-----\n")
    env = {keys.KEY_ENV: str(broken)}
    fail = vpr("manifest", "build", "--spec", str(spec), cwd=tmp_path, env=env)
    assert fail.returncode == 2
    assert "broken.key" in fail.stderr
    for out in (fail.stdout + fail.stderr, built.stdout + built.stderr, gen.stdout + gen.stderr):
        assert "TOPSECRETMATERIAL" not in out and secret_line not in out
    assert secret_line not in (dist / "run.json").read_text()
    assert secret_line not in (dist / "manifest.json").read_text()
    missing = vpr("manifest", "verify", str(dist), "--key", "nope.pub", cwd=tmp_path)
    assert missing.returncode == 2
    assert os.path.exists(pub)
