"""tests/required.py: where the run set up a container engine or Chromium, or gave a
vllm-tt-plugin checkout, a test that needs it and skips fails; elsewhere it skips as
before (pytester runs a small suite with the same plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import REPO

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

from tests.required import tt_checkout

@tt_checkout()
def test_tt_pairing():
    pytest.skip("the checkout has no docs/ folder")

@tt_checkout(may_skip="this machine has CPython 3.10")
def test_tt_without_its_python():
    pytest.skip("this machine has CPython 3.10 where it cannot be hidden")
"""


def _run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, **env: str):
    for name in ("VPR_REQUIRE_ENGINE", "VPR_REQUIRE_CHROMIUM", "VPR_TT_PLUGIN_CHECKOUT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    pytester.makepyfile(test_suite=SUITE)
    pytester.makeini(
        "[pytest]\nmarkers =\n    docker: engine\n    screenshot: browser\n    tt_checkout: tt\n"
    )
    monkeypatch.syspath_prepend(str(REPO))  # the suite imports tests.required
    return pytester.runpytest("-p", "tests.required", "-rA")


def test_without_the_variables_skips_stay_skips(pytester, monkeypatch) -> None:
    result = _run(pytester, monkeypatch)
    result.assert_outcomes(skipped=7)
    result.stdout.fnmatch_lines(["*set VPR_TT_PLUGIN_CHECKOUT to a vllm-tt-plugin checkout*"])


def test_an_engine_started_for_the_run_turns_its_tests_skips_into_failures(
    pytester, monkeypatch
) -> None:
    result = _run(pytester, monkeypatch, VPR_REQUIRE_ENGINE="1")
    # a skipif skips at set-up: failing there, pytest reports an error (the run fails)
    result.assert_outcomes(failed=1, errors=1, skipped=5)
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
    result.assert_outcomes(failed=1, skipped=6)
    result.stdout.fnmatch_lines(["*Chromium was installed for this run*no Chromium*"])


def test_a_tt_checkout_given_turns_the_tt_tests_skips_into_failures(
    pytester, monkeypatch, tmp_path: Path
) -> None:
    """Given as a path, not as "1": the TT tests run, and one that skips all the same fails
    but for the skip it names (`may_skip`)."""
    result = _run(pytester, monkeypatch, VPR_TT_PLUGIN_CHECKOUT=str(tmp_path / "tt"))
    result.assert_outcomes(failed=1, skipped=6)
    result.stdout.fnmatch_lines(
        [
            f"*a vllm-tt-plugin checkout was given (VPR_TT_PLUGIN_CHECKOUT={tmp_path / 'tt'}), "
            "but this tt_checkout test skipped: the checkout has no docs/ folder*"
        ]
    )
    failed = {r.nodeid.split("::")[1] for r in result.reprec.getreports() if r.failed}
    assert failed == {"test_tt_pairing"}


def test_every_test_that_reads_the_tt_checkout_is_marked() -> None:
    """A new test of the TT pairing that reads VPR_TT_PLUGIN_CHECKOUT without `tt_checkout`
    would skip unnoticed where CI gives the checkout."""
    unmarked = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "tests").rglob("test_*.py"))
        if 'os.environ["VPR_TT_PLUGIN_CHECKOUT"]' in path.read_text()
        and "@tt_checkout(" not in path.read_text()
    ]
    assert unmarked == []
