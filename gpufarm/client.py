"""Client side of the serving path: call a model's route, fall back to the gateway only when refused.

The hot path of every request is the model's own route on the load balancer,
``<scheme>://<load balancer>/<model>/v1`` (the ``ModelRoute<Name>`` output): least outstanding
requests and the Target Optimizer's per-replica cap apply there, and nothing sits between the load
balancer and vLLM. The gateway (``GatewayBaseUrl``, the LiteLLM proxy) is CPU-bound Python that
adds queueing under concurrency (docs/decisions/0051-gateway-off-the-hot-path.md), so it is called
only for what the route cannot serve. :class:`FallbackTransport` (and :class:`AsyncFallbackTransport`)
is an `httpx` transport that does that inside any httpx client, the OpenAI SDK's included::

    import httpx
    from openai import OpenAI
    from gpufarm.client import FallbackTransport

    transport = FallbackTransport(
        route_url="http://<alb>/qwen3-8b/v1", gateway_url="http://<alb>/v1"
    )
    client = OpenAI(
        base_url="http://<alb>/qwen3-8b/v1",
        api_key="unused",
        http_client=httpx.Client(transport=transport),
    )

What is re-sent, and why (the Application Load Balancer's own meaning of each status, "The load
balancer generates an HTTP error",
https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-troubleshooting.html):

* **HTTP 503, by default.** The load balancer answers 503 when "the target groups for the load
  balancer have no registered targets" (a model parked at zero replicas: its pods are not
  registered), and the Target Optimizer rejects a request with 503 at once when every target is
  at its cap (ALB user guide, "Target optimizer",
  https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-target-groups.html#target-optimizer).
  In both cases no replica received the request, so re-sending it duplicates nothing.
* **A refused, reset or closed connection before any response** (:data:`RESENT_ERRORS`): the
  route gave no answer. A refused connection never carried the request; a reset or close while
  waiting may follow a request the load balancer had forwarded, the one case where a re-send can
  duplicate work (docs/client.md, "Failure modes").
* **Not by default: 502 and 504.** A 502 is also the load balancer's answer when "the target
  closed the connection ... while the load balancer had an outstanding request to the target",
  and a 504 when "the target did not respond before the idle timeout period elapsed": the replica
  may have worked on (or still be working on) the request, and a re-send would pay for it twice.
  A caller to whom that is acceptable widens the set: ``fallback_statuses={502, 503, 504}``.

A response the route answered with any other status, a success included, is returned as it is.
A stream that started is never re-sent: the transport returns the route's response once its
headers arrive, and a failure while its body is read reaches the caller. Each re-sent response
carries :data:`FALLBACK_HEADER`, whose value says why (the route's status, or the error's class
name), and the transport counts re-sends in :attr:`FallbackTransport.fallbacks`.

This module imports only `httpx` (the ``client`` extra: ``pip install 'gpufarm[client]'``), never
the CDK, so an application imports it in tens of milliseconds; `openai` is needed only by
:func:`openai_client` and :func:`async_openai_client`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI

__all__ = [
    "DEFAULT_FALLBACK_STATUSES",
    "FALLBACK_HEADER",
    "RESENT_ERRORS",
    "AsyncFallbackTransport",
    "FallbackTransport",
    "async_openai_client",
    "openai_client",
]

FALLBACK_HEADER = "x-gpufarm-fallback"
"""Header on a response the gateway gave after the route refused the request; its value is why:
the route's status ('503') or the connection error's class name ('ConnectError'). It does not
collide with the gateway's own headers (``x-litellm-*``), which name the backend that answered."""

DEFAULT_FALLBACK_STATUSES = frozenset({503})
"""Statuses of the route that send the request to the gateway by default: only 503, the load
balancer's answer when no replica received the request (no registered target, or every target at
its Target Optimizer cap)."""

RESENT_ERRORS: tuple[type[httpx.TransportError], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)
"""Errors of the route, raised before any response arrived, that send the request to the gateway:
the connection was refused or could not be made in time, or was reset or closed before the
response's headers (httpx raises `RemoteProtocolError` for "Server disconnected without sending
a response"). Timeouts while waiting for the answer (`ReadTimeout`, `WriteTimeout`) and a full
local pool (`PoolTimeout`) are not re-sent: the replica may be working on the request, or the
gateway would wait on the same pool."""

_DROPPED_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})
"""Headers httpx computes for the re-sent request's own URL and body."""


def _validated_statuses(statuses: Iterable[int]) -> frozenset[int]:
    out = frozenset(statuses)
    wrong = sorted(s for s in out if not 400 <= s <= 599)
    if wrong:
        raise ValueError(f"'fallback_statuses' must be HTTP error statuses (400-599), got {wrong[0]}")
    return out


def _base_url(url: httpx.URL | str, name: str) -> httpx.URL:
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"'{name}' must be an absolute http(s) URL, got {str(url)!r}")
    if parsed.query or parsed.fragment:
        raise ValueError(f"'{name}' must have no query or fragment, got {str(url)!r}")
    return parsed


class _Fallback:
    """What both transports share: which requests may go to the gateway, and how they are rebuilt."""

    def __init__(
        self,
        route_url: httpx.URL | str,
        gateway_url: httpx.URL | str,
        *,
        gateway_api_key: str | None,
        fallback_statuses: Collection[int],
    ) -> None:
        self.route_url = _base_url(route_url, "route_url")
        """The model's route, the base URL requests are sent to first."""
        self.gateway_url = _base_url(gateway_url, "gateway_url")
        """The gateway's base URL the refused requests go to."""
        # Paths without their trailing slash (httpx keeps at least '/' in a URL's own path).
        self._route_prefix = self.route_url.raw_path.rstrip(b"/")
        self._gateway_prefix = self.gateway_url.raw_path.rstrip(b"/")
        self.gateway_api_key = gateway_api_key
        self.fallback_statuses = _validated_statuses(fallback_statuses)
        """Statuses of the route that send a request to the gateway."""
        self._count = 0
        self._lock = threading.Lock()

    @property
    def fallbacks(self) -> int:
        """Requests this transport re-sent to the gateway so far."""
        return self._count

    def _counted(self) -> None:
        with self._lock:
            self._count += 1

    def rest(self, request: httpx.Request) -> bytes | None:
        """What follows the route in the request's URL (path and query); None when not under the route."""
        url, route = request.url, self.route_url
        if (url.scheme, url.host, url.port) != (route.scheme, route.host, route.port):
            return None
        prefix = self._route_prefix
        rest = url.raw_path[len(prefix) :]
        if not url.raw_path.startswith(prefix) or rest[:1] not in (b"", b"/", b"?"):
            return None
        return rest

    def gateway_request(self, request: httpx.Request, rest: bytes) -> httpx.Request:
        """The same request addressed to the gateway: its base URL plus `rest` (see :meth:`rest`).

        Same method, body and headers. With a `gateway_api_key`, `Authorization: Bearer <key>`
        replaces the request's own. The request's extensions (its timeouts) carry over.
        """
        headers = [(k, v) for k, v in request.headers.multi_items() if k.lower() not in _DROPPED_HEADERS]
        if self.gateway_api_key is not None:
            headers = [(k, v) for k, v in headers if k.lower() != "authorization"]
            headers.append(("Authorization", f"Bearer {self.gateway_api_key}"))
        return httpx.Request(
            request.method,
            self.gateway_url.copy_with(raw_path=self._gateway_prefix + rest),
            headers=headers,
            content=request.content,
            extensions=dict(request.extensions),
        )

    def marked(self, response: httpx.Response, reason: str) -> httpx.Response:
        """`response` with :data:`FALLBACK_HEADER` set to `reason`, counted."""
        response.headers[FALLBACK_HEADER] = reason
        self._counted()
        return response


class _FallbackState:
    """What both transports report of their fallback: the count and the two URLs."""

    _fallback: _Fallback

    @property
    def fallbacks(self) -> int:
        """Requests re-sent to the gateway so far (each also carries :data:`FALLBACK_HEADER`)."""
        return self._fallback.fallbacks

    @property
    def route_url(self) -> httpx.URL:
        """The model's route."""
        return self._fallback.route_url

    @property
    def gateway_url(self) -> httpx.URL:
        """The gateway's base URL."""
        return self._fallback.gateway_url


class FallbackTransport(_FallbackState, httpx.BaseTransport):
    """Send each request to the model's route; re-send it to the gateway when the route refuses it.

    `route_url`: the model's route, ``<scheme>://<load balancer>/<model>/v1`` (the
    ``ModelRoute<Name>`` output). `gateway_url`: the gateway's base URL (``GatewayBaseUrl``).
    Only requests under `route_url` can be re-sent; others pass through unchanged.
    `gateway_api_key`: sent as ``Authorization: Bearer <key>`` to the gateway when
    `fallback.master_key_secret` is set (default None: the request's own headers).
    `fallback_statuses`: the route's statuses that re-send (default
    :data:`DEFAULT_FALLBACK_STATUSES`, {503}; HTTP error statuses only). The connection errors in
    :data:`RESENT_ERRORS` always re-send. `transport`: the transport both calls use (default a
    new `httpx.HTTPTransport()`, closed with this one).

    The request body is read into memory before the first send, so that it can be sent twice.
    """

    def __init__(
        self,
        route_url: httpx.URL | str,
        gateway_url: httpx.URL | str,
        *,
        gateway_api_key: str | None = None,
        fallback_statuses: Collection[int] = DEFAULT_FALLBACK_STATUSES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._fallback = _Fallback(
            route_url, gateway_url, gateway_api_key=gateway_api_key, fallback_statuses=fallback_statuses
        )
        self._transport = transport if transport is not None else httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """The route's response, or the gateway's when the route refused the request."""
        request.read()
        rest = self._fallback.rest(request)
        if rest is None:
            return self._transport.handle_request(request)
        try:
            response = self._transport.handle_request(request)
        except RESENT_ERRORS as exc:
            reason = type(exc).__name__
        else:
            if response.status_code not in self._fallback.fallback_statuses:
                return response
            reason = str(response.status_code)
            # Read the refusal so that its connection can be reused; a body that breaks is no answer either.
            with contextlib.suppress(httpx.TransportError):
                response.read()
            response.close()
        rerouted = self._fallback.gateway_request(request, rest)
        return self._fallback.marked(self._transport.handle_request(rerouted), reason)

    def close(self) -> None:
        """Close the underlying transport."""
        self._transport.close()


class AsyncFallbackTransport(_FallbackState, httpx.AsyncBaseTransport):
    """:class:`FallbackTransport` for `httpx.AsyncClient` (and `openai.AsyncOpenAI`); same arguments.

    `transport` defaults to a new `httpx.AsyncHTTPTransport()`, closed with this one.
    """

    def __init__(
        self,
        route_url: httpx.URL | str,
        gateway_url: httpx.URL | str,
        *,
        gateway_api_key: str | None = None,
        fallback_statuses: Collection[int] = DEFAULT_FALLBACK_STATUSES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._fallback = _Fallback(
            route_url, gateway_url, gateway_api_key=gateway_api_key, fallback_statuses=fallback_statuses
        )
        self._transport = transport if transport is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The route's response, or the gateway's when the route refused the request."""
        await request.aread()
        rest = self._fallback.rest(request)
        if rest is None:
            return await self._transport.handle_async_request(request)
        try:
            response = await self._transport.handle_async_request(request)
        except RESENT_ERRORS as exc:
            reason = type(exc).__name__
        else:
            if response.status_code not in self._fallback.fallback_statuses:
                return response
            reason = str(response.status_code)
            with contextlib.suppress(httpx.TransportError):
                await response.aread()
            await response.aclose()
        rerouted = self._fallback.gateway_request(request, rest)
        return self._fallback.marked(await self._transport.handle_async_request(rerouted), reason)

    async def aclose(self) -> None:
        """Close the underlying transport."""
        await self._transport.aclose()


def _openai_module() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ModuleNotFoundError(
            "gpufarm.client's OpenAI helpers need the 'openai' package, which gpufarm does not "
            "install: pip install openai (or build the client yourself with "
            "http_client=httpx.Client(transport=FallbackTransport(...)))"
        ) from exc
    return openai


def openai_client(
    route_url: str,
    gateway_url: str,
    *,
    api_key: str = "unused",
    gateway_api_key: str | None = None,
    fallback_statuses: Collection[int] = DEFAULT_FALLBACK_STATUSES,
    **kwargs: Any,
) -> OpenAI:
    """An `openai.OpenAI` client on the model's route that falls back to the gateway.

    `api_key`: what the route receives (vLLM runs without a key; default "unused"). The other
    arguments are :class:`FallbackTransport`'s; `kwargs` go to `OpenAI(...)` (`timeout`,
    `max_retries`...). Needs the `openai` package (not a dependency of gpufarm).
    """
    openai = _openai_module()
    transport = FallbackTransport(
        route_url, gateway_url, gateway_api_key=gateway_api_key, fallback_statuses=fallback_statuses
    )
    client: OpenAI = openai.OpenAI(
        base_url=route_url, api_key=api_key, http_client=httpx.Client(transport=transport), **kwargs
    )
    return client


def async_openai_client(
    route_url: str,
    gateway_url: str,
    *,
    api_key: str = "unused",
    gateway_api_key: str | None = None,
    fallback_statuses: Collection[int] = DEFAULT_FALLBACK_STATUSES,
    **kwargs: Any,
) -> AsyncOpenAI:
    """:func:`openai_client` as an `openai.AsyncOpenAI` client (with :class:`AsyncFallbackTransport`)."""
    openai = _openai_module()
    transport = AsyncFallbackTransport(
        route_url, gateway_url, gateway_api_key=gateway_api_key, fallback_statuses=fallback_statuses
    )
    client: AsyncOpenAI = openai.AsyncOpenAI(
        base_url=route_url, api_key=api_key, http_client=httpx.AsyncClient(transport=transport), **kwargs
    )
    return client
