"""EKS Hybrid Nodes: the address rules EKS applies to remote networks, and which models run on-premises.

One answer for the config check, `gpufarm preflight` (offline, before any AWS call) and the
placement of pods.

Sources (read 2026-12-02):

- RemoteNodeNetwork / RemotePodNetwork in the EKS API reference
  (https://docs.aws.amazon.com/eks/latest/APIReference/API_RemoteNodeNetwork.html): "Each block
  must be within an IPv4 RFC-1918 network range. Minimum allowed size is /32, maximum allowed size
  is /8", "cannot overlap with the range of the VPC CIDR blocks for your EKS resources, or the
  block of the Kubernetes service IP range"; `remoteNodeNetworks` and `remotePodNetworks` hold at
  most one item each (RemoteNetworkConfigResponse,
  https://docs.aws.amazon.com/eks/latest/APIReference/API_RemoteNetworkConfigResponse.html).
- "Prepare networking for hybrid nodes" (awsdocs/amazon-eks-user-guide
  latest/ug/nodes/hybrid-nodes-networking.adoc): the node and pod CIDRs must "not overlap with
  each other, the VPC CIDR for your EKS cluster, or your Kubernetes service IPv4 CIDR".
- KubernetesNetworkConfigRequest.serviceIpv4Cidr
  (https://docs.aws.amazon.com/eks/latest/APIReference/API_KubernetesNetworkConfigRequest.html):
  with none given (gpufarm gives none) "Kubernetes assigns addresses from either the
  10.100.0.0/16 or 172.20.0.0/16 CIDR blocks", so a remote network must avoid both.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpufarm.config.model import ModelConfig, TierConfig

RFC1918 = tuple(ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
"""The private ranges EKS accepts for remote node and pod networks."""

SERVICE_CIDR_CANDIDATES = tuple(ipaddress.IPv4Network(n) for n in ("10.100.0.0/16", "172.20.0.0/16"))
"""The Kubernetes service ranges EKS picks from when the cluster names none (gpufarm names none)."""

HYBRID_COMPUTE_TYPE_LABEL = "eks.amazonaws.com/compute-type"
"""Label EKS puts on every hybrid node, value `hybrid` (hybrid-nodes-cni.adoc: "they have the
`eks.amazonaws.com/compute-type: hybrid` label"; the VPC CNI has anti-affinity for it)."""

HYBRID_COMPUTE_TYPE = "hybrid"


@dataclass(frozen=True, kw_only=True)
class CidrProblem:
    """One remote CIDR that EKS would refuse, and why (the config check's words)."""

    field: str
    """`remote_node_cidrs` or `remote_pod_cidrs`."""
    index: int
    cidr: str
    message: str


def _private(network: ipaddress.IPv4Network) -> bool:
    return any(network.subnet_of(r) for r in RFC1918)


def cidr_problems(*, vpc_cidr: str, node_cidrs: list[str], pod_cidrs: list[str]) -> list[CidrProblem]:
    """Every remote node or pod CIDR that is not private, or overlaps the VPC, the service range
    candidates or another remote CIDR (each overlapping pair reported once, on the later one)."""
    vpc = ipaddress.IPv4Network(vpc_cidr)
    out: list[CidrProblem] = []
    seen: list[tuple[str, int, ipaddress.IPv4Network]] = []
    for field, cidrs in (("remote_node_cidrs", node_cidrs), ("remote_pod_cidrs", pod_cidrs)):
        for i, text in enumerate(cidrs):
            net = ipaddress.IPv4Network(text)

            def problem(message: str, i: int = i, text: str = text, field: str = field) -> None:
                out.append(CidrProblem(field=field, index=i, cidr=text, message=message))

            if not _private(net):
                problem(
                    "must be within an RFC 1918 range ('10.0.0.0/8', '172.16.0.0/12', "
                    f"'192.168.0.0/16'; EKS refuses publicly routable remote networks), got {text!r}"
                )
            elif net.overlaps(vpc):
                problem(f"must not overlap the VPC's network.cidr {vpc_cidr!r}, got {text!r}")
            elif clash := next((s for s in SERVICE_CIDR_CANDIDATES if net.overlaps(s)), None):
                problem(
                    f"must not overlap the Kubernetes service range EKS may pick ('10.100.0.0/16' or "
                    f"'172.20.0.0/16'; it overlaps {str(clash)!r}), got {text!r}"
                )
            elif other := next((s for s in seen if net.overlaps(s[2])), None):
                problem(f"must not overlap {other[0]}[{other[1]}] {str(other[2])!r}, got {text!r}")
            seen.append((field, i, net))
    return out


def on_prem_class(tier: TierConfig) -> str | None:
    """The capacity class of the hybrid nodes, or None when the tier has none."""
    return tier.hybrid_nodes.capacity_class if tier.hybrid_nodes.enabled else None


def runs_on_prem(tier: TierConfig, model: ModelConfig) -> bool:
    """True when a model (or share, as `ModelConfig.as_share` gives it) selects the hybrid nodes' class."""
    name = on_prem_class(tier)
    return name is not None and model.capacity_class == name


def node_affinity(tier: TierConfig, model: ModelConfig) -> dict[str, object] | None:
    """The node affinity of a model on the on-premises class; None for any other model.

    Required: a hybrid node, or (when cloud pools or node groups share the class, as burst) a
    cloud node of the class; the terms are ORed (Kubernetes, "Assign Pods to Nodes", node
    affinity) and Karpenter "will go through each of the nodeSelectorTerms in order and take the
    first one that works" (Karpenter docs, Scheduling, Node affinity), so it launches cloud nodes
    only for pods the hybrid nodes cannot hold. Preferred (weight 100): a hybrid node, so the
    scheduler fills the on-premises GPUs before cloud nodes of the class that have room.
    """
    if not runs_on_prem(tier, model):
        return None
    from gpufarm.core.labels import CAPACITY_CLASS_LABEL

    hybrid = {"key": HYBRID_COMPUTE_TYPE_LABEL, "operator": "In", "values": [HYBRID_COMPUTE_TYPE]}
    terms: list[dict[str, object]] = [{"matchExpressions": [hybrid]}]
    if tier.capacity_classes().get(model.capacity_class or ""):
        terms.append(
            {
                "matchExpressions": [
                    {"key": CAPACITY_CLASS_LABEL, "operator": "In", "values": [model.capacity_class]}
                ]
            }
        )
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "preference": {"matchExpressions": [hybrid]}}
        ],
    }


def node_affinities(tier: TierConfig) -> dict[str, dict[str, object]]:
    """The node affinity of every model (or `<model>/<share>`) that runs on-premises."""
    return {
        model.name if share is None else f"{model.name}/{share}": affinity
        for model in tier.models
        for share, part in model.parts()
        if (affinity := node_affinity(tier, part)) is not None
    }
