"""benchmarks/synth.py: the arithmetic and the run order the printed figures rest on (not timings)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "synth.py"


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_synth", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_synth"] = module  # dataclasses look their module up while building the class
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_synth"]


def test_ratio_of_medians_divides_the_medians_not_the_means(bench) -> None:  # type: ignore[no-untyped-def]
    # Medians 4.0 and 2.0; the means (5.0 and 2.0) would give 2.5.
    assert bench.ratio_of_medians([3.0, 4.0, 8.0], [1.0, 2.0, 3.0]) == 2.0


def test_ratio_of_medians_of_an_even_count_takes_the_middle_pair(bench) -> None:  # type: ignore[no-untyped-def]
    assert bench.ratio_of_medians([1.0, 2.0, 4.0, 10.0], [1.5, 1.5]) == 2.0


def test_alternate_runs_the_measurements_in_turn_each_round(bench) -> None:  # type: ignore[no-untyped-def]
    peer = bench.Measurement("peer", ("node", "peer.js"))
    production = bench.Measurement("production", ("python", "-c", "pass"))
    order: list[str] = []

    def timer(measurement) -> float:  # type: ignore[no-untyped-def]
        order.append(measurement.label)
        return float(len(order))

    times = bench.alternate([peer, production], 3, timer)

    assert order == ["peer", "production", "peer", "production", "peer", "production"]
    assert times == {"peer": [1.0, 3.0, 5.0], "production": [2.0, 4.0, 6.0]}


def test_time_once_gives_each_run_its_own_output_folder(bench, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    calls: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(bench, "_run", lambda argv, env: calls.append((argv, env)) or 0.5)
    measurement = bench.Measurement("peer", ("node", "__OUTDIR__/x"), {"CDK_OUTDIR": "__OUTDIR__"})

    assert bench.time_once(measurement) == 0.5
    assert bench.time_once(measurement) == 0.5

    (argv1, env1), (_, env2) = calls
    assert argv1 == ["node", env1["CDK_OUTDIR"] + "/x"]
    assert "__OUTDIR__" not in env1["CDK_OUTDIR"]
    assert env1["CDK_OUTDIR"] != env2["CDK_OUTDIR"]


def test_parse_args_defaults(bench) -> None:  # type: ignore[no-untyped-def]
    args = bench.parse_args([])
    assert args.runs == 5
    assert args.peer_script == SCRIPT.parents[2] / "shared" / "peer" / "peer.js"
    assert args.peer_modules == SCRIPT.parent / "peer" / "node_modules"


def test_parse_args_takes_runs_and_peer_paths(bench) -> None:  # type: ignore[no-untyped-def]
    args = bench.parse_args(["--runs", "9", "--peer-script", "/p/peer.js", "--peer-modules", "/p/nm"])
    assert (args.runs, args.peer_script, args.peer_modules) == (9, Path("/p/peer.js"), Path("/p/nm"))


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "argument --runs: 0 is below 1; give at least one run"),
        ("-2", "argument --runs: -2 is below 1; give at least one run"),
        ("three", "argument --runs: 'three' is not a whole number"),
    ],
)
def test_parse_args_rejects_a_run_count_below_one(bench, capsys, value, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--runs", value])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().endswith(message)


def test_main_stops_with_status_2_when_the_peer_is_not_installed(bench, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "node_modules"
    assert bench.main(["--peer-script", str(SCRIPT), "--peer-modules", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"benchmarks/synth.py: {missing} does not exist (it comes from `make peer`)\n"
    )


def test_warm_bytecode_cache_lets_python_write_bytecode(bench, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    seen: list[tuple[list[str], dict[str, str]]] = []
    monkeypatch.setattr(bench.subprocess, "run", lambda argv, **kwargs: seen.append((argv, kwargs["env"])))

    bench.warm_bytecode_cache()

    [(argv, env)] = seen
    assert argv[1:] == ["-c", "import gpufarm.app"]
    assert "PYTHONDONTWRITEBYTECODE" not in env
