"""Conformance checks: each module is one check returning a `CheckResult`."""
