"""benchmarks/durations.py: the parsing and the scheduler replay its printed figures rest on."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "durations.py"

LOG = """\
........                                                                 [100%]
============================= slowest 4 durations ==============================
17.41s call     tests/integration/test_snapshots.py::test_cfn_lint_finds_no_error_in_the_test_templates
15.10s setup    tests/integration/test_snapshots.py::test_snapshot_matches[poc]
6.18s setup    tests/tiers/test_shares.py::test_nlb_listener_forwards_to_every_share_by_weight
0.50s teardown tests/e2e/test_hot_path.py::test_x[a b]

(2 durations < 0.005s hidden.  Use -vv to show these durations.)
5764 passed in 456.98s (0:07:36)
"""

JUNIT = """\
<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="5">
<testcase classname="tests.unit.test_a" name="test_1" time="1.5" />
<testcase classname="tests.unit.test_a" name="test_2" time="0.5" />
<testcase classname="tests.tiers.test_b.TestGroup" name="test_3" time="4.0" />
<testcase classname="tests.unit.test_a" name="test_4" time="1.0" />
<testcase classname="tests.cli.test_c" name="test_5" time="2.0" />
</testsuite></testsuites>
"""


@pytest.fixture(scope="module")
def durations() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("bench_durations", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_durations"] = module  # dataclasses look their module up while building the class
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_durations"]


def test_the_durations_section_is_read_line_by_line(durations: ModuleType) -> None:
    found = durations.parse_durations(LOG)
    assert [(d.seconds, d.phase, d.file) for d in found] == [
        (17.41, "call", "tests/integration/test_snapshots.py"),
        (15.10, "setup", "tests/integration/test_snapshots.py"),
        (6.18, "setup", "tests/tiers/test_shares.py"),
        (0.50, "teardown", "tests/e2e/test_hot_path.py"),
    ]
    # A parameter with a space stays part of the test's id.
    assert found[-1].test == "tests/e2e/test_hot_path.py::test_x[a b]"


def test_lines_outside_the_durations_section_are_not_entries(durations: ModuleType) -> None:
    assert durations.parse_durations("12.00s call     tests/x.py::test_y\n") == []


def test_junit_cases_are_summed_per_file_in_run_order(durations: ModuleType) -> None:
    files = durations.junit_file_times([JUNIT])
    # test_a's three cases (1.5 + 0.5 + 1.0); a class name is not part of the file's path.
    assert [(f.file, f.tests, f.seconds) for f in files] == [
        ("tests/unit/test_a.py", 3, 3.0),
        ("tests/tiers/test_b.py", 1, 4.0),
        ("tests/cli/test_c.py", 1, 2.0),
    ]


def test_each_file_goes_to_the_worker_that_frees_up_first(durations: ModuleType) -> None:
    files = [
        durations.FileTime(name, 1, seconds)
        for name, seconds in [("a", 3.0), ("b", 1.0), ("c", 1.0), ("d", 4.0)]
    ]
    # a -> worker 0 (0-3); b -> worker 1 (0-1); c -> worker 1 (1-2); d -> worker 1 (2-6).
    layout = durations.lay_out(files, 2)
    assert layout.finish == (3.0, 6.0)
    assert (layout.wall, layout.idle) == (6.0, 3.0)
    # Longest first: d -> 0 (0-4), a -> 1 (0-3), b -> 1 (3-4), c -> 0 (4-5).
    assert durations.lay_out(durations.longest_first(files), 2).finish == (5.0, 4.0)


def test_the_xdist_queue_puts_the_files_with_most_tests_first_keeping_ties_in_order(
    durations: ModuleType,
) -> None:
    files = [durations.FileTime(n, t, 1.0) for n, t in [("few", 1), ("many", 9), ("some", 3), ("one", 1)]]
    assert [f.file for f in durations.xdist_order(files)] == ["many", "some", "few", "one"]
