"""Karpenter on any aws_eks_v2 cluster: IAM, interruption queue, Helm chart, GPU pools, device plugin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NotRequired, TypedDict, Unpack

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from gpufarm.config.model import KarpenterConfig, NodePoolConfig
from gpufarm.constructs._util import acknowledge_all, pod_identity_role, pseudo_parameters
from gpufarm.constructs.cluster import helm_chart_on
from gpufarm.constructs.feature_flags import check_feature_flags
from gpufarm.k8s.karpenter import (
    DISCOVERY_TAG,
    SERVICE_ACCOUNT,
    ec2_nodeclass,
    karpenter_gpu_nodepool,
    karpenter_values,
    nvidia_device_plugin_values,
)

KARPENTER_REPOSITORY: Final = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_CRD_REPOSITORY: Final = "oci://public.ecr.aws/karpenter/karpenter-crd"
NVIDIA_DEVICE_PLUGIN_REPOSITORY: Final = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_CHART: Final = "nvidia-device-plugin"

NODE_POLICIES: Final = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonSSMManagedInstanceCore",
)
"""AWS-managed policies of the Karpenter node role (Karpenter's getting-started template)."""

_NODE_POLICY_REASONS: Final = {
    "AmazonEKSWorkerNodePolicy": "lets the kubelet describe the node's instance and join the cluster",
    "AmazonEKS_CNI_Policy": "lets the VPC CNI on the node attach ENIs and assign pod IP addresses",
    "AmazonEC2ContainerRegistryPullOnly": "lets the node pull images from ECR, read-only",
    "AmazonSSMManagedInstanceCore": "lets operators reach a GPU node through Session Manager "
    "instead of SSH (no key pair, no inbound port)",
}

INTERRUPTION_EVENTS: Final = {
    "HealthEvent": ("aws.health", "AWS Health Event"),
    "SpotInterruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning"),
    "Rebalance": ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
    "InstanceStateChange": ("aws.ec2", "EC2 Instance State-change Notification"),
    "CapacityReservationInterruption": ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"),
}
"""EventBridge rules feeding the interruption queue: construct ID -> (source, detail-type)."""

_MANAGED_POLICY = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"
_IAM5 = "AwsSolutions-IAM5[Resource::{}]"


def literal_cluster_name(cluster: eks.ICluster) -> str:
    """The cluster's name as a plain string, known at synth time.

    aws_eks_v2 hands out a cluster's name as a reference even when the name was given; the
    name the CfnCluster was created with is read back instead. An imported cluster's name is
    the string it was imported with.
    """
    name = cluster.cluster_name
    if not cdk.Token.is_unresolved(name):
        return name
    resource = cluster.node.default_child
    if isinstance(resource, eks.CfnCluster) and resource.name and not cdk.Token.is_unresolved(resource.name):
        return resource.name
    raise ValueError(
        "'cluster' must have a name known at synth time: Karpenter's IAM conditions carry it in "
        "condition keys (aws:RequestTag/kubernetes.io/cluster/<name>), which CloudFormation cannot "
        f"compute; give the cluster an explicit cluster_name, got {cluster.node.path!r} without one"
    )


def _check_tag_value(value: str, field: str) -> None:
    if not cdk.Token.is_unresolved(value) and not 0 < len(value) <= 256:
        raise ValueError(f"'{field}' must be a tag value of 1 to 256 characters, got {value!r}")


def _ec2_arn(resource: str, *, account: bool = True) -> str:
    owner = "*" if account else ""
    partition, region = pseudo_parameters()[:2]
    return f"arn:{partition}:ec2:{region}:{owner}:{resource}"


def controller_policies(
    *, cluster_name: str, queue_arn: str, node_role_arn: str
) -> dict[str, list[dict[str, Any]]]:
    """The Karpenter controller's IAM statements, by policy, as the v1.14 getting-started
    CloudFormation template scopes them.

    Instances, fleets, volumes, ENIs and launch templates can only be created carrying the
    cluster's ownership tag and a `karpenter.sh/nodepool` tag, and only such resources can be
    tagged further or terminated; instance profiles likewise carry the cluster, region and
    EC2NodeClass tags; `iam:PassRole` names only the node role, toward EC2 only; the queue
    actions name only the interruption queue. Reads are limited to the stack's region.
    """
    partition, region, account = pseudo_parameters()
    owned = f"kubernetes.io/cluster/{cluster_name}"
    cluster_arn = f"arn:{partition}:eks:{region}:{account}:cluster/{cluster_name}"
    instance_profiles = f"arn:{partition}:iam::{account}:instance-profile/*"
    created = [
        _ec2_arn(r)
        for r in (
            "fleet/*",
            "instance/*",
            "volume/*",
            "network-interface/*",
            "launch-template/*",
            "spot-instances-request/*",
        )
    ]
    create_actions = ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]
    resource_owned = {
        "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    return {
        "NodeLifecycle": [
            {
                "Sid": "AllowScopedEC2InstanceAccessActions",
                "Effect": "Allow",
                "Resource": [
                    _ec2_arn("image/*", account=False),
                    _ec2_arn("snapshot/*", account=False),
                    _ec2_arn("security-group/*"),
                    _ec2_arn("subnet/*"),
                    _ec2_arn("capacity-reservation/*"),
                    _ec2_arn("placement-group/*"),
                ],
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            },
            {
                "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
                "Effect": "Allow",
                "Resource": _ec2_arn("launch-template/*"),
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Condition": resource_owned,
            },
            {
                "Sid": "AllowScopedEC2InstanceActionsWithTags",
                "Effect": "Allow",
                "Resource": created,
                "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{owned}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                    },
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceCreationTagging",
                "Effect": "Allow",
                "Resource": created,
                "Action": "ec2:CreateTags",
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{owned}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                        "ec2:CreateAction": create_actions,
                    },
                    "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
                },
            },
            {
                "Sid": "AllowScopedResourceTagging",
                "Effect": "Allow",
                "Resource": _ec2_arn("instance/*"),
                "Action": "ec2:CreateTags",
                "Condition": {
                    **resource_owned,
                    "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                    "ForAllValues:StringEquals": {
                        "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                    },
                },
            },
            {
                "Sid": "AllowScopedDeletion",
                "Effect": "Allow",
                "Resource": [_ec2_arn("instance/*"), _ec2_arn("launch-template/*")],
                "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                "Condition": resource_owned,
            },
        ],
        "IAMIntegration": [
            {
                "Sid": "AllowPassingInstanceRole",
                "Effect": "Allow",
                "Resource": node_role_arn,
                "Action": "iam:PassRole",
                "Condition": {
                    "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileCreationActions",
                "Effect": "Allow",
                "Resource": instance_profiles,
                "Action": ["iam:CreateInstanceProfile"],
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{owned}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                        "aws:RequestTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileTagActions",
                "Effect": "Allow",
                "Resource": instance_profiles,
                "Action": ["iam:TagInstanceProfile"],
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/{owned}": "owned",
                        "aws:ResourceTag/topology.kubernetes.io/region": region,
                        f"aws:RequestTag/{owned}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                        "aws:RequestTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {
                        "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                        "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    },
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileActions",
                "Effect": "Allow",
                "Resource": instance_profiles,
                "Action": [
                    "iam:AddRoleToInstanceProfile",
                    "iam:RemoveRoleFromInstanceProfile",
                    "iam:DeleteInstanceProfile",
                ],
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/{owned}": "owned",
                        "aws:ResourceTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
        ],
        "EKSIntegration": [
            {
                "Sid": "AllowAPIServerEndpointDiscovery",
                "Effect": "Allow",
                "Resource": cluster_arn,
                "Action": "eks:DescribeCluster",
            }
        ],
        "Interruption": [
            {
                "Sid": "AllowInterruptionQueueActions",
                "Effect": "Allow",
                "Resource": queue_arn,
                "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            }
        ],
        "ZonalShift": [
            {
                "Sid": "AllowZonalShiftStatusReadOnly",
                "Effect": "Allow",
                "Resource": "*",
                "Action": ["arc-zonal-shift:GetManagedResource"],
                "Condition": {"StringEquals": {"arc-zonal-shift:ResourceIdentifier": cluster_arn}},
            }
        ],
        "ResourceDiscovery": [
            {
                "Sid": "AllowRegionalReadActions",
                "Effect": "Allow",
                "Resource": "*",
                "Action": [
                    "ec2:DescribeCapacityReservations",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstances",
                    "ec2:DescribeInstanceStatus",
                    "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplates",
                    "ec2:DescribePlacementGroups",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory",
                    "ec2:DescribeSubnets",
                ],
                "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
            },
            {
                "Sid": "AllowSSMReadActions",
                "Effect": "Allow",
                "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
                "Action": "ssm:GetParameter",
            },
            {
                "Sid": "AllowPricingReadActions",
                "Effect": "Allow",
                "Resource": "*",
                "Action": "pricing:GetProducts",
            },
            {
                "Sid": "AllowUnscopedInstanceProfileListAction",
                "Effect": "Allow",
                "Resource": "*",
                "Action": "iam:ListInstanceProfiles",
            },
            {
                "Sid": "AllowInstanceProfileReadActions",
                "Effect": "Allow",
                "Resource": instance_profiles,
                "Action": "iam:GetInstanceProfile",
            },
        ],
    }


# Why each wildcard resource in the controller policies is needed, for the nag acknowledgements.
_EC2_CREATE_REASON = (
    "Karpenter launches nodes whose instance, volume, ENI, fleet, spot-request and launch-template "
    "IDs do not exist yet; creation is allowed only with the cluster's ownership tag and a "
    "karpenter.sh/nodepool request tag, as in Karpenter's getting-started template."
)
_WILDCARD_REASONS: Final = {
    "NodeLifecycle": {
        "arn:<AWS::Partition>:ec2:<AWS::Region>::image/*": "RunInstances/CreateFleet must read the "
        "EKS-optimized AMI the EC2NodeClass alias resolves to; AMI IDs change with every release.",
        "arn:<AWS::Partition>:ec2:<AWS::Region>::snapshot/*": "RunInstances/CreateFleet read the "
        "AMI's root snapshot, whose ID changes with every AMI release.",
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:security-group/*": "Nodes join the security groups "
        "EC2NodeClasses select by tag at run time; RunInstances/CreateFleet only, in this region.",
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:subnet/*": "Nodes launch into the subnets "
        "EC2NodeClasses select by tag at run time; RunInstances/CreateFleet only, in this region.",
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:capacity-reservation/*": "Nodes may launch into "
        "the capacity reservations EC2NodeClasses select at run time; RunInstances/CreateFleet only.",
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:placement-group/*": "Nodes may launch into the "
        "placement groups EC2NodeClasses select at run time; RunInstances/CreateFleet only.",
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:launch-template/*": "Karpenter creates, uses and "
        "deletes its own launch templates; each use is conditioned on the cluster's ownership tag "
        "and a karpenter.sh/nodepool tag.",
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:fleet/*": _EC2_CREATE_REASON,
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:instance/*": _EC2_CREATE_REASON
        + " Tagging and termination require the same tags on the existing instance.",
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:volume/*": _EC2_CREATE_REASON,
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:network-interface/*": _EC2_CREATE_REASON,
        "arn:<AWS::Partition>:ec2:<AWS::Region>:*:spot-instances-request/*": _EC2_CREATE_REASON,
    },
    "IAMIntegration": {
        "arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*": "Karpenter creates one "
        "instance profile per EC2NodeClass with a generated name; creating, tagging and changing "
        "one requires the cluster's ownership, region and karpenter.k8s.aws/ec2nodeclass tags.",
    },
    "ZonalShift": {
        "*": "arc-zonal-shift:GetManagedResource has no resource-level permissions; the condition "
        "arc-zonal-shift:ResourceIdentifier limits it to this cluster, and it only reads.",
    },
    "ResourceDiscovery": {
        "*": "The EC2 Describe* calls, pricing:GetProducts and iam:ListInstanceProfiles support no "
        "resource-level permissions; the EC2 reads are limited to this region by "
        "aws:RequestedRegion, and all of them only read.",
        "arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/*": "Karpenter resolves "
        "EKS-optimized AMI aliases from the public SSM parameters under /aws/service/; read-only.",
        "arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*": "Karpenter reads back the "
        "instance profiles it generated for its EC2NodeClasses; names are generated, read-only.",
    },
}


class GpuNodePoolOptions(TypedDict):
    """What a Karpenter GPU pool needs beyond what its Karpenter supplies: the options shared by
    :meth:`Karpenter.add_gpu_node_pool` and :class:`KarpenterGpuNodePool`.
    """

    pool: NodePoolConfig
    """The pool: instance types, capacity type, limits, disruption, AMI, EFA."""
    security_group_ids: NotRequired[Sequence[str]]
    """Security groups the NodeClass adds by ID (default: none, only those tagged
    `karpenter.sh/discovery: <discovery_value>`)."""


class Karpenter(Construct):
    """Karpenter on an existing EKS cluster (any aws_eks_v2 cluster without Auto Mode).

    Creates the node role (AmazonEKSWorkerNodePolicy, AmazonEKS_CNI_Policy,
    AmazonEC2ContainerRegistryPullOnly, AmazonSSMManagedInstanceCore) with an EC2_LINUX access
    entry; the controller role, given to `kube-system/karpenter` through EKS Pod Identity, with
    the six policies of Karpenter's v1.14 getting-started template (node lifecycle, IAM
    integration, EKS integration, interruption, zonal shift, resource discovery) scoped the
    same way; the SQS interruption queue (300 s retention, SQS-managed encryption, TLS only)
    fed by EventBridge rules for AWS Health, spot interruption, rebalance, instance state-change
    and capacity-reservation interruption events; the `karpenter.sh/discovery` tag on the given
    subnets and security groups; and the `karpenter-crd` and `karpenter` Helm charts at
    `config.chart_version`, the controller after its Pod Identity association, policies and
    node access entry exist.

    With `config.node_repair` (default on) the chart's `nodeRepair` feature gate is on: the
    controller deletes the NodeClaim of an unhealthy node, which terminates the instance under
    the node lifecycle policy's scoped `ec2:TerminateInstances` and launches a replacement as for
    any pending pod, so repair needs no IAM beyond the getting-started policies. It acts on the
    conditions of the `eks-node-monitoring-agent` add-on (see docs/operations.md, "When a GPU
    fails").

    Defaults: `discovery_value` is the cluster name. Subnets and security groups defined in this
    app get the tag; imported ones must already carry it (CloudFormation cannot tag what it does
    not manage). The cluster needs the EKS Pod Identity agent, and the kubectl provider needs a
    route to public.ecr.aws to pull the charts. On an :class:`~gpufarm.constructs.InferenceCluster`'s
    cluster the controller chart is installed after the system nodes (its pods run there).
    Add GPU pools with :meth:`add_gpu_node_pool`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        config: KarpenterConfig,
        subnets: Sequence[ec2.ISubnet],
        security_groups: Sequence[ec2.ISecurityGroup],
        discovery_value: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        check_feature_flags(self)
        name = literal_cluster_name(cluster)
        self.discovery_value: str = name if discovery_value is None else discovery_value
        _check_tag_value(self.discovery_value, "discovery_value")
        self.config = config

        self.node_role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"Nodes Karpenter launches for EKS cluster {name}",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(p) for p in NODE_POLICIES],
        )
        acknowledge_all(
            self.node_role,
            {
                _MANAGED_POLICY.format(node_policy): f"Karpenter nodes need {node_policy}: it "
                f"{_NODE_POLICY_REASONS[node_policy]}; AWS maintains "
                "it, and Karpenter's getting-started template attaches it to the node role."
                for node_policy in NODE_POLICIES
            },
        )
        self.node_access_entry = eks.CfnAccessEntry(
            self,
            "NodeAccessEntry",
            cluster_name=cluster.cluster_name,
            principal_arn=self.node_role.role_arn,
            type="EC2_LINUX",
        )

        self.queue = sqs.Queue(
            self,
            "InterruptionQueue",
            retention_period=cdk.Duration.seconds(300),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        no_dead_letters = (
            "The interruption queue carries EC2 and AWS Health events Karpenter must act on within "
            "minutes; retention is 300 s, so a dead-letter queue would only hold stale events."
        )
        acknowledge_all(
            self.queue, {"AwsSolutions-SQS3": no_dead_letters, "ControlTower::CT.SQS.PR.1": no_dead_letters}
        )
        self.rules: dict[str, events.Rule] = {}
        for rule_id, (source, detail_type) in INTERRUPTION_EVENTS.items():
            self.rules[rule_id] = events.Rule(
                self,
                f"{rule_id}Rule",
                description=f"{detail_type} events for Karpenter on {name}",
                event_pattern=events.EventPattern(source=[source], detail_type=[detail_type]),
                targets=[targets.SqsQueue(self.queue)],
            )

        self.controller_role = pod_identity_role(
            self, "ControllerRole", description=f"Karpenter controller of EKS cluster {name}"
        )
        statements = controller_policies(
            cluster_name=name, queue_arn=self.queue.queue_arn, node_role_arn=self.node_role.role_arn
        )
        self.policies: dict[str, iam.CfnManagedPolicy] = {}
        for policy_id, policy_statements in statements.items():
            policy = iam.CfnManagedPolicy(
                self,
                f"{policy_id}Policy",
                description=f"Karpenter controller ({policy_id}) for EKS cluster {name}",
                policy_document={"Version": "2012-10-17", "Statement": policy_statements},
                roles=[self.controller_role.role_name],
            )
            self.policies[policy_id] = policy
            wildcards = _WILDCARD_REASONS.get(policy_id, {})
            if wildcards:
                acknowledge_all(
                    policy, {_IAM5.format(resource): reason for resource, reason in wildcards.items()}
                )
        self.pod_identity_association = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentityAssociation",
            cluster_name=cluster.cluster_name,
            namespace=config.namespace,
            service_account=SERVICE_ACCOUNT,
            role_arn=self.controller_role.role_arn,
        )

        for taggable in (*subnets, *security_groups):
            cdk.Tags.of(taggable).add(DISCOVERY_TAG, self.discovery_value)

        self.crd_chart = eks.HelmChart(
            self,
            "CrdChart",
            cluster=cluster,
            chart="karpenter-crd",
            repository=KARPENTER_CRD_REPOSITORY,
            version=config.chart_version,
            release="karpenter-crd",
            namespace=config.namespace,
            create_namespace=True,
            wait=True,
            timeout=cdk.Duration.minutes(5),
        )
        self.values = karpenter_values(
            cluster_name=cluster.cluster_name,
            interruption_queue=self.queue.queue_name,
            replicas=config.replicas,
            node_repair=config.node_repair,
        )
        # Its pods run on the system nodes, and Pod Identity needs its agent first.
        self.chart = helm_chart_on(
            cluster,
            self,
            "Chart",
            chart="karpenter",
            repository=KARPENTER_REPOSITORY,
            version=config.chart_version,
            release="karpenter",
            namespace=config.namespace,
            create_namespace=True,
            # No `skip_crds`: aws-cdk-lib 2.275's kubectl handler reads SkipCrds but never passes
            # `--skip-crds` to helm (custom-resource-handlers/dist/aws-eks-v2/kubectl-handler/
            # helm/__init__.py). The karpenter-crd release installs the CRDs first; the chart's
            # crds/ then finds them in place, and Helm skips a CRD that exists.
            values=self.values,
            wait=True,
            timeout=cdk.Duration.minutes(10),
        )
        self.chart.node.add_dependency(
            self.crd_chart, self.pod_identity_association, self.node_access_entry, *self.policies.values()
        )
        self._cluster = cluster

    def add_gpu_node_pool(
        self, id: str, *, scope: Construct | None = None, **options: Unpack[GpuNodePoolOptions]
    ) -> KarpenterGpuNodePool:
        """A GPU pool on this Karpenter: its node role and discovery tag, applied after the chart.

        `scope` (default: this construct) holds the pool's construct `id`; a stack that has its
        pools beside Karpenter passes itself, and the pools keep their logical IDs.
        """
        return KarpenterGpuNodePool(
            scope or self,
            id,
            cluster=self._cluster,
            node_role=self.node_role,
            discovery_value=self.discovery_value,
            after=self.chart,
            **options,
        )


class KarpenterGpuNodePool(Construct):
    """One GPU pool for Karpenter: its EC2NodeClass and NodePool, applied as one manifest.

    Defaults (from :class:`NodePoolConfig`): AL2023 with the latest EKS-optimized NVIDIA AMI,
    g6e instances, on-demand, a 300 GiB encrypted gp3 volume, IMDSv2 with hop limit 1, tainted
    `nvidia.com/gpu:NoSchedule`, at most 8 GPUs, weight 50 for serving pools and 10 for batch
    pools, nodes removed only when empty for 30 minutes, one disrupted at a time, replaced after
    14 days. `security_group_ids` adds security groups by ID (default: none, only those tagged
    `karpenter.sh/discovery: <discovery_value>`). Pass the Karpenter chart as `after` so the
    CRDs exist before the manifest is applied; :meth:`Karpenter.add_gpu_node_pool` does that, and
    passes the node role and discovery value, from the same options (:class:`GpuNodePoolOptions`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        node_role: iam.IRole,
        discovery_value: str,
        after: Construct | None = None,
        **options: Unpack[GpuNodePoolOptions],
    ) -> None:
        super().__init__(scope, id)
        _check_tag_value(discovery_value, "discovery_value")
        pool = options["pool"]
        security_group_ids = options.get("security_group_ids", ())
        self.pool = pool
        self.node_class = ec2_nodeclass(
            pool,
            node_role_name=node_role.role_name,
            discovery_value=discovery_value,
            security_group_ids=security_group_ids,
        )
        self.node_pool = karpenter_gpu_nodepool(pool)
        self.manifest = [self.node_class, self.node_pool]
        self.node_pool_name: str = self.node_pool["metadata"]["name"]
        self.resource = eks.KubernetesManifest(
            self, "Resource", cluster=cluster, manifest=self.manifest, overwrite=True
        )
        if after is not None:
            self.resource.node.add_dependency(after)


class NvidiaDevicePlugin(Construct):
    """NVIDIA's Kubernetes device plugin (Helm chart `nvidia-device-plugin`), pinned.

    It advertises `nvidia.com/gpu` on AL2023 GPU nodes, which ship the driver but not the plugin
    (without it GPU pods never schedule). Runs only on NVIDIA GPU nodes, tolerating their taint;
    Bottlerocket nodes are skipped (their NVIDIA AMIs include the plugin). Default namespace:
    `kube-system`.
    `image_digests` (default: none) supplies digests the image table lacks (a tier's
    `images.digests`).
    On an :class:`~gpufarm.constructs.InferenceCluster`'s cluster the chart waits for its system
    nodes (:meth:`InferenceCluster.add_helm_chart`).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        chart_version: str,
        namespace: str = "kube-system",
        image_digests: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.values = nvidia_device_plugin_values(image_digests)
        self.chart = helm_chart_on(
            cluster,
            self,
            "Resource",
            chart=NVIDIA_DEVICE_PLUGIN_CHART,
            repository=NVIDIA_DEVICE_PLUGIN_REPOSITORY,
            version=chart_version,
            release=NVIDIA_DEVICE_PLUGIN_CHART,
            namespace=namespace,
            create_namespace=True,
            values=self.values,
            wait=True,
            timeout=cdk.Duration.minutes(5),
        )
