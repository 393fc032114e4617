#!/usr/bin/env python3
"""Where the test suite's time goes, from pytest's own records: no test is run here.

Reads either or both of

- a pytest log with a durations section (``pytest --durations=40 ...``): the slowest test calls,
  and the slowest set-ups (a set-up is where a fixture's cost lands: a module or session fixture
  is charged to the first test that asks for it, so a tier synth shows as one test's set-up);
- JUnit XML files (``pytest --junitxml=FILE -o junit_duration_report=total``, set-up, call and
  tear-down of each test): the time per test file, and how pytest-xdist's ``--dist loadfile``
  would lay those files out on N workers.

and prints the slowest entries and files. With ``--workers N`` it replays xdist's file scheduler
on the per-file times in three orders and prints each order's wall time and idle tail:

- ``xdist default``: files with the most tests first (``--dist loadfile`` reorders its queue
  so; pytest-xdist 3.8.0, ``xdist/scheduler/loadscope.py``, ``loadscopereorder``);
- ``collection``: the order the files were collected in (``--no-loadscope-reorder``);
- ``longest first``: by time, longest first, which no option gives but which bounds the others.

The replay gives each file, in queue order, to the worker that frees up first (a worker asks
for its next file when two or fewer tests of its current one are left; the replay ignores that
overlap). Times from ``-n 0`` runs on a loaded machine are relative: compare orders, not seconds.

    .venv/bin/python benchmarks/durations.py [--log run.log] [--junit a.xml b.xml ...]
        [--top 25] [--workers 2]
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

DURATION_LINE = re.compile(
    r"^\s*(?P<seconds>\d+(?:\.\d+)?)s (?P<phase>setup|call|teardown)\s+(?P<test>\S.*)$"
)
"""One line of pytest's durations section: ``12.34s call     tests/x.py::test_y[param]``."""


@dataclass(frozen=True)
class Duration:
    """One phase of one test, as pytest's durations section prints it."""

    seconds: float
    phase: str
    test: str

    @property
    def file(self) -> str:
        return self.test.split("::", 1)[0]


def parse_durations(text: str) -> list[Duration]:
    """The entries of every durations section in a pytest log, in the order printed."""
    out: list[Duration] = []
    inside = False
    for line in text.splitlines():
        if "slowest" in line and "durations" in line and line.startswith("="):
            inside = True
            continue
        if inside:
            found = DURATION_LINE.match(line)
            if found:
                out.append(Duration(float(found["seconds"]), found["phase"], found["test"].strip()))
            elif line.startswith("=") or (line.strip() and not line.startswith("(")):
                inside = False
    return out


@dataclass(frozen=True)
class FileTime:
    """One test file: its tests and their summed time (set-up, call and tear-down)."""

    file: str
    tests: int
    seconds: float


def junit_file_times(xml_texts: Iterable[str]) -> list[FileTime]:
    """Per test file, in the order the files first appear (the run's order), from JUnit XML.

    A test case's `classname` is its module path with dots (`tests.tiers.test_poc`), or that
    plus a class name; the file is taken from the case's `file` attribute when pytest wrote one.
    """
    seconds: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    order: list[str] = []
    for text in xml_texts:
        for case in ET.fromstring(text).iter("testcase"):
            name = case.get("file") or _module_file(case.get("classname", ""))
            if name not in tests:
                order.append(name)
            tests[name] += 1
            seconds[name] += float(case.get("time", "0"))
    return [FileTime(name, tests[name], seconds[name]) for name in order]


def _module_file(classname: str) -> str:
    parts = classname.split(".")
    # Drop a trailing class name (capitalized), keep the module path.
    while parts and parts[-1][:1].isupper():
        parts.pop()
    return "/".join(parts) + ".py"


@dataclass(frozen=True)
class Layout:
    """Files laid out on workers: each worker's finish time and the wall time."""

    finish: tuple[float, ...]

    @property
    def wall(self) -> float:
        return max(self.finish)

    @property
    def idle(self) -> float:
        """Worker-seconds spent waiting for the last worker to finish."""
        return sum(self.wall - f for f in self.finish)


def lay_out(files: Sequence[FileTime], workers: int) -> Layout:
    """Each file, in the given order, to the worker that frees up first (the lowest-numbered on a tie)."""
    finish = [0.0] * workers
    for f in files:
        index = min(range(workers), key=lambda i: (finish[i], i))
        finish[index] += f.seconds
    return Layout(tuple(finish))


def xdist_order(files: Sequence[FileTime]) -> list[FileTime]:
    """`--dist loadfile`'s queue: most tests first, ties in collection order (a stable sort)."""
    return sorted(files, key=lambda f: -f.tests)


def longest_first(files: Sequence[FileTime]) -> list[FileTime]:
    return sorted(files, key=lambda f: -f.seconds)


def report(durations: list[Duration], files: list[FileTime], *, top: int, workers: int) -> str:
    lines: list[str] = []
    if durations:
        calls = sorted((d for d in durations if d.phase == "call"), key=lambda d: -d.seconds)
        setups = sorted((d for d in durations if d.phase != "call"), key=lambda d: -d.seconds)
        lines += ["slowest test calls:", *(f"  {d.seconds:8.2f}s  {d.test}" for d in calls[:top])]
        lines += [
            "slowest set-ups and tear-downs (fixtures; charged to the first test that uses them):",
            *(f"  {d.seconds:8.2f}s  {d.phase:8s} {d.test}" for d in setups[:top]),
        ]
        by_file: dict[str, float] = defaultdict(float)
        for d in durations:
            by_file[d.file] += d.seconds
        lines += [
            "files, summed over the entries listed above:",
            *(f"  {s:8.2f}s  {f}" for f, s in sorted(by_file.items(), key=lambda i: -i[1])[:top]),
        ]
    if files:
        total = sum(f.seconds for f in files)
        lines += [
            f"test files by time ({len(files)} files, {sum(f.tests for f in files)} tests, {total:.1f}s):",
            *(f"  {f.seconds:8.2f}s  {f.tests:5d} tests  {f.file}" for f in longest_first(files)[:top]),
        ]
        if workers > 1:
            lines.append(
                f"--dist loadfile on {workers} workers (replayed; lower bound {total / workers:.1f}s):"
            )
            for label, order in (
                ("xdist default", xdist_order(files)),
                ("collection", list(files)),
                ("longest first", longest_first(files)),
            ):
                layout = lay_out(order, workers)
                last = order[-1]
                lines.append(
                    f"  {label:14s} wall {layout.wall:8.1f}s  idle {layout.idle:7.1f} worker-s  "
                    f"last file {last.file} ({last.seconds:.1f}s, {last.tests} tests)"
                )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--log", type=Path, action="append", default=[], help="a pytest log with --durations")
    parser.add_argument("--junit", type=Path, nargs="*", default=[], help="JUnit XML files, in run order")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if not args.log and not args.junit:
        parser.error("give --log, --junit or both")
    durations = [d for log in args.log for d in parse_durations(log.read_text())]
    files = junit_file_times(p.read_text() for p in args.junit)
    print(report(durations, files, top=args.top, workers=args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
