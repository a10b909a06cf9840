"""tests/required.py: where the run set up a container engine or Chromium, a test that
needs it and skips fails; elsewhere it skips as before (pytester runs a small suite
with the same plugin)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

SUITE = """
import pytest

NOT_HERE = True

@pytest.mark.docker
@pytest.mark.skipif(NOT_HERE, reason="no container engine: nothing at DOCKER_HOST")
def test_container():
    pass

@pytest.mark.docker(may_skip="the pinned base cannot be pulled")
def test_registry():
    pytest.skip("the pinned base cannot be pulled here: 403")

@pytest.mark.docker(may_skip="the pinned base cannot be pulled")
def test_registry_but_no_engine():
    pytest.skip("no container engine: nothing at DOCKER_HOST")

@pytest.mark.screenshot
def test_page():
    pytest.skip("no Chromium (apt-get install -y chromium)")

def test_other():
    pytest.skip("not this machine")
"""


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, **env: str):
    for name in ("VPR_REQUIRE_ENGINE", "VPR_REQUIRE_CHROMIUM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini("[pytest]\nmarkers =\n    docker: engine\n    screenshot: browser\n")
    return pytester.runpytest("-p", "tests.required", "-rA")


def test_without_the_variables_skips_stay_skips(pytester, monkeypatch) -> None:
    _run(pytester, monkeypatch).assert_outcomes(skipped=5)


def test_an_engine_started_for_the_run_turns_its_tests_skips_into_failures(
    pytester, monkeypatch
) -> None:
    result = _run(pytester, monkeypatch, VPR_REQUIRE_ENGINE="1")
    # a skipif skips at set-up: failing there, pytest reports an error (the run fails)
    result.assert_outcomes(failed=1, errors=1, skipped=3)
    result.stdout.fnmatch_lines(
        [
            "*a container engine was started for this run (VPR_REQUIRE_ENGINE=1), but this "
            "docker test skipped: no container engine: nothing at DOCKER_HOST*"
        ]
    )
    failed = {r.nodeid.split("::")[1] for r in result.reprec.getreports() if r.failed}
    assert failed == {"test_container", "test_registry_but_no_engine"}


def test_chromium_installed_for_the_run_turns_screenshot_skips_into_failures(
    pytester, monkeypatch
) -> None:
    result = _run(pytester, monkeypatch, VPR_REQUIRE_CHROMIUM="1")
    result.assert_outcomes(failed=1, skipped=4)
    result.stdout.fnmatch_lines(["*Chromium was installed for this run*no Chromium*"])
