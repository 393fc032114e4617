"""Checks of the environment, network and cluster sections, and of the namespaces gpufarm takes."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from gpufarm.config.checks.common import _instance_architecture, _quoted, _repeats
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import CoreAddon, EndpointAccess, Provisioning, TierConfig
from gpufarm.core.instances import is_accelerated

KUBECTL_VERSION = "1.35"
"""kubectl minor version of the kubectl provider (package aws-cdk.lambda-layer-kubectl-v35)."""


SUPPORTED_KUBERNETES_VERSIONS = ("1.34", "1.35", "1.36")
"""Cluster versions the bundled kubectl (1.35) can manage: its minor version and one either side
(docs/decisions/0006-kubectl-version-skew.md)."""


def _environment(cfg: TierConfig) -> Iterator[ConfigIssue]:
    env = cfg.environment
    for i, az in enumerate(env.availability_zones):
        suffix = az[len(env.region) :]
        if not az.startswith(env.region) or len(suffix) != 1 or not suffix.isalpha():
            yield ConfigIssue(
                path=f"environment.availability_zones[{i}]",
                message=f"must be an availability zone of region {env.region!r} "
                f"(such as '{env.region}a'), got {az!r}",
            )
    yield from _repeats(
        "environment.availability_zones", env.availability_zones, "must not repeat an availability zone"
    )


def _network(cfg: TierConfig) -> Iterator[ConfigIssue]:
    net = cfg.network
    azs = len(cfg.environment.availability_zones)
    if net.nat_gateways > azs:
        yield ConfigIssue(
            path="network.nat_gateways",
            message=f"must be at most the number of availability zones ({azs}), got {net.nat_gateways}",
        )
    if net.nat_gateways == 0:
        yield ConfigIssue(
            path="network.nat_gateways",
            message="must be at least 1 for a tier: GPU nodes pull the vLLM image and Hugging Face "
            "weights through NAT, and Auto Mode nodes reach AWS APIs that have no endpoint here, got 0",
        )
    prefix = ipaddress.IPv4Network(net.cidr).prefixlen
    if not 16 <= prefix <= 20:
        yield ConfigIssue(
            path="network.cidr",
            message=f"must be a /16 to /20 block (room for a private subnet per AZ), got {net.cidr!r}",
        )
    yield from _repeats(
        "network.interface_endpoints",
        [e.value for e in net.interface_endpoints],
        "must not list an endpoint twice",
    )


def _cluster(cfg: TierConfig) -> Iterator[ConfigIssue]:
    cl = cfg.cluster
    if cl.kubernetes_version not in SUPPORTED_KUBERNETES_VERSIONS:
        yield ConfigIssue(
            path="cluster.kubernetes_version",
            message=f"must be one of {_quoted(SUPPORTED_KUBERNETES_VERSIONS)}, got {cl.kubernetes_version!r}",
        )
    if cl.endpoint_access is EndpointAccess.PUBLIC_AND_PRIVATE and not cl.public_access_cidrs:
        yield ConfigIssue(
            path="cluster.public_access_cidrs",
            message="must list at least one CIDR when endpoint_access is 'public_and_private' "
            "(the public endpoint is never open to everyone by default), got []",
        )
    if cl.provisioning is Provisioning.AUTO_MODE and not cl.auto_mode_builtin_pools:
        yield ConfigIssue(
            path="cluster.auto_mode_builtin_pools",
            message="must enable at least one of 'system', 'general-purpose' with auto-mode "
            "provisioning (GPU pools use the 'default' NodeClass, which exists only while a "
            "built-in pool is enabled), got []",
        )
    if cl.endpoint_access is EndpointAccess.PRIVATE and cl.public_access_cidrs:
        yield ConfigIssue(
            path="cluster.public_access_cidrs",
            message=f"must be empty when endpoint_access is 'private', got {cl.public_access_cidrs!r}",
        )
    nodes = cl.system_nodes
    if not nodes.min_size <= nodes.desired_size <= nodes.max_size:
        yield ConfigIssue(
            path="cluster.system_nodes",
            message="must satisfy min_size <= desired_size <= max_size, got "
            f"{nodes.min_size} <= {nodes.desired_size} <= {nodes.max_size}",
        )
    yield from _repeats(
        "cluster.core_addons", [a.value for a in cl.core_addons], "must not list an add-on twice"
    )
    if cl.provisioning is Provisioning.KARPENTER and cfg.karpenter.replicas > nodes.min_size:
        yield ConfigIssue(
            path="karpenter.replicas",
            message="must be at most cluster.system_nodes.min_size "
            f"({nodes.min_size}; each controller replica needs its own system node), "
            f"got {cfg.karpenter.replicas}",
        )
    if cl.provisioning is Provisioning.KARPENTER:
        missing = {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"} - {
            a.value for a in cl.core_addons
        }
        if missing:
            yield ConfigIssue(
                path="cluster.core_addons",
                message="must include 'vpc-cni', 'coredns', 'kube-proxy' and 'eks-pod-identity-agent' "
                "with karpenter provisioning (pod networking, DNS and Pod Identity for the "
                f"controllers), missing {_quoted(sorted(missing))}",
            )
    if (
        cl.provisioning is Provisioning.KARPENTER
        and cfg.karpenter.node_repair
        and CoreAddon.NODE_MONITORING_AGENT not in cl.core_addons
    ):
        # Karpenter repairs on the conditions the agent sets (AcceleratedHardwareReady for a
        # GPU); without it only a node that stops being Ready for 30 minutes is replaced
        # (https://karpenter.sh/docs/concepts/disruption/#node-auto-repair).
        yield ConfigIssue(
            path="cluster.core_addons",
            message="must include 'eks-node-monitoring-agent' while karpenter.node_repair is on "
            "(the agent reports the GPU faults Karpenter repairs), got "
            f"{_quoted([a.value for a in cl.core_addons])}",
        )


KUBERNETES_SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
"""Namespaces every Kubernetes cluster creates for itself."""


GPUFARM_CONTROLLER_NAMESPACES = ("lws-system", "dcgm-exporter")
"""Fixed namespaces of controllers gpufarm installs: LeaderWorkerSet
(`gpufarm.k8s.lws.LWS_NAMESPACE`) and the DCGM exporter
(`gpufarm.constructs.observability.DCGM_NAMESPACE`); a test keeps them equal. Karpenter's and
KEDA's come from `karpenter.namespace` and `autoscaling.namespace`."""


def _system_nodes(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """System-node instance types, checked before the CDK reads them (only karpenter uses them)."""
    if cfg.cluster.provisioning is not Provisioning.KARPENTER:
        return
    types = cfg.cluster.system_nodes.instance_types
    by_arch: dict[str, list[str]] = {}
    for j, itype in enumerate(types):
        path = f"cluster.system_nodes.instance_types[{j}]"
        arch = _instance_architecture(itype)
        if arch is None:
            yield ConfigIssue(
                path=path,
                message="must be an EC2 instance type such as 'm7i.xlarge' (family, generation, "
                f"capabilities, '.', size), got {itype!r}",
            )
            continue
        if is_accelerated(itype):
            yield ConfigIssue(
                path=path,
                message="must be a CPU instance type (system pods use no GPU or other accelerator; "
                f"GPU capacity belongs in node_pools or node_groups), got {itype!r}",
            )
            continue
        by_arch.setdefault(arch, []).append(itype)
    if len(by_arch) > 1:
        found = " and ".join(f"{arch} {names!r}" for arch, names in sorted(by_arch.items()))
        yield ConfigIssue(
            path="cluster.system_nodes.instance_types",
            message=f"must share one CPU architecture (one AMI serves the node group), got {found}",
        )
    yield from _repeats(
        "cluster.system_nodes.instance_types", list(types), "must not list an instance type twice"
    )


def _namespaces(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """The serving namespace is gpufarm's own: not a system namespace nor a controller's."""
    namespace = cfg.serving.namespace
    owners = {name: "a Kubernetes system namespace" for name in KUBERNETES_SYSTEM_NAMESPACES}
    for name in GPUFARM_CONTROLLER_NAMESPACES:
        owners.setdefault(name, "the namespace of a controller gpufarm installs")
    owners.setdefault(cfg.karpenter.namespace, "karpenter.namespace (Karpenter's controller)")
    owners.setdefault(cfg.autoscaling.namespace, "autoscaling.namespace (KEDA's operator)")
    if namespace in owners:
        yield ConfigIssue(
            path="serving.namespace",
            message=f"must be a namespace of its own (gpufarm creates it, labels it and deletes it "
            f"with the stack), not {owners[namespace]}, got {namespace!r}",
        )
    clients = cfg.serving.allowed_client_namespaces
    if namespace in clients:
        yield ConfigIssue(
            path="serving.allowed_client_namespaces",
            message=f"must name other namespaces than serving.namespace (gpufarm's own pods are "
            f"allowed by their own policies), got {namespace!r}",
        )
    yield from _repeats("serving.allowed_client_namespaces", list(clients), "must list each namespace once")
