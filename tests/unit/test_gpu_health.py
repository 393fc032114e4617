"""vLLM's probes per role, the agent's probes, and the failure timeline the operations guide shows."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from gpufarm.config import ServingConfig
from gpufarm.config.model import ModelConfig, PrefillDecodeConfig, TargetOptimizerConfig
from gpufarm.core import gpu_health
from gpufarm.k8s.serving import AGENT_CONTAINER, agent_probes, vllm_deployment, vllm_probes

from .factories import make_tier, model_override
from .k8s_schema import validate_core

REGION = "us-east-1"


def _containers(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    pod = manifest["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*pod.get("initContainers", []), *pod["containers"]]}


def test_vllm_probes_tell_loading_serving_and_dead_apart() -> None:
    model = make_tier(model_override(startup_timeout_seconds=905)).models[0]
    health = {"path": "/health", "port": "http"}
    assert vllm_probes(model) == {
        # loading: refused connections for up to startup_timeout_seconds (91 x 10 s >= 905 s)
        "startupProbe": {"httpGet": health, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 91},
        # serving / dead: 200 keeps the pod in its Service, two 503s take it out
        "readinessProbe": {"httpGet": health, "periodSeconds": 5, "timeoutSeconds": 4, "failureThreshold": 2},
        # a server that stops answering for a minute is restarted; starts only after startup
        "livenessProbe": {
            "httpGet": health,
            "periodSeconds": 15,
            "timeoutSeconds": 10,
            "failureThreshold": 4,
        },
    }


def test_liveness_never_fires_before_readiness() -> None:
    assert gpu_health.readiness_seconds() == 10
    assert gpu_health.liveness_seconds() == 60
    assert gpu_health.readiness_seconds() < gpu_health.liveness_seconds()


@pytest.mark.parametrize("role", [None, "prefill", "decode"])
def test_every_role_of_a_model_has_the_same_probes(role: Literal["prefill", "decode"] | None) -> None:
    model = ModelConfig(
        name="llama-70b",
        weights="meta-llama/Llama-3.3-70B-Instruct",
        gpus=4,
        startup_timeout_seconds=2400,
        prefill_decode=PrefillDecodeConfig(prefill_replicas=2),
    )
    deployment = vllm_deployment(
        model, ServingConfig(), pool_name="h100", region=REGION, prefill_decode_role=role
    )
    vllm = _containers(deployment)["vllm"]
    # The decode engine sits behind the sidecar on another port, still named `http`.
    assert {k: vllm[k] for k in vllm_probes(model)} == vllm_probes(model)
    assert vllm["startupProbe"]["failureThreshold"] == 240


def test_agent_is_probed_by_tcp_on_its_data_port() -> None:
    probe = {"tcpSocket": {"port": "data"}, "periodSeconds": 10, "timeoutSeconds": 2, "failureThreshold": 3}
    assert agent_probes() == {"startupProbe": probe, "readinessProbe": probe, "livenessProbe": probe}


def test_agent_probes_pass_kubernetes_validation() -> None:
    tier = make_tier()
    model = tier.models[0]
    deployment = vllm_deployment(
        model,
        ServingConfig(),
        pool_name=tier.pool_of(model).name,
        region=REGION,
        target_optimizer=TargetOptimizerConfig(enabled=True),
    )
    agent = _containers(deployment)[AGENT_CONTAINER]
    assert agent["restartPolicy"] == "Always", "probes on an init container need a native sidecar"
    assert {k: agent[k] for k in agent_probes()} == agent_probes()
    validate_core(deployment)


def test_failure_timeline_from_the_tier() -> None:
    tier = make_tier(
        model_override(startup_timeout_seconds=2400),
        {"ingress": {"health_check_interval_seconds": 20}},
    )
    assert [(s.step, s.seconds) for s in gpu_health.failure_timeline(tier)] == [
        ("vLLM exits after its engine dies", 5),
        ("pod leaves its Service (gateway and in-cluster route)", 10),
        ("load balancer stops sending new requests", 60),
        ("hung server restarted by liveness", 60),
        ("node with a failed GPU replaced", 600),
        ("node with a failed kernel, network, storage or runtime replaced", 1800),
        ("replacement pod loads the model", 2400),
    ]
