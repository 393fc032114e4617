"""gpufarm.client: what goes to the gateway, what stays on the route, and how the re-sent request looks.

The route and the gateway are `httpx.MockTransport` handlers here; tests/e2e/test_hot_path.py runs
the transports against the load balancer stand-in and the real gateway.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator

import httpx
import pytest

from gpufarm import client as gc

ROUTE = "http://alb.example/qwen3-8b/v1"
GATEWAY = "http://alb.example/v1"
BODY = {"model": "qwen3-8b", "messages": [{"role": "user", "content": "hi"}]}


class Backends:
    """A mock load balancer: `/qwen3-8b/...` is the route, `/v1/...` the gateway; records every request."""

    def __init__(self, route: Callable[[httpx.Request], httpx.Response]) -> None:
        self.route = route
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if _is_gateway(request):
            return httpx.Response(
                200, json={"from": "gateway"}, headers={"x-litellm-model-id": "vllm-qwen3-8b"}
            )
        return self.route(request)

    @property
    def gateway_requests(self) -> list[httpx.Request]:
        return [r for r in self.seen if _is_gateway(r)]


def _is_gateway(request: httpx.Request) -> bool:
    return request.url.host == "alb.example" and (
        request.url.path == "/v1" or request.url.path.startswith("/v1/")
    )


def status(code: int) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(code, text=f"{code} from the load balancer")


def raises(error: type[httpx.TransportError]) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error("route failed", request=request)

    return handler


def sync_client(backends: Backends, **options: object) -> tuple[httpx.Client, gc.FallbackTransport]:
    transport = gc.FallbackTransport(ROUTE, GATEWAY, transport=httpx.MockTransport(backends), **options)  # type: ignore[arg-type]
    return httpx.Client(transport=transport), transport


def post(client: httpx.Client, path: str = "/chat/completions", **kwargs: object) -> httpx.Response:
    return client.post(f"{ROUTE}{path}", json=BODY, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- what stays on the route


@pytest.mark.parametrize("code", [200, 400, 404, 429, 500, 502, 504])
def test_the_route_answer_is_returned_unless_it_is_a_503(code: int) -> None:
    backends = Backends(status(code))
    client, transport = sync_client(backends)
    response = post(client)
    assert (response.status_code, response.text) == (code, f"{code} from the load balancer")
    assert gc.FALLBACK_HEADER not in response.headers
    assert backends.gateway_requests == [] and transport.fallbacks == 0


@pytest.mark.parametrize("error", [httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout])
def test_a_timeout_on_the_route_is_raised_not_resent(error: type[httpx.TransportError]) -> None:
    """The replica may be working on the request: sending it again would pay for it twice."""
    backends = Backends(raises(error))
    client, transport = sync_client(backends)
    with pytest.raises(error):
        post(client)
    assert backends.gateway_requests == [] and transport.fallbacks == 0


def test_a_request_outside_the_route_is_never_resent() -> None:
    backends = Backends(status(503))
    client, transport = sync_client(backends)
    for url in (
        "http://alb.example/qwen3-8b/v1x/chat/completions",  # a longer path segment, not the route
        "http://alb.example/other/v1/chat/completions",
        "https://alb.example/qwen3-8b/v1/chat/completions",  # another scheme
        "http://other.example/qwen3-8b/v1/chat/completions",
    ):
        seen = len(backends.seen)
        response = client.post(url, json=BODY)
        assert (response.status_code, response.headers.get(gc.FALLBACK_HEADER)) == (503, None), url
        assert len(backends.seen) == seen + 1, url
    assert backends.gateway_requests == [] and transport.fallbacks == 0


# --------------------------------------------------------------------------- what goes to the gateway


def test_a_503_is_resent_to_the_gateway_as_the_same_request() -> None:
    backends = Backends(status(503))
    client, transport = sync_client(backends)
    response = post(client, headers={"Authorization": "Bearer unused", "X-Trace": "t-1"})
    assert response.status_code == 200 and response.json() == {"from": "gateway"}
    assert response.headers[gc.FALLBACK_HEADER] == "503"
    assert response.headers["x-litellm-model-id"] == "vllm-qwen3-8b"
    assert transport.fallbacks == 1
    first, resent = backends.seen
    assert (resent.method, str(resent.url)) == ("POST", "http://alb.example/v1/chat/completions")
    assert json.loads(resent.content) == BODY and resent.content == first.content
    assert resent.headers["authorization"] == "Bearer unused"
    assert resent.headers["x-trace"] == "t-1"
    assert resent.headers["host"] == "alb.example"
    assert resent.headers["content-length"] == str(len(first.content))


def test_the_gateway_key_replaces_the_authorization_header() -> None:
    backends = Backends(status(503))
    client, _ = sync_client(backends, gateway_api_key="sk-gateway")
    post(client, headers={"Authorization": "Bearer unused"})
    (resent,) = backends.gateway_requests
    assert resent.headers.get_list("authorization") == ["Bearer sk-gateway"]
    # The route never sees the gateway's key.
    assert backends.seen[0].headers["authorization"] == "Bearer unused"


def test_the_path_after_the_route_and_the_query_carry_over() -> None:
    backends = Backends(status(503))
    client, _ = sync_client(backends)
    client.get(f"{ROUTE}/models?limit=2")
    client.get(ROUTE)
    assert [str(r.url) for r in backends.gateway_requests] == [
        "http://alb.example/v1/models?limit=2",
        "http://alb.example/v1",
    ]


def test_a_trailing_slash_on_either_url_changes_nothing() -> None:
    backends = Backends(status(503))
    transport = gc.FallbackTransport(f"{ROUTE}/", f"{GATEWAY}/", transport=httpx.MockTransport(backends))
    httpx.Client(transport=transport).post(f"{ROUTE}/chat/completions", json=BODY)
    assert [str(r.url) for r in backends.gateway_requests] == ["http://alb.example/v1/chat/completions"]


def test_a_gateway_at_the_root_of_its_host_gets_the_path_after_the_route() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(503 if request.url.host == "alb.example" else 200)

    transport = gc.FallbackTransport(ROUTE, "http://gateway.example", transport=httpx.MockTransport(handler))
    httpx.Client(transport=transport).post(f"{ROUTE}/chat/completions", json=BODY)
    assert seen == [f"{ROUTE}/chat/completions", "http://gateway.example/chat/completions"]


def test_a_refusal_whose_body_breaks_is_still_resent() -> None:
    def broken() -> Iterator[bytes]:
        raise httpx.ReadError("reset while reading the 503")
        yield b""  # pragma: no cover - makes this a generator

    backends = Backends(lambda request: httpx.Response(503, content=broken()))
    client, transport = sync_client(backends)
    response = post(client)
    assert (response.status_code, response.headers[gc.FALLBACK_HEADER]) == (200, "503")
    assert transport.fallbacks == 1


@pytest.mark.parametrize(
    "error",
    [httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError],
)
def test_no_response_from_the_route_is_resent(error: type[httpx.TransportError]) -> None:
    backends = Backends(raises(error))
    client, transport = sync_client(backends)
    response = post(client)
    assert response.status_code == 200
    assert response.headers[gc.FALLBACK_HEADER] == error.__name__
    assert len(backends.gateway_requests) == 1 and transport.fallbacks == 1


@pytest.mark.parametrize("code", [502, 504])
def test_the_caller_may_widen_the_statuses(code: int) -> None:
    backends = Backends(status(code))
    client, transport = sync_client(backends, fallback_statuses={502, 503, 504})
    response = post(client)
    assert (response.status_code, response.headers[gc.FALLBACK_HEADER]) == (200, str(code))
    assert transport.fallbacks == 1


def test_what_the_gateway_answers_is_returned_even_an_error() -> None:
    def both_refuse(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="busy")

    transport = gc.FallbackTransport(ROUTE, GATEWAY, transport=httpx.MockTransport(both_refuse))
    response = httpx.Client(transport=transport).post(f"{ROUTE}/chat/completions", json=BODY)
    assert (response.status_code, response.headers[gc.FALLBACK_HEADER]) == (503, "503")


def test_a_gateway_that_cannot_be_reached_raises() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if _is_gateway(request):
            raise httpx.ConnectError("gateway down", request=request)
        return httpx.Response(503)

    transport = gc.FallbackTransport(ROUTE, GATEWAY, transport=httpx.MockTransport(handler))
    with pytest.raises(httpx.ConnectError, match="gateway down"):
        httpx.Client(transport=transport).post(f"{ROUTE}/chat/completions", json=BODY)
    assert transport.fallbacks == 0


def test_a_streamed_request_body_is_read_once_and_sent_twice() -> None:
    backends = Backends(status(503))
    client, _ = sync_client(backends)

    def body() -> Iterator[bytes]:
        yield b'{"model": '
        yield b'"qwen3-8b"}'

    client.post(f"{ROUTE}/chat/completions", content=body())
    assert [r.content for r in backends.seen] == [b'{"model": "qwen3-8b"}'] * 2


# --------------------------------------------------------------------------- streams


def _events(fail_after: int | None) -> Iterator[bytes]:
    for n in range(3):
        if fail_after is not None and n == fail_after:
            raise httpx.ReadError("connection reset mid-stream")
        yield b'data: {"n": %d}\n\n' % n
    yield b"data: [DONE]\n\n"


def test_a_stream_that_started_is_never_resent() -> None:
    """The route answered 200 and its stream broke: the error reaches the caller, the gateway sees nothing."""
    backends = Backends(
        lambda request: httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=_events(fail_after=1)
        )
    )
    client, transport = sync_client(backends)
    with client.stream("POST", f"{ROUTE}/chat/completions", json={**BODY, "stream": True}) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.ReadError, match="mid-stream"):
            list(response.iter_lines())
    assert backends.gateway_requests == [] and transport.fallbacks == 0


def test_a_refused_stream_is_streamed_from_the_gateway() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if _is_gateway(request):
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_events(None))
        return httpx.Response(503)

    transport = gc.FallbackTransport(ROUTE, GATEWAY, transport=httpx.MockTransport(handler))
    with httpx.Client(transport=transport).stream(
        "POST", f"{ROUTE}/chat/completions", json={**BODY, "stream": True}
    ) as response:
        lines = [line for line in response.iter_lines() if line]
    assert response.headers[gc.FALLBACK_HEADER] == "503"
    assert lines == ['data: {"n": 0}', 'data: {"n": 1}', 'data: {"n": 2}', "data: [DONE]"]


# --------------------------------------------------------------------------- async


def test_the_async_transport_resends_a_503_and_a_refused_connection() -> None:
    async def run() -> tuple[list[httpx.Response], gc.AsyncFallbackTransport, Backends]:
        answers = iter([httpx.Response(503), None, httpx.Response(200, json={"from": "route"})])

        def route(request: httpx.Request) -> httpx.Response:
            answer = next(answers)
            if answer is None:
                raise httpx.ConnectError("refused", request=request)
            return answer

        backends = Backends(route)
        transport = gc.AsyncFallbackTransport(ROUTE, GATEWAY, transport=httpx.MockTransport(backends))
        async with httpx.AsyncClient(transport=transport) as client:
            responses = [await client.post(f"{ROUTE}/chat/completions", json=BODY) for _ in range(3)]
        return responses, transport, backends

    responses, transport, backends = asyncio.run(run())
    assert [(r.json(), r.headers.get(gc.FALLBACK_HEADER)) for r in responses] == [
        ({"from": "gateway"}, "503"),
        ({"from": "gateway"}, "ConnectError"),
        ({"from": "route"}, None),
    ]
    assert transport.fallbacks == 2 and len(backends.gateway_requests) == 2


def test_the_async_transport_never_resends_a_started_stream() -> None:
    async def run() -> tuple[gc.AsyncFallbackTransport, Backends]:
        async def events() -> object:
            yield b'data: {"n": 0}\n\n'
            raise httpx.ReadError("connection reset mid-stream")

        backends = Backends(lambda request: httpx.Response(200, content=events()))  # type: ignore[arg-type]
        transport = gc.AsyncFallbackTransport(ROUTE, GATEWAY, transport=httpx.MockTransport(backends))
        async with (
            httpx.AsyncClient(transport=transport) as client,
            client.stream("POST", f"{ROUTE}/chat/completions", json=BODY) as response,
        ):
            with pytest.raises(httpx.ReadError, match="mid-stream"):
                async for _ in response.aiter_lines():
                    pass
        return transport, backends

    transport, backends = asyncio.run(run())
    assert backends.gateway_requests == [] and transport.fallbacks == 0


# --------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"fallback_statuses": {503, 200}},
            "'fallback_statuses' must be HTTP error statuses (400-599), got 200",
        ),
        (
            {"route_url": "alb.example/qwen3-8b/v1"},
            "'route_url' must be an absolute http(s) URL, got 'alb.example/qwen3-8b/v1'",
        ),
        (
            {"gateway_url": "ftp://alb.example/v1"},
            "'gateway_url' must be an absolute http(s) URL, got 'ftp://alb.example/v1'",
        ),
        (
            {"route_url": "http://alb.example/qwen3-8b/v1?x=1"},
            "'route_url' must have no query or fragment, got 'http://alb.example/qwen3-8b/v1?x=1'",
        ),
    ],
)
@pytest.mark.parametrize("kind", [gc.FallbackTransport, gc.AsyncFallbackTransport])
def test_invalid_arguments_are_named(kind: type, kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"route_url": ROUTE, "gateway_url": GATEWAY, **kwargs}
    with pytest.raises(ValueError) as caught:
        kind(**arguments)
    assert str(caught.value) == message


def test_the_defaults() -> None:
    transport = gc.FallbackTransport(ROUTE, GATEWAY)
    assert frozenset({503}) == gc.DEFAULT_FALLBACK_STATUSES
    assert (str(transport.route_url), str(transport.gateway_url)) == (ROUTE, GATEWAY)
    assert transport.fallbacks == 0
    transport.close()


@pytest.mark.parametrize("helper", [gc.openai_client, gc.async_openai_client])
def test_the_openai_helpers_say_what_is_missing(
    helper: Callable[..., object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` raises ImportError
    with pytest.raises(ModuleNotFoundError) as caught:
        helper(ROUTE, GATEWAY)
    assert str(caught.value) == (
        "gpufarm.client's OpenAI helpers need the 'openai' package, which gpufarm does not install: "
        "pip install openai (or build the client yourself with "
        "http_client=httpx.Client(transport=FallbackTransport(...)))"
    )


def test_the_module_imports_without_the_cdk() -> None:
    """An application imports the transport without loading aws_cdk, jsii or pydantic."""
    code = (
        "import sys, gpufarm.client; "
        "heavy = {'aws_cdk', 'jsii', 'constructs', 'pydantic', 'yaml'}; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
