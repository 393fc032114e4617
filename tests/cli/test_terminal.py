"""Every table of the `gpufarm` command fits an 80-column terminal: the real command, in a real one.

Each case runs the installed `gpufarm` console script (or, for `preflight`, which needs AWS, the
same entry point with canned AWS results) in a subprocess whose standard output and standard
error are pseudo-terminals (Python's `pty` module) 80 columns wide, with COLUMNS=80 as a shell
sets it. What the terminal receives is then checked: no line wider than 80 columns, and no cell
cut with an ellipsis (rich's `…`), which is how a table that did not fit used to end.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from rich.cells import cell_len

ROOT = Path(__file__).resolve().parents[2]
GPUFARM = Path(sys.executable).with_name("gpufarm")
WIDTH = 80
TYPE_METAVAR = r"<(?:bool|str|int|float|path|list\[[a-z]+\])>"
"""How typer 0.29 shows an option's Python type in help when no metavar is set."""
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]")


@dataclass(frozen=True)
class Screen:
    """What one run wrote to each terminal, with control sequences removed, and its exit status."""

    stdout: str
    stderr: str
    status: int

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()


def _drain(fds: dict[int, bytearray], proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Read both terminals until the program has exited and they are empty."""
    open_fds = set(fds)
    while open_fds:
        ready, _, _ = select.select(list(open_fds), [], [], timeout)
        if not ready:
            proc.kill()
            raise AssertionError(f"no output for {timeout} s: {proc.args}")
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the program closed its end of the terminal
                chunk = b""
            if chunk:
                fds[fd] += chunk
            else:
                open_fds.discard(fd)


def _terminal() -> tuple[int, int]:
    """A pseudo-terminal WIDTH columns wide: (our end, the program's end)."""
    ours, theirs = pty.openpty()
    fcntl.ioctl(theirs, termios.TIOCSWINSZ, struct.pack("HHHH", 50, WIDTH, 0, 0))
    return ours, theirs


def in_terminal(argv: list[str], *, cwd: Path, timeout: float = 300) -> Screen:
    """Run `argv` with standard output and standard error on two 80-column terminals."""
    out_ours, out_theirs = _terminal()
    err_ours, err_theirs = _terminal()
    env = {
        **os.environ,
        "COLUMNS": str(WIDTH),
        "LINES": "50",
        "TERM": "xterm-256color",
        # Nothing from the test run may decide the width or the colours for the program.
        "PYTHONUNBUFFERED": "1",
    }
    for key in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        env.pop(key, None)
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=out_theirs,
        stderr=err_theirs,
        start_new_session=True,
    )
    os.close(out_theirs)
    os.close(err_theirs)
    received = {out_ours: bytearray(), err_ours: bytearray()}
    try:
        _drain(received, proc, timeout)
    finally:
        status = proc.wait(timeout=timeout)
        os.close(out_ours)
        os.close(err_ours)

    def text(fd: int) -> str:
        # The terminal turns each newline into CR LF; a spinner redraws its line with CR.
        raw = ANSI.sub("", received[fd].decode("utf-8", errors="replace")).replace("\r\n", "\n")
        return "\n".join(line.rsplit("\r", 1)[-1] for line in raw.split("\n"))

    return Screen(stdout=text(out_ours), stderr=text(err_ours), status=status)


def headers(lines: list[str]) -> list[str]:
    """The column headers of the first table in `lines`, each header's wrapped words rejoined."""
    cut = next(i for i, line in enumerate(lines) if line.startswith("┡"))
    rows = [line.strip("┃").split("┃") for line in lines[:cut] if line.startswith("┃")]
    return [" ".join(" ".join(row[i] for row in rows).split()) for i in range(len(rows[0]))]


def column(lines: list[str], index: int) -> str:
    """The text of one column of the first table's body, its wrapped and folded lines rejoined."""
    body = [line.strip("│").split("│") for line in lines if line.startswith("│")]
    return " ".join(" ".join(cells[index] for cells in body).split())


def assert_fits(screen: Screen) -> None:
    """Every line of standard output within 80 columns, and no cell cut short."""
    wide = [(cell_len(line), line) for line in screen.lines if cell_len(line) > WIDTH]
    assert not wide, f"lines wider than {WIDTH} columns:\n" + "\n".join(f"{n}: {line}" for n, line in wide)
    cut = [line for line in screen.lines if "…" in line]
    assert not cut, "cells cut with an ellipsis:\n" + "\n".join(cut)
    assert "Traceback" not in screen.stderr, screen.stderr


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder outside the checkout holding its cdk.json, as the doc samples run."""
    path = tmp_path_factory.mktemp("terminal")
    shutil.copy(ROOT / "cdk.json", path / "cdk.json")
    return path


def gpufarm(*args: str) -> list[str]:
    if not GPUFARM.is_file():
        pytest.skip(f"the gpufarm console script is not installed beside {sys.executable}")
    return [str(GPUFARM), *args]


PLAN_70B = [
    "plan",
    *("--params-b", "70", "--precision", "fp8", "--layers", "80", "--kv-heads", "8"),
    *("--head-dim", "128", "--context-length", "32768", "--concurrency", "200"),
    *("--target-tokens-per-s", "20"),
]
PLAN_MOE = [
    "plan",
    *("--params-b", "671", "--moe-active-params-b", "37", "--precision", "fp8", "--layers", "61"),
    *("--kv-heads", "1", "--head-dim", "576", "--context-length", "32768", "--concurrency", "64"),
    *("--target-tokens-per-s", "20"),
]


@pytest.mark.parametrize(
    "args",
    [
        ["cost", "--tier", "poc"],
        ["cost", "--tier", "production", "--tokens-per-month", "2e9", "--fallback-share", "0.05"],
        [
            "cost",
            *("--tier", "enterprise"),
            *(
                "--commitment",
                "kind=ec2-instance-savings-plan,family=p5,usd_per_hour=30,discount=0.4,term=3y",
            ),
        ],
        PLAN_70B,
        PLAN_MOE,
    ],
    ids=["cost-poc", "cost-production", "cost-enterprise", "plan-70b", "plan-moe"],
)
def test_tables_fit_80_columns(args: list[str], folder: Path) -> None:
    screen = in_terminal(gpufarm(*args), cwd=folder)
    assert screen.status == 0, screen.stderr
    assert_fits(screen)
    assert any(line.startswith("┏") for line in screen.lines), "no table was printed"


def test_the_cost_table_leaves_out_a_column_and_says_which(folder: Path) -> None:
    """At 80 columns the widest line-item table drops its unit price, and says so under it."""
    screen = in_terminal(gpufarm("cost", "--tier", "production"), cwd=folder)
    assert_fits(screen)
    assert headers(screen.lines) == [
        "Item [unit]",
        "Capacity",
        "Floor qty",
        "Floor $",
        "Expected $",
        "Ceiling $",
    ]
    assert "Not shown at this width: $ / unit (a wider terminal or --json shows them)" in screen.stdout
    # The line items keep their units whole: `[instance-month]`, never `[instanc…`.
    assert "[instance-month]" in screen.stdout


def test_the_plan_shows_no_reserved_row_equal_to_on_demand(folder: Path) -> None:
    screen = in_terminal(gpufarm(*PLAN_70B, "--json"), cwd=folder)
    costs = json.loads(screen.stdout)["monthly_cost_usd"]
    assert costs["reserved"] == costs["on-demand"]  # an ODCR bills the on-demand rate
    table = in_terminal(gpufarm(*PLAN_70B), cwd=folder).stdout
    rows = [line for line in table.splitlines() if line.startswith("│ ") and "$" not in line]
    capacity_rows = [r.split("│")[1].strip() for r in rows if r.split("│")[1].strip() in costs]
    assert capacity_rows == ["on-demand", "spot"]
    assert "Reserved capacity (an On-Demand Capacity Reservation) bills the on-demand rate;" in table


@pytest.mark.parametrize(
    "command",
    [
        *([], ["synth"], ["plan"], ["cost"], ["preflight"], ["review"]),
        *(["deploy"], ["diff"], ["destroy"], ["status"], ["kubeconfig"]),
    ],
)
def test_help_fits_and_names_values_in_words(command: list[str], folder: Path) -> None:
    screen = in_terminal(gpufarm(*command, "--help"), cwd=folder)
    assert screen.status == 0, screen.stderr
    assert_fits(screen)
    # Python's types are not a user's: no `<bool>`, `<list[str]>`, `<path>` or `<str>`.
    assert not re.search(TYPE_METAVAR, screen.stdout), screen.stdout


PREFLIGHT = textwrap.dedent(
    """
    import sys

    from gpufarm.aws import preflight
    from gpufarm.aws.preflight import Check, CheckResult, PreflightReport, Status
    from gpufarm.cli.main import main

    def canned(tier, **options):
        # The rows of a failing account, with the longest texts the checks write.
        return PreflightReport(
            tier=tier.name,
            region=options.get("region") or "us-east-1",
            account="123456789012",
            results=(
                CheckResult(
                    check=Check.QUOTA,
                    subject="Running On-Demand G and VT instances (L-DB2E81BA)",
                    status=Status.FAIL,
                    message="the models need 192 vCPUs of g6e.12xlarge at their most replicas; "
                    "the applied quota is 64",
                    fix="aws service-quotas request-service-quota-increase --service-code ec2 "
                    "--quota-code L-DB2E81BA --desired-value 192 --region us-east-1",
                ),
                CheckResult(
                    check=Check.OFFERING,
                    subject="g6e.12xlarge",
                    status=Status.PASS,
                    message="offered in us-east-1a, us-east-1b, us-east-1c",
                    fix="",
                ),
            ),
        )

    preflight.run_preflight = canned
    sys.argv = ["gpufarm", *sys.argv[1:]]
    main()
    """
)


def test_the_preflight_table_fits(folder: Path) -> None:
    """`preflight` needs an account: its checks are canned, its command line and table are real."""
    script = folder / "canned_preflight.py"
    script.write_text(PREFLIGHT, encoding="utf-8")
    screen = in_terminal(
        [sys.executable, str(script), "preflight", "--tier", "production", "--region", "us-east-1"],
        cwd=folder,
    )
    assert screen.status == 1, screen.stderr  # a check failed
    assert_fits(screen)
    assert headers(screen.lines) == ["Check", "Subject", "Status", "Detail", "Fix"]
    # The fix is a command to copy: its words all there, in order (a long one folds, never cut).
    assert "--quota-code L-DB2E81BA --desired-value 192 --region us-east-1" in column(screen.lines, 4)


STATUS = textwrap.dedent(
    """
    import sys

    from gpufarm.aws import stack, status
    from gpufarm.aws.kube import ModelPods, PoolNodes
    from gpufarm.aws.stack import StackInfo
    from gpufarm.aws.status import FallbackShare, StatusReport, TargetGroupHealth
    from gpufarm.cli.main import main

    def canned(config, **options):
        # A production tier mid-scale-up, with the longest names the presets give.
        return StatusReport(
            tier=config.name,
            region=config.environment.region,
            stack=StackInfo(name=config.stack_name, status="UPDATE_COMPLETE", reason=""),
            target_groups=[
                TargetGroupHealth(
                    logical_id="IngressLlama3370bTargetGroupData8080Control30005D47F26C",
                    arn="arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/x/1",
                    states={"healthy": 2, "initial": 1, "unhealthy": 1, "draining": 1},
                ),
            ],
            fallback=FallbackShare(window_seconds=900, bedrock_invocations=12, gateway_requests=4800),
            pools=[
                PoolNodes(pool="serving", nodes=3, ready=2, instance_types=("g6e.12xlarge", "p5.48xlarge")),
                PoolNodes(pool="system", nodes=2, ready=2, instance_types=("m7i.2xlarge",)),
            ],
            models=[ModelPods(model="llama-3-3-70b", pods=3, ready=2, desired=None)],
        )

    stack.aws_session = lambda region, needs: object()
    status.read_status = canned
    sys.argv = ["gpufarm", *sys.argv[1:]]
    main()
    """
)


def test_the_status_tables_fit(folder: Path) -> None:
    """`status` reads a deployed stack: its reads are canned, its command line and tables are real."""
    script = folder / "canned_status.py"
    script.write_text(STATUS, encoding="utf-8")
    screen = in_terminal(
        [sys.executable, str(script), "status", "--tier", "production", "--no-kubernetes"], cwd=folder
    )
    assert screen.status == 0, screen.stderr
    assert_fits(screen)
    assert headers(screen.lines) == ["Target group", "Healthy", "Targets", "States"]
    assert "IngressLlama3370bTargetGroupData8080Control30005D47F26C" in column(screen.lines, 0).replace(
        " ", ""
    )


@pytest.fixture(scope="module")
def synthesized(folder: Path) -> tuple[Screen, Path]:
    """`gpufarm synth` of a poc tier file in the terminal: what it printed, and the assembly."""
    (folder / "team.yaml").write_text(
        "extends: poc\nname: team-a\ncluster:\n  public_access_cidrs: [10.20.0.0/16]\n",
        encoding="utf-8",
    )
    out = folder / "synth.out"
    screen = in_terminal(
        gpufarm("synth", "--tier-file", "team.yaml", "--out", str(out)), cwd=folder, timeout=600
    )
    return screen, out


def test_the_synth_summary_fits(synthesized: tuple[Screen, Path]) -> None:
    """The summary keeps the stack, both costs and the gates whole; the resource count gives way."""
    screen, _ = synthesized
    assert screen.status == 0, screen.stderr
    assert_fits(screen)
    assert headers(screen.lines) == [
        "Stack",
        "Peak GPUs reserved / on-demand / spot",
        "Floor $ / month",
        "Ceiling $ / month",
        "cdk-nag",
        "cfn-lint",
    ]
    (row,) = [line for line in screen.lines if line.startswith("│ gpufarm-team-a ")]
    assert [cell.strip() for cell in row.strip("│").split("│")][2:] == ["2,422", "2,422", "passed", "passed"]
    assert "Not shown at this width: Resources (a wider terminal or --json shows them)" in screen.stdout


def test_the_review_renders_its_tables_on_a_terminal(synthesized: tuple[Screen, Path], folder: Path) -> None:
    """On a terminal the review's Markdown is rendered, its tables folded to fit; piped, it is Markdown."""
    _, assembly = synthesized
    screen = in_terminal(gpufarm("review", str(assembly)), cwd=folder)
    assert screen.status == 0, screen.stderr
    assert_fits(screen)
    assert "| Resource | Type |" not in screen.stdout  # rendered, not Markdown source
    assert "Public exposure" in screen.stdout
    piped = subprocess.run(
        gpufarm("review", str(assembly)), cwd=folder, capture_output=True, text=True, check=False
    )
    assert piped.stdout.startswith("## gpufarm review\n")
    assert "| Resource | Type |" in piped.stdout
