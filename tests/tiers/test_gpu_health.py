"""GPU health in every tier: vLLM's probes, target health checks, node repair per provisioning mode."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import load_preset
from gpufarm.core import gpu_health
from gpufarm.core.endpoints import HEALTH_PATH
from gpufarm.k8s.serving import AGENT_CONTAINER, AGENT_DATA_PORT_NAME
from tests.unit.upstream_ref import containers, pod_specs, runs_vllm_serve

from .helpers import helm_releases, manifests, resources

PRESETS = ("poc", "production", "enterprise")


@pytest.fixture(params=PRESETS)
def tier(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    name: str = request.param
    template: dict[str, Any] = request.getfixturevalue(f"{name}_template")
    return name, template


def _containers(template: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) of every container and init container the tier applies."""
    out = []
    for manifest in manifests(template):
        for pod in pod_specs(manifest):
            for container in containers(pod):
                out.append((pod, container))
    return out


def test_every_vllm_server_tells_loading_serving_and_dead_apart(tier: tuple[str, dict[str, Any]]) -> None:
    name, template = tier
    startup_timeouts = {m.startup_timeout_seconds for m in load_preset(name).models}
    servers = [c for _, c in _containers(template) if runs_vllm_serve(c) and "readinessProbe" in c]
    assert servers, f"{name} runs no vLLM server"
    for container in servers:
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert container[probe]["httpGet"] == {"path": HEALTH_PATH, "port": "http"}
        startup = container["startupProbe"]
        window = startup["periodSeconds"] * startup["failureThreshold"]
        # The loading window covers one of the tier's startup timeouts, to within a period.
        assert any(t <= window < t + startup["periodSeconds"] for t in startup_timeouts)
        readiness, liveness = container["readinessProbe"], container["livenessProbe"]
        assert readiness["periodSeconds"] * readiness["failureThreshold"] == gpu_health.readiness_seconds()
        assert liveness["periodSeconds"] * liveness["failureThreshold"] == gpu_health.liveness_seconds()
        for probe in (startup, readiness, liveness):
            assert probe["timeoutSeconds"] < probe["periodSeconds"], "a probe ends before the next starts"


def test_readiness_acts_before_liveness(tier: tuple[str, dict[str, Any]]) -> None:
    # A pod whose engine died leaves its Service before the kubelet would restart a hung one.
    assert gpu_health.readiness_seconds() < gpu_health.liveness_seconds()


def test_every_target_optimizer_agent_is_probed_on_its_data_port(tier: tuple[str, dict[str, Any]]) -> None:
    name, template = tier
    agents = [c for _, c in _containers(template) if c["name"] == AGENT_CONTAINER]
    if load_preset(name).ingress.target_optimizer.enabled:
        assert agents
    for agent in agents:
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert agent[probe]["tcpSocket"] == {"port": AGENT_DATA_PORT_NAME}
            assert agent[probe]["failureThreshold"] == gpu_health.AGENT_FAILURE_THRESHOLD


def test_target_groups_mark_a_dead_engine_unhealthy_at_the_documented_pace(
    tier: tuple[str, dict[str, Any]],
) -> None:
    name, template = tier
    interval = load_preset(name).ingress.health_check_interval_seconds
    groups = resources(template, "AWS::ElasticLoadBalancingV2::TargetGroup")
    serving = {
        k: g["Properties"] for k, g in groups.items() if g["Properties"].get("HealthCheckPath") == HEALTH_PATH
    }
    assert serving, f"{name} has no target group checking {HEALTH_PATH}"
    for props in serving.values():
        assert props["HealthCheckIntervalSeconds"] == interval
        assert props["UnhealthyThresholdCount"] == gpu_health.TARGET_UNHEALTHY_THRESHOLD
        seconds = props["HealthCheckIntervalSeconds"] * props["UnhealthyThresholdCount"]
        assert seconds == gpu_health.target_unhealthy_seconds(interval)


def _addons(template: dict[str, Any]) -> set[str]:
    return {a["Properties"]["AddonName"] for a in resources(template, "AWS::EKS::Addon").values()}


def test_auto_mode_brings_its_own_monitoring_agent(poc_template: dict[str, Any]) -> None:
    # Auto Mode includes the agent and repairs nodes by default: no add-on, no node group.
    assert gpu_health.NODE_MONITORING_AGENT_ADDON not in _addons(poc_template)
    assert not resources(poc_template, "AWS::EKS::Nodegroup")


@pytest.mark.parametrize("name", ["production", "enterprise"])
def test_karpenter_tiers_repair_gpu_nodes(name: str, request: pytest.FixtureRequest) -> None:
    template: dict[str, Any] = request.getfixturevalue(f"{name}_template")
    assert gpu_health.NODE_MONITORING_AGENT_ADDON in _addons(template)
    (values,) = [v for chart, _, v in helm_releases(template) if chart == "karpenter"]
    assert values["settings"]["featureGates"] == {"nodeRepair": True}


@pytest.mark.parametrize("name", ["production", "enterprise"])
def test_every_managed_node_group_repairs_its_nodes(name: str, request: pytest.FixtureRequest) -> None:
    template: dict[str, Any] = request.getfixturevalue(f"{name}_template")
    groups = resources(template, "AWS::EKS::Nodegroup")
    assert groups
    for group in groups.values():
        assert group["Properties"]["NodeRepairConfig"] == {"Enabled": True}
