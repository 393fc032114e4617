#!/usr/bin/env python3
"""What the fallback gateway costs under concurrency: the vLLM stand-in direct against through LiteLLM.

Starts the same processes as the end-to-end test (tests/e2e): the vLLM and Bedrock stand-ins and
the real LiteLLM proxy from `.venv-gateway` with the poc tier's generated config and command
line, hosts and ports on loopback. For each proxy setting (`--settings`: the worker count and
server LiteLLM 1.102.1 offers, the log level) and each concurrency (`--concurrency`, default
1, 16, 64 and 256 streams, each its own kept-alive connection), it sends a bounded number of chat
completions (`--requests`, at least two per stream) first to the stand-in and then through the
gateway, JSON and streamed, and prints per row:

* p50/p99 of the time to the last byte, and what the gateway adds to the direct path's;
* the throughput: completed requests per second and, streamed, content chunks per second (the
  stand-in sends one chunk per token, so chunks/s is the gateway's token ceiling);
* the gateway's CPU time per request (all its processes, from /proc), which the sizing in
  `gpufarm/core/gateway_sizing.py` reads through the figures recorded in benchmarks/README.md.

The stand-in answers at once, so every stream keeps the gateway busy: at concurrency c, the
gateway runs at its ceiling and the added latency is its queue. The machine's load average is
printed before and after each setting: on a shared machine read the ratios, not the seconds.
Figures are printed, never asserted.

Beside the gateway, each row has the hot path (docs/decisions/0051-gateway-off-the-hot-path.md):
the same load sent to the stand-in as a client of the model's route sends it, with `httpx` and
`gpufarm.client.AsyncFallbackTransport` (route: the stand-in, gateway: the proxy), and what the
transport adds at p99 over the same `httpx` client without it. The stand-in never refuses, so no
request goes to the gateway (a re-sent one fails the run).

    .venv/bin/python benchmarks/gateway.py [--concurrency 1,16,64,256] [--requests 100]
        [--settings uvicorn-1,uvicorn-1-quiet,uvicorn-2,granian-1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpufarm.k8s.gateway import BACKEND_HEADER

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Setting:
    """One way to run the proxy: extra command-line flags and environment over gpufarm's own."""

    label: str
    summary: str
    flags: dict[str, str | None] = field(default_factory=dict)
    """Flags to set (`None`: a flag without a value); `--num_workers` replaces gpufarm's."""
    env: dict[str, str] = field(default_factory=dict)


SETTINGS = {
    s.label: s
    for s in (
        Setting("deployed", "the pod's command line and environment as gpufarm generates them"),
        Setting(
            "uvicorn-1",
            "uvicorn with uvloop, 1 worker, per-request INFO log",
            {"--num_workers": "1"},
            {"LITELLM_LOG": "INFO"},
        ),
        Setting(
            "uvicorn-1-quiet",
            "uvicorn with uvloop, 1 worker, WARNING log",
            {"--num_workers": "1"},
            {"LITELLM_LOG": "WARNING"},
        ),
        Setting(
            "uvicorn-2",
            "uvicorn with uvloop, 2 workers, INFO log",
            {"--num_workers": "2", "--timeout_worker_healthcheck": "180"},
            {"LITELLM_LOG": "INFO"},
        ),
        Setting(
            "granian-1",
            "granian, 1 worker, WARNING log",
            {"--run_granian": None, "--num_workers": "1"},
            {"LITELLM_LOG": "WARNING"},
        ),
        Setting(
            "granian-2",
            "granian, 2 workers, WARNING log",
            {"--run_granian": None, "--num_workers": "2"},
            {"LITELLM_LOG": "WARNING"},
        ),
    )
}
"""Proxy settings LiteLLM 1.102.1 supports (`litellm.proxy.proxy_cli`; ../shared/upstream-ref/
litellm@1.102.1.json `cli_flags`). Uvicorn always runs on uvloop there (`_get_loop_type` returns
'uvloop' off Windows): there is no flag to choose the event loop, so uvloop is not a setting."""

DEFAULT_SETTINGS = ("deployed", "uvicorn-1-quiet", "uvicorn-2", "granian-1")


@dataclass
class Row:
    mode: str
    concurrency: int
    path: str
    requests: int
    p50_ms: float
    p99_ms: float
    requests_per_second: float
    chunks_per_second: float
    cpu_ms_per_request: float | None = None
    hot_p50_ms: float | None = None
    """p50 on the hot path: httpx with the fallback transport, straight to the stand-in."""
    hot_p99_ms: float | None = None
    httpx_p50_ms: float | None = None
    """p50 of plain httpx (no fallback transport) to the same stand-in: the client library's own cost."""
    httpx_p99_ms: float | None = None


def percentiles(seconds: list[float]) -> tuple[float, float]:
    """(p50, p99) in milliseconds (inclusive method: p99 of 100 samples is the 99th value)."""
    cuts = statistics.quantiles(seconds, n=100, method="inclusive")
    return statistics.median(seconds) * 1000, cuts[98] * 1000


def requests_for(concurrency: int, requests: int) -> int:
    """The measured requests at a concurrency: `requests`, but at least two per stream."""
    return max(requests, 2 * concurrency)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                break
            body += await reader.readexactly(size + 2)
            del body[-2:]
        return status, headers, bytes(body)
    return status, headers, await reader.readexactly(int(headers.get("content-length", "0")))


def _content_chunks(body: bytes) -> int:
    """Server-sent events of a stream that carry content (one per token from the stand-in)."""
    chunks = 0
    for line in body.split(b"\n"):
        if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
            continue
        for choice in json.loads(line[5:]).get("choices", []):
            if (choice.get("delta") or {}).get("content"):
                chunks += 1
    return chunks


async def _stream_worker(
    port: int,
    body: bytes,
    count: list[int],
    results: list[tuple[float, float, int]],
    errors: list[str],
    expect_backend: str | None,
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    try:
        while count[0] > 0:
            count[0] -= 1
            sent = time.monotonic()
            writer.write(request)
            status, headers, payload = await _read_response(reader)
            received = time.monotonic()
            backend = headers.get(BACKEND_HEADER)
            if status != 200 or (expect_backend is not None and backend != expect_backend):
                errors.append(f"status {status}, backend {backend}: {payload[:200]!r}")
                continue
            stream = b'"stream": true' in body
            results.append((sent, received, _content_chunks(payload) if stream else 0))
    finally:
        writer.close()


async def _run(
    port: int, model: str, *, stream: bool, concurrency: int, requests: int, expect_backend: str | None
) -> tuple[list[tuple[float, float, int]], list[str]]:
    request: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": "Which backend?"}]}
    if stream:
        request["stream"] = True
    body = json.dumps(request).encode()
    count = [requests]
    results: list[tuple[float, float, int]] = []
    errors: list[str] = []
    await asyncio.gather(
        *(_stream_worker(port, body, count, results, errors, expect_backend) for _ in range(concurrency))
    )
    return results, errors


def measure(
    port: int, model: str, *, stream: bool, concurrency: int, requests: int, expect_backend: str | None
) -> tuple[list[tuple[float, float, int]], list[str]]:
    """Warm every connection up (one request each, unmeasured), then send `requests` over them."""
    asyncio.run(
        _run(
            port,
            model,
            stream=stream,
            concurrency=concurrency,
            requests=concurrency,
            expect_backend=expect_backend,
        )
    )
    return asyncio.run(
        _run(
            port,
            model,
            stream=stream,
            concurrency=concurrency,
            requests=requests,
            expect_backend=expect_backend,
        )
    )


async def _run_httpx(
    base_url: str, gateway_url: str | None, body: bytes, *, stream: bool, concurrency: int, requests: int
) -> tuple[list[tuple[float, float, int]], list[str]]:
    """`requests` chat completions over `concurrency` streams with one httpx client; with a
    `gateway_url`, through `AsyncFallbackTransport` (route `base_url`), else plain httpx."""
    import httpx

    from gpufarm.client import FALLBACK_HEADER, AsyncFallbackTransport

    unlimited = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    plain = httpx.AsyncHTTPTransport(limits=unlimited)
    transport: httpx.AsyncBaseTransport = (
        plain if gateway_url is None else AsyncFallbackTransport(base_url, gateway_url, transport=plain)
    )
    results: list[tuple[float, float, int]] = []
    errors: list[str] = []
    count = [requests]
    headers = {"Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=base_url, transport=transport, timeout=600) as client:

        async def worker() -> None:
            while count[0] > 0:
                count[0] -= 1
                sent = time.monotonic()
                response = await client.post("/chat/completions", content=body, headers=headers)
                received = time.monotonic()
                if response.status_code != 200 or FALLBACK_HEADER in response.headers:
                    errors.append(
                        f"status {response.status_code}, re-sent: {response.headers.get(FALLBACK_HEADER)}"
                    )
                    continue
                results.append((sent, received, _content_chunks(response.content) if stream else 0))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, errors


def measure_httpx(
    base_url: str, gateway_url: str | None, model: str, *, stream: bool, concurrency: int, requests: int
) -> tuple[list[tuple[float, float, int]], list[str]]:
    """:func:`_run_httpx` after the same unmeasured warm-up as :func:`measure` (one request per stream)."""
    request: dict[str, object] = {"model": model, "messages": [{"role": "user", "content": "Which backend?"}]}
    if stream:
        request["stream"] = True
    body = json.dumps(request).encode()

    async def both() -> tuple[list[tuple[float, float, int]], list[str]]:
        await _run_httpx(
            base_url, gateway_url, body, stream=stream, concurrency=concurrency, requests=concurrency
        )
        return await _run_httpx(
            base_url, gateway_url, body, stream=stream, concurrency=concurrency, requests=requests
        )

    return asyncio.run(both())


def process_group_cpu_seconds(pgid: int) -> float:
    """User plus system CPU time of every live process in group `pgid` (Linux /proc)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state, ppid, pgrp, ... utime is field 14, stime 15 (proc(5)).
        if int(fields[2]) == pgid:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def _row(mode: str, concurrency: int, path: str, results: list[tuple[float, float, int]]) -> Row:
    p50, p99 = percentiles([r - s for s, r, _ in results])
    wall = max(r for _, r, _ in results) - min(s for s, _, _ in results)
    return Row(
        mode,
        concurrency,
        path,
        len(results),
        p50,
        p99,
        len(results) / wall,
        sum(c for _, _, c in results) / wall,
    )


def load() -> str:
    """The machine's 1, 5 and 15 minute load averages and its CPU count."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def apply_setting(argv: list[str], env: dict[str, str], setting: Setting) -> tuple[list[str], dict[str, str]]:
    """The proxy's argv and environment with `setting`'s flags and variables over them."""
    out = list(argv)
    for flag, value in setting.flags.items():
        if flag in out:
            index = out.index(flag)
            if value is None:
                continue
            out[index + 1] = value
        else:
            out += [flag] if value is None else [flag, value]
    return out, {**env, **setting.env}


def _measure_rows(
    gateway: Any, stand_in: Any, model: str, backend: str, *, mode: str, levels: list[int], requests: int
) -> list[Row]:
    """Direct then through the gateway, per concurrency level; raises RuntimeError on a failed request."""
    assert gateway._popen is not None
    pgid = gateway._popen.pid
    stream = mode != "json"
    rows = []
    for c in levels:
        n = requests_for(c, requests)
        direct, errors = measure(
            stand_in.port, model, stream=stream, concurrency=c, requests=n, expect_backend=None
        )
        if errors:
            raise RuntimeError(f"direct, {mode}, c={c}: {len(errors)} failed, first: {errors[0]}")
        cpu_before = process_group_cpu_seconds(pgid)
        through, errors = measure(
            gateway.port, model, stream=stream, concurrency=c, requests=n, expect_backend=backend
        )
        cpu = process_group_cpu_seconds(pgid) - cpu_before
        if errors:
            raise RuntimeError(f"gateway, {mode}, c={c}: {len(errors)} failed, first: {errors[0]}")
        route = f"{stand_in.base_url}/v1"
        hot, hot_errors = measure_httpx(
            route, f"http://127.0.0.1:{gateway.port}/v1", model, stream=stream, concurrency=c, requests=n
        )
        plain, plain_errors = measure_httpx(route, None, model, stream=stream, concurrency=c, requests=n)
        if hot_errors or plain_errors:
            first = (hot_errors or plain_errors)[0]
            raise RuntimeError(
                f"hot path, {mode}, c={c}: {len(hot_errors + plain_errors)} failed, first: {first}"
            )
        rows.append(_row(mode, c, "direct", direct))
        row = _row(mode, c, "gateway", through)
        # The warm-up ran too: c requests on top of the measured n.
        row.cpu_ms_per_request = cpu * 1000 / (n + c)
        hot_row, plain_row = _row(mode, c, "hot", hot), _row(mode, c, "httpx", plain)
        row.hot_p50_ms, row.hot_p99_ms = hot_row.p50_ms, hot_row.p99_ms
        row.httpx_p50_ms, row.httpx_p99_ms = plain_row.p50_ms, plain_row.p99_ms
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,16,64,256", help="concurrent streams, comma-separated")
    parser.add_argument(
        "--requests", type=int, default=100, help="measured requests per row (at least 2 per stream)"
    )
    parser.add_argument(
        "--settings",
        default=",".join(DEFAULT_SETTINGS),
        help=f"proxy settings, comma-separated, of: {', '.join(SETTINGS)}",
    )
    parser.add_argument(
        "--modes", default="json,stream,long", help="of json, stream (3 chunks), long (--long-chunks)"
    )
    parser.add_argument(
        "--long-chunks", type=int, default=100, help="content chunks (tokens) per long stream"
    )
    parser.add_argument(
        "--long-concurrency", default="16,64", help="concurrent long streams, comma-separated"
    )
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    long_levels = [int(c) for c in args.long_concurrency.split(",")]
    settings = [SETTINGS[s] for s in args.settings.split(",")]
    modes = args.modes.split(",")

    sys.path.insert(0, str(REPO))
    import pytest

    from gpufarm.config import load_preset
    from gpufarm.k8s.gateway import vllm_deployment_id
    from tests.e2e.conftest import Gateway, StandIn, installed_version, litellm_executable

    try:
        litellm = litellm_executable()
    except pytest.fail.Exception as exc:
        print(exc.msg, file=sys.stderr)
        return 1

    tier = load_preset("poc")
    model = tier.models[0].api_model_name
    backend = vllm_deployment_id(tier.models[0])
    print(f"litellm {installed_version('litellm')} (gateway/requirements.lock); poc tier's config")
    print("time to last byte, ms; +p50/+p99: added to the direct path's at the same concurrency;")
    print("req/s and chunks/s: completed per second; cpu ms/req: the gateway's processes' CPU time;")
    print(
        f"long: streams of {args.long_chunks} content chunks, {args.long_concurrency} at once, 2 per stream"
    )
    print(
        "hot p50/p99: the route with gpufarm.client's AsyncFallbackTransport (httpx), nothing re-sent;"
        " httpx p50/p99: plain httpx to the same stand-in; hot +p50/+p99: the transport's part"
    )
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        vllm, bedrock = StandIn("vllm", workdir, f"--model={model}"), StandIn("bedrock", workdir)
        stand_ins = [vllm, bedrock]
        try:
            vllm.start()
            bedrock.start()
            if "long" in modes:
                long_dir = workdir / "long"
                long_dir.mkdir()
                vllm_long = StandIn(
                    "vllm", long_dir, f"--model={model}", f"--stream-chunks={args.long_chunks}"
                )
                stand_ins.append(vllm_long)
                vllm_long.start()
            for setting in settings:
                print(f"\n== {setting.label}: {setting.summary}")
                print(f"   before: {load()}")
                rows: list[Row] = []
                passes = [(vllm, [m for m in modes if m != "long"], levels, args.requests)]
                if "long" in modes:
                    passes.append((vllm_long, ["long"], long_levels, 0))
                for stand_in, pass_modes, pass_levels, requests in passes:
                    if not pass_modes:
                        continue
                    gateway = Gateway(
                        tier,
                        stand_in.log.parent,
                        litellm=litellm,
                        vllm_url=stand_in.base_url,
                        bedrock_url=bedrock.base_url,
                    )
                    gateway.argv, gateway.env = apply_setting(gateway.argv, gateway.env, setting)
                    try:
                        gateway.start()
                        for mode in pass_modes:
                            rows += _measure_rows(
                                gateway,
                                stand_in,
                                model,
                                backend,
                                mode=mode,
                                levels=pass_levels,
                                requests=requests,
                            )
                    except RuntimeError as exc:
                        print(exc, file=sys.stderr)
                        return 1
                    finally:
                        gateway.stop()
                print(f"   {' '.join(gateway.argv[1:])}  LITELLM_LOG={gateway.env.get('LITELLM_LOG')}")
                print(f"   after:  {load()}")
                _print(rows)
        finally:
            for stand_in in reversed(stand_ins):
                stand_in.stop()
    return 0


def _print(rows: list[Row]) -> None:
    print(
        f"   {'mode':<7}{'c':>4}{'n':>6}{'direct p50':>11}{'p99':>8}{'gateway p50':>12}{'p99':>8}"
        f"{'+p50':>8}{'+p99':>8}{'req/s':>8}{'direct':>8}{'chunks/s':>10}{'cpu ms/req':>11}"
        f"{'hot p50':>9}{'p99':>8}{'httpx p50':>10}{'p99':>8}{'hot +p50':>9}{'+p99':>7}"
    )
    by_key = {(r.mode, r.concurrency, r.path): r for r in rows}
    for r in rows:
        if r.path != "gateway":
            continue
        d = by_key[(r.mode, r.concurrency, "direct")]
        print(
            f"   {r.mode:<7}{r.concurrency:>4}{r.requests:>6}{d.p50_ms:>11.1f}{d.p99_ms:>8.1f}"
            f"{r.p50_ms:>12.1f}{r.p99_ms:>8.1f}{r.p50_ms - d.p50_ms:>8.1f}{r.p99_ms - d.p99_ms:>8.1f}"
            f"{r.requests_per_second:>8.1f}{d.requests_per_second:>8.1f}{r.chunks_per_second:>10.1f}"
            f"{r.cpu_ms_per_request or 0:>11.2f}"
            f"{r.hot_p50_ms or 0:>9.1f}{r.hot_p99_ms or 0:>8.1f}{r.httpx_p50_ms or 0:>10.1f}"
            f"{r.httpx_p99_ms or 0:>8.1f}{(r.hot_p50_ms or 0) - (r.httpx_p50_ms or 0):>9.1f}"
            f"{(r.hot_p99_ms or 0) - (r.httpx_p99_ms or 0):>7.1f}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
