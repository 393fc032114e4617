#!/usr/bin/env python3
"""Where one tier's synth time goes: phases, jsii round trips per gpufarm construct, and cProfile.

Synthesizes one preset (default: production) in this process, as `cdk synth` runs the app, and
prints:

- the wall time of each phase (importing aws-cdk-lib, the aws_cdk submodules and other jsii
  libraries gpufarm uses, gpufarm itself; reading the config; building the construct tree;
  synthesizing with the compliance gate) and the jsii round trips in each;
- the jsii round trips by kind (create, invoke, get, set, callbacks completed, ...) and the time
  spent waiting on them (Node's work plus the pipe);
- the requests that took longest (by kind and target: class, method or property);
- the round trips and their time by gpufarm construct (the innermost gpufarm object whose
  `__init__` is on the stack) and by gpufarm function (the innermost gpufarm frame).

Tables are sorted by time spent. With --cprofile it also prints the gpufarm functions with the
highest cumulative time from importing gpufarm to the end of synth.

Round trips are counted by wrapping the jsii Python runtime's one request channel,
`jsii._kernel.providers.process._NodeProcess.send` (jsii 1.142.0: every kernel request, callback
completions included, is written to the Node process there). The attribution walks the Python
stack on each call; its own cost is measured and subtracted from the phase times it inflates.

    .venv/bin/python benchmarks/synth_profile.py [--tier production] [--top 15] [--cprofile]
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import io
import json
import pstats
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PACKAGE = str(REPO / "gpufarm") + "/"


class JsiiCounter:
    """Counts and times every request the jsii runtime sends to its Node process."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.by_construct: Counter[str] = Counter()
        self.construct_seconds: defaultdict[str, float] = defaultdict(float)
        self.by_function: Counter[str] = Counter()
        self.function_seconds: defaultdict[str, float] = defaultdict(float)
        self.by_request: Counter[str] = Counter()
        self.request_seconds: defaultdict[str, float] = defaultdict(float)
        self.overhead = 0.0
        self.total = 0

    def install(self) -> None:
        from jsii._kernel.providers import process

        original: Callable[..., Any] = process._NodeProcess.send
        counter = self

        def send(node: Any, request: Any, response_type: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(node, request, response_type)
            finally:
                elapsed = time.perf_counter() - start
                counter._record(request, elapsed, sys._getframe(1))
                counter.overhead += time.perf_counter() - start - elapsed

        process._NodeProcess.send = send  # type: ignore[method-assign]

    def _record(self, request: Any, elapsed: float, frame: FrameType | None) -> None:
        self.total += 1
        kind = type(request).__name__.removesuffix("Request")
        self.calls[kind] += 1
        self.seconds[kind] += elapsed
        target = getattr(request, "fqn", None) or getattr(request, "name", None) or ""
        member = getattr(request, "method", None) or getattr(request, "property", None)
        what = f"{kind} {target}{'.' if target and member else ''}{member or ''}"
        self.by_request[what] += 1
        self.request_seconds[what] += elapsed
        function = construct = "(outside gpufarm)"
        while frame is not None:
            code = frame.f_code
            if code.co_filename.startswith(PACKAGE):
                if function == "(outside gpufarm)":
                    module = code.co_filename[len(PACKAGE) :].removesuffix(".py").replace("/", ".")
                    function = f"{module}:{code.co_qualname}"
                if code.co_name == "__init__":
                    owner = frame.f_locals.get("self")
                    if owner is not None and type(owner).__module__.startswith("gpufarm."):
                        construct = type(owner).__name__
                        break
            frame = frame.f_back
        self.by_function[function] += 1
        self.function_seconds[function] += elapsed
        self.by_construct[construct] += 1
        self.construct_seconds[construct] += elapsed


def _imported_by_gpufarm() -> tuple[list[str], list[str]]:
    """The aws_cdk submodules and the other jsii libraries importing gpufarm.app loads beyond
    `import aws_cdk`, found in a separate process so that this one can time them one by one."""
    code = (
        "import sys, json, aws_cdk; before = set(sys.modules); import gpufarm.app; "
        "print(json.dumps(sorted(set(sys.modules) - before)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO
    ).stdout
    loaded = json.loads(out)
    bindings = [m for m in loaded if m.startswith("aws_cdk.") and m.count(".") == 1]
    libraries = sorted({m.split(".")[0] for m in loaded} & _JSII_LIBRARIES)
    return bindings, libraries


# Python packages that are jsii bindings (each loads its JavaScript assembly into Node on import).
_JSII_LIBRARIES = {"cdk_nag", "constructs"}


def _table(title: str, counts: Counter[str], seconds: dict[str, float], top: int) -> None:
    """The `top` keys by time spent, with their call counts."""
    print(title)
    print(f"{'':<72}{'calls':>8}{'seconds':>9}")
    for key in sorted(counts, key=lambda key: (-seconds[key], key))[:top]:
        print(f"  {key:<70}{counts[key]:>8}{seconds[key]:>9.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tier", default="production", help="preset to synthesize (default %(default)s)")
    parser.add_argument("--top", type=int, default=15, help="rows per table (default %(default)s)")
    parser.add_argument(
        "--cprofile",
        action="store_true",
        help="also run cProfile from the gpufarm import to the end of synth",
    )
    args = parser.parse_args()

    counter = JsiiCounter()
    counter.install()
    phases: list[tuple[str, float, int, float]] = []

    def phase(name: str, started: float, calls_before: int, overhead_before: float) -> None:
        overhead = counter.overhead - overhead_before
        phases.append(
            (name, time.perf_counter() - started - overhead, counter.total - calls_before, overhead)
        )

    sys.path.insert(0, str(REPO))
    bindings, libraries = _imported_by_gpufarm()
    started, calls, overhead = time.perf_counter(), counter.total, counter.overhead
    import aws_cdk  # noqa: F401  (the floor: jsii start-up and aws-cdk-lib's load)

    phase("import aws_cdk (jsii start-up, aws-cdk-lib load)", started, calls, overhead)
    started, calls, overhead = time.perf_counter(), counter.total, counter.overhead
    for name in bindings:
        importlib.import_module(name)
    phase(f"import the {len(bindings)} aws_cdk submodules gpufarm uses", started, calls, overhead)
    started, calls, overhead = time.perf_counter(), counter.total, counter.overhead
    for name in libraries:
        importlib.import_module(name)
    phase(f"import other jsii libraries ({', '.join(libraries)})", started, calls, overhead)
    profiler = cProfile.Profile() if args.cprofile else None
    if profiler:
        profiler.enable()
    started, calls, overhead = time.perf_counter(), counter.total, counter.overhead
    from gpufarm.app import build_app, select_tiers

    phase("import gpufarm's own modules (pydantic, PyYAML, ...)", started, calls, overhead)
    started, calls, overhead = time.perf_counter(), counter.total, counter.overhead
    context = json.loads((REPO / "cdk.json").read_text())["context"]
    configs = select_tiers({"tier": args.tier})
    phase("read and validate the tier config", started, calls, overhead)

    with tempfile.TemporaryDirectory() as outdir:
        started, calls, overhead = time.perf_counter(), counter.total, counter.overhead
        app = build_app(configs, context=context, outdir=outdir)
        phase("build the construct tree (GpuFarmStack)", started, calls, overhead)
        started, calls, overhead = time.perf_counter(), counter.total, counter.overhead
        app.synth()
        phase("synth (aspects, cdk-nag gate, templates)", started, calls, overhead)
        if profiler:
            profiler.disable()
        resources = sum(
            len(json.loads(path.read_text())["Resources"]) for path in Path(outdir).glob("*.template.json")
        )

    total = sum(seconds for _, seconds, _, _ in phases)
    print(f"tier {args.tier}: {resources} resources, {counter.total} jsii round trips, in-process")
    print("the machine may be shared: seconds move with its load; the call counts do not")
    print(f"{'phase':<52}{'seconds':>9}{'jsii calls':>12}")
    for name, seconds, count, _ in phases:
        print(f"  {name:<50}{seconds:>9.2f}{count:>12}")
    print(f"  {'total (counting overhead removed)':<50}{total:>9.2f}{counter.total:>12}")
    print(f"  counting overhead removed: {counter.overhead:.2f} s")
    print(f"  time waiting on jsii round trips: {sum(counter.seconds.values()):.2f} s")
    print()
    _table("jsii round trips by kind", counter.calls, counter.seconds, args.top)
    print()
    _table(
        "jsii requests by target (class, method or property)",
        counter.by_request,
        counter.request_seconds,
        args.top,
    )
    print()
    _table(
        "jsii round trips by gpufarm construct (innermost __init__)",
        counter.by_construct,
        counter.construct_seconds,
        args.top,
    )
    print()
    _table(
        "jsii round trips by gpufarm function (innermost frame)",
        counter.by_function,
        counter.function_seconds,
        args.top,
    )

    if profiler:
        print()
        print("cProfile: gpufarm functions by cumulative time (import, config, build and synth)")
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(str(REPO / "gpufarm"), args.top)
        print(out.getvalue().split("   ncalls", 1)[-1].join(["   ncalls", ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
