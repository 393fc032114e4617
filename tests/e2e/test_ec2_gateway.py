"""The ec2-poc gateway, end to end: the real LiteLLM with the config and environment the tier's gateway
instances get, calling the model's route on the ALB, falling back to Bedrock.

The proxy runs as `gpufarm-gateway.service` runs it (gpufarm/hosts/gateway.py): the config of
:meth:`GatewayRoutes.through_load_balancer`, the environment of :func:`instance_environment` and
`proxy_args`. Only addresses change: the ALB is the `alb` stand-in on loopback (one model route in
front of a vLLM stand-in, which stands in for the GPU group's engine), Bedrock the `bedrock`
stand-in.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpufarm.config import TierConfig, load_preset
from gpufarm.constructs.gateway_fleet import GatewayRoutes, instance_environment
from gpufarm.k8s.gateway import (
    bedrock_deployment_id,
    config_yaml,
    proxy_args,
    route_env_name,
    vllm_deployment_id,
)

from .conftest import (
    FAKE_AWS_ENV,
    GATEWAY_START_TIMEOUT,
    GATEWAY_VENV,
    LOOPBACK,
    Process,
    StandIn,
    chat,
    free_port,
)
from .stand_ins import BEDROCK_TEXT, VLLM_TEXT


@dataclass(frozen=True)
class Ec2Gateway:
    tier: TierConfig
    routes: GatewayRoutes
    proxy: Process
    port: int
    alb: StandIn
    vllm: StandIn


@pytest.fixture(scope="module")
def ec2(litellm: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ec2Gateway]:
    workdir = tmp_path_factory.mktemp("ec2-gateway")
    tier = load_preset("ec2-poc")
    model = tier.models[0]
    vllm = StandIn("vllm", workdir, f"--model={model.api_model_name}")
    bedrock = StandIn("bedrock", workdir)
    started: list[Process] = []
    try:
        for stand_in in (vllm, bedrock):
            stand_in.start()
            started.append(stand_in)
        alb = StandIn("alb", workdir, f"--model={model.name}", f"--target={vllm.base_url}@4")
        alb.start()
        started.append(alb)
        # On the instances: http://<ALB DNS name>:8088, the gateway listener; here the stand-in's address.
        routes = GatewayRoutes.through_load_balancer(tier, alb.base_url)
        config_file = workdir / "config.yaml"
        config_file.write_text(config_yaml(dict(routes.config)), encoding="utf-8")
        port = free_port()
        args = proxy_args(tier)
        for flag, value in (("--config", str(config_file)), ("--host", LOOPBACK), ("--port", str(port))):
            args[args.index(flag) + 1] = value
        env = instance_environment(tier, routes, None)
        env.update(
            FAKE_AWS_ENV,
            HOME=str(workdir),
            PATH=f"{GATEWAY_VENV / 'bin'}:/usr/bin:/bin",
            AWS_BEDROCK_RUNTIME_ENDPOINT=bedrock.base_url,
        )
        proxy = Process("gateway", [str(litellm), *args], env=env, log=workdir / "gateway.log")
        proxy.start()
        started.append(proxy)
        proxy.wait_until_ready(port, "/health/readiness", GATEWAY_START_TIMEOUT)
        yield Ec2Gateway(tier, routes, proxy, port, alb, vllm)
    finally:
        for process in reversed(started):
            process.stop()


def test_the_gateway_reads_the_models_route_on_the_alb_from_its_environment(ec2: Ec2Gateway) -> None:
    model = ec2.tier.models[0]
    (entry,) = [
        e for e in ec2.routes.config["model_list"] if e["model_info"]["id"] == vllm_deployment_id(model)
    ]
    assert entry["litellm_params"]["api_base"] == f"os.environ/{route_env_name(model)}"
    assert ec2.routes.environment[route_env_name(model)] == f"{ec2.alb.base_url}/{model.name}/v1"


def test_a_request_reaches_the_engine_through_the_albs_route(ec2: Ec2Gateway) -> None:
    model = ec2.tier.models[0]
    before = sum(t["served"] for t in ec2.alb.stats()["targets"])
    reply = chat(ec2.port, model.api_model_name)
    assert (reply.status, reply.text, reply.backend) == (200, VLLM_TEXT, vllm_deployment_id(model))
    assert sum(t["served"] for t in ec2.alb.stats()["targets"]) - before == 1


def test_with_the_engine_gone_the_gateway_answers_from_bedrock(ec2: Ec2Gateway) -> None:
    model = ec2.tier.models[0]
    ec2.vllm.stop()
    reply = chat(ec2.port, model.api_model_name)
    assert (reply.status, reply.text, reply.backend) == (200, BEDROCK_TEXT, bedrock_deployment_id(model))
