"""benchmarks/gateway.py: the arithmetic, bounds and command lines its figures rest on (not timings)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gateway.py"


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_gateway", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_gateway"] = module  # dataclasses look their module up while building the class
    spec.loader.exec_module(module)
    yield module
    del sys.modules["bench_gateway"]


def test_percentiles_are_the_median_and_the_99th_of_100(bench) -> None:  # type: ignore[no-untyped-def]
    seconds = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    p50, p99 = bench.percentiles(seconds)
    assert p50 == pytest.approx(50.5)
    assert p99 == pytest.approx(99.01)


def test_every_stream_sends_at_least_two_requests(bench) -> None:  # type: ignore[no-untyped-def]
    assert [bench.requests_for(c, 100) for c in (1, 16, 64, 256)] == [100, 100, 128, 512]


def test_a_setting_replaces_flags_adds_new_ones_and_overrides_the_environment(bench) -> None:  # type: ignore[no-untyped-def]
    argv = ["litellm", "--config", "c.yaml", "--num_workers", "1", "--telemetry", "False"]
    out, env = bench.apply_setting(argv, {"LITELLM_LOG": "INFO", "HOME": "/tmp"}, bench.SETTINGS["uvicorn-2"])
    assert out == [*argv[:4], "2", "--telemetry", "False", "--timeout_worker_healthcheck", "180"]
    assert env == {"LITELLM_LOG": "INFO", "HOME": "/tmp"}
    out, env = bench.apply_setting(argv, {"LITELLM_LOG": "INFO"}, bench.SETTINGS["granian-1"])
    assert out == [*argv, "--run_granian"]
    assert env == {"LITELLM_LOG": "WARNING"}


def test_the_deployed_setting_changes_nothing(bench) -> None:  # type: ignore[no-untyped-def]
    argv = ["litellm", "--num_workers", "1"]
    assert bench.apply_setting(argv, {"A": "1"}, bench.SETTINGS["deployed"]) == (argv, {"A": "1"})


def test_settings_use_only_flags_of_the_pinned_litellm(bench) -> None:  # type: ignore[no-untyped-def]
    reference = Path(__file__).resolve().parents[3] / "shared" / "upstream-ref" / "litellm@1.102.1.json"
    if not reference.exists():
        pytest.skip(f"{reference} not found (../shared is absent)")
    known = set(json.loads(reference.read_text(encoding="utf-8"))["cli_flags"])
    used = {flag for setting in bench.SETTINGS.values() for flag in setting.flags}
    assert used <= known, sorted(used - known)


def test_content_chunks_count_the_events_with_content_only(bench) -> None:  # type: ignore[no-untyped-def]
    def event(delta: dict[str, str]) -> bytes:
        return b"data: " + json.dumps({"choices": [{"delta": delta}]}).encode()

    body = b"\n\n".join(
        [
            event({"role": "assistant", "content": ""}),
            event({"content": "a"}),
            event({"content": "b"}),
            event({}),
        ]
    )
    assert bench._content_chunks(body + b"\n\ndata: [DONE]\n\n") == 2


def test_chunked_responses_are_read_whole(bench) -> None:  # type: ignore[no-untyped-def]
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Litellm-Model-Id: vllm-m\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    )

    async def read() -> tuple[int, dict[str, str], bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        result: tuple[int, dict[str, str], bytes] = await bench._read_response(reader)
        return result

    status, headers, body = asyncio.run(read())
    assert (status, headers["x-litellm-model-id"], body) == (200, "vllm-m", b"hello world")


def test_rows_divide_completions_by_the_wall_time_from_first_send_to_last_answer(bench) -> None:  # type: ignore[no-untyped-def]
    # Two requests over 2 s of wall time, 3 and 5 chunks: 1 request/s, 4 chunks/s.
    row = bench._row("stream", 2, "gateway", [(10.0, 10.5, 3), (11.0, 12.0, 5)])
    assert (row.requests, row.requests_per_second, row.chunks_per_second) == (2, 1.0, 4.0)
    assert row.p50_ms == pytest.approx(750.0)
