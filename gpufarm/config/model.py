"""The tier model: every setting a tier can carry, with its default and a one-line description.

A tier document (YAML) is read into :class:`TierConfig`. Field-level rules (types, ranges,
closed sets, unknown keys) live here; rules that tie several fields together live in
:mod:`gpufarm.config.validate`.
"""

from __future__ import annotations

import ipaddress
import re
import zlib
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from gpufarm import images as image_table
from gpufarm.config.names import is_dns_1035_label

# --------------------------------------------------------------------------- value types

_DURATION = re.compile(r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$")
HF_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[^\s]*)?$")
_ACM_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]{36}$")
_IAM_ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
_SECRET_REF = re.compile(
    r"^(arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]+|[\w/+=.@-]{1,512})$"
)
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d$")
TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)
"""GPU counts per replica that vLLM's tensor parallelism and GPU instances both allow."""

# Karpenter's own pattern for NodePool disruption budgets: a count, or 0%-100%.
_BUDGET_NODES = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")
_IMAGE = re.compile(r"^[\w.-]+(:\d+)?(/[\w.-]+)+(:[\w.-]+)?@sha256:[0-9a-f]{64}$")


def _dns_label(value: str) -> str:
    if not is_dns_1035_label(value, max_length=40):
        raise ValueError(
            "must be a lowercase DNS label (a-z, 0-9, '-', starting with a letter, "
            f"at most 40 characters), got {value!r}"
        )
    return value


def _duration(value: str) -> str:
    if value != "Never" and not _DURATION.match(value):
        raise ValueError(f"must be a duration such as '30m', '1h' or '2h30m' (or 'Never'), got {value!r}")
    return value


LOG_RETENTION_DAYS = (
    1,
    3,
    5,
    7,
    14,
    30,
    60,
    90,
    120,
    150,
    180,
    365,
    400,
    545,
    731,
    1096,
    1827,
    2192,
    2557,
    2922,
    3288,
    3653,
)
"""Retention periods CloudWatch Logs accepts, in days."""


def _log_retention(value: int) -> int:
    if value not in LOG_RETENTION_DAYS:
        raise ValueError(
            f"must be a CloudWatch Logs retention ({', '.join(map(str, LOG_RETENTION_DAYS))}), got {value}"
        )
    return value


def _cidr(value: str) -> str:
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError:
        raise ValueError(
            f"must be an IPv4 CIDR block with no host bits set, such as '10.0.0.0/16', got {value!r}"
        ) from None
    return str(network)


def _pattern(regex: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not regex.match(value):
            raise ValueError(f"must be {what}, got {value!r}")
        return value

    return AfterValidator(check)


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
Duration = Annotated[str, AfterValidator(_duration)]
Cidr = Annotated[str, AfterValidator(_cidr)]
LogRetentionDays = Annotated[int, AfterValidator(_log_retention)]
Region = Annotated[str, _pattern(REGION, "an AWS region name such as 'us-east-1'")]
AcmCertificateArn = Annotated[
    str, _pattern(_ACM_ARN, "an ACM certificate ARN (arn:aws:acm:<region>:<account>:certificate/<id>)")
]
IamRoleArn = Annotated[str, _pattern(_IAM_ROLE_ARN, "an IAM role ARN (arn:aws:iam::<account>:role/<name>)")]
SecretRef = Annotated[str, _pattern(_SECRET_REF, "a Secrets Manager secret name or ARN")]
NodeBudget = Annotated[
    str, _pattern(_BUDGET_NODES, "a node count such as '1' or a percentage from '0%' to '100%'")
]


def _pinned_image(value: str) -> str:
    # Pods run exactly the image reviewed: a tag can be pushed again, a digest cannot
    # (docs/decisions/0042-images-pinned-by-digest.md).
    if not _IMAGE.match(value):
        raise ValueError(
            "must be a container image pinned by digest, such as "
            f"'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            f"got {value!r}"
        )
    return value


ImageRef = Annotated[str, AfterValidator(_pinned_image)]

TARGET_CONTROL_AGENT_IMAGE = image_table.image("target-control-agent").reference()
"""The ALB target control agent as AWS publishes it: under the `latest` tag only, with no
digest gpufarm could confirm (gpufarm/data/images.yaml)."""


def _agent_image(value: str) -> str:
    if value == TARGET_CONTROL_AGENT_IMAGE:
        return value
    return _pinned_image(value)


AgentImageRef = Annotated[str, AfterValidator(_agent_image)]
AccountId = Annotated[str, _pattern(re.compile(r"^\d{12}$"), "a 12-digit AWS account ID")]
ChartVersion = Annotated[
    str, _pattern(re.compile(r"^\d+\.\d+\.\d+$"), "an exact chart version such as '1.2.3'")
]
AmiVersion = Annotated[
    str,
    _pattern(
        re.compile(r"^(latest|v\d{8}|\d+\.\d+\.\d+)$"),
        "'latest', an AL2023 release such as 'v20251120' or a Bottlerocket version such as '1.50.0'",
    ),
]
CognitoUserPoolArn = Annotated[
    str,
    _pattern(
        re.compile(r"^arn:aws[a-z-]*:cognito-idp:[a-z0-9-]+:\d{12}:userpool/[\w-]+$"),
        "a Cognito user pool ARN (arn:aws:cognito-idp:<region>:<account>:userpool/<id>)",
    ),
]
HttpsUrl = Annotated[str, _pattern(re.compile(r"^https://[^\s/]+(/\S*)?$"), "an https:// URL")]


_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{8}([0-9a-f]{9})?$")
ReservationId = Annotated[
    str, _pattern(_RESERVATION_ID, "a capacity reservation ID such as 'cr-0123456789abcdef0'")
]
_PRINCIPAL = re.compile(r"^(\*|arn:aws[a-z-]*:iam::\d{12}:(root|role/[\w+=,.@/-]+|user/[\w+=,.@/-]+))$")
AllowedPrincipal = Annotated[
    str,
    _pattern(_PRINCIPAL, "an IAM principal ARN (arn:aws:iam::<account>:root, :role/<name> or :user/<name>)"),
]


TIER_METADATA_KEY = "gpufarm:tier"
"""Template `Metadata` key under which each stack carries the tier config it was built from.

Here rather than next to the stack, so reading an assembly back needs no aws-cdk-lib.
"""


def default_route_priority(model_name: str) -> int:
    """A listener-rule priority derived from the model name alone (1000-40999).

    Priorities must not depend on a model's position in the list: removing a model would shift
    the others onto priorities the old rules still hold, and the deploy would fail.
    """
    return 1000 + zlib.crc32(model_name.encode()) % 40000


class _Model(BaseModel):
    """Base for every config object: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_enum_values=False)


# --------------------------------------------------------------------------- enums


class Provisioning(StrEnum):
    """How GPU nodes are provisioned."""

    AUTO_MODE = "auto-mode"
    KARPENTER = "karpenter"


class CapacityType(StrEnum):
    """EC2 purchase option for GPU nodes (the values of `karpenter.sh/capacity-type`)."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVED = "reserved"


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


class AutoModeBuiltinPool(StrEnum):
    """Node pools that EKS Auto Mode manages itself (for CPU workloads)."""

    SYSTEM = "system"
    GENERAL_PURPOSE = "general-purpose"


class AmiFamily(StrEnum):
    """Operating system of Karpenter GPU nodes (both ship the NVIDIA driver)."""

    AL2023 = "al2023"
    BOTTLEROCKET = "bottlerocket"


class PoolPurpose(StrEnum):
    """What a GPU pool is for: latency-critical serving, or batch/background work that may use spot."""

    SERVING = "serving"
    BATCH = "batch"


class CoreAddon(StrEnum):
    """EKS add-ons installed on a cluster that is not in Auto Mode."""

    VPC_CNI = "vpc-cni"
    COREDNS = "coredns"
    KUBE_PROXY = "kube-proxy"
    POD_IDENTITY_AGENT = "eks-pod-identity-agent"
    METRICS_SERVER = "metrics-server"


class ModelStoreKind(StrEnum):
    """Where vLLM reads `s3://` weights from."""

    S3_MOUNTPOINT = "s3-mountpoint"
    FSX_LUSTRE = "fsx-lustre"


class ReservationKind(StrEnum):
    """Where a reserved node group's capacity comes from."""

    CREATE = "create"
    ODCR = "odcr"
    CAPACITY_BLOCK = "capacity-block"


class NodeGroupAmiType(StrEnum):
    """EKS-optimized GPU AMIs for managed node groups."""

    AL2023_NVIDIA = "AL2023_x86_64_NVIDIA"
    BOTTLEROCKET_NVIDIA = "BOTTLEROCKET_x86_64_NVIDIA"


class LoadBalancerKind(StrEnum):
    """The load balancer in front of the models."""

    ALB = "alb"
    NLB = "nlb"


class LoadBalancerScheme(StrEnum):
    """Whether the load balancer has public addresses."""

    INTERNAL = "internal"
    INTERNET_FACING = "internet-facing"


class CompliancePack(StrEnum):
    """Rule packs a tier must pass: cdk-nag's, or AWS Control Tower's proactive controls."""

    AWS_SOLUTIONS = "aws-solutions"
    NIST_800_53_R5 = "nist-800-53-r5"
    CONTROL_TOWER = "control-tower"
    """AWS Control Tower's proactive controls, as bundled by `cdklabs.cdk-validator-cfnguard`."""


class RemovalPolicy(StrEnum):
    """What happens to keys and log groups when the stack is deleted or they are replaced."""

    RETAIN = "retain"
    DESTROY = "destroy"


# --------------------------------------------------------------------------- sections


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


class OpenChoiceConfig(_Model):
    """A deliberate choice to admit the whole internet (0.0.0.0/0), and why; the reason becomes
    the cdk-nag acknowledgement on the resource it opens."""

    reason: str = Field(description="Why the whole internet must reach it (at least 20 characters).")


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
    nvidia_device_plugin_chart_version: ChartVersion = Field(
        "0.18.0",
        description="NVIDIA device plugin Helm chart version (AL2023 GPU nodes need it).",
    )


class NodePoolConfig(_Model):
    """A pool of GPU nodes that models are scheduled on."""

    name: DnsLabel = Field(description="Pool name; the NodePool is named `gpu-<name>`.")
    instance_families: list[str] = Field(
        ["g6e"], min_length=1, description="GPU instance families the pool may launch."
    )
    instance_types: list[str] = Field(
        [], description="Narrow the pool to these instance types (empty: any size of the families)."
    )
    capacity_types: list[CapacityType] = Field(
        [CapacityType.ON_DEMAND], min_length=1, description="EC2 purchase options allowed."
    )
    gpu_limit: int = Field(8, ge=1, le=4096, description="Most GPUs the pool may run at once.")
    consolidate_after: Duration = Field(
        "30m", description="How long a node must be empty before it is removed."
    )
    expire_after: Duration = Field(
        "336h", description="Node lifetime before replacement (Auto Mode allows at most 504h)."
    )
    disruption_budget_nodes: NodeBudget = Field(
        "1", description="Nodes (count or percent) that may be disrupted at once."
    )
    purpose: PoolPurpose = Field(
        PoolPurpose.SERVING, description="'serving' (on-demand only) or 'batch' (may also use spot)."
    )
    weight: int | None = Field(
        None,
        ge=1,
        le=100,
        description="Karpenter NodePool weight; higher fills first (default: 50 serving, 10 batch).",
    )
    ami_family: AmiFamily = Field(
        AmiFamily.AL2023, description="Node OS for Karpenter pools (ignored in Auto Mode)."
    )
    ami_version: AmiVersion = Field(
        "latest",
        description="AMI alias version: 'latest', 'v20251120' (AL2023) or '1.50.0' (Bottlerocket).",
    )
    root_volume_gib: int = Field(
        300, ge=100, le=16000, description="Root volume of Karpenter GPU nodes, GiB (images, weights)."
    )
    capacity_class: DnsLabel | None = Field(
        None,
        description="Class shared with other pools and node groups that models can target "
        "(default: the pool's name).",
    )
    reservation_ids: list[ReservationId] = Field(
        [],
        description="Capacity reservations (ODCR or Capacity Block) the pool may use with the "
        "'reserved' capacity type (karpenter provisioning).",
    )
    efa: bool = Field(False, description="Give nodes EFA interfaces (instance types that support EFA).")

    @property
    def capacity_class_name(self) -> str:
        """The class models select: `capacity_class`, else the pool's name."""
        return self.capacity_class or self.name

    @property
    def nodepool_weight(self) -> int:
        """The NodePool weight: explicit, else 50 for serving pools and 10 for batch pools."""
        if self.weight is not None:
            return self.weight
        return 50 if self.purpose is PoolPurpose.SERVING else 10


BEDROCK_MODEL_ID = re.compile(r"^[a-z0-9-]+\.[a-z0-9][a-z0-9.:-]*$")
"""A Bedrock foundation-model ID ('anthropic.claude-3-5-haiku-20241022-v1:0') or, with a
geography prefix, an inference-profile ID ('us.anthropic.claude-3-5-haiku-20241022-v1:0')."""


class BedrockTargetConfig(_Model):
    """The Amazon Bedrock model that answers for a model when its GPUs cannot."""

    model_id: str = Field(
        description="Foundation-model ID, or an inference-profile ID ('us.meta.llama3-3-70b-instruct-v1:0')."
    )
    region: Region | None = Field(
        None, description="Region to call Bedrock in (default: the stack's region)."
    )
    destination_regions: list[Region] = Field(
        [],
        description="Regions a cross-region profile may route to (default: gpufarm's table for its prefix).",
    )
    max_tokens: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="Default max_tokens on the fallback path (a request's own value wins).",
    )


class ReservedCapacityConfig(_Model):
    """The EC2 capacity behind a reserved node group."""

    kind: ReservationKind = Field(
        ReservationKind.CREATE,
        description="'create' an On-Demand Capacity Reservation, use existing 'odcr' IDs, or a "
        "'capacity-block'.",
    )
    reservation_ids: list[ReservationId] = Field(
        [], description="Existing reservations ('odcr': one or more; 'capacity-block': exactly one)."
    )
    instance_count: int | None = Field(
        None, ge=1, le=1000, description="Instances to reserve ('create'; default: the group's nodes)."
    )


class NodeGroupConfig(_Model):
    """An EKS managed node group of GPU instances on reserved capacity: the always-on base."""

    name: DnsLabel = Field(description="Node group name; nodes are labelled with it.")
    instance_type: str = Field(description="GPU instance type of the reservation ('p5.48xlarge').")
    availability_zone: str = Field(description="AZ of the reservation; the group's only subnet is there.")
    nodes: int = Field(1, ge=1, le=1000, description="Nodes in the group (fixed: reserved capacity).")
    ami_type: NodeGroupAmiType = Field(NodeGroupAmiType.AL2023_NVIDIA, description="GPU AMI of the nodes.")
    disk_gib: int = Field(500, ge=100, le=16000, description="Root volume per node, GiB.")
    capacity: ReservedCapacityConfig = Field(
        default_factory=ReservedCapacityConfig, description="Where the reserved capacity comes from."
    )
    efa: bool = Field(False, description="Give nodes EFA interfaces and the EFA security group.")
    capacity_class: DnsLabel | None = Field(
        None, description="Class shared with Karpenter pools that burst above this base (default: name)."
    )

    @property
    def capacity_class_name(self) -> str:
        """The class models select: `capacity_class`, else the group's name."""
        return self.capacity_class or self.name


class ModelAutoscalingConfig(_Model):
    """KEDA scaling of one model on its vLLM metrics in Amazon Managed Prometheus."""

    min_replicas: int = Field(1, ge=0, le=100, description="Fewest replicas; 0 only for non-critical models.")
    max_replicas: int = Field(4, ge=1, le=100, description="Most replicas (gpu_limit must cover them).")
    queue_target: float | None = Field(
        5, gt=0, description="Waiting requests per replica to aim for (vllm:num_requests_waiting)."
    )
    kv_cache_target: float | None = Field(
        None, gt=0, le=1, description="KV-cache usage per replica to aim for (vllm:kv_cache_usage_perc)."
    )
    polling_interval_seconds: int = Field(15, ge=5, le=600, description="How often KEDA queries.")
    cooldown_seconds: int = Field(
        900, ge=60, le=86400, description="Idle time before scaling to zero (min_replicas 0 only)."
    )
    scale_down_stabilization_seconds: int = Field(
        600, ge=0, le=3600, description="Time a lower replica count must hold before pods are removed."
    )


class KvTransport(StrEnum):
    """How a prefill pod's KV cache reaches the decode pod (NIXL backends)."""

    TCP = "tcp"
    EFA = "efa"


class PrefillDecodeConfig(_Model):
    """Disaggregated serving of one model: prefill pods beside the decode pods (`replicas`).

    The llm-d router picks a decode pod for every request and, when the prompt's uncached part is
    long enough, a prefill pod too; the decode pod's routing sidecar sends the prompt there and
    vLLM's NixlConnector moves the KV cache to the decode GPU.
    """

    prefill_replicas: int = Field(
        1,
        ge=1,
        le=100,
        description="Prefill pods (fixed); the model's replicas/autoscaling size the decode pods.",
    )
    prefill_gpus: int | None = Field(
        None, ge=1, description="GPUs per prefill pod, its tensor-parallel size (default: the model's gpus)."
    )
    min_uncached_tokens: int = Field(
        512,
        ge=1,
        le=1_048_576,
        description="Prompt tokens not in the decode pod's prefix cache from which a request is "
        "prefilled on a prefill pod; shorter prompts are served whole by the decode pod.",
    )
    block_size: Literal[16, 32, 64, 128] = Field(
        128, description="KV-cache block size, tokens (--block-size on both roles; NIXL needs them equal)."
    )
    kv_transport: KvTransport = Field(
        KvTransport.TCP,
        description="'tcp' (UCX over the pod network, stock image) or 'efa' (libfabric over EFA; "
        "needs efa_image and EFA node groups).",
    )
    efa_image: ImageRef | None = Field(
        None,
        description="vLLM image with NIXL's libfabric backend and the EFA libraries (kv_transport 'efa').",
    )

    prefill_autoscaling: ModelAutoscalingConfig | None = Field(
        None,
        description="Scale the prefill pods with KEDA on their own vLLM metrics (replaces "
        "prefill_replicas); empty: prefill_replicas pods.",
    )

    def prefill_gpus_for(self, model_gpus: int) -> int:
        """GPUs of one prefill pod: `prefill_gpus`, else the model's `gpus`."""
        return self.prefill_gpus or model_gpus

    @property
    def prefill_replica_bounds(self) -> tuple[int, int]:
        """(fewest, most) prefill pods: the autoscaling bounds, else `prefill_replicas` twice."""
        if self.prefill_autoscaling is not None:
            return self.prefill_autoscaling.min_replicas, self.prefill_autoscaling.max_replicas
        return self.prefill_replicas, self.prefill_replicas


MAX_SHARES = 5
"""Shares one model may have: a load balancer's forward action names at most five target groups."""


class ModelShareConfig(_Model):
    """Part of a model's replicas on one pool or capacity class, behind its own weighted target group."""

    name: DnsLabel | None = Field(
        None,
        description="Share name, unique within the model; its Deployment and Service are "
        "`vllm-<model>-<name>` (default: its node_pool or capacity_class).",
    )
    node_pool: str | None = Field(
        None, description="GPU pool or node group the share runs on (set this or capacity_class)."
    )
    capacity_class: DnsLabel | None = Field(
        None, description="Capacity class the share runs on (set this or node_pool)."
    )
    replicas: int = Field(1, ge=0, le=100, description="vLLM pods of this share.")
    gpus: int | None = Field(
        None,
        ge=1,
        description="GPUs per replica on this hardware, vLLM's tensor-parallel size "
        "(default: the model's gpus).",
    )
    weight: int = Field(
        1,
        ge=0,
        le=999,
        description="Weight of the share's target group in the model's forward action "
        "(0 sends it no new requests).",
    )

    @property
    def share_name(self) -> str:
        """The share's name: `name`, else its capacity class, else its node pool."""
        return self.name or self.capacity_class or self.node_pool or ""


class ModelConfig(_Model):
    """A model served by vLLM."""

    name: DnsLabel = Field(description="Name used for Kubernetes objects and the route prefix.")
    weights: str = Field(
        description="Hugging Face repo id ('Qwen/Qwen3-8B') or S3 URI ('s3://bucket/prefix/')."
    )
    served_model_name: str | None = Field(
        None, description="The `model` clients send (default: the model's `name`)."
    )
    revision: str | None = Field(
        None, description="Hugging Face revision (commit, branch or tag) to pin the weights."
    )
    hf_token_secret: SecretRef | None = Field(
        None, description="Secrets Manager secret holding a Hugging Face token (gated models)."
    )
    node_pool: str | None = Field(None, description="GPU pool the model runs on (default: the first pool).")
    gpus: int = Field(1, ge=1, description="GPUs per replica; vLLM's tensor-parallel size.")
    replicas: int = Field(1, ge=0, le=100, description="vLLM pods.")
    max_model_len: int = Field(
        8192, ge=256, le=1_048_576, description="Context length in tokens (--max-model-len)."
    )
    gpu_memory_utilization: float = Field(
        0.90, gt=0.1, le=0.98, description="GPU memory share vLLM may use (--gpu-memory-utilization)."
    )
    max_num_seqs: int | None = Field(
        None, ge=1, le=4096, description="Concurrent sequences per replica (--max-num-seqs)."
    )
    dtype: Literal["auto", "half", "float16", "bfloat16", "float32"] = Field(
        "auto", description="Weight and activation precision (--dtype)."
    )
    quantization: str | None = Field(
        None, pattern=r"^[a-z0-9_-]+$", description="--quantization (e.g. 'fp8', 'awq')."
    )
    extra_args: list[str] = Field([], description="More `vllm serve` arguments, appended as given.")
    cpu: float = Field(4, gt=0, le=192, description="CPU cores requested per replica.")
    memory_gib: int = Field(32, ge=4, le=2048, description="Memory requested per replica, GiB.")
    startup_timeout_seconds: int = Field(
        1800, ge=60, le=7200, description="Time allowed to download and load weights."
    )
    route_priority: int | None = Field(
        None,
        ge=1,
        le=50000,
        description="Listener-rule priority of the model's route (default: derived from the name).",
    )
    critical: bool = Field(
        True, description="Latency-critical: never on spot, never scaled to zero (unless overridden)."
    )
    allow_spot: bool = Field(
        False, description="Let a critical model run on a pool that allows spot (explicit override)."
    )
    weights_gib: float | None = Field(
        None, gt=0, le=20000, description="Size of the weights on disk, GiB (sizes the FSx file system)."
    )
    autoscaling: ModelAutoscalingConfig | None = Field(
        None, description="Scale replicas with KEDA (replaces `replicas`); empty: fixed replicas."
    )
    target_control_max_concurrency: int | None = Field(
        None,
        ge=1,
        le=1000,
        description="Concurrent requests the Target Optimizer sends one replica "
        "(default: max_num_seqs, else 64).",
    )
    capacity_class: DnsLabel | None = Field(
        None,
        description="Run on any node group or pool of this class (reserved base first, then burst); "
        "instead of node_pool.",
    )
    pipeline_parallel: int = Field(
        1,
        ge=1,
        le=16,
        description="Nodes per replica (vLLM pipeline parallelism over a LeaderWorkerSet); gpus is per node.",
    )
    listener_port: int | None = Field(
        None, ge=1, le=65535, description="NLB listener port of the model (ingress.kind 'nlb')."
    )
    kv_cache_routing: bool = Field(
        False,
        description="Route requests through a KV-cache-aware endpoint picker (Gateway API "
        "Inference Extension, standalone) instead of the load balancer's own pod choice.",
    )
    prefill_decode: PrefillDecodeConfig | None = Field(
        None,
        description="Serve disaggregated: prefill pods beside the decode pods, behind the llm-d "
        "router (vLLM NixlConnector); empty: every pod prefills and decodes its own requests.",
    )
    bedrock: BedrockTargetConfig | Literal["none"] | None = Field(
        None,
        description="Bedrock model the gateway falls back to, or 'none' to opt out "
        "(required while fallback is enabled).",
    )
    shares: list[ModelShareConfig] = Field(
        [],
        description="Split the replicas over pools or classes, each share behind its own weighted "
        "target group (2-5 shares; instead of node_pool, capacity_class and replicas).",
    )

    @property
    def bedrock_target(self) -> BedrockTargetConfig | None:
        """The Bedrock fallback of this model; None when it opts out or names none."""
        return self.bedrock if isinstance(self.bedrock, BedrockTargetConfig) else None

    @property
    def routed(self) -> bool:
        """True when the model's traffic passes its own router (KV-cache-aware or prefill/decode)."""
        return self.kv_cache_routing or self.prefill_decode is not None

    @property
    def prefill_gpu_demand(self) -> int:
        """GPUs the model's prefill pods may hold at most (0 without prefill/decode)."""
        return self.prefill_gpus_at(peak=True)

    def prefill_gpus_at(self, *, peak: bool) -> int:
        """GPUs of the model's prefill pods at their fewest (base) or most (`peak`); 0 without them."""
        pd = self.prefill_decode
        if pd is None:
            return 0
        return pd.prefill_replica_bounds[1 if peak else 0] * pd.prefill_gpus_for(self.gpus)

    @property
    def max_replicas(self) -> int:
        """The most replicas the model can run: the autoscaling maximum, else `replicas` (its shares' sum)."""
        if self.shares:
            return sum(share.replicas for share in self.shares)
        return self.autoscaling.max_replicas if self.autoscaling else self.replicas

    def as_share(self, share: ModelShareConfig) -> ModelConfig:
        """The model as one of its shares serves it: the share's placement, replicas and GPUs.

        Everything else (weights, vLLM flags, resources, fallback) is the model's. The result
        has no shares, fixed replicas of one node each and no KV-cache router, as a share's
        Deployment runs (shares exclude autoscaling, pipeline parallelism and the router).
        """
        return self.model_copy(
            update={
                "node_pool": share.node_pool,
                "capacity_class": share.capacity_class,
                "replicas": share.replicas,
                "gpus": share.gpus or self.gpus,
                "shares": [],
                "autoscaling": None,
                "pipeline_parallel": 1,
                "kv_cache_routing": False,
            }
        )

    def parts(self) -> list[tuple[str | None, ModelConfig]]:
        """How the model is deployed: `[(None, self)]`, or `(share name, as_share(share))` per share."""
        if not self.shares:
            return [(None, self)]
        return [(share.share_name, self.as_share(share)) for share in self.shares]

    @property
    def max_concurrency(self) -> int:
        """TARGET_CONTROL_MAX_CONCURRENCY for this model's replicas."""
        return self.target_control_max_concurrency or self.max_num_seqs or 64

    @property
    def is_s3(self) -> bool:
        """True when the weights come from S3 (mounted with Mountpoint) rather than Hugging Face."""
        return self.weights.startswith("s3://")

    @property
    def rule_priority(self) -> int:
        """The listener-rule priority of this model's route."""
        return self.route_priority or default_route_priority(self.name)

    @property
    def api_model_name(self) -> str:
        """The model name clients put in the request body."""
        return self.served_model_name or self.name


class ServingConfig(_Model):
    """Settings shared by every vLLM deployment."""

    namespace: DnsLabel = Field("gpufarm", description="Namespace of the serving workloads.")
    vllm_image: ImageRef = Field(
        image_table.reference("vllm"), description="vLLM OpenAI-compatible server image, pinned by digest."
    )
    aws_cli_image: ImageRef = Field(
        image_table.reference("aws-cli"),
        description="Image of the init container that reads the Hugging Face token secret.",
    )
    port: int = Field(8000, ge=1024, le=65535, description="Port vLLM listens on in the pod.")
    allowed_client_namespaces: list[DnsLabel] = Field(
        [],
        description="Namespaces whose pods may call the gateway and each model's Service in the "
        "cluster (NetworkPolicy ingress; empty: only the load balancer and gpufarm's own pods).",
    )


FSX_THROUGHPUT_PER_TIB = (125, 250, 500, 1000)
"""PERSISTENT_2 throughput tiers, MB/s per TiB of storage."""


class FsxLustreConfig(_Model):
    """An FSx for Lustre PERSISTENT_2 file system that imports the model bucket."""

    import_path: str | None = Field(
        None, description="S3 prefix imported into the file system ('s3://bucket/prefix/')."
    )
    storage_capacity_gib: int | None = Field(
        None, description="1200, 2400 or a multiple of 2400 GiB (default: sized from the models)."
    )
    throughput_per_tib: int = Field(250, description="MB/s per TiB: 125, 250, 500 or 1000.")
    headroom: float = Field(
        1.3, ge=1.0, le=10.0, description="Capacity sized as the models' weights_gib times this factor."
    )
    data_compression: Literal["LZ4", "NONE"] = Field("LZ4", description="Lustre data compression.")
    auto_import: bool = Field(True, description="Import new, changed and deleted S3 objects automatically.")


class ModelStoreConfig(_Model):
    """Where `s3://` weights are read from: Mountpoint for S3, or FSx for Lustre."""

    kind: ModelStoreKind = Field(ModelStoreKind.S3_MOUNTPOINT, description="The model store.")
    fsx: FsxLustreConfig = Field(default_factory=FsxLustreConfig, description="FSx for Lustre (fsx-lustre).")


class AccessLogsConfig(_Model):
    """Load balancer access logs to S3."""

    enabled: bool = Field(True, description="Write ALB access logs to an encrypted S3 bucket.")
    retention_days: int = Field(90, ge=1, le=3653, description="Days access logs are kept.")


class TargetOptimizerConfig(_Model):
    """ALB Target Optimizer: an agent sidecar caps the concurrent requests each pod receives."""

    enabled: bool = Field(False, description="Turn on (changing it replaces the model target groups).")
    agent_image: AgentImageRef = Field(
        TARGET_CONTROL_AGENT_IMAGE,
        description="Target control agent image; AWS publishes only ':latest', pin a mirrored digest.",
    )
    data_port: int = Field(8080, ge=1024, le=65535, description="Agent port receiving ALB traffic.")
    control_port: int = Field(3000, ge=1024, le=65535, description="Agent control port (TargetControlPort).")

    @property
    def runs_unpinned_agent(self) -> bool:
        """Whether the optimizer is on with the agent as AWS publishes it (`:latest`, no digest)."""
        return self.enabled and self.agent_image == TARGET_CONTROL_AGENT_IMAGE


class WafConfig(_Model):
    """AWS WAF web ACL on the load balancer (required when internet-facing)."""

    enabled: bool = Field(True, description="Attach a web ACL.")
    rate_limit_per_5_minutes: int = Field(
        2000, ge=10, le=2_000_000_000, description="Requests one client IP may send per 5 minutes."
    )
    common_rule_set: bool = Field(
        True,
        description="AWS managed common rules (SizeRestrictions_BODY counts only: prompts exceed 8 KB).",
    )
    known_bad_inputs: bool = Field(True, description="AWS managed known-bad-inputs rules.")


class OidcAuthConfig(_Model):
    """Authenticate clients at the load balancer with an OpenID Connect provider."""

    issuer: HttpsUrl = Field(description="OIDC issuer URL.")
    authorization_endpoint: HttpsUrl = Field(description="Authorization endpoint.")
    token_endpoint: HttpsUrl = Field(description="Token endpoint.")
    user_info_endpoint: HttpsUrl = Field(description="User info endpoint.")
    client_id: str = Field(min_length=1, max_length=256, description="OAuth client ID.")
    client_secret: SecretRef = Field(
        description="Secrets Manager secret holding the client secret (resolved at deploy time)."
    )


class CognitoAuthConfig(_Model):
    """Authenticate clients at the load balancer with an Amazon Cognito user pool."""

    user_pool_arn: CognitoUserPoolArn = Field(description="User pool ARN.")
    user_pool_client_id: str = Field(min_length=1, max_length=128, description="App client ID.")
    user_pool_domain: DnsLabel = Field(description="User pool domain prefix.")


class NlbConfig(_Model):
    """A Network Load Balancer: one TCP or TLS listener per model."""

    static_ips: bool = Field(
        True, description="An Elastic IP per AZ when internet-facing (clients allow-list fixed addresses)."
    )
    tls: bool = Field(True, description="Terminate TLS at the NLB (needs ingress.certificate_arn); else TCP.")
    cross_zone: bool = Field(True, description="Spread each AZ's traffic over targets in every AZ.")


APPLIANCE_ROOT_DEVICE = "/dev/xvda"
"""Root device of Amazon Linux 2023, the default appliance image."""


class ApplianceConfig(_Model):
    """The inspection appliances behind the Gateway Load Balancer (an Auto Scaling group)."""

    ami_id: str | None = Field(
        None,
        pattern=r"^ami-[0-9a-f]{8,17}$",
        description="Appliance AMI (your firewall vendor's); empty: Amazon Linux 2023 forwarding GENEVE.",
    )
    instance_type: str = Field("c6in.large", description="Appliance instance type.")
    min_size: int = Field(2, ge=1, le=20, description="Fewest appliances.")
    max_size: int = Field(4, ge=1, le=50, description="Most appliances.")
    health_check_port: int = Field(
        80, ge=1, le=65535, description="TCP port the Gateway Load Balancer checks on each appliance."
    )
    root_device_name: str = Field(
        APPLIANCE_ROOT_DEVICE,
        pattern=r"^/dev/[a-z0-9]+$",
        description="Root device of the appliance image (the encrypted gp3 volume); set it with ami_id.",
    )


class InspectionConfig(_Model):
    """Send internet ingress through appliances behind a Gateway Load Balancer before the load balancer."""

    enabled: bool = Field(False, description="Build the inspection VPC and route ingress through it.")
    cidr: Cidr = Field("10.250.0.0/20", description="CIDR of the inspection VPC (must not overlap).")
    appliances: ApplianceConfig = Field(
        default_factory=ApplianceConfig, description="The appliances' Auto Scaling group."
    )


class PrivateLinkConfig(_Model):
    """Offer the models to other VPCs and accounts through a VPC endpoint service."""

    enabled: bool = Field(False, description="Create an NLB-backed endpoint service.")
    allowed_principals: list[AllowedPrincipal] = Field(
        [], description="Principals allowed to create endpoints to the service."
    )
    acceptance_required: bool = Field(True, description="New endpoint connections wait for acceptance.")


class IngressConfig(_Model):
    """The Application Load Balancer in front of the models."""

    scheme: LoadBalancerScheme = Field(
        LoadBalancerScheme.INTERNAL, description="Internal (default) or internet-facing."
    )
    certificate_arn: AcmCertificateArn | None = Field(
        None, description="ACM certificate for the HTTPS listener (required when internet-facing)."
    )
    allowed_cidrs: list[Cidr] = Field(
        [], description="Client CIDRs allowed to connect (default: the VPC CIDR when internal)."
    )
    open_to_internet: OpenChoiceConfig | None = Field(
        None, description="Needed, with a reason, to list 0.0.0.0/0 in allowed_cidrs (empty: refused)."
    )
    idle_timeout_seconds: int = Field(
        600, ge=60, le=4000, description="ALB idle timeout; long generations stream for minutes."
    )
    slow_start_seconds: int = Field(
        0,
        ge=0,
        le=900,
        description="Ramp-up for a new target; must stay 0 with kind 'alb' (least outstanding "
        "requests excludes slow start).",
    )
    deregistration_delay_seconds: int = Field(
        300, ge=0, le=3600, description="Time in-flight requests get to finish when a pod leaves."
    )
    health_check_interval_seconds: int = Field(
        15, ge=5, le=300, description="Target health-check interval on /health."
    )
    access_logs: AccessLogsConfig = Field(default_factory=AccessLogsConfig, description="ALB access logs.")
    kind: LoadBalancerKind = Field(
        LoadBalancerKind.ALB, description="'alb' (HTTP routing) or 'nlb' (TCP/TLS)."
    )
    lcu_reservation: int | None = Field(
        None, ge=100, le=1_000_000, description="ALB capacity units reserved ahead of traffic (empty: none)."
    )
    nlb: NlbConfig = Field(default_factory=lambda: NlbConfig(), description="The NLB (kind 'nlb').")
    inspection: InspectionConfig = Field(
        default_factory=lambda: InspectionConfig(), description="Gateway Load Balancer inspection."
    )
    private_link: PrivateLinkConfig = Field(
        default_factory=lambda: PrivateLinkConfig(), description="PrivateLink endpoint service."
    )
    target_optimizer: TargetOptimizerConfig = Field(
        default_factory=TargetOptimizerConfig, description="ALB Target Optimizer."
    )
    waf: WafConfig = Field(default_factory=WafConfig, description="AWS WAF web ACL.")
    oidc: OidcAuthConfig | None = Field(None, description="Authenticate with OIDC (HTTPS only).")
    cognito: CognitoAuthConfig | None = Field(None, description="Authenticate with Cognito (HTTPS only).")


class GuardrailConfig(_Model):
    """An Amazon Bedrock guardrail applied to requests answered by Bedrock."""

    enabled: bool = Field(False, description="Create a guardrail and apply it on the fallback path.")
    content_filter_strength: Literal["LOW", "MEDIUM", "HIGH"] = Field(
        "HIGH", description="Strength of the hate, insults, sexual, violence and misconduct filters."
    )
    prompt_attack_strength: Literal["NONE", "LOW", "MEDIUM", "HIGH"] = Field(
        "HIGH", description="Strength of the prompt-attack filter on inputs."
    )
    blocked_message: str = Field(
        "This request was blocked by the platform's content policy.",
        min_length=1,
        max_length=500,
        description="Text returned in place of a blocked prompt or answer.",
    )


class FallbackConfig(_Model):
    """The gateway in front of the models: vLLM first, Amazon Bedrock when vLLM cannot answer."""

    enabled: bool = Field(True, description="Run the LiteLLM gateway and route the default path to it.")
    image: ImageRef = Field(
        image_table.reference("litellm"), description="LiteLLM proxy image, pinned by digest."
    )
    replicas: int = Field(2, ge=2, le=20, description="Gateway pods (at least 2, spread over nodes).")
    cpu: float = Field(1, gt=0, le=16, description="CPU cores requested per gateway pod.")
    memory_gib: int = Field(2, ge=1, le=64, description="Memory per gateway pod, GiB.")
    port: int = Field(4000, ge=1024, le=65535, description="Port the gateway listens on.")
    num_retries: int = Field(1, ge=0, le=5, description="Retries against vLLM before falling back.")
    request_timeout_seconds: int = Field(
        240,
        ge=5,
        le=3600,
        description="Longest a non-streamed request may take on one backend before the next is tried.",
    )
    stream_timeout_seconds: int = Field(
        60, ge=1, le=600, description="Longest gap between streamed chunks (the first included)."
    )
    allowed_fails: int = Field(
        3,
        ge=1,
        le=100,
        description="Failures of one kind (each within cooldown_seconds of the last) beyond which "
        "vLLM is put in cooldown.",
    )
    cooldown_seconds: int = Field(
        30, ge=1, le=3600, description="How long a failing vLLM backend is skipped before it is tried again."
    )
    master_key_secret: SecretRef | None = Field(
        None,
        description="Secrets Manager secret holding the gateway's master key (empty: no key required).",
    )
    guardrail: GuardrailConfig = Field(
        default_factory=GuardrailConfig, description="Bedrock guardrail on the fallback path."
    )


class AutoscalingConfig(_Model):
    """KEDA, which scales models that set `autoscaling` (Karpenter then adds or removes nodes)."""

    keda_chart_version: ChartVersion = Field("2.18.1", description="KEDA Helm chart version, pinned.")
    namespace: DnsLabel = Field("keda", description="Namespace of the KEDA operator.")


_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
Email = Annotated[str, _pattern(_EMAIL, "an email address")]


class PrometheusConfig(_Model):
    """Amazon Managed Service for Prometheus: workspace, managed scraper and DCGM exporter."""

    enabled: bool = Field(False, description="Create the workspace and the managed scraper.")
    scrape_interval_seconds: int = Field(
        30, ge=30, le=300, description="How often metrics are scraped (the managed scraper allows 30-300)."
    )
    dcgm_exporter: bool = Field(True, description="Deploy NVIDIA's DCGM exporter on GPU nodes.")
    dcgm_exporter_chart_version: ChartVersion = Field(
        "4.6.0", description="DCGM exporter Helm chart version, pinned."
    )


class AlarmsConfig(_Model):
    """CloudWatch alarms on the load balancer, sent to an SNS topic."""

    enabled: bool = Field(True, description="Create the alarms and their SNS topic.")
    emails: list[Email] = Field([], description="Addresses subscribed to the alarm topic.")
    target_5xx_per_minute: int = Field(
        10, ge=1, description="5xx responses (targets and load balancer) per minute that alarm."
    )
    p99_response_seconds: float = Field(
        30, gt=0, le=4000, description="p99 time to first response byte that alarms, seconds."
    )
    evaluation_minutes: int = Field(5, ge=1, le=60, description="Minutes a breach must last.")


class ObservabilityConfig(_Model):
    """Metrics, alarms and dashboards."""

    prometheus: PrometheusConfig = Field(default_factory=PrometheusConfig, description="Managed Prometheus.")
    alarms: AlarmsConfig = Field(default_factory=AlarmsConfig, description="CloudWatch alarms.")
    dashboard: bool = Field(True, description="A CloudWatch dashboard for the tier.")


def _supplied_digests(value: dict[str, str]) -> dict[str, str]:
    allowed = [row.name for row in image_table.unconfirmed() if row.chart is not None]
    for name, digest in value.items():
        if name not in allowed:
            raise ValueError(
                f"must name images whose digest gpufarm's table lacks ({', '.join(allowed)}), got {name!r}"
            )
        if not image_table.DIGEST.match(digest):
            raise ValueError(f"{name!r} must be a digest, {image_table.DIGEST_HINT}, got {digest!r}")
    return value


ImageDigests = Annotated[dict[str, str], AfterValidator(_supplied_digests)]


class ImagesConfig(_Model):
    """Digests of the controller images whose digest gpufarm could not confirm (gpufarm/data/images.yaml)."""

    digests: ImageDigests = Field(
        {},
        description="Image name -> digest ('sha256:...') of its table tag, for the images the table "
        "holds no digest for; a tier that runs one of them without it is refused at deploy.",
    )


class TierConfig(_Model):
    """A whole tier: everything one gpufarm stack deploys."""

    name: DnsLabel = Field(description="Tier name; the stack is named `gpufarm-<name>`.")
    description: str = Field("", max_length=1024, description="Free text, copied to the stack.")
    removal_policy: RemovalPolicy = Field(
        RemovalPolicy.RETAIN,
        description="Removal policy of KMS keys and log groups (buckets are always retained).",
    )
    termination_protection: bool = Field(False, description="Protect the stack from deletion.")
    compliance_packs: list[CompliancePack] = Field(
        [CompliancePack.AWS_SOLUTIONS],
        description="Rule packs that gate synth (cdk-nag's; Control Tower's proactive controls).",
    )
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    karpenter: KarpenterConfig = Field(default_factory=KarpenterConfig)
    node_pools: list[NodePoolConfig] = Field(min_length=1, description="GPU node pools.")
    node_groups: list[NodeGroupConfig] = Field(
        [], description="Reserved GPU node groups: the always-on base (standard compute only)."
    )
    serving: ServingConfig = Field(default_factory=ServingConfig)
    models: list[ModelConfig] = Field(min_length=1, max_length=50, description="Models to serve.")
    model_store: ModelStoreConfig = Field(default_factory=ModelStoreConfig)
    ingress: IngressConfig = Field(default_factory=IngressConfig)
    fallback: FallbackConfig = Field(default_factory=FallbackConfig)
    autoscaling: AutoscalingConfig = Field(default_factory=AutoscalingConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    images: ImagesConfig = Field(
        default_factory=ImagesConfig, description="Image digests the tier supplies (docs/operations.md)."
    )

    @property
    def stack_name(self) -> str:
        """CloudFormation stack name."""
        return f"gpufarm-{self.name}"

    def capacity_classes(self) -> dict[str, list[NodePoolConfig | NodeGroupConfig]]:
        """Class name -> the node groups and pools in it (node groups first: they fill first)."""
        out: dict[str, list[NodePoolConfig | NodeGroupConfig]] = {}
        for group in self.node_groups:
            out.setdefault(group.capacity_class_name, []).append(group)
        for pool in self.node_pools:
            out.setdefault(pool.capacity_class_name, []).append(pool)
        return out

    def model_parts(self) -> list[ModelConfig]:
        """Every placement that holds GPUs: each model, or each share of one (`ModelConfig.as_share`)."""
        return [part for model in self.models for _, part in model.parts()]

    def pool_of(self, model: ModelConfig) -> NodePoolConfig:
        """The node pool a model runs on (its `node_pool`, or the first pool)."""
        wanted = model.node_pool or self.node_pools[0].name
        return next(p for p in self.node_pools if p.name == wanted)
