"""EKS Hybrid Nodes in a tier: the hybrid_nodes section, the on-premises class, and every refusal."""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import ConfigError
from gpufarm.core.hybrid import HYBRID_COMPUTE_TYPE_LABEL, cidr_problems, node_affinities, node_affinity
from gpufarm.core.labels import CAPACITY_CLASS_LABEL
from gpufarm.core.placement import node_selector
from gpufarm.core.pools import pool_loads

from .factories import enterprise_document, enterprise_part, make_enterprise, make_production, overrides

GATEWAY = "tgw-0a1b2c3d4e5f60718"
ANCHOR = "arn:aws:rolesanywhere:us-east-1:210987654321:trust-anchor/0f8f2bc4-8b2a-4c1e-9a57-1b2c3d4e5f60"
PROFILE = "arn:aws:rolesanywhere:us-east-1:210987654321:profile/1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"

HOSTS = [{"name": "dc1-h100", "nodes": 2, "gpus_per_node": 8, "gpu_type": "h100", "vcpus_per_node": 96}]
"""Two on-premises hosts of 8 H100s: 16 GPUs, 192 vCPUs."""

HYBRID: dict[str, Any] = {
    "hybrid_nodes": {
        "enabled": True,
        "remote_node_cidrs": ["192.168.0.0/20"],
        "remote_pod_cidrs": ["192.168.64.0/18"],
        "gateway_id": GATEWAY,
        "gpus": HOSTS,
    }
}

ON_PREM_70B = enterprise_part(
    "models", 1, capacity_class="on-prem", weights="Qwen/Qwen2.5-72B-Instruct", served_model_name=None
)
"""The enterprise 70B-class model (4 GPUs, 1-4 replicas, Bedrock fallback) on the on-premises class."""

BURST_POOL = {
    "name": "onprem-burst",
    "purpose": "serving",
    "capacity_class": "on-prem",
    "instance_families": ["p5"],
    "instance_types": ["p5.48xlarge"],
    "capacity_types": ["on-demand"],
    "gpu_limit": 8,
    "weight": 40,
    "root_volume_gib": 1000,
    "consolidate_after": "1h",
    "expire_after": "720h",
}
"""A cloud pool in the on-premises class: where the class bursts when the hosts are full."""


def with_burst() -> dict[str, Any]:
    return {"node_pools": [*enterprise_document()["node_pools"], BURST_POOL]}


def hybrid(**fields: Any) -> dict[str, Any]:
    """HYBRID with `fields` of the section changed."""
    return overrides(HYBRID, {"hybrid_nodes": fields})


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_enterprise(*parts)
    return [str(issue) for issue in caught.value.issues]


# --------------------------------------------------------------------------- a valid section


def test_section_is_off_by_default_and_the_presets_leave_it_off() -> None:
    tier = make_enterprise()
    assert not tier.hybrid_nodes.enabled
    assert node_affinities(tier) == {}


def test_inventory_counts_gpus_and_vcpus() -> None:
    tier = make_enterprise(HYBRID)
    # 2 hosts x 8 GPUs, 2 hosts x 96 vCPUs.
    assert (tier.hybrid_nodes.gpu_count, tier.hybrid_nodes.vcpus) == (16, 192)


def test_on_prem_model_selects_hybrid_nodes_only_when_no_cloud_pool_shares_the_class() -> None:
    tier = make_enterprise(HYBRID, ON_PREM_70B)
    model = tier.models[1]
    hybrid_term = {"key": HYBRID_COMPUTE_TYPE_LABEL, "operator": "In", "values": ["hybrid"]}
    assert node_affinity(tier, model) == {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [hybrid_term]}]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [hybrid_term]}}
        ],
    }
    # No node selector: a NodePool or class label would keep the pods off the hybrid nodes.
    assert node_selector(tier, model) is None


def test_cascade_hybrid_first_then_the_class_cloud_pool() -> None:
    tier = make_enterprise(HYBRID, with_burst(), ON_PREM_70B)
    terms = node_affinity(tier, tier.models[1])["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]  # type: ignore[index]
    # Hybrid nodes first (Karpenter takes the first term it can satisfy; none provides hybrid
    # nodes), then any cloud node of the class, which Karpenter launches from the burst pool.
    assert [t["matchExpressions"][0]["key"] for t in terms] == [
        HYBRID_COMPUTE_TYPE_LABEL,
        CAPACITY_CLASS_LABEL,
    ]
    assert terms[1]["matchExpressions"][0]["values"] == ["on-prem"]


def test_on_prem_gpus_fill_before_the_burst_pool() -> None:
    # The model asks 4 GPUs x 1 replica at base, x 4 at peak: 4 and 16 GPUs. The 16 on-premises
    # GPUs hold both, so the burst pool's load is 0 at base and at peak.
    tier = make_enterprise(HYBRID, with_burst(), ON_PREM_70B)
    burst = next(load for load in pool_loads(tier) if load.name == "onprem-burst")
    assert (burst.base_gpus, burst.peak_gpus) == (0, 0)


def test_burst_pool_takes_what_the_hosts_cannot() -> None:
    # One host (8 GPUs): at peak 16 GPUs are asked, 8 stay on-premises and 8 burst.
    one_host = hybrid(gpus=[{**HOSTS[0], "nodes": 1}])
    tier = make_enterprise(one_host, with_burst(), ON_PREM_70B)
    burst = next(load for load in pool_loads(tier) if load.name == "onprem-burst")
    assert (burst.base_gpus, burst.peak_gpus) == (0, 8)


def test_roles_anywhere_takes_its_trust_anchor_and_profile() -> None:
    tier = make_enterprise(
        hybrid(credential_provider="iam-roles-anywhere", trust_anchor_arn=ANCHOR, profile_arn=PROFILE)
    )
    assert tier.hybrid_nodes.trust_anchor_arn == ANCHOR


def test_cidr_problems_accepts_what_eks_accepts() -> None:
    assert (
        cidr_problems(vpc_cidr="10.0.0.0/16", node_cidrs=["172.16.0.0/16"], pod_cidrs=["192.168.0.0/16"])
        == []
    )


# --------------------------------------------------------------------------- refusals

AUTO_MODE_WHY = (
    "EKS accepts hybrid nodes beside Auto Mode, but hybrid nodes need the kube-proxy and CoreDNS "
    "add-ons and a Cilium or Calico CNI, and gpufarm's auto-mode tiers install no add-ons "
    "(docs/decisions/0068-hybrid-nodes.md); use 'karpenter'"
)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        pytest.param(
            [hybrid(remote_node_cidrs=["10.0.128.0/20"])],
            "hybrid_nodes.remote_node_cidrs[0]: must not overlap the VPC's network.cidr '10.0.0.0/16', "
            "got '10.0.128.0/20'",
            id="node-cidr-overlaps-vpc",
        ),
        pytest.param(
            [hybrid(remote_pod_cidrs=["10.0.0.0/8"])],
            "hybrid_nodes.remote_pod_cidrs[0]: must not overlap the VPC's network.cidr '10.0.0.0/16', "
            "got '10.0.0.0/8'",
            id="pod-cidr-contains-vpc",
        ),
        pytest.param(
            [hybrid(remote_node_cidrs=["100.64.0.0/16"])],
            "hybrid_nodes.remote_node_cidrs[0]: must be within an RFC 1918 range ('10.0.0.0/8', "
            "'172.16.0.0/12', '192.168.0.0/16'; EKS refuses publicly routable remote networks), got "
            "'100.64.0.0/16'",
            id="node-cidr-cgnat",
        ),
        pytest.param(
            [hybrid(remote_pod_cidrs=["52.94.0.0/22"])],
            "hybrid_nodes.remote_pod_cidrs[0]: must be within an RFC 1918 range ('10.0.0.0/8', "
            "'172.16.0.0/12', '192.168.0.0/16'; EKS refuses publicly routable remote networks), got "
            "'52.94.0.0/22'",
            id="pod-cidr-public",
        ),
        pytest.param(
            [hybrid(remote_pod_cidrs=["192.168.8.0/21"])],
            "hybrid_nodes.remote_pod_cidrs[0]: must not overlap remote_node_cidrs[0] '192.168.0.0/20', "
            "got '192.168.8.0/21'",
            id="pod-cidr-overlaps-node-cidr",
        ),
        pytest.param(
            [hybrid(remote_node_cidrs=["192.168.0.0/20", "192.168.4.0/24"])],
            "hybrid_nodes.remote_node_cidrs[1]: must not overlap remote_node_cidrs[0] '192.168.0.0/20', "
            "got '192.168.4.0/24'",
            id="node-cidrs-overlap-each-other",
        ),
        pytest.param(
            [hybrid(remote_node_cidrs=["10.100.8.0/24"])],
            "hybrid_nodes.remote_node_cidrs[0]: must not overlap the Kubernetes service range EKS may "
            "pick ('10.100.0.0/16' or '172.20.0.0/16'; it overlaps '10.100.0.0/16'), got '10.100.8.0/24'",
            id="node-cidr-overlaps-service-range",
        ),
        pytest.param(
            [hybrid(remote_node_cidrs=[])],
            "hybrid_nodes.remote_node_cidrs: must list the on-premises network the hybrid nodes' "
            "addresses come from (EKS RemoteNodeNetworks), got []",
            id="no-node-cidrs",
        ),
        pytest.param(
            [hybrid(gateway_id=None)],
            "hybrid_nodes.gateway_id: must name the transit gateway ('tgw-...') or virtual private "
            "gateway ('vgw-...') attached to the VPC that reaches the on-premises networks (the private "
            "subnets route the remote CIDRs to it), got None",
            id="no-gateway",
        ),
        pytest.param(
            [hybrid(credential_provider="iam-roles-anywhere")],
            "hybrid_nodes.trust_anchor_arn: must name the IAM Roles Anywhere trust anchor with "
            "credential_provider 'iam-roles-anywhere' (the hybrid nodes role trusts only sessions from "
            "it), got None",
            id="roles-anywhere-without-anchor",
        ),
        pytest.param(
            [hybrid(trust_anchor_arn=ANCHOR)],
            "hybrid_nodes.trust_anchor_arn: must be empty with credential_provider 'ssm' (EKS hybrid "
            "nodes use SSM hybrid activations or IAM Roles Anywhere, not both), got "
            f"{ANCHOR!r}",
            id="ssm-with-anchor",
        ),
        pytest.param(
            [
                HYBRID,
                {
                    "cluster": {
                        "endpoint_access": "public_and_private",
                        "public_access_cidrs": ["198.18.0.0/24"],
                    }
                },
            ],
            "cluster.endpoint_access: must be 'private' with hybrid_nodes (with a public and a private "
            "endpoint the API name resolves to public IPs for hosts outside the VPC), got "
            "'public_and_private'",
            id="public-and-private-endpoint",
        ),
        pytest.param(
            [hybrid(gpus=[HOSTS[0], HOSTS[0]])],
            "hybrid_nodes.gpus: must name each set of hosts once, got 'dc1-h100' 2 times",
            id="host-set-twice",
        ),
        pytest.param(
            [ON_PREM_70B],
            "models[1].capacity_class: must name a capacity class; 'on-prem' is the class of on-premises "
            "GPUs, which needs hybrid_nodes.enabled: true and the hosts in hybrid_nodes.gpus, got 'on-prem'",
            id="on-prem-class-without-hybrid-nodes",
        ),
        pytest.param(
            [hybrid(remote_pod_cidrs=[]), ON_PREM_70B],
            "hybrid_nodes.remote_pod_cidrs: must list the hybrid nodes' pod CIDRs while models[1] runs "
            "on-premises (the load balancer targets pod IPs, which must be routable from the VPC), got []",
            id="on-prem-model-without-pod-cidrs",
        ),
        pytest.param(
            [HYBRID, enterprise_part("models", 1, capacity_class="on-prem")],
            "models[1].weights: must be a Hugging Face repo id on the on-premises class (the Mountpoint "
            "for S3 and FSx for Lustre CSI drivers are not supported on EKS hybrid nodes), got "
            "'s3://gpufarm-enterprise-models/meta-llama/Llama-3.3-70B-Instruct/'",
            id="on-prem-model-with-s3-weights",
        ),
        pytest.param(
            [
                HYBRID,
                enterprise_part(
                    "models",
                    0,
                    node_pool=None,
                    capacity_class="on-prem",
                    weights="meta-llama/Llama-3.1-405B-Instruct-FP8",
                ),
            ],
            "models[0].capacity_class: must not be the on-premises class for a multi-node or "
            "prefill/decode model (gpufarm keeps their node-to-node traffic inside the VPC), got 'on-prem'",
            id="multi-node-on-prem",
        ),
        pytest.param(
            [hybrid(gpus=[{**HOSTS[0], "gpus_per_node": 2}]), ON_PREM_70B],
            "models[1].gpus: must fit one on-premises host (the largest in hybrid_nodes.gpus has 2 "
            "GPUs), got 4",
            id="model-larger-than-a-host",
        ),
        pytest.param(
            [hybrid(gpus=[{**HOSTS[0], "nodes": 1}]), ON_PREM_70B],
            "hybrid_nodes.gpus: must hold the GPUs of the models on class 'on-prem' (16 requested, no "
            "cloud pool shares the class to burst into), got 8",
            id="hosts-too-few-without-burst",
        ),
    ],
)
def test_refused_with_exact_message(parts: list[dict[str, Any]], expected: str) -> None:
    assert expected in issues_of(*parts)


@pytest.mark.parametrize(
    ("provisioning", "why"),
    [
        ("auto-mode", AUTO_MODE_WHY),
        ("ec2", "it has no EKS cluster to join"),
        ("sagemaker", "it has no EKS cluster to join"),
    ],
)
def test_hybrid_nodes_need_karpenter_provisioning(provisioning: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_production(HYBRID, {"cluster": {"provisioning": provisioning}})
    assert f"hybrid_nodes.enabled: must be false with provisioning {provisioning!r} ({why}), got true" in [
        str(i) for i in caught.value.issues
    ]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        (
            "gateway_id",
            "igw-0a1b2c3d",
            "must be a transit gateway ('tgw-...') or virtual private gateway ('vgw-...') ID, "
            "got 'igw-0a1b2c3d'",
        ),
        (
            "trust_anchor_arn",
            "arn:aws:iam::210987654321:role/x",
            "must be an IAM Roles Anywhere trust anchor ARN "
            "(arn:aws:rolesanywhere:<region>:<account>:trust-anchor/<id>), "
            "got 'arn:aws:iam::210987654321:role/x'",
        ),
    ],
)
def test_field_formats(field: str, value: str, expected: str) -> None:
    messages = issues_of(hybrid(**{field: value}))
    assert any(m.startswith(f"hybrid_nodes.{field}") and m.endswith(expected) for m in messages), messages
