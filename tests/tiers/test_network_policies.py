"""Every tier's NetworkPolicies against the flows its template needs: needed flows allowed, the rest denied.

The flows come from what each template deploys (tests/tiers/flows.py), the verdicts from the
NetworkPolicy evaluator (tests/netpol.py); the probes cover every pair of the tier's pods and
outside endpoints (a load balancer's address in the VPC, the internet, the Pod Identity agent,
kube-system's pods, another namespace's pods with and without a VPC address) on every container
port and the ports of Ray, NCCL, DNS, HTTPS and SSH.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gpufarm.k8s.lws import RAY_CLIENT_PORT, RAY_PORT
from tests.tiers.flows import Tier, check_closed_world, read_tier, unselected_pods
from tests.tiers.helpers import KUBERNETES_RESOURCE, flatten, resources

TIERS = ("poc", "production", "enterprise")
RAY_DASHBOARD_PORT = 8265
"""Ray's default dashboard port (https://docs.ray.io/en/latest/cluster/cli.html); gpufarm starts
the head with --include-dashboard=false, and the port stays fenced should it ever listen."""
NCCL_PORTS = (29500, 40000)
"""A usual NCCL/torch bootstrap port and an ephemeral one: NCCL and Gloo pick ports of their own."""


@pytest.fixture(scope="module")
def tiers(
    poc_template: dict[str, Any], production_template: dict[str, Any], enterprise_template: dict[str, Any]
) -> dict[str, Tier]:
    return {
        "poc": read_tier(poc_template),
        "production": read_tier(production_template),
        "enterprise": read_tier(enterprise_template),
    }


@pytest.mark.parametrize("name", TIERS)
def test_every_pod_is_isolated_in_both_directions(tiers: dict[str, Tier], name: str) -> None:
    tier = tiers[name]
    assert tier.pods, "the tier deploys pods"
    assert unselected_pods(tier) == []


@pytest.mark.parametrize("name", TIERS)
def test_policies_allow_exactly_the_needed_flows(tiers: dict[str, Tier], name: str) -> None:
    assert check_closed_world(tiers[name]) == []


def test_the_check_fails_on_a_denied_needed_flow_and_on_an_allowed_unneeded_one(
    tiers: dict[str, Tier],
) -> None:
    tier = copy.copy(tiers["enterprise"])
    group = [p for p in tier.policies if p["metadata"]["name"].endswith("-group-0")]
    tier.policies = [p for p in tier.policies if p not in group]
    denied = check_closed_world(tier)
    assert any("needed but denied" in d and f"TCP/{RAY_PORT}" in d for d in denied)
    allow_all = {
        "metadata": {"name": "allow-all", "namespace": tier.namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]},
    }
    tier.policies = [*tiers["enterprise"].policies, allow_all]
    assert any(
        "foreign-pod-off-vpc -> gateway" in d and "allowed but not needed" in d
        for d in check_closed_world(tier)
    )


@pytest.mark.parametrize("name", TIERS)
def test_other_namespaces_reach_no_gpufarm_pod(tiers: dict[str, Tier], name: str) -> None:
    """A pod of another namespace (outside the VPC's addresses) reaches no serving pod on any port."""
    tier = tiers[name]
    for pod in tier.pods:
        for port in {*pod.endpoint.ports.values(), RAY_PORT, RAY_CLIENT_PORT, *NCCL_PORTS}:
            assert not tier.allowed("foreign-pod-off-vpc", pod.id, port), (pod.id, port)
            assert not tier.allowed("kube-system-pod", pod.id, RAY_PORT), pod.id


def test_ray_head_and_nccl_are_fenced_to_the_group(tiers: dict[str, Tier]) -> None:
    tier = tiers["enterprise"]
    members = [p for p in tier.pods if p.group is not None]
    assert members, "the enterprise tier runs a LeaderWorkerSet"
    leader = next(p for p in members if p.endpoint.labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0")
    worker = next(p for p in members if p is not leader)
    # Inside the group: the worker joins the head's GCS, both talk NCCL.
    assert tier.allowed(worker.id, leader.id, RAY_PORT)
    for port in NCCL_PORTS:
        assert tier.allowed(leader.id, worker.id, port)
    # From anywhere else: no Ray port, no NCCL port, neither on the head nor on a worker.
    outsiders = [p.id for p in tier.pods if p.group != leader.group] + [
        "vpc-host",
        "foreign-pod",
        "foreign-pod-off-vpc",
        "kube-system-pod",
        "internet",
    ]
    for source in outsiders:
        for port in (RAY_PORT, RAY_CLIENT_PORT, RAY_DASHBOARD_PORT, *NCCL_PORTS):
            assert not tier.allowed(source, leader.id, port), (source, port)
            assert not tier.allowed(source, worker.id, port), (source, port)


@pytest.mark.parametrize("name", TIERS)
def test_no_pod_reaches_arbitrary_internet_ports(tiers: dict[str, Tier], name: str) -> None:
    tier = tiers[name]
    for pod in tier.pods:
        for port in (22, 80, 8080, 6379):
            assert not tier.allowed(pod.id, "internet", port), (pod.id, port)


def test_hugging_face_egress_only_for_models_that_download(tiers: dict[str, Tier]) -> None:
    """Production's models read S3 weights through FSx (no download); poc's downloads from Hugging Face."""
    poc, production = tiers["poc"], tiers["production"]
    assert poc.allowed("vllm-qwen3-8b", "internet", 443)
    for pod in production.pods:
        if pod.workload.startswith("vllm-"):
            assert not production.allowed(pod.id, "internet", 443), pod.id


def test_load_balancer_reaches_the_agents_data_and_control_ports(tiers: dict[str, Tier]) -> None:
    """Production runs the Target Optimizer: the ALB reaches the agent's data and control ports,
    which the flows derive from the binding's Service port and the target group's control port."""
    tier = tiers["production"]
    pod = tier.pod("vllm-llama-3-3-70b")
    for name in ("data", "control"):
        port = pod.endpoint.ports[name]
        assert ("vpc-host", pod.id, port, "TCP") in tier.needed
        assert tier.allowed("vpc-host", pod.id, port)
        assert not tier.allowed("foreign-pod-off-vpc", pod.id, port)


@pytest.mark.parametrize("name", TIERS)
def test_policies_are_one_manifest_applied_after_the_namespace(
    name: str, request: pytest.FixtureRequest
) -> None:
    template: dict[str, Any] = request.getfixturevalue(f"{name}_template")
    holders = {
        logical_id: json.loads(flatten(r["Properties"]["Manifest"]))
        for logical_id, r in resources(template, KUBERNETES_RESOURCE).items()
    }
    (policies,) = [k for k, docs in holders.items() if any(d["kind"] == "NetworkPolicy" for d in docs)]
    assert all(d["kind"] == "NetworkPolicy" for d in holders[policies])
    (namespace,) = [k for k, docs in holders.items() if any(d["kind"] == "Namespace" for d in docs)]
    assert namespace in template["Resources"][policies]["DependsOn"]
