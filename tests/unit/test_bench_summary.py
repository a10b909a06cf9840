"""`nox -s bench` reports every row of the targets table with its target (no timing here:
the figures are made up; what is checked is that each row is found, judged and kept)."""

from __future__ import annotations

import importlib

import pytest

bench_main = importlib.import_module("benchmarks.__main__")

RESULTS = {
    "build_core": {
        "ratios": {
            "cold / bare": {"ratio": 0.98},
            "cold / bare in the same scratch": {"ratio": 1.2},
            "warm / cold": {"ratio": 0.03},
        }
    },
    "env": {
        "ratios": {
            "vpr env / plain": {"ratio": 1.9},
            "first env of its lock / plain": {"ratio": 3.1},
            "install only / plain": {"ratio": 0.8},
        }
    },
    "isolation": {
        "cli_ratio": 1.4,
        "ratio": 1.2,
        "growth": {
            "slopes": {"rg": 0.97, "scan": 0.99, "vpr scan-core": 0.81},
            "sizes": {"3 copies": {"cli_ratio": 1.1}},
        },
    },
    "replay": {
        "total_s": 21.0,
        "warm_worker_total_s": 12.0,
        "scheduler_floor_s": 9.5,
        "overhead_ratio": 1.05,
        "growth": {"slopes": {"total_s": 0.7, "scheduler_s": 1.02, "overhead_ratio": None}},
    },
    "install": {
        "ratios": {
            "verified / before": {"ratio": 1.04},
            "verified / before, cpu": {"ratio": 1.02},
            "verification / whole install": {"ratio": 0.05},
        }
    },
    "release": {
        "medians": {"cold release (fresh .vpr)": 58.0},
        "ratios": {"warm / cold": {"ratio": 0.01}},
        "cold_cpu_s": 104.0,
        "cpu_floor_s": 52.0,
    },
    "container": {
        "ratios": {
            "container cold / local cold": {"ratio": 1.07},
            "container warm / cold": {"ratio": 0.11},
        }
    },
    "store": {  # as bench_store returns it (sizes as ints) ...
        "cases": {
            "query, one pairing": {
                "medians": {10_000: {"command cpu": 0.21, "in process cpu": 0.004}},
                "slopes": {"command cpu": 0.02, "in process cpu": 0.1},
            },
            "matrix": {  # ... or as read back from results.json (sizes as strings)
                "medians": {"10000": {"command cpu": 0.35, "in process cpu": 0.05}},
                "slopes": {"command cpu": 0.6},
            },
        }
    },
}


def test_every_row_of_the_targets_table_has_its_figure_and_target() -> None:
    rows = {r["measure"]: r for r in bench_main.summary(RESULTS)}
    assert len(rows) == 33
    judged = {m: r["met"] for m, r in rows.items() if r["target"] is not None}
    assert judged == {
        "vpr build-core cold / bare python -m build": True,
        "the same, the bare build in vpr's build scratch (/dev/shm)": False,
        "vpr build-core warm / cold": False,
        "vpr env (hashes + in-env checks) / plain uv pip install": True,
        "vpr scan-core end to end / rg -w -i": True,
        "replay of 10,000 requests, both schedulers": False,
        "the same in the warm worker (as vpr conform runs it)": True,
        "replay overhead (wall / inside the schedulers)": True,
        "vpr release cold (fresh .vpr, warm uv cache)": False,  # over its target
        "vpr release warm / cold": True,
        "vpr install warm, store verified first / before": True,
        "vpr build-core in the pinned container cold / local cold": True,
        "the container's warm re-run / its cold build": False,
        "vpr manifest query, one pairing of 10,000: the command's CPU": True,
        "the same, in process": True,
        "log-log slope of the command, 1k to 100k pairings (<= 0.48: 3x per 10x)": True,
        "vpr manifest matrix over 10,000 pairings: the command's CPU": False,
        "the same in process": True,
        "log-log slope of the command, the same sizes": False,
    }
    assert rows["in process: the verification / the whole warm install"]["value"] == 0.05
    assert rows["the install alone / plain uv pip install"]["value"] == 0.8
    first = rows["the same, first environment of its lock (no kept bytecode)"]
    assert first["value"] == 3.1 and first["met"] is None  # shown beside the judged row
    assert rows["in-process scan / rg -w -i"]["met"] is None
    floor = rows["floor: that CPU time over the usable cores"]
    assert floor["value"] == 52.0 and floor["met"] is None
    assert rows["its CPU time (user + sys, every process)"]["value"] == 104.0
    growth = {m: r["value"] for m, r in rows.items() if m.startswith("growth exponent")}
    assert growth == {
        "growth exponent of vpr scan-core (a third, the tree, 3 copies)": 0.81,
        "growth exponent of rg -w -i, the same trees": 0.97,
        "growth exponent of the replay's total (1,000, 3,000, 10,000 requests)": 0.7,
        "growth exponent of the time inside the schedulers, the same": 1.02,
        "growth exponent of the overhead ratio, the same": None,  # too few sizes: no slope
    }
    assert all(rows[m]["met"] is None for m in growth)  # printed, never judged
    assert rows["vpr scan-core / rg -w -i over 3 copies of the tree"]["value"] == 1.1


def test_only_the_benches_that_ran_are_reported_and_a_missing_figure_is_not_a_pass() -> None:
    rows = bench_main.summary({"replay": {"overhead_ratio": 1.2}})
    assert [r["measure"] for r in rows] == [
        "replay of 10,000 requests, both schedulers",
        "the same in the warm worker (as vpr conform runs it)",
        "floor: the slower scheduler's own time (the two side by side)",
        "replay overhead (wall / inside the schedulers)",
        "growth exponent of the replay's total (1,000, 3,000, 10,000 requests)",
        "growth exponent of the time inside the schedulers, the same",
        "growth exponent of the overhead ratio, the same",
    ]
    assert rows[0]["value"] is None and rows[0]["met"] is None
    assert rows[3]["met"] is False


def test_the_growth_exponent_is_the_log_log_slope() -> None:
    from benchmarks.common import slope

    assert slope([(1_000, 2.0), (10_000, 20.0), (100_000, 200.0)]) == pytest.approx(1.0)
    assert slope([(1_000, 5.0), (3_000, 5.0), (10_000, 5.0)]) == pytest.approx(0.0)
    assert slope([(1, 1.0), (4, 2.0), (16, 4.0)]) == pytest.approx(0.5)  # a square root
    assert slope([(1, 1.0), (10, 100.0)]) == pytest.approx(2.0)  # quadratic, not linear
    # a point that cannot be on a log scale is left out; one point alone has no slope
    assert slope([(0, 1.0), (10, 0.0), (100, 3.0)]) is None
    assert slope([(10, 1.0), (10, 2.0)]) is None
