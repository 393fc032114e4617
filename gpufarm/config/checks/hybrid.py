"""Checks of the hybrid_nodes section and of the models that run on the on-premises class.

Every rule cites where it comes from; the EKS address rules are in :mod:`gpufarm.core.hybrid`.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import CredentialProvider, EndpointAccess, ModelConfig, Provisioning, TierConfig
from gpufarm.core.hybrid import cidr_problems, runs_on_prem

_WHY_NOT_AUTO_MODE = (
    "EKS accepts hybrid nodes beside Auto Mode, but hybrid nodes need the kube-proxy and CoreDNS "
    "add-ons and a Cilium or Calico CNI, and gpufarm's auto-mode tiers install no add-ons "
    "(docs/decisions/0068-hybrid-nodes.md); use 'karpenter'"
)


def _placements(cfg: TierConfig) -> Iterator[tuple[str, ModelConfig]]:
    """(path, model or share) for every placement in the config."""
    for i, model in enumerate(cfg.models):
        if model.shares:
            for j, share in enumerate(model.shares):
                yield f"models[{i}].shares[{j}]", model.as_share(share)
        else:
            yield f"models[{i}]", model


def _section(cfg: TierConfig) -> Iterator[ConfigIssue]:
    hn = cfg.hybrid_nodes
    mode = cfg.cluster.provisioning
    if mode is not Provisioning.KARPENTER:
        why = _WHY_NOT_AUTO_MODE if mode is Provisioning.AUTO_MODE else "it has no EKS cluster to join"
        yield ConfigIssue(
            path="hybrid_nodes.enabled",
            message=f"must be false with provisioning {mode.value!r} ({why}), got true",
        )
        return
    if not hn.remote_node_cidrs:
        yield ConfigIssue(
            path="hybrid_nodes.remote_node_cidrs",
            message="must list the on-premises network the hybrid nodes' addresses come from "
            "(EKS RemoteNodeNetworks), got []",
        )
    for p in cidr_problems(
        vpc_cidr=cfg.network.cidr, node_cidrs=hn.remote_node_cidrs, pod_cidrs=hn.remote_pod_cidrs
    ):
        yield ConfigIssue(path=f"hybrid_nodes.{p.field}[{p.index}]", message=p.message)
    if hn.gateway_id is None:
        yield ConfigIssue(
            path="hybrid_nodes.gateway_id",
            message="must name the transit gateway ('tgw-...') or virtual private gateway ('vgw-...') "
            "attached to the VPC that reaches the on-premises networks (the private subnets route "
            "the remote CIDRs to it), got None",
        )
    ira = hn.credential_provider is CredentialProvider.IAM_ROLES_ANYWHERE
    if ira and hn.trust_anchor_arn is None:
        yield ConfigIssue(
            path="hybrid_nodes.trust_anchor_arn",
            message="must name the IAM Roles Anywhere trust anchor with credential_provider "
            "'iam-roles-anywhere' (the hybrid nodes role trusts only sessions from it), got None",
        )
    if not ira:
        for field in ("trust_anchor_arn", "profile_arn"):
            if getattr(hn, field) is not None:
                yield ConfigIssue(
                    path=f"hybrid_nodes.{field}",
                    message="must be empty with credential_provider 'ssm' (EKS hybrid nodes use SSM "
                    f"hybrid activations or IAM Roles Anywhere, not both), got {getattr(hn, field)!r}",
                )
    if cfg.cluster.endpoint_access is EndpointAccess.PUBLIC_AND_PRIVATE:
        # hybrid-nodes-cluster-create.adoc: "Your cluster cannot use 'Public and Private' cluster
        # endpoint connectivity, because the Amazon EKS Kubernetes API server endpoint will resolve
        # to the public IPs for hybrid nodes running outside of your VPC."
        yield ConfigIssue(
            path="cluster.endpoint_access",
            message="must be 'private' with hybrid_nodes (with a public and a private endpoint the API "
            "name resolves to public IPs for hosts outside the VPC), got 'public_and_private'",
        )
    names = [g.name for g in hn.gpus]
    for name in sorted({n for n in names if names.count(n) > 1}):
        yield ConfigIssue(
            path="hybrid_nodes.gpus",
            message=f"must name each set of hosts once, got {name!r} {names.count(name)} times",
        )


def _on_prem_models(cfg: TierConfig) -> Iterator[ConfigIssue]:
    hn = cfg.hybrid_nodes
    demand = 0
    largest_host = max((g.gpus_per_node for g in hn.gpus), default=0)
    for where, model in _placements(cfg):
        if (
            not hn.enabled
            and model.capacity_class == hn.capacity_class
            and hn.capacity_class not in cfg.capacity_classes()
        ):
            yield ConfigIssue(
                path=f"{where}.capacity_class",
                message=f"must name a capacity class; {hn.capacity_class!r} is the class of on-premises "
                "GPUs, which needs hybrid_nodes.enabled: true and the hosts in hybrid_nodes.gpus, got "
                f"{model.capacity_class!r}",
            )
            continue
        if not runs_on_prem(cfg, model):
            continue
        if not hn.remote_pod_cidrs:
            # hybrid-nodes-webhooks.adoc: "If you are using Application Load Balancers (ALB) or
            # Network Load Balancers (NLB) for workload traffic running on hybrid nodes, then the IP
            # target(s) used with the ALB or NLB must be routable from AWS."
            yield ConfigIssue(
                path="hybrid_nodes.remote_pod_cidrs",
                message=f"must list the hybrid nodes' pod CIDRs while {where} runs on-premises (the load "
                "balancer targets pod IPs, which must be routable from the VPC), got []",
            )
        if model.is_s3:
            # hybrid-nodes-add-ons.adoc: "Only the add-ons included on this page have been validated
            # for compatibility with Amazon EKS Hybrid Nodes"; neither CSI driver is listed.
            yield ConfigIssue(
                path=f"{where}.weights",
                message="must be a Hugging Face repo id on the on-premises class (the Mountpoint for S3 "
                "and FSx for Lustre CSI drivers are not supported on EKS hybrid nodes), got "
                f"{model.weights!r}",
            )
        if model.pipeline_parallel > 1 or model.prefill_decode is not None:
            yield ConfigIssue(
                path=f"{where}.capacity_class",
                message="must not be the on-premises class for a multi-node or prefill/decode model "
                "(gpufarm keeps their node-to-node traffic inside the VPC), got "
                f"{model.capacity_class!r}",
            )
        if model.gpus > largest_host and not cfg.capacity_classes().get(hn.capacity_class):
            yield ConfigIssue(
                path=f"{where}.gpus",
                message=f"must fit one on-premises host (the largest in hybrid_nodes.gpus has "
                f"{largest_host} GPUs), got {model.gpus}",
            )
        demand += model.gpus * model.max_replicas * model.pipeline_parallel
    have = hn.gpu_count
    if hn.enabled and demand > have and not cfg.capacity_classes().get(hn.capacity_class):
        yield ConfigIssue(
            path="hybrid_nodes.gpus",
            message=f"must hold the GPUs of the models on class {hn.capacity_class!r} ({demand} "
            f"requested, no cloud pool shares the class to burst into), got {have}",
        )


def _hybrid_nodes(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """The hybrid nodes section, when enabled, and every model that selects the on-premises class."""
    if cfg.hybrid_nodes.enabled:
        yield from _section(cfg)
    yield from _on_prem_models(cfg)
