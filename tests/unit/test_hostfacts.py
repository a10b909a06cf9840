"""HostFacts: this run's host, typed; run.json keeps the keys it always had, in order."""

from __future__ import annotations

import os
import platform
import socket
import sys

from vllm_plugin_release.edges import runner


def test_the_facts_are_this_run_and_serialise_as_before() -> None:
    facts = runner.host_facts()
    assert list(facts.to_json().items()) == [
        ("host", socket.gethostname()),
        ("platform", platform.platform()),
        ("python", sys.version.split()[0]),
        ("pid", os.getpid()),
    ]
