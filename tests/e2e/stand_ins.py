"""Loopback stand-ins for the gateway's two backends, each run as its own process.

* `vllm`: an OpenAI-compatible server like vLLM's (`GET /health`, `GET /v1/models`,
  `POST /v1/chat/completions`, JSON or `stream: true` server-sent events ending with
  `data: [DONE]`). Every answer is the text `VLLM_TEXT`.
* `bedrock`: the Amazon Bedrock runtime Converse API (`POST /model/{modelId}/converse` as JSON,
  `POST /model/{modelId}/converse-stream` as an `application/vnd.amazon.eventstream` of
  messageStart, contentBlockDelta, contentBlockStop, messageStop and metadata events, each framed
  with its prelude and message CRC32). Every answer is the text `BEDROCK_TEXT`. SigV4 is not
  verified: any credentials pass.

`GET /_stand_in/stats` tells what each answered (counters, the requests being answered now, and
for Bedrock the last request received: operation, decoded model ID, raw path and body);
`POST /_stand_in/fail {"status": 503}` makes the vLLM
stand-in answer completions with that status (`{"status": null}` heals it). Standard library only,
so the stand-ins run under any Python 3.11, each in its own process the test can SIGKILL.

    python tests/e2e/stand_ins.py vllm --port=0 [--model=qwen3-8b] [--delay-ms=0] [--stream-chunks=0]
    python tests/e2e/stand_ins.py bedrock --port=0
    python tests/e2e/stand_ins.py sagemaker --port=0 --model=<inference component> ...
    python tests/e2e/stand_ins.py alb --port=0 --model=qwen3-8b --target=http://127.0.0.1:8001@4 ...

* `sglang`, `trtllm`: the `vllm` stand-in behind the engine's health path and Prometheus
  exposition (metrics path, series names and labels of the pinned release; see `EngineHandler`).
* `sagemaker`: the SageMaker runtime's InvokeEndpoint for an endpoint of inference components
  (SageMaker Runtime API in botocore 1.44.8: `POST /endpoints/{EndpointName}/invocations`, the
  component named by the `X-Amzn-SageMaker-Inference-Component` header, the body passed to the
  container as is; errors as `x-amzn-ErrorType` plus `{"message": ...}`: `ValidationError` 400,
  `ModelNotReadyException` 429, `ServiceUnavailable` 503). The container behind it is the Large
  Model Inference container answering the OpenAI chat schema on `/invocations` (a body with
  `messages`). Every answer is `SAGEMAKER_TEXT`; `--model` lists the components it hosts; the
  fail switch makes every component answer that status as `ServiceUnavailable`.
* `alb`: one model route of the tier's Application Load Balancer (`/<model>/*`, prefix stripped)
  with least outstanding requests and the Target Optimizer's per-target cap, forwarding to
  vLLM stand-ins; with every target at its cap it answers 503 at once (see `AlbHandler`).
  Its stats list each target's requests served, peak concurrency and the rejections.
  `--gateway-listener` opens a second port, the gateway's listener of ADR 0050 (port 8088 in
  the tier), forwarding to the same targets under the same caps; each listener's stats count
  its own forwarded and rejected requests.

On start each prints one line `ready <port>` to stdout once its socket accepts connections
(`ready <port> <gateway listener port>` for an `alb` with `--gateway-listener`).
`--stream-chunks=N` (N > 0) makes the vLLM stand-in stream N content chunks of one token each
(`STREAM_TOKEN`) instead of `VLLM_TEXT`'s three, for the gateway benchmark's long streams.
"""

from __future__ import annotations

import argparse
import http.client
import json
import struct
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

VLLM_TEXT = "from-vllm"
"""What the vLLM stand-in answers, whole or as the concatenation of its streamed chunks."""

BEDROCK_TEXT = "from-bedrock"
"""What the Bedrock stand-in answers, whole or as the concatenation of its streamed chunks."""

SAGEMAKER_TEXT = "from-sagemaker"
"""What the SageMaker runtime stand-in answers."""

COMPONENT_HEADER = "X-Amzn-SageMaker-Inference-Component"
"""InvokeEndpoint's header naming the inference component (`InferenceComponentName`)."""

STREAM_TOKEN = "tok "
"""Each content chunk of a `--stream-chunks` stream."""

STATS_PATH = "/_stand_in/stats"
FAIL_PATH = "/_stand_in/fail"


def _pieces(text: str) -> list[str]:
    """The streamed chunks of `text`: split after the dash so a stream has several deltas."""
    head, dash, tail = text.partition("-")
    return [head + dash, tail[: len(tail) // 2], tail[len(tail) // 2 :]]


class _Handler(BaseHTTPRequestHandler):
    """Common plumbing: HTTP/1.1 keep-alive, JSON bodies, chunked streaming, counters."""

    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes: without TCP_NODELAY, Nagle's algorithm and the
    # peer's delayed ACK hold the body ~40 ms on a kept-alive connection (vLLM's server sets it too).
    disable_nagle_algorithm = True
    server: _StandInServer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the test reads the counters, not an access log."""

    def _read_json(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b"{}"
        data: dict[str, Any] = json.loads(raw or b"{}")
        return data

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._before_last_write()
        self.wfile.write(payload)

    def _start_chunked(self, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end_chunked(self) -> None:
        self._before_last_write()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _before_last_write(self) -> None:
        """Called just before a response's last bytes leave (a completion ends its count here)."""
        release = getattr(self, "_release", None)
        if release is not None:
            self._release = None
            release()

    def _count(self, key: str) -> None:
        with self.server.lock:
            self.server.counts[key] += 1

    def _stats(self) -> None:
        with self.server.lock:
            body = {
                "counts": dict(self.server.counts),
                "models": dict(self.server.models),
                "active": self.server.active,
                "max_active": self.server.max_active,
                "last": self.server.last,
            }
        self._send_json(200, body)

    def _delay(self) -> None:
        if self.server.delay_seconds:
            time.sleep(self.server.delay_seconds)


class _StandInServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # The gateway opens many connections at once while the test fires concurrent requests.
    request_queue_size = 128

    def __init__(
        self, port: int, handler: type[_Handler], *, models: list[str], delay_ms: int, stream_chunks: int = 0
    ) -> None:
        super().__init__(("127.0.0.1", port), handler)
        self.stream_chunks = stream_chunks
        """Content chunks of a vLLM stream (0: the three pieces of `VLLM_TEXT`)."""
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.models: Counter[str] = Counter()
        self.served_models = models
        self.delay_seconds = delay_ms / 1000
        self.fail_status: int | None = None
        self.active = 0
        """Completions being answered right now (accepted, not yet fully sent)."""
        self.max_active = 0
        """The most completions ever answered at once (a replica's peak concurrency)."""
        self.last: dict[str, Any] | None = None
        """The last Converse request: operation, model ID and body."""
        self.engine = "vllm"
        """The engine an `EngineHandler` imitates (`sglang`, `trtllm`)."""
        self.responses: Counter[str] = Counter()
        """Completions answered, by status code (the engine stand-ins' counters)."""
        self.ttft: list[float] = []
        """Seconds to each successful answer (the engine stand-ins' histograms)."""


class VllmHandler(_Handler):
    """vLLM's OpenAI-compatible API, answering `VLLM_TEXT` for any model name."""

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/v1/models":
            models = [
                {"id": name, "object": "model", "created": 0, "owned_by": "vllm"}
                for name in self.server.served_models
            ]
            self._send_json(200, {"object": "list", "data": models})
        elif self.path == STATS_PATH:
            self._stats()
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}", "code": 404}})

    def do_POST(self) -> None:
        if self.path == FAIL_PATH:
            self.server.fail_status = self._read_json().get("status")
            self._send_json(200, {"fail_status": self.server.fail_status})
            return
        if self.path != "/v1/chat/completions":
            self._send_json(404, {"error": {"message": f"no route {self.path}", "code": 404}})
            return
        request = self._read_json()
        model = str(request.get("model", ""))
        if self.server.fail_status is not None:
            self._count("failed")
            self._send_json(
                self.server.fail_status,
                {"error": {"message": "stand-in told to fail", "code": self.server.fail_status}},
            )
            return
        with self.server.lock:
            self.server.models[model] += 1
            self.server.active += 1
            self.server.max_active = max(self.server.max_active, self.server.active)

        def release() -> None:
            with self.server.lock:
                self.server.active -= 1

        # The completion stops counting as active just before its last bytes leave, not after:
        # the load balancer in front frees the replica's slot once it has read those bytes, and
        # may send the next request before this thread would get to run a `finally`. Counting
        # until then would show a cap exceeded that the load balancer never exceeded.
        self._release: Callable[[], None] | None = release
        try:
            self._answer(request, model)
        finally:
            self._before_last_write()  # an answer cut short still ends its count

    def _answer(self, request: dict[str, Any], model: str) -> None:
        self._delay()
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        if request.get("stream"):
            self._count("stream")
            self._stream(
                completion_id, model, bool((request.get("stream_options") or {}).get("include_usage"))
            )
        else:
            self._count("chat")
            self._send_json(
                200,
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": VLLM_TEXT},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
                },
            )

    def _stream(self, completion_id: str, model: str, include_usage: bool) -> None:
        def event(delta: dict[str, Any], finish: str | None) -> bytes:
            chunk = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            return b"data: " + json.dumps(chunk).encode() + b"\n\n"

        self._start_chunked("text/event-stream")
        self._chunk(event({"role": "assistant", "content": ""}, None))
        pieces = (
            [STREAM_TOKEN] * self.server.stream_chunks if self.server.stream_chunks else _pieces(VLLM_TEXT)
        )
        for piece in pieces:
            self._chunk(event({"content": piece}, None))
        self._chunk(event({}, "stop"))
        if include_usage:
            usage = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            }
            self._chunk(b"data: " + json.dumps(usage).encode() + b"\n\n")
        self._chunk(b"data: [DONE]\n\n")
        self._end_chunked()


TTFT_BUCKETS = (0.1, 0.5, 1.0, 5.0)
"""Upper bounds of the stand-ins' time-to-first-token histograms (the engines use more; any will do)."""


class EngineHandler(VllmHandler):
    """vLLM's OpenAI API behind another engine's health path and Prometheus exposition.

    `sglang` (SGLang 0.5.23): `GET /health`; `GET /metrics` with the scheduler's gauges
    `sglang:num_queue_reqs`, `sglang:num_running_reqs`, `sglang:token_usage`,
    `sglang:cache_hit_rate` (labels model_name, engine_type, tp_rank, pp_rank, moe_ep_rank), the
    tokenizer's `sglang:num_requests_total` and `sglang:time_to_first_token_seconds` histogram
    (labels model_name, engine_type, is_streaming) and the HTTP middleware's
    `sglang:http_responses_total` (endpoint, status_code, method); sglang/srt/observability/
    metrics_collector.py and http_request_metrics.py in the sglang-0.5.23 wheel.
    `trtllm` (trtllm-serve 1.2.1): `GET /health`; `GET /prometheus/metrics` with unprefixed
    `request_success_total` (finished_reason) and `time_to_first_token_seconds`, labelled
    `model_name="undefined"` and `engine_type="undefined"` (NVIDIA/TensorRT-LLM pull request
    5785; vllm-project/aibrix issue 2008). Both also expose a Python runtime series, which the
    scrape job must drop. Requests waiting are the completions held by `--delay-ms` beyond the
    first (the stand-in runs one at a time in the engine's eyes).
    """

    def do_GET(self) -> None:
        engine = self.server.engine
        if self.path == METRICS_PATHS[engine]:
            body = (sglang_exposition if engine == "sglang" else trtllm_exposition)(self.server).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            super().do_GET()

    def do_POST(self) -> None:
        start = time.monotonic()
        super().do_POST()
        if self.path == "/v1/chat/completions":
            with self.server.lock:
                status = "200" if self.server.fail_status is None else str(self.server.fail_status)
                self.server.responses[status] += 1
                if status == "200":
                    self.server.ttft.append(time.monotonic() - start)


METRICS_PATHS = {"sglang": "/metrics", "trtllm": "/prometheus/metrics"}


def _histogram(name: str, labels: str, values: list[float]) -> list[str]:
    lines = [f"# TYPE {name} histogram"]
    for bound in TTFT_BUCKETS:
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {sum(v <= bound for v in values)}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {len(values)}')
    lines.append(f"{name}_sum{{{labels}}} {sum(values)}")
    lines.append(f"{name}_count{{{labels}}} {len(values)}")
    return lines


def sglang_exposition(server: _StandInServer) -> str:
    with server.lock:
        active, done, ttft = server.active, sum(server.responses.values()), list(server.ttft)
        responses = dict(server.responses)
    model = server.served_models[0] if server.served_models else "model"
    sched = f'engine_type="unified",model_name="{model}",moe_ep_rank="0",pp_rank="0",tp_rank="0"'
    tok = f'engine_type="unified",model_name="{model}"'
    lines = [
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 1.0',
        "# TYPE sglang:num_running_reqs gauge",
        f"sglang:num_running_reqs{{{sched}}} {min(active, 1)}",
        "# TYPE sglang:num_queue_reqs gauge",
        f"sglang:num_queue_reqs{{{sched}}} {max(active - 1, 0)}",
        "# TYPE sglang:token_usage gauge",
        f"sglang:token_usage{{{sched}}} {0.5 if active else 0.0}",
        "# TYPE sglang:cache_hit_rate gauge",
        f"sglang:cache_hit_rate{{{sched}}} 0.25",
        "# TYPE sglang:num_requests_total counter",
        f'sglang:num_requests_total{{{tok},is_streaming="false"}} {done}',
        "# TYPE sglang:http_responses_total counter",
        *[
            'sglang:http_responses_total{endpoint="/v1/chat/completions",method="POST",'
            f'status_code="{code}"}} {n}'
            for code, n in sorted(responses.items())
        ],
        *_histogram("sglang:time_to_first_token_seconds", f'{tok},is_streaming="false"', ttft),
    ]
    return "\n".join(lines) + "\n"


def trtllm_exposition(server: _StandInServer) -> str:
    with server.lock:
        ok, ttft = server.responses.get("200", 0), list(server.ttft)
    labels = 'engine_type="undefined",model_name="undefined"'
    lines = [
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 1.0',
        "# TYPE request_success_total counter",
        f'request_success_total{{{labels},finished_reason="stop"}} {ok}',
        *_histogram("time_to_first_token_seconds", labels, ttft),
    ]
    return "\n".join(lines) + "\n"


def encode_event(event_type: str, payload: dict[str, Any]) -> bytes:
    """One AWS event-stream message: prelude, prelude CRC32, string headers, JSON payload, CRC32.

    Layout (big-endian): total length (4 bytes), headers length (4), CRC32 of those 8 bytes (4),
    headers (name length 1 byte, name, value type 7 = string, value length 2 bytes, value),
    payload, CRC32 of everything before it (4).
    """
    headers = b""
    for name, value in (
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        name_bytes, value_bytes = name.encode(), value.encode()
        headers += struct.pack(">B", len(name_bytes)) + name_bytes
        headers += struct.pack(">BH", 7, len(value_bytes)) + value_bytes
    body = json.dumps(payload).encode()
    total = 12 + len(headers) + len(body) + 4
    prelude = struct.pack(">II", total, len(headers))
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + body
    return message + struct.pack(">I", zlib.crc32(message))


class BedrockHandler(_Handler):
    """The Bedrock runtime's Converse and ConverseStream operations, answering `BEDROCK_TEXT`."""

    def do_GET(self) -> None:
        if self.path == STATS_PATH:
            self._stats()
        else:
            self._send_json(404, {"message": f"no route {self.path}"})

    def do_POST(self) -> None:
        parts = self.path.split("/")
        # /model/{modelId}/converse[-stream]; the model ID arrives percent-encoded ('v1%3A0').
        if len(parts) != 4 or parts[1] != "model" or parts[3] not in ("converse", "converse-stream"):
            self._send_json(404, {"message": f"UnknownOperationException: {self.path}"})
            return
        model_id, operation = unquote(parts[2]), parts[3]
        request = self._read_json()
        if not request.get("messages"):
            self._send_json(400, {"message": "ValidationException: messages is required"})
            return
        signed = self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 ")
        self._count("signed" if signed else "unsigned")
        self._count(operation)
        with self.server.lock:
            self.server.models[model_id] += 1
            self.server.last = {
                "operation": operation,
                "model_id": model_id,
                "path": self.path,
                "body": request,
            }
        self._delay()
        request_id = {"x-amzn-RequestId": str(uuid.uuid4())}
        usage = {"inputTokens": 5, "outputTokens": 3, "totalTokens": 8}
        if operation == "converse":
            self._send_json(
                200,
                {
                    "output": {"message": {"role": "assistant", "content": [{"text": BEDROCK_TEXT}]}},
                    "stopReason": "end_turn",
                    "usage": usage,
                    "metrics": {"latencyMs": 1},
                },
                request_id,
            )
            return
        self._start_chunked("application/vnd.amazon.eventstream", request_id)
        self._chunk(encode_event("messageStart", {"role": "assistant"}))
        for piece in _pieces(BEDROCK_TEXT):
            self._chunk(encode_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}}))
        self._chunk(encode_event("contentBlockStop", {"contentBlockIndex": 0}))
        self._chunk(encode_event("messageStop", {"stopReason": "end_turn"}))
        self._chunk(encode_event("metadata", {"usage": usage, "metrics": {"latencyMs": 1}}))
        self._end_chunked()


class SageMakerHandler(_Handler):
    """The SageMaker runtime's InvokeEndpoint for an endpoint of inference components."""

    def do_GET(self) -> None:
        if self.path == STATS_PATH:
            self._stats()
        else:
            self._error(404, "UnknownOperationException", f"no route {self.path}")

    def _error(self, status: int, kind: str, message: str) -> None:
        self._send_json(status, {"message": message}, {"x-amzn-ErrorType": kind})

    def do_POST(self) -> None:
        if self.path == FAIL_PATH:
            with self.server.lock:
                self.server.fail_status = self._read_json().get("status")
            self._send_json(200, {"fail_status": self.server.fail_status})
            return
        parts = self.path.split("/")
        # /endpoints/{EndpointName}/invocations
        if len(parts) != 4 or parts[1] != "endpoints" or parts[3] != "invocations":
            self._error(404, "UnknownOperationException", f"no route {self.path}")
            return
        endpoint = unquote(parts[2])
        component = self.headers.get(COMPONENT_HEADER)
        request = self._read_json()
        signed = self.headers.get("Authorization", "").startswith("AWS4-HMAC-SHA256 ")
        self._count("signed" if signed else "unsigned")
        with self.server.lock:
            self.server.last = {"endpoint": endpoint, "component": component, "body": request}
        if component not in self.server.served_models:
            self._error(
                400,
                "ValidationError",
                f"Inference Component Name header is required or names no component of endpoint "
                f"{endpoint}: got {component!r}",
            )
            return
        if not request.get("messages"):
            self._error(424, "ModelError", "Received client error (400) from primary: messages is required")
            return
        with self.server.lock:
            fail = self.server.fail_status
        if fail is not None:
            self._count("failed")
            self._error(fail, "ServiceUnavailable", "the inference component has no capacity")
            return
        with self.server.lock:
            self.server.models[component] += 1
        self._count("invocations")
        self._delay()
        self._send_json(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": SAGEMAKER_TEXT},
                        "logprobs": None,
                        "finish_reason": "length",
                    }
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
            },
            {"x-Amzn-Invoked-Production-Variant": "AllTraffic"},
        )


class _AlbServer(_StandInServer):
    """The stand-in ALB's state: one model route, its targets and how busy each is."""

    def __init__(self, port: int, *, route: str, targets: list[tuple[str, int]]) -> None:
        super().__init__(port, AlbHandler, models=[route], delay_ms=0)
        self.route = route
        self.targets = [
            {"url": url, "cap": cap, "active": 0, "max_active": 0, "served": 0} for url, cap in targets
        ]
        self.next_tie = 0

    def pick(self) -> dict[str, Any] | None:
        """The target with the fewest outstanding requests among those below their cap (None: all full)."""
        with self.lock:
            free = [t for t in self.targets if t["active"] < t["cap"]]
            if not free:
                self.counts["rejected"] += 1
                return None
            fewest = min(t["active"] for t in free)
            tied = [t for t in free if t["active"] == fewest]
            # Among equally idle targets, take turns (the ALB documents no tie rule).
            target = tied[self.next_tie % len(tied)]
            self.next_tie += 1
            target["active"] += 1
            target["max_active"] = max(target["max_active"], target["active"])
            target["served"] += 1
            return target

    def release(self, target: dict[str, Any]) -> None:
        with self.lock:
            target["active"] -= 1

    def listener(self, port: int) -> _AlbServer:
        """Another listener of the same load balancer: the same targets, lock and caps, its own counts."""
        other = _AlbServer(port, route=self.route, targets=[])
        other.targets, other.lock = self.targets, self.lock
        return other


class AlbHandler(_Handler):
    """An ALB listener rule `/<model>/*` with the path rewrite, least outstanding requests and the
    Target Optimizer's per-target cap, forwarding to vLLM stand-ins (the part that stands in for AWS).

    What it implements, as AWS documents it:

    * the rule strips the route's prefix (`^/<model>/(.*)$` -> `/$1`, gpufarm's listener rules);
    * least outstanding requests: the request goes to the target with the fewest requests in
      progress (ALB user guide, target group attributes, routing algorithm:
      https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-target-group-attributes.html);
    * Target Optimizer: only targets whose agent has room below its maximum concurrency are
      candidates; with none, the load balancer rejects the request at once with HTTP 503 and
      counts it in `TargetControlRequestRejectCount` (ALB user guide, "Target optimizer",
      https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-target-groups.html#target-optimizer;
      AWS Networking blog, "Drive application performance with Application Load Balancer Target
      Optimizer", https://aws.amazon.com/blogs/networking-and-content-delivery/drive-application-performance-with-application-load-balancer-target-optimizer/).

    Not modelled: health checks (every target is healthy), several load balancer nodes (one
    node sees every request, so its counts are exact), connection reuse to targets.
    """

    server: _AlbServer

    def do_GET(self) -> None:
        if self.path == STATS_PATH:
            with self.server.lock:
                body = {"counts": dict(self.server.counts), "targets": [dict(t) for t in self.server.targets]}
            self._send_json(200, body)
            return
        self._forward("GET")

    def do_POST(self) -> None:
        self._forward("POST")

    def _forward(self, method: str) -> None:
        prefix = f"/{self.server.route}/"
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if not self.path.startswith(prefix):
            self._send_json(404, {"error": {"message": f"Unknown route {self.path}", "type": "not_found"}})
            return
        target = self.server.pick()
        if target is None:
            page = b"<html><body><center><h1>503 Service Temporarily Unavailable</h1></center></body></html>"
            self.send_response(503)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        self._count("forwarded")
        host, _, port = target["url"].removeprefix("http://").partition(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        try:
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            conn.request(method, "/" + self.path[len(prefix) :], body, headers)
            resp = conn.getresponse()
            content_type = resp.getheader("Content-Type", "application/json")
            if resp.getheader("Transfer-Encoding", "").lower() == "chunked":
                self.send_response(resp.status)
                self.send_header("Content-Type", content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                while data := resp.read1(65536):
                    self._chunk(data)
                self._end_chunked()
            else:
                payload = resp.read()
                self.send_response(resp.status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
        except OSError:
            self._send_json(502, {"message": "502 Bad Gateway"})
        finally:
            conn.close()
            self.server.release(target)


HANDLERS: dict[str, type[_Handler]] = {
    "vllm": VllmHandler,
    "bedrock": BedrockHandler,
    "sagemaker": SageMakerHandler,
    "alb": AlbHandler,
    "sglang": EngineHandler,
    "trtllm": EngineHandler,
}


def main(argv: list[str] | None = None) -> int:
    """Serve one stand-in on 127.0.0.1 until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=sorted(HANDLERS))
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--model", action="append", default=[], help="model name for /v1/models")
    parser.add_argument("--delay-ms", type=int, default=0, help="added latency per answer, ms")
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        help="alb: a target as <url>@<max concurrency> (its Target Optimizer agent's cap)",
    )
    parser.add_argument(
        "--stream-chunks", type=int, default=0, help="vLLM: content chunks per stream (0: VLLM_TEXT's three)"
    )
    parser.add_argument(
        "--gateway-listener",
        action="store_true",
        help="alb: a second listener on a free port, with the same targets and caps (the gateway's)",
    )
    args = parser.parse_args(argv)
    server: _StandInServer
    if args.kind == "alb":
        targets = [(url, int(cap)) for url, _, cap in (t.rpartition("@") for t in args.target)]
        server = _AlbServer(args.port, route=args.model[0], targets=targets)
        if args.gateway_listener:
            second = server.listener(0)
            threading.Thread(target=second.serve_forever, daemon=True).start()
            print(f"ready {server.server_address[1]} {second.server_address[1]}", flush=True)
            server.serve_forever()
            return 0
    else:
        server = _StandInServer(
            args.port,
            HANDLERS[args.kind],
            models=args.model,
            delay_ms=args.delay_ms,
            stream_chunks=args.stream_chunks,
        )
        server.engine = args.kind
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
