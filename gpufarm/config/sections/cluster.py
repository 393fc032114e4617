"""Where the tier runs: its environment, network, EKS cluster and Karpenter controller."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from gpufarm.config.sections.values import (
    AccountId,
    ChartVersion,
    Cidr,
    DnsLabel,
    IamRoleArn,
    LogRetentionDays,
    OpenChoiceConfig,
    Region,
    _Model,
)


class Provisioning(StrEnum):
    """Where the GPUs that serve the models come from: an EKS cluster's nodes, or no cluster at all."""

    AUTO_MODE = "auto-mode"
    KARPENTER = "karpenter"
    EC2 = "ec2"
    """GPU instances in Auto Scaling groups behind the load balancer, no Kubernetes (section `ec2`)."""
    SAGEMAKER = "sagemaker"
    """A SageMaker real-time endpoint with inference components (section `sagemaker`)."""


class EndpointAccess(StrEnum):
    """Who can reach the Kubernetes API endpoint."""

    PRIVATE = "private"
    PUBLIC_AND_PRIVATE = "public_and_private"


class ControlPlaneLog(StrEnum):
    """EKS control-plane log types shipped to CloudWatch Logs."""

    API = "api"
    AUDIT = "audit"
    AUTHENTICATOR = "authenticator"
    CONTROLLER_MANAGER = "controllerManager"
    SCHEDULER = "scheduler"


class InterfaceEndpoint(StrEnum):
    """VPC interface endpoints gpufarm knows how to create (AWS service short names)."""

    ECR_API = "ecr.api"
    ECR_DKR = "ecr.dkr"
    STS = "sts"
    LOGS = "logs"
    EC2 = "ec2"
    EKS = "eks"
    EKS_AUTH = "eks-auth"
    ELASTIC_LOAD_BALANCING = "elasticloadbalancing"
    SECRETS_MANAGER = "secretsmanager"
    SSM = "ssm"
    KMS = "kms"
    SQS = "sqs"
    APS_WORKSPACES = "aps-workspaces"
    MONITORING = "monitoring"
    BEDROCK_RUNTIME = "bedrock-runtime"
    SAGEMAKER_RUNTIME = "sagemaker.runtime"
    SSM_MESSAGES = "ssmmessages"
    EC2_MESSAGES = "ec2messages"


class AutoModeBuiltinPool(StrEnum):
    """Node pools that EKS Auto Mode manages itself (for CPU workloads)."""

    SYSTEM = "system"
    GENERAL_PURPOSE = "general-purpose"


class CoreAddon(StrEnum):
    """EKS add-ons installed on a cluster that is not in Auto Mode."""

    VPC_CNI = "vpc-cni"
    COREDNS = "coredns"
    KUBE_PROXY = "kube-proxy"
    POD_IDENTITY_AGENT = "eks-pod-identity-agent"
    METRICS_SERVER = "metrics-server"
    NODE_MONITORING_AGENT = "eks-node-monitoring-agent"


class EnvironmentConfig(_Model):
    """Where the tier is deployed. Synth never looks these up, so it runs offline."""

    region: Region = Field("us-east-1", description="AWS region of the stack.")
    account: AccountId | None = Field(
        None,
        description="12-digit account ID; empty leaves the template account-agnostic.",
    )
    availability_zones: list[str] = Field(
        ["us-east-1a", "us-east-1b"],
        min_length=2,
        max_length=6,
        description="Availability zones of the VPC, in order; must belong to `region`.",
    )


class FlowLogsConfig(_Model):
    """VPC flow logs to CloudWatch Logs."""

    enabled: bool = Field(True, description="Record VPC flow logs.")
    retention_days: LogRetentionDays = Field(
        30, description="Days the flow log group keeps records (a CloudWatch Logs retention)."
    )


class NetworkConfig(_Model):
    """The VPC: subnets in every configured AZ, NAT, flow logs and endpoints."""

    cidr: Cidr = Field("10.0.0.0/16", description="IPv4 CIDR of the VPC (a /16 to /20).")
    nat_gateways: int = Field(1, ge=0, le=6, description="NAT gateways (at most one per AZ).")
    flow_logs: FlowLogsConfig = Field(default_factory=FlowLogsConfig, description="VPC flow logs.")
    s3_gateway_endpoint: bool = Field(
        True, description="Gateway endpoint for S3 (image layers and model weights stay off NAT)."
    )
    interface_endpoints: list[InterfaceEndpoint] = Field(
        [
            InterfaceEndpoint.ECR_API,
            InterfaceEndpoint.ECR_DKR,
            InterfaceEndpoint.STS,
            InterfaceEndpoint.LOGS,
        ],
        description="Interface endpoints (private DNS) in the private subnets.",
    )


class SystemNodesConfig(_Model):
    """The managed node group for system pods (controllers, CoreDNS) when not in Auto Mode."""

    instance_types: list[str] = Field(
        ["m7i.xlarge", "m6i.xlarge"], min_length=1, description="CPU instance types of the group."
    )
    min_size: int = Field(2, ge=1, le=20, description="Fewest nodes (2 keeps controllers highly available).")
    desired_size: int = Field(2, ge=1, le=20, description="Nodes at creation.")
    max_size: int = Field(4, ge=1, le=20, description="Most nodes.")
    disk_gib: int = Field(50, ge=20, le=1000, description="Root volume per node, GiB.")


class ClusterConfig(_Model):
    """The EKS control plane and how nodes are provisioned."""

    kubernetes_version: str = Field("1.35", description="Kubernetes minor version, pinned.")
    provisioning: Provisioning = Field(Provisioning.AUTO_MODE, description="How GPU nodes are provisioned.")
    auto_mode_builtin_pools: list[AutoModeBuiltinPool] = Field(
        [AutoModeBuiltinPool.SYSTEM, AutoModeBuiltinPool.GENERAL_PURPOSE],
        description="Auto Mode's own CPU node pools to enable.",
    )
    endpoint_access: EndpointAccess = Field(
        EndpointAccess.PRIVATE, description="Who can reach the Kubernetes API endpoint."
    )
    public_access_cidrs: list[Cidr] = Field(
        [], description="CIDRs allowed to reach the public endpoint (public_and_private only)."
    )
    open_to_internet: OpenChoiceConfig | None = Field(
        None, description="Needed, with a reason, to list 0.0.0.0/0 in public_access_cidrs (empty: refused)."
    )
    private_access_cidrs: list[Cidr] = Field(
        [],
        description="Operator networks (VPN, peered VPCs) allowed to the private API endpoint on 443.",
    )
    control_plane_logging: list[ControlPlaneLog] = Field(
        list(ControlPlaneLog), description="Control-plane log types sent to CloudWatch Logs."
    )
    secrets_encryption: bool = Field(
        True, description="Envelope-encrypt Kubernetes secrets with a customer-managed KMS key."
    )
    admin_role_arn: IamRoleArn | None = Field(
        None, description="IAM role given cluster-admin through an EKS access entry."
    )
    core_addons: list[CoreAddon] = Field(
        list(CoreAddon),
        description="EKS add-ons to install when not in Auto Mode (versions: EKS default; `vpc-cni` "
        "always has its network policy agent on, so NetworkPolicies are enforced).",
    )
    system_nodes: SystemNodesConfig = Field(
        default_factory=SystemNodesConfig, description="System node group (not used in Auto Mode)."
    )


class KarpenterConfig(_Model):
    """The Karpenter controller (karpenter provisioning only)."""

    chart_version: ChartVersion = Field("1.14.0", description="Karpenter Helm chart version, pinned.")
    namespace: DnsLabel = Field("kube-system", description="Namespace of the controller.")
    replicas: int = Field(2, ge=1, le=3, description="Controller replicas (one leads, the rest wait).")
    node_repair: bool = Field(
        True,
        description="Replace nodes whose GPU, kernel, network, storage or runtime the node "
        "monitoring agent reports broken (chart feature gate `nodeRepair`; needs the "
        "`eks-node-monitoring-agent` core add-on).",
    )
    nvidia_device_plugin_chart_version: ChartVersion = Field(
        "0.18.0",
        description="NVIDIA device plugin Helm chart version (AL2023 GPU nodes need it).",
    )
