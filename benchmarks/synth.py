#!/usr/bin/env python3
"""Synth wall time per tier, for all tiers together, an empty CDK app and the TypeScript peer.

Each measurement starts a new process (a new Python and jsii/Node runtime, or a new Node for the
peer), as `cdk synth` does. The measurements run in rounds, each round running every one once in
a fixed order with the two sides of each goal next to each other (the peer, then the production
tier; the empty app, then all tiers together), so load from other work on the machine falls on both
sides alike. Prints every run, the medians over --runs rounds and the ratios of medians. The goals
(DESIGN.md, issue 13): the production tier within 2.5x the TypeScript peer in ../shared/peer/, and
all tiers together within 2.5x the empty app. Figures are printed, never asserted.

    .venv/bin/python benchmarks/synth.py [--runs 5]

`make bench` installs the peer's npm dependencies first (`make peer`, into benchmarks/peer/).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PEER_SCRIPT = REPO.parent / "shared" / "peer" / "peer.js"
PEER_MODULES = REPO / "benchmarks" / "peer" / "node_modules"
GOAL = 2.5
DEFAULT_RUNS = 5

EMPTY_APP = """
import aws_cdk as cdk
app = cdk.App(outdir={outdir!r}, builtin_cloud_formation_validation={validation})
cdk.Stack(app, "Empty")
app.synth()
"""

TIER_APP = """
import json, sys
sys.path.insert(0, {repo!r})
from gpufarm.app import build_app, select_tiers
context = json.loads((__import__("pathlib").Path({repo!r}) / "cdk.json").read_text())["context"]
configs = select_tiers({selection!r})
build_app(configs, context=context, outdir={outdir!r}).synth()
"""


@dataclass(frozen=True)
class Measurement:
    """One process to time: argv (and extra environment) with __OUTDIR__ standing for a fresh
    temporary output folder."""

    label: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1")
    env["PATH"] = f"{REPO / '.venv' / 'bin'}:{env.get('PATH', '')}"
    env.update(extra or {})
    return env


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(list(argv), check=True, env=_env(env), cwd=REPO, capture_output=True)
    return time.perf_counter() - start


def _time(code: str) -> float:
    return _run([sys.executable, "-c", code])


def time_once(measurement: Measurement) -> float:
    """Wall time of one fresh process, writing into a new temporary folder."""
    with tempfile.TemporaryDirectory() as outdir:
        argv = [arg.replace("__OUTDIR__", outdir) for arg in measurement.argv]
        env = {key: value.replace("__OUTDIR__", outdir) for key, value in measurement.env.items()}
        return _run(argv, env)


def alternate(
    measurements: Sequence[Measurement], runs: int, timer: Callable[[Measurement], float] = time_once
) -> dict[str, list[float]]:
    """Times every measurement once per round, in the given order, for `runs` rounds."""
    times: dict[str, list[float]] = {m.label: [] for m in measurements}
    for _ in range(runs):
        for measurement in measurements:
            times[measurement.label].append(timer(measurement))
    return times


def ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """median(numerator) / median(denominator): the figure each goal is judged on."""
    return statistics.median(numerator) / statistics.median(denominator)


def warm_bytecode_cache() -> None:
    """Import the app once, untimed, letting Python write gpufarm's bytecode (__pycache__).

    With PYTHONDONTWRITEBYTECODE set (some shells and CI images set it) every run would compile
    gpufarm's ~90 modules from source again (about 0.7 s on a 2-core machine), a cost an
    installed package or a second `cdk synth` does not pay; aws-cdk-lib's modules are compiled
    when pip installs them. Python reads existing bytecode even with that variable set.
    """
    env = {key: value for key, value in _env().items() if key != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(
        [sys.executable, "-c", "import gpufarm.app"], check=True, env=env, cwd=REPO, capture_output=True
    )


def _python(label: str, code: str) -> Measurement:
    return Measurement(label, (sys.executable, "-c", code))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1; give at least one run")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--runs",
        type=_positive,
        default=DEFAULT_RUNS,
        help=f"rounds; every measurement runs once per round, medians reported (default {DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--peer-script", type=Path, default=PEER_SCRIPT, help="the TypeScript peer (default: %(default)s)"
    )
    parser.add_argument(
        "--peer-modules",
        type=Path,
        default=PEER_MODULES,
        help="node_modules with the peer's dependencies, from `make peer` (default: %(default)s)",
    )
    return parser.parse_args(argv)


SIZE_APP = """
import json, sys, yaml
sys.path.insert(0, {repo!r})
from gpufarm.app import build_app
from gpufarm.config import build_tier, load_preset, merge
from gpufarm.config.loader import PRESET_DIR
context = json.loads((__import__("pathlib").Path({repo!r}) / "cdk.json").read_text())["context"]
document = yaml.safe_load((PRESET_DIR / "enterprise.yaml").read_text())
models = list(document["models"])
for i in range(len(models), 8):
    models.append({{"name": f"batch-{{i}}", "weights": f"s3://gpufarm-enterprise-models/batch/model-{{i}}/",
                   "weights_gib": 16, "capacity_class": "background", "gpus": 1, "replicas": 1,
                   "critical": False, "bedrock": "none"}})
configs = [load_preset(n) for n in ("poc", "production", "enterprise")]
configs.append(build_tier(merge(document, {{"name": "enterprise8", "models": models}})))
build_app(configs, context=context, outdir={outdir!r}).synth()
"""

RESOURCE_LIMIT = 500
TEMPLATE_BYTES_LIMIT = 1_000_000


def _sizes() -> list[tuple[str, int, int]]:
    """(stack, resources, template bytes) of every preset and of enterprise with 8 models."""
    with tempfile.TemporaryDirectory() as outdir:
        _time(SIZE_APP.format(repo=str(REPO), outdir=outdir))
        rows = []
        for path in sorted(Path(outdir).glob("*.template.json")):
            rows.append(
                (
                    path.name.removesuffix(".template.json"),
                    len(json.loads(path.read_text())["Resources"]),
                    path.stat().st_size,
                )
            )
        return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for path, how in (
        (args.peer_script, "the shared folder beside the repository"),
        (args.peer_modules, "`make peer`"),
    ):
        if not path.exists():
            print(f"benchmarks/synth.py: {path} does not exist (it comes from {how})", file=sys.stderr)
            return 2

    sys.path.insert(0, str(REPO))
    from gpufarm.config import preset_names

    # The empty app as aws-cdk-lib ships it (its built-in template validation on) is DESIGN.md's
    # measure; the same app with that validation off, as gpufarm synthesizes, is the like-for-like
    # start-up cost (ADR 0028). Both are printed; the goal is checked against the first.
    # The peer resolves its packages from --peer-modules through NODE_PATH (it requires plain
    # CommonJS names) and writes where CDK_OUTDIR points, as its README describes.
    peer = Measurement(
        "TypeScript peer",
        ("node", str(args.peer_script)),
        {"NODE_PATH": str(args.peer_modules), "CDK_OUTDIR": "__OUTDIR__"},
    )

    def tier(selection: dict[str, str]) -> str:
        return TIER_APP.format(repo=str(REPO), selection=selection, outdir="__OUTDIR__")

    measurements = [
        peer,
        _python("tier production", tier({"tier": "production"})),
        _python("empty CDK app", EMPTY_APP.format(outdir="__OUTDIR__", validation=True)),
        _python("all tiers together", tier({})),
        _python("empty, no validation", EMPTY_APP.format(outdir="__OUTDIR__", validation=False)),
        *(_python(f"tier {name}", tier({"tier": name})) for name in preset_names() if name != "production"),
    ]
    warm_bytecode_cache()
    times = alternate(measurements, args.runs)
    empty, bare = times["empty CDK app"], times["empty, no validation"]

    print(
        f"synth wall time, {args.runs} rounds of fresh processes, each round in this order "
        "(cdk-nag gate included)"
    )
    print("the machine may be shared: absolute seconds move with its load; compare ratios within one run")
    print("gpufarm's bytecode cache was written first (untimed), as an installed package has it")
    print(f"{'what':<24}{'median':>8}{'min':>8}{'max':>8}{'x empty':>9}{'x no-val.':>11}  runs (s)")
    for label, runs in times.items():
        print(
            f"{label:<24}{statistics.median(runs):>8.2f}{min(runs):>8.2f}{max(runs):>8.2f}"
            f"{ratio_of_medians(runs, empty):>9.2f}{ratio_of_medians(runs, bare):>11.2f}  "
            + " ".join(f"{t:.2f}" for t in runs)
        )
    for label, numerator, denominator, base in (
        ("production tier", times["tier production"], times["TypeScript peer"], "the TypeScript peer"),
        ("all tiers", times["all tiers together"], empty, "the empty app"),
        ("all tiers", times["all tiers together"], bare, "the empty app without validation"),
    ):
        ratio = ratio_of_medians(numerator, denominator)
        goal = "met" if ratio <= GOAL else "NOT met"
        print(f"goal: {label} <= {GOAL}x {base}: {goal} ({ratio:.2f}x, ratio of medians)")

    print()
    print("template size (CloudFormation limits: 500 resources, 1 MB; goal: <= 60% of each)")
    print(f"{'stack':<28}{'resources':>10}{'% of 500':>10}{'KB':>10}{'% of 1 MB':>11}")
    for stack, count, size in _sizes():
        print(
            f"{stack:<28}{count:>10}{100 * count / RESOURCE_LIMIT:>9.0f}%"
            f"{size / 1000:>10.0f}{100 * size / TEMPLATE_BYTES_LIMIT:>10.0f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
