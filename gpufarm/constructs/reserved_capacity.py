"""Reserved GPU capacity: EKS managed node groups on On-Demand Capacity Reservations or Capacity
Blocks (the enterprise tier's always-on base), EFA interfaces, and the EFA device plugin."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_resourcegroups as resourcegroups
from constructs import Construct

from gpufarm.config.model import NodeGroupAmiType, NodeGroupConfig, ReservationKind
from gpufarm.constructs._util import acknowledge, private_subnets
from gpufarm.constructs.cluster import after_system_nodes, helm_chart_on
from gpufarm.core.efa import node_group_efa_interfaces as node_group_efa_interfaces  # re-exported
from gpufarm.core.instances import NVIDIA_GPU_FAMILIES, family_of
from gpufarm.k8s.karpenter import (
    AMI_FAMILY_LABEL,
    BOTTLEROCKET_OS_VOLUME_GIB,
    ROOT_VOLUME_IOPS,
    ROOT_VOLUME_THROUGHPUT_MIBPS,
    efa_device_plugin_values,
)
from gpufarm.k8s.labels import (
    CAPACITY_CLASS_LABEL,
    EFA_LABEL,
    GPU_PRESENT_LABEL,
    GPU_TAINT_KEY,
    POOL_LABEL,
)

NODE_POLICIES: Final = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")
"""Managed policies of the node role this construct creates. The VPC CNI's permissions are on its
own Pod Identity role (see the cluster), so no pod can borrow them from the node."""

_NODE_POLICY_REASONS: Final = {
    "AmazonEKSWorkerNodePolicy": "the policy EKS documents for managed node group nodes: join the "
    "cluster and let the Pod Identity agent call eks-auth:AssumeRoleForPodIdentity",
    "AmazonEC2ContainerRegistryPullOnly": "the pull-only ECR policy EKS documents: the nodes pull "
    "the vLLM, device plugin and add-on images",
}

IMDS_HOP_LIMIT: Final = 1
"""IMDSv2 answers the node and host-network pods (CNI, device plugins) but no pod in its own
network namespace; pods get AWS credentials from the Pod Identity agent, which needs no IMDS."""

ROLL_SURGE_NODES: Final = 2
"""Nodes a managed node group roll with the DEFAULT strategy launches ahead of the old ones in a
one-AZ group (twice the AZ count): the free reservation capacity it needs."""

EFA_DEVICE_PLUGIN_REPOSITORY: Final = "https://aws.github.io/eks-charts"
EFA_DEVICE_PLUGIN_CHART: Final = "aws-efa-k8s-device-plugin"
EFA_DEVICE_PLUGIN_CHART_VERSION: Final = "v0.5.29"
"""The chart version (image v0.5.20) pinned by default; this chart's versions carry a leading 'v'."""

_MANAGED_POLICY = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"


# --------------------------------------------------------------------------- validation


def _check_instance_type(config: NodeGroupConfig) -> None:
    if family_of(config.instance_type) not in NVIDIA_GPU_FAMILIES or "." not in config.instance_type:
        raise ValueError(
            f"'instance_type' of node group {config.name!r} must be an x86_64 NVIDIA GPU instance type "
            f"(families {', '.join(sorted(NVIDIA_GPU_FAMILIES))}), got {config.instance_type!r}"
        )


def _check_capacity(config: NodeGroupConfig) -> None:
    capacity = config.capacity
    ids = list(capacity.reservation_ids)
    prefix = f"node group {config.name!r}:"
    if capacity.kind is ReservationKind.CREATE and ids:
        raise ValueError(
            f"{prefix} 'capacity.reservation_ids' must be empty with kind 'create' (the reservation "
            f"is created here), got {ids!r}"
        )
    if capacity.kind is ReservationKind.ODCR and not ids:
        raise ValueError(
            f"{prefix} 'capacity.reservation_ids' must name at least one reservation with kind "
            "'odcr', got none"
        )
    if capacity.kind is ReservationKind.CAPACITY_BLOCK and len(ids) != 1:
        raise ValueError(
            f"{prefix} 'capacity.reservation_ids' must name exactly one Capacity Block with kind "
            f"'capacity-block', got {ids!r}"
        )
    if capacity.instance_count is not None:
        if capacity.kind is not ReservationKind.CREATE:
            raise ValueError(
                f"{prefix} 'capacity.instance_count' applies to kind 'create' only (an existing "
                f"reservation has its own size), got {capacity.instance_count} with kind "
                f"{capacity.kind.value!r}"
            )
        if capacity.instance_count < config.nodes:
            raise ValueError(
                f"{prefix} 'capacity.instance_count' must be at least 'nodes' ({config.nodes}): "
                f"every node runs in the reservation, got {capacity.instance_count}"
            )


def _subnets_in_zone(vpc: ec2.IVpc, config: NodeGroupConfig) -> list[ec2.ISubnet]:
    """The VPC's private subnets in the reservation's AZ (a reservation is zonal)."""
    subnets = private_subnets(vpc)
    zones = [s.availability_zone for s in subnets]
    if any(cdk.Token.is_unresolved(z) for z in zones):
        raise ValueError(
            f"node group {config.name!r}: the VPC's private subnets must have availability zones "
            "known at synth time, to pick the subnet of the reservation's AZ"
        )
    chosen = [s for s in subnets if s.availability_zone == config.availability_zone]
    if not chosen:
        raise ValueError(
            f"node group {config.name!r}: 'availability_zone' must be the AZ of one of the VPC's "
            f"private subnets ({', '.join(sorted(set(zones)))}), got {config.availability_zone!r}"
        )
    return chosen


def capacity_instance_count(config: NodeGroupConfig) -> int:
    """Instances the created reservation holds: `capacity.instance_count`, else `nodes`."""
    return config.capacity.instance_count or config.nodes


def update_strategy(config: NodeGroupConfig) -> str:
    """How a version update replaces nodes: DEFAULT (new nodes first) only when the reservation
    this construct creates has room for the surge, else MINIMAL (terminate one, then launch one).

    A targeted reservation that is fully used cannot start a replacement before an old node
    is gone, so a DEFAULT roll would fail with NodeCreationFailure.
    """
    spare = capacity_instance_count(config) - config.nodes
    if config.capacity.kind is ReservationKind.CREATE and spare >= ROLL_SURGE_NODES:
        return "DEFAULT"
    return "MINIMAL"


def node_group_labels(config: NodeGroupConfig) -> dict[str, str]:
    """Kubernetes labels of a reserved node group's nodes.

    Pool (the group's name), capacity class and OS, like Karpenter's GPU pools;
    `nvidia.com/gpu.present: "true"` on AL2023 (where NVIDIA's device plugin must run; the
    Bottlerocket NVIDIA AMI brings its own); `gpufarm.io/efa: "true"` with EFA.
    """
    bottlerocket = config.ami_type is NodeGroupAmiType.BOTTLEROCKET_NVIDIA
    labels = {
        POOL_LABEL: config.name,
        CAPACITY_CLASS_LABEL: config.capacity_class_name,
        AMI_FAMILY_LABEL: "bottlerocket" if bottlerocket else "al2023",
    }
    if not bottlerocket:
        labels[GPU_PRESENT_LABEL] = "true"
    if config.efa:
        labels[EFA_LABEL] = "true"
    return labels


# --------------------------------------------------------------------------- constructs


class ReservedGpuNodeGroup(Construct):
    """An EKS managed node group of GPU instances on reserved capacity, in the reservation's AZ.

    The group is fixed at `nodes` (`min = desired = max`), boots the `ami_type` NVIDIA AMI
    through a launch template (the instance type, an encrypted gp3 root volume of `disk_gib`
    with 3000 IOPS and 500 MiB/s, IMDSv2 only with a hop limit of 1, detailed monitoring, no
    public IP on EFA interfaces), runs only in the private
    subnet(s) of `availability_zone`, and is labelled `gpufarm.io/pool`, `gpufarm.io/capacity-
    class` and `gpufarm.io/ami-family` and tainted `nvidia.com/gpu=true:NoSchedule`. Node auto
    repair is on.

    Capacity by `config.capacity.kind`:

    - `create`: an `AWS::EC2::CapacityReservation` (Linux/UNIX, default tenancy, targeted, no
      end date) of `instance_count` (default `nodes`) instances, which the launch template
      targets;
    - `odcr`: the launch template targets the one reservation given, or a Capacity
      Reservation resource group holding all of them;
    - `capacity-block`: capacity type `CAPACITY_BLOCK`, market type `capacity-block` and the
      block's ID in the launch template, and `min = 0` so EKS's own scheduled scale-down 40
      minutes before the block ends (and the scale-to-zero an update needs) stay within bounds.

    Version updates replace one node at a time (`maxUnavailable` 1), terminating before
    launching unless a created reservation has two spare instances (:func:`update_strategy`).

    With `efa`, the launch template lists the network interfaces (:func:`node_group_efa_interfaces`)
    with the EFA security group (all traffic from and to itself) and the cluster security group,
    since EKS adds the cluster security group only when the launch template names none.

    On an :class:`~gpufarm.constructs.InferenceCluster`'s cluster the node group is created after
    the cluster's system nodes and core add-ons (:attr:`InferenceCluster.system_ready`).

    Defaults: `node_role` is a new role with AmazonEKSWorkerNodePolicy and
    AmazonEC2ContainerRegistryPullOnly (EKS creates the node access entry for a managed node
    group's role); `cluster_security_group_id` is the cluster's own (needed with `efa` only).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        vpc: ec2.IVpc,
        config: NodeGroupConfig,
        node_role: iam.IRole | None = None,
        cluster_security_group_id: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        _check_instance_type(config)
        _check_capacity(config)
        self.subnets = _subnets_in_zone(vpc, config)
        if config.efa and cluster_security_group_id is None:
            cluster_security_group_id = _cluster_security_group_id(cluster, config)
        self.config = config
        self.labels = node_group_labels(config)
        self.taints = [{"key": GPU_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"}]
        self.node_role = node_role or self._node_role(config)

        self.capacity_reservation: ec2.CfnCapacityReservation | None = None
        """The reservation this construct creates (kind `create`), else None."""
        self.capacity_reservation_group: resourcegroups.CfnGroup | None = None
        """The resource group holding several existing reservations (kind `odcr`), else None."""
        self.efa_security_group: ec2.SecurityGroup | None = None
        """The EFA security group (`efa` only): all traffic between its members, nothing else."""

        target = self._reservation_target(config)
        network_interfaces = None
        if cluster_security_group_id is not None and config.efa:
            network_interfaces = self._efa(vpc, config, cluster_security_group_id)

        tags = [
            cdk.CfnTag(key=POOL_LABEL, value=config.name),
            cdk.CfnTag(key=CAPACITY_CLASS_LABEL, value=config.capacity_class_name),
        ]
        capacity_block = config.capacity.kind is ReservationKind.CAPACITY_BLOCK
        self.launch_template = ec2.CfnLaunchTemplate(
            self,
            "LaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                instance_type=config.instance_type,
                block_device_mappings=_block_devices(config),
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_endpoint="enabled",
                    http_tokens="required",
                    http_put_response_hop_limit=IMDS_HOP_LIMIT,
                ),
                # One-minute EC2 metrics, as the inspection appliances have (CT.EC2.PR.10).
                monitoring=ec2.CfnLaunchTemplate.MonitoringProperty(enabled=True),
                capacity_reservation_specification=ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
                    capacity_reservation_target=target
                ),
                instance_market_options=(
                    ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block")
                    if capacity_block
                    else None
                ),
                network_interfaces=network_interfaces,
                tag_specifications=[
                    ec2.CfnLaunchTemplate.TagSpecificationProperty(resource_type=kind, tags=tags)
                    for kind in ("instance", "volume")
                ],
            ),
        )

        size = config.nodes
        self.nodegroup = eks.CfnNodegroup(
            self,
            "Resource",
            cluster_name=cluster.cluster_name,
            node_role=self.node_role.role_arn,
            subnets=[s.subnet_id for s in self.subnets],
            ami_type=config.ami_type.value,
            capacity_type="CAPACITY_BLOCK" if capacity_block else "ON_DEMAND",
            scaling_config=eks.CfnNodegroup.ScalingConfigProperty(
                min_size=0 if capacity_block else size, desired_size=size, max_size=size
            ),
            labels=self.labels,
            taints=[eks.CfnNodegroup.TaintProperty(**taint) for taint in self.taints],
            launch_template=eks.CfnNodegroup.LaunchTemplateSpecificationProperty(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            update_config=eks.CfnNodegroup.UpdateConfigProperty(
                max_unavailable=1, update_strategy=update_strategy(config)
            ),
            node_repair_config=eks.CfnNodegroup.NodeRepairConfigProperty(enabled=True),
            tags={POOL_LABEL: config.name, CAPACITY_CLASS_LABEL: config.capacity_class_name},
        )
        self.nodegroup_name: str = self.nodegroup.attr_nodegroup_name
        # On an InferenceCluster: a node turns Ready only once the VPC CNI and kube-proxy add-ons
        # run, and those are part of the system nodes' readiness.
        after_system_nodes(cluster, self.nodegroup)

    def _efa(
        self, vpc: ec2.IVpc, config: NodeGroupConfig, cluster_security_group_id: str
    ) -> list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
        """The EFA security group, and the launch template's network interfaces that carry it."""
        self.efa_security_group = ec2.SecurityGroup(
            self,
            "EfaSecurityGroup",
            vpc=vpc,
            description=f"EFA traffic between the nodes of GPU node group {config.name}",
            allow_all_outbound=False,
        )
        # EFA's OS-bypass traffic needs all traffic allowed from and to the group itself. Other
        # egress is the cluster security group's, which sits on the same interfaces.
        self.efa_security_group.add_ingress_rule(
            self.efa_security_group, ec2.Port.all_traffic(), "EFA from nodes in this group"
        )
        self.efa_security_group.add_egress_rule(
            self.efa_security_group, ec2.Port.all_traffic(), "EFA to nodes in this group"
        )
        acknowledge(
            self.efa_security_group,
            "NIST.800.53.R5-EC2RestrictedCommonPorts",
            "The EFA security group admits all traffic only from its own members (the GPU nodes of "
            "this group, source: the group itself), as EFA's OS-bypass transport requires; no CIDR "
            "and no other security group can reach any port through it.",
        )
        groups = [self.efa_security_group.security_group_id, cluster_security_group_id]
        return [
            ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
                network_card_index=i.network_card_index,
                device_index=i.device_index,
                interface_type=i.interface_type,
                groups=groups,
                delete_on_termination=True,
                # The nodes live in private subnets; say so where Control Tower looks (CT.EC2.PR.9).
                associate_public_ip_address=False,
            )
            for i in node_group_efa_interfaces(config.instance_type)
        ]

    def _node_role(self, config: NodeGroupConfig) -> iam.Role:
        role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"Nodes of the reserved GPU node group {config.name}",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(p) for p in NODE_POLICIES],
        )
        for policy in NODE_POLICIES:
            acknowledge(
                role,
                _MANAGED_POLICY.format(policy),
                f"The reserved GPU nodes need {policy}: {_NODE_POLICY_REASONS[policy]}; AWS maintains it.",
            )
        return role

    def _reservation_target(
        self, config: NodeGroupConfig
    ) -> ec2.CfnLaunchTemplate.CapacityReservationTargetProperty:
        """Create or reference the capacity, and return what the launch template targets."""
        capacity = config.capacity
        if capacity.kind is ReservationKind.CREATE:
            self.capacity_reservation = ec2.CfnCapacityReservation(
                self,
                "CapacityReservation",
                instance_type=config.instance_type,
                instance_platform="Linux/UNIX",
                availability_zone=config.availability_zone,
                instance_count=capacity_instance_count(config),
                # Only launches that name this reservation use it: burst nodes never take it.
                instance_match_criteria="targeted",
                tenancy="default",
                end_date_type="unlimited",
                tag_specifications=[
                    ec2.CfnCapacityReservation.TagSpecificationProperty(
                        resource_type="capacity-reservation",
                        tags=[
                            cdk.CfnTag(key=POOL_LABEL, value=config.name),
                            cdk.CfnTag(key=CAPACITY_CLASS_LABEL, value=config.capacity_class_name),
                        ],
                    )
                ],
            )
            return ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
                capacity_reservation_id=self.capacity_reservation.ref
            )
        ids = list(capacity.reservation_ids)
        if len(ids) == 1:
            return ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(capacity_reservation_id=ids[0])
        # A launch template targets one reservation or one resource group; several ODCRs go in a
        # group of type AWS::EC2::CapacityReservationPool, which EC2 fills from any member.
        self.capacity_reservation_group = resourcegroups.CfnGroup(
            self,
            "CapacityReservationGroup",
            name=cdk.Names.unique_resource_name(self, max_length=128, separator="-"),
            description=f"Capacity reservations of GPU node group {config.name}",
            configuration=[
                resourcegroups.CfnGroup.ConfigurationItemProperty(type="AWS::EC2::CapacityReservationPool"),
                resourcegroups.CfnGroup.ConfigurationItemProperty(
                    type="AWS::ResourceGroups::Generic",
                    parameters=[
                        resourcegroups.CfnGroup.ConfigurationParameterProperty(
                            name="allowed-resource-types", values=["AWS::EC2::CapacityReservation"]
                        )
                    ],
                ),
            ],
            resources=[reservation_arn(i) for i in ids],
        )
        return ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
            capacity_reservation_resource_group_arn=self.capacity_reservation_group.attr_arn
        )


def reservation_arn(reservation_id: str) -> str:
    """The ARN of a capacity reservation in this stack's account and region."""
    return (
        f"arn:{cdk.Aws.PARTITION}:ec2:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:"
        f"capacity-reservation/{reservation_id}"
    )


def _cluster_security_group_id(cluster: eks.ICluster, config: NodeGroupConfig) -> str:
    """The cluster security group's ID, which EFA nodes must name in their launch template."""
    try:
        group_id: str | None = cluster.cluster_security_group_id
    except RuntimeError:  # jsii's error for an imported cluster given no security group ID
        group_id = None
    if not group_id:
        raise ValueError(
            f"node group {config.name!r}: 'cluster_security_group_id' is required with 'efa' when the "
            "cluster does not expose its security group (the launch template then names the security "
            "groups, and EKS no longer adds the cluster's)"
        )
    return group_id


_BlockDevice = ec2.CfnLaunchTemplate.BlockDeviceMappingProperty


def _block_devices(config: NodeGroupConfig) -> list[_BlockDevice]:
    """An encrypted gp3 volume of `disk_gib` for images and pods: AL2023's root volume, or
    Bottlerocket's data volume next to its small (also encrypted) OS volume."""

    def volume(
        device: str, size_gib: int, throughput: int
    ) -> ec2.CfnLaunchTemplate.BlockDeviceMappingProperty:
        return ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
            device_name=device,
            ebs=ec2.CfnLaunchTemplate.EbsProperty(
                volume_size=size_gib,
                volume_type="gp3",
                iops=ROOT_VOLUME_IOPS,
                throughput=throughput,
                encrypted=True,
                delete_on_termination=True,
            ),
        )

    data = config.disk_gib
    if config.ami_type is NodeGroupAmiType.BOTTLEROCKET_NVIDIA:
        return [
            volume("/dev/xvda", BOTTLEROCKET_OS_VOLUME_GIB, 125),
            volume("/dev/xvdb", data, ROOT_VOLUME_THROUGHPUT_MIBPS),
        ]
    return [volume("/dev/xvda", data, ROOT_VOLUME_THROUGHPUT_MIBPS)]


class EfaDevicePlugin(Construct):
    """The AWS EFA Kubernetes device plugin (Helm chart `aws-efa-k8s-device-plugin`), pinned.

    It advertises `vpc.amazonaws.com/efa` on nodes labelled `gpufarm.io/efa: "true"` (reserved
    node groups and Karpenter pools with `efa`), tolerating the GPU taint. The EKS AL2023 and
    Bottlerocket AMIs ship the EFA host software but not this plugin. The image is pulled from
    the EKS registry of the stack's region (the chart's default is us-west-2's); the stack
    must name its region, one with a known EKS registry. Defaults: chart `v0.5.29`, namespace
    `kube-system`.
    On an :class:`~gpufarm.constructs.InferenceCluster`'s cluster the chart waits for its system
    nodes (:meth:`InferenceCluster.add_helm_chart`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        chart_version: str = EFA_DEVICE_PLUGIN_CHART_VERSION,
        namespace: str = "kube-system",
        image_digests: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        region = cdk.Stack.of(self).region
        if cdk.Token.is_unresolved(region):
            raise ValueError(
                "EfaDevicePlugin needs a stack with an explicit region (its image is pulled from "
                "that region's Amazon EKS registry), got an environment-agnostic stack"
            )
        self.values = efa_device_plugin_values(region, image_digests)
        self.chart = helm_chart_on(
            cluster,
            self,
            "Resource",
            chart=EFA_DEVICE_PLUGIN_CHART,
            repository=EFA_DEVICE_PLUGIN_REPOSITORY,
            version=chart_version,
            release=EFA_DEVICE_PLUGIN_CHART,
            namespace=namespace,
            create_namespace=True,
            values=self.values,
            wait=True,
            timeout=cdk.Duration.minutes(5),
        )
