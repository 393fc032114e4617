"""The EKS cluster: native CloudFormation (`aws_eks_v2`), encrypted secrets, logging, and either
EKS Auto Mode or standard compute (system node group, core EKS add-ons, AWS Load Balancer Controller)."""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from typing import Any, Final

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer
from constructs import Construct, DependencyGroup, IConstruct

from gpufarm.config.model import (
    ClusterConfig,
    ControlPlaneLog,
    CoreAddon,
    EndpointAccess,
    HybridNodesConfig,
    Provisioning,
    SystemNodesConfig,
)
from gpufarm.config.placeholders import OPEN_CIDRS
from gpufarm.constructs._util import (
    acknowledge,
    limit_grants_to_aws_services,
    pod_identity_role,
    private_subnets,
)
from gpufarm.constructs.feature_flags import check_feature_flags
from gpufarm.constructs.image_cache import ImageCache
from gpufarm.constructs.kubectl_provider import acknowledge_kubectl_provider, encrypt_kubectl_logs
from gpufarm.constructs.lb_controller import AwsLoadBalancerController
from gpufarm.core.instances import is_accelerated
from gpufarm.k8s.policy_enforcement import (
    auto_mode_network_policy_config_map,
    vpc_cni_configuration_values,
)

_LOG_TYPES = {
    ControlPlaneLog.API: eks.ClusterLoggingTypes.API,
    ControlPlaneLog.AUDIT: eks.ClusterLoggingTypes.AUDIT,
    ControlPlaneLog.AUTHENTICATOR: eks.ClusterLoggingTypes.AUTHENTICATOR,
    ControlPlaneLog.CONTROLLER_MANAGER: eks.ClusterLoggingTypes.CONTROLLER_MANAGER,
    ControlPlaneLog.SCHEDULER: eks.ClusterLoggingTypes.SCHEDULER,
}


_NODE_POLICIES = ("AmazonEKSWorkerNodeMinimalPolicy", "AmazonEC2ContainerRegistryPullOnly")
"""The least-privileged managed policies EKS documents for Auto Mode nodes."""

_SYSTEM_NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")
"""Managed node group nodes: join the cluster (and serve Pod Identity), pull images. The CNI
policy is not here: the VPC CNI gets it through Pod Identity, so pods cannot borrow it from IMDS."""

_CNI_POLICY = "AmazonEKS_CNI_Policy"
_CNI_SERVICE_ACCOUNT = "aws-node"

_MANAGED_POLICY = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{}]"

SYSTEM_NODE_LABEL_KEY: Final = "gpufarm.io/node-role"
SYSTEM_NODE_LABEL_VALUE: Final = "system"

REQUIRED_CORE_ADDONS: Final = (
    CoreAddon.VPC_CNI,
    CoreAddon.COREDNS,
    CoreAddon.KUBE_PROXY,
    CoreAddon.POD_IDENTITY_AGENT,
)
"""Add-ons without which a standard-compute cluster has no pod network, DNS or Pod Identity."""

_BEFORE_NODES = frozenset({CoreAddon.VPC_CNI, CoreAddon.KUBE_PROXY, CoreAddon.POD_IDENTITY_AGENT})
"""DaemonSets a node needs before it turns Ready: they are installed before the node group.
The others (CoreDNS, metrics-server) are Deployments that need nodes, so they follow it."""

_ADDON_IDS = {
    CoreAddon.VPC_CNI: "VpcCni",
    CoreAddon.COREDNS: "CoreDns",
    CoreAddon.KUBE_PROXY: "KubeProxy",
    CoreAddon.POD_IDENTITY_AGENT: "PodIdentityAgent",
    CoreAddon.METRICS_SERVER: "MetricsServer",
    CoreAddon.NODE_MONITORING_AGENT: "NodeMonitoringAgent",
}

_IMDS_HOP_LIMIT = 1
"""IMDSv2 responses reach the node itself (and host-network pods) but not pods on their own
network namespace, so no pod can borrow the node role."""


def kubernetes_version(version: str) -> eks.KubernetesVersion:
    """The CDK version object for a 'major.minor' string."""
    return eks.KubernetesVersion.of(version)


def _repeated(values: list[str]) -> list[str]:
    return sorted({v for v in values if values.count(v) > 1})


def validate_standard_compute(config: ClusterConfig) -> None:
    """Checks that a cluster with `karpenter` provisioning can come up; raises ValueError."""
    names = [a.value for a in config.core_addons]
    if repeated := _repeated(names):
        raise ValueError(f"'core_addons' must not list an add-on twice, got {repeated!r} more than once")
    if missing := [a.value for a in REQUIRED_CORE_ADDONS if a not in config.core_addons]:
        raise ValueError(
            "'core_addons' must include 'vpc-cni', 'coredns', 'kube-proxy' and 'eks-pod-identity-agent' "
            "with karpenter provisioning (pod networking, DNS and Pod Identity for the controllers), "
            f"missing {missing!r}"
        )
    nodes = config.system_nodes
    if not nodes.min_size <= nodes.desired_size <= nodes.max_size:
        raise ValueError(
            "'system_nodes' must satisfy min_size <= desired_size <= max_size, got "
            f"{nodes.min_size} <= {nodes.desired_size} <= {nodes.max_size}"
        )
    if accelerated := [t for t in nodes.instance_types if is_accelerated(t)]:
        raise ValueError(
            "'system_nodes.instance_types' must be CPU instance types (system pods use no GPU or "
            f"other accelerator), got {accelerated!r}"
        )


_AL2023_BY_ARCHITECTURE = {
    ec2.InstanceArchitecture.X86_64: ("x86_64", eks.NodegroupAmiType.AL2023_X86_64_STANDARD),
    ec2.InstanceArchitecture.ARM_64: ("arm64", eks.NodegroupAmiType.AL2023_ARM_64_STANDARD),
}


def _remote_networks(hybrid: HybridNodesConfig | None) -> dict[str, typing.Any]:
    """The cluster's `RemoteNetworkConfig` for EKS Hybrid Nodes: one remote node network and, with pod
    CIDRs, one remote pod network (the API takes at most one of each, each with several CIDRs)."""
    if hybrid is None or not hybrid.enabled:
        return {}
    out: dict[str, typing.Any] = {
        "remote_node_networks": [eks.RemoteNodeNetwork(cidrs=hybrid.remote_node_cidrs)]
    }
    if hybrid.remote_pod_cidrs:
        out["remote_pod_networks"] = [eks.RemotePodNetwork(cidrs=hybrid.remote_pod_cidrs)]
    return out


def _system_ami_type(nodes: SystemNodesConfig) -> eks.NodegroupAmiType:
    """The AL2023 standard AMI for the group's CPU architecture (one AMI serves the whole group)."""
    by_arch: dict[ec2.InstanceArchitecture, list[str]] = {}
    for name in nodes.instance_types:
        by_arch.setdefault(ec2.InstanceType(name).architecture, []).append(name)
    if len(by_arch) > 1:
        found = " and ".join(
            sorted(f"{_AL2023_BY_ARCHITECTURE[arch][0]} {types!r}" for arch, types in by_arch.items())
        )
        raise ValueError(f"'system_nodes.instance_types' must share one CPU architecture, got {found}")
    (arch,) = by_arch
    return _AL2023_BY_ARCHITECTURE[arch][1]


class InferenceCluster(Construct):
    """An EKS cluster for GPU inference, built on an existing VPC.

    Defaults (from :class:`ClusterConfig`): Kubernetes 1.35, EKS Auto Mode with its `system` and
    `general-purpose` pools for CPU workloads, private API endpoint, every control-plane log
    type, Kubernetes secrets envelope-encrypted with a rotating customer-managed KMS key, nodes
    in the private subnets. The kubectl provider (which applies Kubernetes manifests during
    deploy) runs in the private subnets with kubectl 1.35, so it reaches a private endpoint.
    Its log groups (which record every manifest and Helm values it applies) are encrypted with
    `logs_key` when given (default: none, CloudWatch Logs' own encryption); the key must let
    CloudWatch Logs use it. NetworkPolicies are enforced on every node: in Auto Mode the
    `kube-system/amazon-vpc-cni` ConfigMap turns the network policy controller on (nodes of the
    built-in `default` NodeClass then enforce, default allow for pods no policy selects).

    With `provisioning: karpenter` the cluster uses standard compute instead of Auto Mode (GPU
    nodes come from Karpenter, built elsewhere): a managed node group `SystemNodes` for system
    pods (AL2023 standard AMI, on-demand, sizes and root volume from `system_nodes`, encrypted
    gp3, IMDSv2 only with a hop limit of 1, detailed monitoring, node auto repair, label
    `gpufarm.io/node-role: system`), the `core_addons` as EKS add-ons (VPC CNI with its
    permissions through Pod Identity and its network policy agent on, `enableNetworkPolicy`,
    for the system, Karpenter and reserved nodes alike; self-managed bootstrap add-ons off), and the AWS Load
    Balancer Controller on the system nodes for `elbv2.k8s.aws/v1beta1` TargetGroupBindings.
    `image_digests` (default: none) supplies digests the image table lacks (a tier's
    `images.digests`), here the load balancer controller's.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        config: ClusterConfig,
        cluster_name: str | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        logs_key: kms.IKey | None = None,
        image_digests: Mapping[str, str] | None = None,
        image_cache: ImageCache | None = None,
        hybrid_nodes: HybridNodesConfig | None = None,
    ) -> None:
        super().__init__(scope, id)
        check_feature_flags(self)
        self.image_cache = image_cache
        """Where every image of this cluster's charts and manifests is pulled from (None: upstream)."""
        auto_mode = config.provisioning is Provisioning.AUTO_MODE
        system_ami = None
        if not auto_mode:
            validate_standard_compute(config)
            system_ami = _system_ami_type(config.system_nodes)
        self.secrets_key: kms.Key | None = None
        if config.secrets_encryption:
            self.secrets_key = kms.Key(
                self,
                "SecretsKey",
                description="Envelope encryption of Kubernetes secrets",
                enable_key_rotation=True,
                removal_policy=removal_policy,
            )
            limit_grants_to_aws_services(self.secrets_key)
        compute: dict[str, typing.Any]
        if auto_mode:
            self.node_role = iam.Role(
                self,
                "NodeRole",
                assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
                description="EKS Auto Mode nodes",
                managed_policies=[
                    iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in _NODE_POLICIES
                ],
            )
            compute = {
                "default_capacity_type": eks.DefaultCapacityType.AUTOMODE,
                "compute": eks.ComputeConfig(
                    node_pools=[p.value for p in config.auto_mode_builtin_pools], node_role=self.node_role
                ),
            }
        else:
            self.node_role = iam.Role(
                self,
                "SystemNodeRole",
                assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
                description="EKS managed node group for system pods",
                managed_policies=[
                    iam.ManagedPolicy.from_aws_managed_policy_name(name) for name in _SYSTEM_NODE_POLICIES
                ],
            )
            # No default capacity: the system node group is built below, after the add-ons it needs.
            # Every core add-on is an EKS add-on, so EKS installs no self-managed copies first.
            compute = {
                "default_capacity_type": eks.DefaultCapacityType.NODEGROUP,
                "default_capacity": 0,
                "bootstrap_self_managed_addons": False,
            }
        if config.endpoint_access is EndpointAccess.PRIVATE:
            endpoint = eks.EndpointAccess.PRIVATE
        else:
            endpoint = eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*config.public_access_cidrs)
        self.cluster = eks.Cluster(
            self,
            "Resource",
            cluster_name=cluster_name,
            version=kubernetes_version(config.kubernetes_version),
            vpc=vpc,
            vpc_subnets=[ec2.SubnetSelection(subnets=private_subnets(vpc))],
            endpoint_access=endpoint,
            cluster_logging=[_LOG_TYPES[t] for t in config.control_plane_logging],
            secrets_encryption_key=self.secrets_key,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=KubectlV35Layer(self, "KubectlLayer"),
                private_subnets=private_subnets(vpc),
            ),
            output_config_command=False,
            **compute,
            **_remote_networks(hybrid_nodes),
        )
        if config.admin_role_arn:
            self.cluster.grant_access(
                "AdminAccess",
                config.admin_role_arn,
                [
                    eks.AccessPolicy.from_access_policy_name(
                        "AmazonEKSClusterAdminPolicy", access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )
        for cidr in config.private_access_cidrs:
            # Operators on a VPN or a peered network reach the private endpoint on 443, nothing else.
            self.cluster.connections.allow_from(
                ec2.Peer.ipv4(cidr), ec2.Port.tcp(443), "Kubernetes API from an operator network"
            )
        self.addons: dict[str, eks.CfnAddon] = {}
        """EKS add-ons by name (standard compute only; Auto Mode runs its own)."""
        self.cni_role: iam.Role | None = None
        """Pod Identity role of the VPC CNI's `kube-system/aws-node` (standard compute only)."""
        self.system_nodegroup: eks.Nodegroup | None = None
        """The managed node group for system pods (standard compute only)."""
        self.system_node_label: dict[str, str] = {}
        """Node selector that pins controllers to the system nodes; empty in Auto Mode, which
        places them itself."""
        self.system_ready = DependencyGroup()
        """The system node group and every core add-on: make Helm charts and manifests whose pods
        must run depend on it (empty in Auto Mode, where the cluster brings its own capacity)."""
        self.load_balancer_controller: AwsLoadBalancerController | None = None
        """The AWS Load Balancer Controller (standard compute only; Auto Mode has its own). Make
        every `elbv2.k8s.aws/v1beta1` TargetGroupBinding depend on it."""
        self.network_policy_enforcement = DependencyGroup()
        """What makes the nodes enforce NetworkPolicies: the `vpc-cni` add-on (standard compute)
        or the ConfigMap that turns Auto Mode's network policy controller on. Make NetworkPolicy
        manifests depend on it, so that enforcement is on before they exist."""
        self.network_policy_controller: eks.KubernetesManifest | None = None
        """The ConfigMap turning Auto Mode's network policy controller on (Auto Mode only)."""
        if image_cache is not None:
            image_cache.grant_pull(self.node_role)
        if system_ami is not None:
            self._standard_compute(
                vpc,
                config,
                system_ami,
                image_digests,
                hybrid=hybrid_nodes is not None and hybrid_nodes.enabled,
            )
        else:
            self._auto_mode_network_policies()
        if logs_key is not None:
            encrypt_kubectl_logs(self.cluster, logs_key)
        self._acknowledge(config)

    def _standard_compute(
        self,
        vpc: ec2.IVpc,
        config: ClusterConfig,
        system_ami: eks.NodegroupAmiType,
        image_digests: Mapping[str, str] | None,
        *,
        hybrid: bool = False,
    ) -> None:
        """System node group, core add-ons and the load balancer controller, in dependency order."""
        cluster_name = self.cluster.cluster_name
        self.cni_role = pod_identity_role(
            self, "VpcCniRole", description="Amazon VPC CNI (kube-system/aws-node): pod network interfaces"
        )
        self.cni_role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(_CNI_POLICY))
        for addon in config.core_addons:
            associations = None
            configuration = None
            if addon is CoreAddon.VPC_CNI:
                associations = [
                    eks.CfnAddon.PodIdentityAssociationProperty(
                        role_arn=self.cni_role.role_arn, service_account=_CNI_SERVICE_ACCOUNT
                    )
                ]
                # The network policy agent enforces NetworkPolicies on every node of the
                # cluster; validation requires this add-on with karpenter provisioning, and
                # gpufarm offers no add-on configuration that could turn the agent off.
                configuration = vpc_cni_configuration_values()
            elif addon is CoreAddon.POD_IDENTITY_AGENT and hybrid:
                # IMDS is not on hybrid nodes: the add-on's second DaemonSet reads the credentials
                # file nodeadm writes (hybrid-nodes-add-ons.adoc, EKS Pod Identity Agent).
                configuration = json.dumps({"daemonsets": {"hybrid": {"create": True}}})
            self.addons[addon.value] = eks.CfnAddon(
                self,
                f"Addon{_ADDON_IDS[addon]}",
                cluster_name=cluster_name,
                addon_name=addon.value,
                resolve_conflicts="OVERWRITE",
                pod_identity_associations=associations,
                configuration_values=configuration,
            )
        # The agent serves the CNI's credentials, so it is installed first.
        self.addons[CoreAddon.VPC_CNI].node.add_dependency(self.addons[CoreAddon.POD_IDENTITY_AGENT])
        self.network_policy_enforcement.add(self.addons[CoreAddon.VPC_CNI])

        nodes = config.system_nodes
        launch_template = ec2.CfnLaunchTemplate(
            self,
            "SystemNodesLaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                block_device_mappings=[
                    ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                        device_name="/dev/xvda",
                        ebs=ec2.CfnLaunchTemplate.EbsProperty(
                            volume_size=nodes.disk_gib,
                            volume_type="gp3",
                            encrypted=True,
                            delete_on_termination=True,
                        ),
                    )
                ],
                metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                    http_endpoint="enabled",
                    http_tokens="required",
                    http_put_response_hop_limit=_IMDS_HOP_LIMIT,
                ),
                # One-minute EC2 metrics, as the inspection appliances have (CT.EC2.PR.10).
                monitoring=ec2.CfnLaunchTemplate.MonitoringProperty(enabled=True),
            ),
        )
        self.system_node_label = {SYSTEM_NODE_LABEL_KEY: SYSTEM_NODE_LABEL_VALUE}
        self.system_nodegroup = eks.Nodegroup(
            self,
            "SystemNodes",
            cluster=self.icluster,
            node_role=self.node_role,
            instance_types=[ec2.InstanceType(t) for t in nodes.instance_types],
            ami_type=system_ami,
            capacity_type=eks.CapacityType.ON_DEMAND,
            min_size=nodes.min_size,
            desired_size=nodes.desired_size,
            max_size=nodes.max_size,
            subnets=ec2.SubnetSelection(subnets=private_subnets(vpc)),
            labels=self.system_node_label,
            launch_template_spec=eks.LaunchTemplateSpec(
                id=launch_template.ref, version=launch_template.attr_latest_version_number
            ),
            enable_node_auto_repair=True,
        )
        for name, resource in self.addons.items():
            if CoreAddon(name) in _BEFORE_NODES:
                self.system_nodegroup.node.add_dependency(resource)
            else:
                resource.node.add_dependency(self.system_nodegroup)
        self.system_ready.add(self.system_nodegroup, *self.addons.values())

        self.load_balancer_controller = AwsLoadBalancerController(
            self,
            "LoadBalancerController",
            cluster=self.icluster,
            vpc_id=vpc.vpc_id,
            region=cdk.Stack.of(self).region,
            node_selector=self.system_node_label,
            image_digests=image_digests,
            image_cache=self.image_cache,
        )
        self.load_balancer_controller.chart.node.add_dependency(self.system_ready)

    def _auto_mode_network_policies(self) -> None:
        """Turn Auto Mode's network policy controller on (off until this ConfigMap exists)."""
        self.network_policy_controller = eks.KubernetesManifest(
            self,
            "NetworkPolicyController",
            cluster=self.icluster,
            manifest=[auto_mode_network_policy_config_map()],
            # `kubectl apply`, as the guide does it: a ConfigMap of that name that already
            # exists is updated instead of failing the create.
            overwrite=True,
        )
        self.network_policy_enforcement.add(self.network_policy_controller)

    @classmethod
    def of(cls, cluster: eks.ICluster) -> InferenceCluster | None:
        """The InferenceCluster whose EKS cluster `cluster` is; None for any other cluster (one
        built or imported elsewhere), which has no system nodes to wait for."""
        owner = cluster.node.scope
        if isinstance(owner, InferenceCluster) and owner.cluster.node.path == cluster.node.path:
            return owner
        return None

    def add_helm_chart(self, id: str, *, scope: Construct | None = None, **options: Any) -> eks.HelmChart:
        """A Helm chart on this cluster, installed after the system nodes (:attr:`system_ready`).

        Shaped as `aws_eks_v2.Cluster.add_helm_chart(id, **HelmChartOptions)`: `options` are the
        `eks.HelmChart` properties but `cluster`. aws_eks_v2 makes the chart a child of the
        cluster, `chart-<id>` (aws/aws-cdk@0543daac, packages/aws-cdk-lib/aws-eks-v2/lib/
        cluster.ts, `addHelmChart`); here it is created under `scope` (default: this construct)
        with `id` as given, so the construct that installs a chart keeps it, and its logical ID,
        among its own children. A controller whose release Helm `wait`s for needs nodes to run
        its pods on: this is the order for it.
        """
        if self.image_cache is not None and options.get("values") is not None:
            options = {**options, "values": self.image_cache.values(options["values"])}
        chart = eks.HelmChart(scope or self, id, cluster=self.icluster, **options)
        chart.node.add_dependency(self.system_ready)
        return chart

    def add_manifest(
        self,
        id: str,
        *manifest: Mapping[str, Any],
        scope: Construct | None = None,
        **options: Any,
    ) -> eks.KubernetesManifest:
        """Kubernetes objects on this cluster, applied after the system nodes (:attr:`system_ready`).

        Shaped as `aws_eks_v2.Cluster.add_manifest(id, *manifest)` (same file, `addManifest`,
        which names the child `manifest-<id>`), with `options` the `eks.KubernetesManifest`
        properties but `cluster` and `manifest` (`overwrite`, ...), and created under `scope`
        (default: this construct) with `id` as given.
        """
        applied = eks.KubernetesManifest(
            scope or self,
            id,
            cluster=self.icluster,
            manifest=through_image_cache(self.icluster, *manifest),
            **options,
        )
        applied.node.add_dependency(self.system_ready)
        return applied

    def add_system_dependent(self, *constructs: IConstruct) -> None:
        """Make `constructs` (node groups, ...) wait for the system nodes and core add-ons."""
        for construct in constructs:
            construct.node.add_dependency(self.system_ready)

    @property
    def icluster(self) -> eks.ICluster:
        """The cluster as the interface other constructs accept."""
        # jsii's Cluster implements ICluster; mypy cannot see it through the generated protocol.
        return typing.cast(eks.ICluster, self.cluster)

    @property
    def cluster_name(self) -> str:
        """Name of the EKS cluster."""
        return self.cluster.cluster_name

    @property
    def cluster_security_group(self) -> ec2.ISecurityGroup:
        """The EKS-managed security group, on the control plane's interfaces and on every node.

        Auto Mode nodes and managed node group nodes whose launch template names no security
        group carry it; the cluster's own rule lets all of them reach each other.
        """
        return self.cluster.cluster_security_group

    @property
    def pod_security_group(self) -> ec2.ISecurityGroup:
        """The security group of pod network interfaces: allow the load balancer into this one.

        Pods take the security groups of their node's primary interface (VPC CNI without
        security groups for pods; Auto Mode likewise), and every node here carries the cluster
        security group, so this is :attr:`cluster_security_group` in both modes.
        """
        return self.cluster.cluster_security_group

    def _acknowledge(self, config: ClusterConfig) -> None:
        if config.provisioning is Provisioning.AUTO_MODE:
            self._acknowledge_auto_mode()
        else:
            self._acknowledge_standard_compute()
        acknowledge_kubectl_provider(self.cluster)
        if config.endpoint_access is EndpointAccess.PUBLIC_AND_PRIVATE:
            reason = (
                "The public endpoint is enabled by cluster.endpoint_access and admits only "
                f"{', '.join(config.public_access_cidrs)}; nodes use the private endpoint."
            )
            if config.open_to_internet is not None and OPEN_CIDRS & set(config.public_access_cidrs):
                # The tier states why the whole internet may reach the API; that reason is the one.
                reason = f"cluster.open_to_internet: {config.open_to_internet.reason}"
            acknowledge(self.cluster, "AwsSolutions-EKS1", reason)

    def _acknowledge_auto_mode(self) -> None:
        role = self.cluster.role
        for policy in (
            "AmazonEKSClusterPolicy",
            "AmazonEKSComputePolicy",
            "AmazonEKSBlockStoragePolicy",
            "AmazonEKSLoadBalancingPolicy",
            "AmazonEKSNetworkingPolicy",
        ):
            acknowledge(
                role,
                _MANAGED_POLICY.format(policy),
                f"EKS Auto Mode requires {policy} on the cluster role; AWS maintains it as the "
                "service's permissions change.",
            )
        for policy in _NODE_POLICIES:
            acknowledge(
                self.node_role,
                _MANAGED_POLICY.format(policy),
                f"EKS documents {policy} as the node role policy for Auto Mode nodes; it is the "
                "minimal managed policy for joining the cluster and pulling images.",
            )

    def _acknowledge_standard_compute(self) -> None:
        acknowledge(
            self.cluster.role,
            _MANAGED_POLICY.format("AmazonEKSClusterPolicy"),
            "EKS requires AmazonEKSClusterPolicy on the cluster role of a cluster without Auto "
            "Mode; AWS maintains it as the service's permissions change.",
        )
        acknowledge(
            self.node_role,
            _MANAGED_POLICY.format("AmazonEKSWorkerNodePolicy"),
            "The system node group's nodes need AmazonEKSWorkerNodePolicy, the policy EKS documents "
            "for managed node group nodes: join the cluster and let the Pod Identity agent call "
            "eks-auth:AssumeRoleForPodIdentity.",
        )
        acknowledge(
            self.node_role,
            _MANAGED_POLICY.format("AmazonEC2ContainerRegistryPullOnly"),
            "The system node group's nodes pull add-on and controller images from ECR; "
            "AmazonEC2ContainerRegistryPullOnly is the pull-only managed policy EKS documents.",
        )
        if self.cni_role is not None:
            acknowledge(
                self.cni_role,
                _MANAGED_POLICY.format(_CNI_POLICY),
                "The VPC CNI (kube-system/aws-node) manages pod network interfaces with "
                "AmazonEKS_CNI_Policy, the policy EKS documents for it; it sits on this Pod "
                "Identity role instead of the node role, so no other pod can use it.",
            )


def helm_chart_on(cluster: eks.ICluster, scope: Construct, id: str, **options: Any) -> eks.HelmChart:
    """`eks.HelmChart(scope, id, cluster=cluster, **options)`, installed after the system nodes
    when `cluster` is an :class:`InferenceCluster`'s (:meth:`InferenceCluster.add_helm_chart`).

    For constructs that take any `eks.ICluster` and install a controller on it.
    """
    owner = InferenceCluster.of(cluster)
    if owner is not None:
        return owner.add_helm_chart(id, scope=scope, **options)
    return eks.HelmChart(scope, id, cluster=cluster, **options)


def manifest_on(
    cluster: eks.ICluster, scope: Construct, id: str, *manifest: Mapping[str, Any], **options: Any
) -> eks.KubernetesManifest:
    """`eks.KubernetesManifest(scope, id, cluster=cluster, manifest=[...], **options)`, applied
    after the system nodes when `cluster` is an :class:`InferenceCluster`'s
    (:meth:`InferenceCluster.add_manifest`)."""
    owner = InferenceCluster.of(cluster)
    if owner is not None:
        return owner.add_manifest(id, *manifest, scope=scope, **options)
    return eks.KubernetesManifest(scope, id, cluster=cluster, manifest=list(manifest), **options)


def through_image_cache(cluster: eks.ICluster, *manifest: Mapping[str, Any]) -> list[Any]:
    """`manifest` with every container image pulled through the image cache of `cluster`'s
    :class:`InferenceCluster` (:class:`ImageCache`); unchanged without one. Every construct that
    applies Kubernetes objects with images to a cluster passes them through here."""
    owner = InferenceCluster.of(cluster)
    if owner is None or owner.image_cache is None:
        return list(manifest)
    return [owner.image_cache.manifest(doc) for doc in manifest]


def values_through_image_cache(cluster: eks.ICluster, values: Mapping[str, Any]) -> Any:
    """A chart's `values` with every image repository pulled through the image cache of
    `cluster`'s :class:`InferenceCluster`; unchanged without one (see :func:`through_image_cache`)."""
    owner = InferenceCluster.of(cluster)
    if owner is None or owner.image_cache is None:
        return values
    return owner.image_cache.values(values)


def after_system_nodes(cluster: eks.ICluster, *constructs: IConstruct) -> None:
    """Make `constructs` wait for the system nodes when `cluster` is an :class:`InferenceCluster`'s."""
    owner = InferenceCluster.of(cluster)
    if owner is not None:
        owner.add_system_dependent(*constructs)
