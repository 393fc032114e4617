"""Production's gateway route, end to end: the real LiteLLM, through an NLB hop, to the ALB stand-in.

On an internet-facing ALB tier the gateway calls `http://<gateway NLB>:8088/<model>/v1`, and the
internal NLB passes each TCP connection, unchanged, to the ALB's gateway listener
(`gpufarm.core.endpoints.gateway_through_nlb`, ADR 0050). Here the proxy runs with the config and
pod environment gpufarm builds for the production preset; the NLB is a TCP pass-through on
loopback (it stands in for nothing but that: an NLB's TCP listener forwarding a connection to its
one `alb` target), in front of the `alb` stand-in (tests/e2e/stand_ins.py) and one vLLM stand-in.
The balancing itself is proved by test_gateway_balancing.py; this shows the production wiring's
route string reaches it.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufarm.config import TierConfig, load_preset
from gpufarm.core.endpoints import GATEWAY_LISTENER_PORT, GatewayRoute, gateway_route, gateway_through_nlb
from gpufarm.k8s.gateway import route_api_base, route_env_name, vllm_deployment_id

from .conftest import LOOPBACK, Gateway, StandIn, chat
from .stand_ins import VLLM_TEXT


class _Pipe(socketserver.BaseRequestHandler):
    """One accepted connection, copied byte for byte to and from the upstream address."""

    server: _TcpPassThrough

    def handle(self) -> None:
        upstream = socket.create_connection(self.server.upstream)
        self.server.count()
        back = threading.Thread(target=_copy, args=(upstream, self.request), daemon=True)
        back.start()
        _copy(self.request, upstream)
        back.join()
        upstream.close()


def _copy(source: socket.socket, sink: socket.socket) -> None:
    """Copy until `source` closes (or either side fails), then close `sink`'s sending half."""
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class _TcpPassThrough(socketserver.ThreadingTCPServer):
    """A TCP listener forwarding each connection to one target: the NLB hop, on loopback."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: tuple[str, int]) -> None:
        super().__init__((LOOPBACK, 0), _Pipe)
        self.upstream = upstream
        self.connections = 0
        self._lock = threading.Lock()

    def count(self) -> None:
        with self._lock:
            self.connections += 1

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.server_address[1]}"


@dataclass(frozen=True)
class Hop:
    tier: TierConfig
    gateway: Gateway
    nlb: _TcpPassThrough
    alb: StandIn


@pytest.fixture(scope="module")
def hop(litellm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hop]:
    workdir = tmp_path_factory.mktemp("gateway-nlb-hop")
    tier = load_preset("production")
    model = tier.models[0]
    vllm = StandIn("vllm", workdir, f"--model={model.api_model_name}", "--delay-ms=50")
    bedrock = StandIn("bedrock", workdir)
    started: list[StandIn] = []
    nlb: _TcpPassThrough | None = None
    try:
        for stand_in in (vllm, bedrock):
            stand_in.start()
            started.append(stand_in)
        alb = StandIn("alb", workdir, f"--model={model.name}", f"--target={vllm.base_url}@4")
        alb.start()
        started.append(alb)
        nlb = _TcpPassThrough((LOOPBACK, alb.port))
        threading.Thread(target=nlb.serve_forever, daemon=True).start()
        gateway = Gateway(
            tier,
            workdir,
            litellm=litellm,
            vllm_url=alb.base_url,
            bedrock_url=bedrock.base_url,
            load_balancer_url=nlb.url,
        )
        gateway.start()
        try:
            yield Hop(tier, gateway, nlb, alb)
        finally:
            gateway.stop()
    finally:
        if nlb is not None:
            nlb.shutdown()
            nlb.server_close()
        for stand_in in started:
            stand_in.stop()


def test_the_production_gateway_reads_each_route_on_the_nlb(hop: Hop) -> None:
    tier = hop.tier
    assert gateway_route(tier) is GatewayRoute.LOAD_BALANCER
    assert gateway_through_nlb(tier)
    for model in tier.models:
        # In the cluster: http://<gateway NLB DNS name>:8088/<model>/v1; here only the address is loopback.
        assert hop.gateway.env[route_env_name(model)] == route_api_base(model, hop.nlb.url)
        assert route_api_base(model, f"http://nlb:{GATEWAY_LISTENER_PORT}") == (
            f"http://nlb:{GATEWAY_LISTENER_PORT}/{model.name}/v1"
        )


def test_a_request_through_the_gateway_crosses_the_nlb_and_is_balanced_by_the_alb(hop: Hop) -> None:
    model = hop.tier.models[0]
    served_before = sum(t["served"] for t in hop.alb.stats()["targets"])
    replies = [chat(hop.gateway.port, model.api_model_name) for _ in range(3)]
    assert [(r.status, r.text, r.backend) for r in replies] == [
        (200, VLLM_TEXT, vllm_deployment_id(model))
    ] * 3
    assert hop.nlb.connections >= 1
    assert sum(t["served"] for t in hop.alb.stats()["targets"]) - served_before == 3
