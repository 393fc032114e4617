"""Preflight: can this account run a tier in a region? Checked with read-only AWS calls.

Six checks, each giving rows of pass / warn / fail with the fix for a failure:

- **vCPU quotas**: the EC2 Service Quotas for G/VT and P instances, On-Demand and Spot, against
  the vCPUs the tier needs (instances x vCPUs per instance, from ``DescribeInstanceTypes``).
- **Instance type offerings**: the GPU instance types are offered in the configured AZs.
- **Capacity reservations**: referenced ODCRs and Capacity Blocks exist, are active, and match
  the node group's instance type, AZ and node count (Capacity Blocks: cover the present moment).
- **Bedrock**: fallback foundation models and inference profiles are offered in the region.
- **Kubernetes version**: EKS supports the configured version.
- **Network quotas**: with the synthesized template, what it creates (Elastic IPs, VPCs,
  interface endpoints per VPC, target groups per region and per load balancer, listener rules per
  load balancer, rules per security group, security groups per network interface) against the
  account's quotas in Service Quotas and what the account already uses.

An API the caller may not call turns its check into a warning (the check could not run); missing
or expired credentials stop the run with :class:`PreflightError`. Nothing here is imported at
synth time.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from typing import Any

from gpufarm.aws import network_demand
from gpufarm.aws.network_demand import Count
from gpufarm.config import CapacityType, NodePoolConfig, TierConfig
from gpufarm.config.bedrock import destination_regions, foundation_model_id, profile_prefix
from gpufarm.config.model import ModelConfig, NodeGroupConfig, ReservationKind
from gpufarm.config.placeholders import UNPINNED_IMAGE, find_placeholders
from gpufarm.core.instances import GPU_FAMILIES, gpus_in, quota_class
from gpufarm.core.placement import placement_of
from gpufarm.eks_support import WARN_DAYS, support_status
from gpufarm.pricing import load_prices

# --------------------------------------------------------------------------- results


class Status(StrEnum):
    """Outcome of one check row."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


class Check(StrEnum):
    """The checks preflight runs, in the order they are reported."""

    QUOTA = "vcpu-quota"
    OFFERING = "instance-offering"
    RESERVATION = "capacity-reservation"
    BEDROCK = "bedrock"
    KUBERNETES = "kubernetes-version"
    NETWORK_QUOTA = "network-quota"
    REGION = "region"
    PLACEHOLDER = "placeholder"


@dataclass(frozen=True, kw_only=True)
class QuotaFigures:
    """The figures behind a network quota row: the quota, its value, and the tier's use of it."""

    name: str
    code: str
    """The Service Quotas code; '' for a fixed quota that Service Quotas does not list."""
    limit: int
    in_use: int
    needed: int

    def to_dict(self) -> dict[str, str | int]:
        """The figures as JSON-ready data."""
        return {
            "name": self.name,
            "code": self.code,
            "limit": self.limit,
            "in_use": self.in_use,
            "needed": self.needed,
        }


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """One row of the preflight table."""

    check: Check
    subject: str
    status: Status
    message: str
    fix: str = ""
    quota: QuotaFigures | None = None
    """The figures of a network quota row (None for the other checks)."""

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data (with `quota` for a network quota row)."""
        out: dict[str, Any] = {
            "check": self.check.value,
            "subject": self.subject,
            "status": self.status.value,
            "message": self.message,
            "fix": self.fix,
        }
        if self.quota is not None:
            out["quota"] = self.quota.to_dict()
        return out


@dataclass(frozen=True, kw_only=True)
class PreflightReport:
    """Every row of a preflight run, with where it ran."""

    tier: str
    region: str
    account: str
    results: tuple[CheckResult, ...]

    @property
    def failed(self) -> bool:
        """True when any row failed (the command then exits with status 1)."""
        return any(r.status is Status.FAIL for r in self.results)

    def counts(self) -> dict[str, int]:
        """Rows per status."""
        return {s.value: sum(1 for r in self.results if r.status is s) for s in Status}

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "tier": self.tier,
            "region": self.region,
            "account": self.account,
            "ok": not self.failed,
            "counts": self.counts(),
            "results": [r.to_dict() for r in self.results],
        }


class PreflightError(Exception):
    """The checks could not run at all: no or expired credentials, or AWS unreachable."""


# --------------------------------------------------------------------------- quotas


@dataclass(frozen=True, kw_only=True)
class VcpuQuota:
    """An EC2 vCPU quota in Service Quotas (service code `ec2`)."""

    code: str
    name: str
    instance_class: str
    """'G' (G and VT families) or 'P'."""
    capacity_type: CapacityType
    """On-demand or spot."""


VCPU_QUOTAS: tuple[VcpuQuota, ...] = (
    VcpuQuota(
        code="L-DB2E81BA",
        name="Running On-Demand G and VT instances",
        instance_class="G",
        capacity_type=CapacityType.ON_DEMAND,
    ),
    VcpuQuota(
        code="L-417A185B",
        name="Running On-Demand P instances",
        instance_class="P",
        capacity_type=CapacityType.ON_DEMAND,
    ),
    VcpuQuota(
        code="L-3819A6DF",
        name="All G and VT Spot Instance Requests",
        instance_class="G",
        capacity_type=CapacityType.SPOT,
    ),
    VcpuQuota(
        code="L-7212CCBC",
        name="All P Spot Instance Requests",
        instance_class="P",
        capacity_type=CapacityType.SPOT,
    ),
)
"""The vCPU quotas GPU instances count against (values are vCPUs, per region)."""


def quota_for(instance_type: str, capacity_type: CapacityType) -> VcpuQuota | None:
    """The vCPU quota an instance of this type and capacity type counts against, if any."""
    wanted = quota_class(instance_type)
    return next(
        (q for q in VCPU_QUOTAS if q.instance_class == wanted and q.capacity_type is capacity_type), None
    )


# --------------------------------------------------------------------------- demand (pure)


@dataclass(frozen=True, kw_only=True)
class InstanceInfo:
    """What EC2 says about an instance type (from DescribeInstanceTypes)."""

    instance_type: str
    vcpus: int
    memory_gib: float
    gpus: int


@dataclass(frozen=True, kw_only=True)
class VcpuDemand:
    """Instances one node group or pool may run, of one type and capacity type."""

    source: str
    """'node group <name>' or 'pool <name>'."""
    instance_type: str
    capacity_type: CapacityType
    vcpus_per_instance: int
    instances: int
    """Instances for the models at their most replicas."""
    limit_instances: int
    """Instances at the pool's GPU limit (for a node group: its nodes)."""

    @property
    def vcpus(self) -> int:
        """vCPUs for the models at their most replicas."""
        return self.instances * self.vcpus_per_instance

    @property
    def limit_vcpus(self) -> int:
        """vCPUs at the pool's GPU limit."""
        return self.limit_instances * self.vcpus_per_instance


def pool_candidates(pool: NodePoolConfig) -> list[str]:
    """Instance types a pool may launch: its `instance_types`, else every catalog size of its families."""
    if pool.instance_types:
        return list(pool.instance_types)
    return [t for f in pool.instance_families if f in GPU_FAMILIES for t in GPU_FAMILIES[f].instance_types()]


def fits(model: ModelConfig, info: InstanceInfo) -> bool:
    """Whether one replica (per node) of the model fits an instance: GPUs, CPU and memory requests.

    The node keeps some CPU and memory for itself, so the requests must be strictly below the
    instance's vCPUs and memory.
    """
    return info.gpus >= model.gpus and info.vcpus > model.cpu and info.memory_gib > model.memory_gib


def instance_for(
    model: ModelConfig, candidates: Iterable[str], info: Mapping[str, InstanceInfo]
) -> str | None:
    """The smallest candidate (fewest GPUs, then vCPUs) one node of the model fits, roughly as
    Karpenter picks; None when no candidate with known facts fits."""
    usable = [info[t] for t in candidates if t in info and fits(model, info[t])]
    if not usable:
        return None
    return min(usable, key=lambda i: (i.gpus, i.vcpus, i.memory_gib)).instance_type


def _nodes(model: ModelConfig, replicas: int, gpus_per_node: int) -> int:
    """Nodes `replicas` of the model take: a node per pipeline stage, else replicas packed by GPUs."""
    if model.pipeline_parallel > 1:
        return replicas * model.pipeline_parallel
    per_node = max(1, gpus_per_node // model.gpus)
    return math.ceil(replicas / per_node)


def _with_prefill_pods(models: list[ModelConfig]) -> list[ModelConfig]:
    """The models, each prefill/decode model followed by its prefill pods as a model of their own.

    The prefill pods run where the model runs, at most replicas x `prefill_gpus`: counting
    them as one more fixed-size model puts them on the same nodes the quota check counts.
    """
    out: list[ModelConfig] = []
    for model in models:
        out.append(model)
        pd = model.prefill_decode
        if pd is not None:
            update = {
                "name": f"{model.name}-prefill"[:40],
                "gpus": pd.prefill_gpus_for(model.gpus),
                "replicas": pd.prefill_replica_bounds[1],
                "autoscaling": None,
                "prefill_decode": None,
            }
            out.append(model.model_copy(update=update))
    return out


def _quota_capacity_types(pool: NodePoolConfig) -> list[CapacityType]:
    """Quota capacity types a pool's nodes count against (reserved instances count as on-demand)."""
    out = []
    if CapacityType.ON_DEMAND in pool.capacity_types or CapacityType.RESERVED in pool.capacity_types:
        out.append(CapacityType.ON_DEMAND)
    if CapacityType.SPOT in pool.capacity_types:
        out.append(CapacityType.SPOT)
    return out


def vcpu_demands(tier: TierConfig, info: Mapping[str, InstanceInfo]) -> list[VcpuDemand]:
    """The instances each node group and pool may run, from the models' placement and most replicas.

    Node groups on an On-Demand Capacity Reservation (`create`, `odcr`) count against the
    On-Demand quota with all their nodes; Capacity Blocks are paid ahead and are not counted.
    A model's nodes fill the reserved node groups it may use first, then its first pool (highest
    weight). Pools count against On-Demand and Spot quotas for every capacity type they allow.
    """
    demands: list[VcpuDemand] = []
    free_nodes: dict[str, int] = {}
    for group in tier.node_groups:
        free_nodes[group.name] = group.nodes
        known = info.get(group.instance_type)
        if known is None or group.capacity.kind is ReservationKind.CAPACITY_BLOCK:
            continue
        demands.append(
            VcpuDemand(
                source=f"node group {group.name}",
                instance_type=group.instance_type,
                capacity_type=CapacityType.ON_DEMAND,
                vcpus_per_instance=known.vcpus,
                instances=group.nodes,
                limit_instances=group.nodes,
            )
        )
    pool_nodes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    pool_largest: dict[str, str] = {}
    # A model split into shares: each share on its own pool; prefill pods where their model runs.
    for model in _with_prefill_pods(list(tier.model_parts())):
        targets = placement_of(tier, model)
        remaining = model.max_replicas
        for group in (t for t in targets if isinstance(t, NodeGroupConfig)):
            gpus = gpus_in(group.instance_type) or 0
            if remaining == 0 or gpus < model.gpus:
                continue
            per_node = max(1, gpus // model.gpus) if model.pipeline_parallel == 1 else 0
            if per_node:
                used = min(free_nodes[group.name], math.ceil(remaining / per_node))
                remaining = max(0, remaining - used * per_node)
            else:
                groups = min(free_nodes[group.name] // model.pipeline_parallel, remaining)
                used = groups * model.pipeline_parallel
                remaining -= groups
            free_nodes[group.name] -= used
        pools = sorted(
            (t for t in targets if isinstance(t, NodePoolConfig)), key=lambda p: -p.nodepool_weight
        )
        if not pools:
            continue
        pool = pools[0]
        chosen = instance_for(model, pool_candidates(pool), info)
        if chosen is None:
            continue
        if remaining:
            pool_nodes[pool.name][chosen] += _nodes(model, remaining, info[chosen].gpus)
        current = pool_largest.get(pool.name)
        if current is None or info[chosen].gpus > info[current].gpus:
            pool_largest[pool.name] = chosen
    for pool in tier.node_pools:
        unit = pool_largest.get(pool.name)
        if unit is None:
            facts = [info[t] for t in pool_candidates(pool) if t in info]
            if not facts:
                continue
            unit = min(facts, key=lambda i: (i.gpus, i.vcpus)).instance_type
        limit = math.ceil(pool.gpu_limit / max(1, info[unit].gpus))
        nodes = dict(pool_nodes.get(pool.name, {}))
        nodes.setdefault(unit, 0)
        for capacity_type in _quota_capacity_types(pool):
            for instance_type, count in sorted(nodes.items()):
                demands.append(
                    VcpuDemand(
                        source=f"pool {pool.name}",
                        instance_type=instance_type,
                        capacity_type=capacity_type,
                        vcpus_per_instance=info[instance_type].vcpus,
                        instances=count,
                        limit_instances=limit if instance_type == unit else 0,
                    )
                )
    return demands


def instance_types_of(tier: TierConfig) -> list[str]:
    """Every instance type the tier's node groups and pools may launch, sorted."""
    types = {g.instance_type for g in tier.node_groups}
    for pool in tier.node_pools:
        types.update(pool_candidates(pool))
    return sorted(types)


# --------------------------------------------------------------------------- AWS plumbing

_CREDENTIAL_ERROR_CODES = frozenset(
    {
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredToken",
        "ExpiredTokenException",
        "RequestExpired",
        "SignatureDoesNotMatch",
        "InvalidSignatureException",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "AuthFailure",
    }
)
_ACCESS_DENIED_CODES = frozenset(
    {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess"}
)

CREDENTIALS_HELP = (
    "configure credentials for the account (aws configure, AWS_PROFILE, or aws sso login) and try again"
)


def _error_code(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Code", ""))
    return ""


def _error_message(exc: BaseException) -> str:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return str(response.get("Error", {}).get("Message", "")) or str(exc)
    return str(exc)


def _fatal(exc: BaseException, *, connectivity: bool = False) -> PreflightError | None:
    """A PreflightError when `exc` means no check can run: credentials, or (with `connectivity`,
    for the first call) an AWS endpoint that cannot be reached. Later, an unreachable endpoint
    (a service the region does not offer) only stops its own check."""
    from botocore import exceptions as boto_errors

    if isinstance(exc, boto_errors.ClientError):
        if _error_code(exc) in _CREDENTIAL_ERROR_CODES:
            return PreflightError(f"AWS rejected the credentials: {_error_message(exc)}; {CREDENTIALS_HELP}")
        return None
    if isinstance(
        exc,
        boto_errors.NoCredentialsError
        | boto_errors.PartialCredentialsError
        | boto_errors.CredentialRetrievalError
        | boto_errors.TokenRetrievalError
        | boto_errors.SSOError
        | boto_errors.ProfileNotFound,
    ):
        return PreflightError(f"no usable AWS credentials ({exc}); {CREDENTIALS_HELP}")
    if connectivity and isinstance(
        exc, boto_errors.EndpointConnectionError | boto_errors.ConnectTimeoutError
    ):
        return PreflightError(f"cannot reach AWS: {exc}")
    return None


_CHECK_ACTIONS: dict[Check, str] = {
    Check.QUOTA: "servicequotas:GetServiceQuota, servicequotas:GetAWSDefaultServiceQuota, "
    "ec2:DescribeInstanceTypes",
    Check.OFFERING: "ec2:DescribeInstanceTypeOfferings, ec2:DescribeInstanceTypes",
    Check.RESERVATION: "ec2:DescribeCapacityReservations",
    Check.BEDROCK: "bedrock:ListFoundationModels, bedrock:GetInferenceProfile",
    Check.KUBERNETES: "eks:DescribeClusterVersions",
    Check.NETWORK_QUOTA: "servicequotas:GetServiceQuota, servicequotas:GetAWSDefaultServiceQuota, "
    "ec2:DescribeAddresses, ec2:DescribeVpcs, elasticloadbalancing:DescribeTargetGroups",
    Check.REGION: "sts:GetCallerIdentity",
}


def _guarded(check: Check, run: Callable[[], list[CheckResult]]) -> list[CheckResult]:
    """Run one check; an AWS error other than credentials becomes a single warning row."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return run()
    except (ClientError, BotoCoreError) as exc:
        fatal = _fatal(exc)
        if fatal is not None:
            raise fatal from None
        code = _error_code(exc)
        if code in _ACCESS_DENIED_CODES:
            return [
                CheckResult(
                    check=check,
                    subject="permissions",
                    status=Status.WARN,
                    message=f"could not check: access denied ({_error_message(exc)})",
                    fix=f"allow {_CHECK_ACTIONS[check]} to the caller",
                )
            ]
        return [
            CheckResult(
                check=check,
                subject="aws error",
                status=Status.WARN,
                message=f"could not check: {code or type(exc).__name__}: {_error_message(exc)}",
                fix="run preflight again; if it persists, check the AWS service health for the region",
            )
        ]


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def describe_instance_types(ec2: Any, instance_types: list[str]) -> dict[str, InstanceInfo]:
    """vCPUs, memory and GPUs of the given types; types the region does not have are left out."""
    out: dict[str, InstanceInfo] = {}
    paginator = ec2.get_paginator("describe_instance_types")
    for chunk in _chunks(instance_types, 100):
        for page in paginator.paginate(Filters=[{"Name": "instance-type", "Values": chunk}]):
            for item in page.get("InstanceTypes", []):
                name = str(item["InstanceType"])
                gpus = sum(int(g.get("Count", 0)) for g in item.get("GpuInfo", {}).get("Gpus", []))
                out[name] = InstanceInfo(
                    instance_type=name,
                    vcpus=int(item["VCpuInfo"]["DefaultVCpus"]),
                    memory_gib=int(item["MemoryInfo"]["SizeInMiB"]) / 1024,
                    gpus=gpus or (gpus_in(name) or 0),
                )
    return out


def describe_offerings(ec2: Any, instance_types: list[str], zones: list[str]) -> dict[str, set[str]]:
    """Instance type -> the zones (of `zones`) that offer it."""
    out: dict[str, set[str]] = {t: set() for t in instance_types}
    paginator = ec2.get_paginator("describe_instance_type_offerings")
    for chunk in _chunks(instance_types, 100):
        pages = paginator.paginate(
            LocationType="availability-zone",
            Filters=[
                {"Name": "location", "Values": zones},
                {"Name": "instance-type", "Values": chunk},
            ],
        )
        for page in pages:
            for offer in page.get("InstanceTypeOfferings", []):
                out.setdefault(str(offer["InstanceType"]), set()).add(str(offer["Location"]))
    return out


# --------------------------------------------------------------------------- check: quotas


def _quota_value(quotas: Any, code: str, service: str = "ec2") -> float:
    """The applied value of a quota (`GetServiceQuota`), else its AWS default
    (`GetAWSDefaultServiceQuota`, when the account has no applied value)."""
    from botocore.exceptions import ClientError

    try:
        response = quotas.get_service_quota(ServiceCode=service, QuotaCode=code)
    except ClientError as exc:
        if _error_code(exc) != "NoSuchResourceException":
            raise
        response = quotas.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)
    return float(response["Quota"]["Value"])


def _describe(demands: list[VcpuDemand], *, at_limit: bool) -> str:
    parts = []
    for d in demands:
        count = d.limit_instances if at_limit else d.instances
        if count:
            parts.append(f"{d.source}: {count} x {d.instance_type}")
    return "; ".join(parts)


def check_vcpu_quotas(
    tier: TierConfig, *, region: str, info: Mapping[str, InstanceInfo], quotas: Any
) -> list[CheckResult]:
    """One row per vCPU quota the tier's instances count against.

    pass: the quota covers the pools at their GPU limits; warn: it covers the models at their most
    replicas only; fail: it does not cover the models.
    """
    by_quota: dict[str, list[VcpuDemand]] = defaultdict(list)
    for demand in vcpu_demands(tier, info):
        quota = quota_for(demand.instance_type, demand.capacity_type)
        if quota is not None:
            by_quota[quota.code].append(demand)
    rows = []
    for quota in VCPU_QUOTAS:
        demands = by_quota.get(quota.code)
        if not demands:
            continue
        need = sum(d.vcpus for d in demands)
        need_limit = max(need, sum(d.limit_vcpus for d in demands))
        value = _quota_value(quotas, quota.code)
        have = int(value)
        subject = f"{quota.name} ({quota.code})"
        request = (
            f"request an increase to at least {{}} vCPUs: aws service-quotas "
            f"request-service-quota-increase --service-code ec2 --quota-code {quota.code} "
            f"--desired-value {{}} --region {region}"
        )
        if value >= need_limit:
            rows.append(
                CheckResult(
                    check=Check.QUOTA,
                    subject=subject,
                    status=Status.PASS,
                    message=f"{have} vCPUs cover the {need_limit} the tier may use at its pools' GPU limits",
                )
            )
        elif value >= need:
            rows.append(
                CheckResult(
                    check=Check.QUOTA,
                    subject=subject,
                    status=Status.WARN,
                    message=f"{have} vCPUs cover the models at their most replicas ({need}) but not "
                    f"the pools at their GPU limits ({need_limit}: {_describe(demands, at_limit=True)})",
                    fix=request.format(need_limit, need_limit),
                )
            )
        else:
            rows.append(
                CheckResult(
                    check=Check.QUOTA,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"{have} vCPUs, but the models at their most replicas need {need} "
                    f"({_describe(demands, at_limit=False)})",
                    fix=request.format(need_limit, need_limit),
                )
            )
    return rows


# --------------------------------------------------------------------------- check: offerings


def check_offerings(
    tier: TierConfig, *, info: Mapping[str, InstanceInfo], offered: Mapping[str, set[str]]
) -> list[CheckResult]:
    """Node group types in their AZ; each pool's models in the tier's AZs.

    A node group whose type its AZ does not offer fails. A model that no AZ can place fails; one
    that only some AZs can place is a warning (its nodes run in the others). A pool's explicit
    instance type offered in no AZ is a warning (the pool launches the others).
    """
    zones = list(tier.environment.availability_zones)
    rows = []
    for group in tier.node_groups:
        subject = f"node group {group.name}"
        if group.availability_zone in offered.get(group.instance_type, set()):
            rows.append(
                CheckResult(
                    check=Check.OFFERING,
                    subject=subject,
                    status=Status.PASS,
                    message=f"{group.instance_type} is offered in {group.availability_zone}",
                )
            )
        else:
            where = sorted(offered.get(group.instance_type, set()))
            rows.append(
                CheckResult(
                    check=Check.OFFERING,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"{group.instance_type} is not offered in {group.availability_zone}"
                    + (f" (offered in {', '.join(where)})" if where else " nor in any other AZ of the tier"),
                    fix=f"move node_groups '{group.name}' to an AZ that offers {group.instance_type}"
                    + (f" ({', '.join(where)})" if where else "")
                    + ", or choose another instance type",
                )
            )
    for pool in tier.node_pools:
        rows.extend(_pool_offerings(tier, pool, zones, info, offered))
    return rows


def _pool_types(pool: NodePoolConfig) -> str:
    """The pool's instance types as configured: its types, else its families ('g6e.*')."""
    return ", ".join(pool.instance_types) or ", ".join(f"{f}.*" for f in pool.instance_families)


def _pool_offerings(
    tier: TierConfig,
    pool: NodePoolConfig,
    zones: list[str],
    info: Mapping[str, InstanceInfo],
    offered: Mapping[str, set[str]],
) -> list[CheckResult]:
    subject = f"pool {pool.name}"
    candidates = pool_candidates(pool)
    models = [
        m
        for m in tier.model_parts()
        if any(isinstance(t, NodePoolConfig) and t.name == pool.name for t in placement_of(tier, m))
    ]
    problems: list[CheckResult] = []
    for model in models:
        missing = []
        for zone in zones:
            here = [t for t in candidates if zone in offered.get(t, set())]
            if instance_for(model, here, info) is None:
                missing.append(zone)
        if len(missing) == len(zones):
            problems.append(
                CheckResult(
                    check=Check.OFFERING,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"no AZ of the tier ({', '.join(zones)}) offers an instance type of the pool "
                    f"({_pool_types(pool)}) that fits model '{model.name}' ({model.gpus} GPU(s), "
                    f"{model.cpu:g} CPU, {model.memory_gib} GiB)",
                    fix=f"add instance types or families to node_pools '{pool.name}' that the region "
                    "offers, or choose other availability zones",
                )
            )
        elif missing:
            problems.append(
                CheckResult(
                    check=Check.OFFERING,
                    subject=subject,
                    status=Status.WARN,
                    message=f"model '{model.name}' cannot be placed in {', '.join(missing)}: no instance "
                    "type of the pool that fits it is offered there; its nodes run in the other AZs",
                    fix="choose availability zones that offer the pool's instance types, or add "
                    "instance types offered there",
                )
            )
    unoffered = [t for t in pool.instance_types if not offered.get(t, set()) & set(zones)]
    if unoffered:
        problems.append(
            CheckResult(
                check=Check.OFFERING,
                subject=subject,
                status=Status.WARN,
                message=f"{', '.join(unoffered)} offered in none of {', '.join(zones)}; the pool "
                "launches its other instance types",
                fix=f"remove {', '.join(unoffered)} from node_pools '{pool.name}'.instance_types",
            )
        )
    if problems:
        return problems
    usable = sorted({t for t in candidates if offered.get(t, set()) & set(zones)})
    return [
        CheckResult(
            check=Check.OFFERING,
            subject=subject,
            status=Status.PASS,
            message=f"every model fits an instance type offered in each AZ ({', '.join(zones)})"
            if models
            else f"{len(usable)} instance type(s) of the pool offered in the tier's AZs",
        )
    ]


# --------------------------------------------------------------------------- check: reservations


@dataclass(frozen=True, kw_only=True)
class _Reference:
    reservation_id: str
    owner: str
    instance_types: tuple[str, ...]
    zones: tuple[str, ...]
    kind: ReservationKind | None = None
    nodes: int = 0
    group: str | None = None


def _references(tier: TierConfig) -> list[_Reference]:
    refs = []
    for group in tier.node_groups:
        for rid in group.capacity.reservation_ids:
            refs.append(
                _Reference(
                    reservation_id=rid,
                    owner=f"node group {group.name}",
                    instance_types=(group.instance_type,),
                    zones=(group.availability_zone,),
                    kind=group.capacity.kind,
                    nodes=group.nodes,
                    group=group.name,
                )
            )
    for pool in tier.node_pools:
        for rid in pool.reservation_ids:
            refs.append(
                _Reference(
                    reservation_id=rid,
                    owner=f"pool {pool.name}",
                    instance_types=tuple(pool_candidates(pool)),
                    zones=tuple(tier.environment.availability_zones),
                )
            )
    return refs


def _describe_reservation(ec2: Any, reservation_id: str) -> dict[str, Any] | None:
    from botocore.exceptions import ClientError

    try:
        response = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])
    except ClientError as exc:
        if _error_code(exc).startswith(("InvalidCapacityReservationId", "InvalidReservationID")):
            return None
        raise
    found = response.get("CapacityReservations", [])
    return dict(found[0]) if found else None


def _day(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def check_reservations(tier: TierConfig, *, region: str, ec2: Any, now: datetime) -> list[CheckResult]:
    """One row per referenced reservation: exists, active now, type/AZ/count match, not ending soon."""
    rows = []
    totals: dict[str, int] = defaultdict(int)
    refs = _references(tier)
    if not refs:
        created = [g.name for g in tier.node_groups if g.capacity.kind is ReservationKind.CREATE]
        return [
            CheckResult(
                check=Check.RESERVATION,
                subject="reservations",
                status=Status.PASS,
                message="the tier references no existing reservation"
                + (f" (node groups {', '.join(created)} create theirs at deploy)" if created else ""),
            )
        ]
    for ref in refs:
        found = _describe_reservation(ec2, ref.reservation_id)
        subject = f"{ref.reservation_id} ({ref.owner})"
        if found is None:
            rows.append(
                CheckResult(
                    check=Check.RESERVATION,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"{ref.reservation_id} does not exist in {region} or is not shared with "
                    "this account",
                    fix="check the reservation ID and region, or share the reservation with this account "
                    "(AWS RAM)",
                )
            )
            continue
        totals[ref.group or ""] += int(found.get("TotalInstanceCount", 0))
        rows.append(_reservation_row(ref, found, subject=subject, now=now))
    for group in tier.node_groups:
        kind = group.capacity.kind
        if kind is ReservationKind.CREATE or group.name not in totals:
            continue
        if totals[group.name] < group.nodes:
            rows.append(
                CheckResult(
                    check=Check.RESERVATION,
                    subject=f"node group {group.name}",
                    status=Status.FAIL,
                    message=f"its reservations hold {totals[group.name]} instance(s), the group runs "
                    f"{group.nodes}",
                    fix=f"reserve {group.nodes - totals[group.name]} more {group.instance_type} in "
                    f"{group.availability_zone}, or lower node_groups '{group.name}'.nodes",
                )
            )
    return rows


def _reservation_row(
    ref: _Reference, found: Mapping[str, Any], *, subject: str, now: datetime
) -> CheckResult:
    problems: list[tuple[str, str]] = []
    state = str(found.get("State", ""))
    rtype = str(found.get("ReservationType", "default"))
    start = found.get("StartDate")
    end = found.get("EndDate")
    is_block = rtype == "capacity-block"
    if ref.kind is ReservationKind.CAPACITY_BLOCK and not is_block:
        problems.append(
            (
                "is an On-Demand Capacity Reservation, not a Capacity Block",
                f"set node_groups '{ref.group}'.capacity.kind to 'odcr'",
            )
        )
    if ref.kind is ReservationKind.ODCR and is_block:
        problems.append(
            ("is a Capacity Block", f"set node_groups '{ref.group}'.capacity.kind to 'capacity-block'")
        )
    if state == "expired" or (isinstance(end, datetime) and end <= now):
        when = f" on {_day(end)}" if isinstance(end, datetime) else ""
        problems.append((f"expired{when}", "buy or create a new reservation and reference its ID"))
    elif is_block and (state == "scheduled" or (isinstance(start, datetime) and start > now)):
        when = _day(start) if isinstance(start, datetime) else "later"
        problems.append(
            (
                f"does not cover now: the Capacity Block starts {when}",
                "deploy the node group once the block is active, or use a block that covers now",
            )
        )
    elif state != "active":
        problems.append((f"is {state or 'in an unknown state'}, not active", "use an active reservation"))
    itype = str(found.get("InstanceType", ""))
    if itype not in ref.instance_types:
        allowed = ", ".join(ref.instance_types) if len(ref.instance_types) <= 4 else "the pool's types"
        problems.append(
            (f"reserves {itype}, not {allowed}", "reference a reservation of the same instance type")
        )
    zone = str(found.get("AvailabilityZone", ""))
    if zone not in ref.zones:
        problems.append(
            (
                f"is in {zone}, not {' or '.join(ref.zones)}",
                f"reference a reservation in {' or '.join(ref.zones)}"
                + (f", or move node_groups '{ref.group}' to {zone}" if ref.group else ""),
            )
        )
    if problems:
        return CheckResult(
            check=Check.RESERVATION,
            subject=subject,
            status=Status.FAIL,
            message="; ".join(p for p, _ in problems),
            fix="; ".join(dict.fromkeys(f for _, f in problems)),
        )
    total = int(found.get("TotalInstanceCount", 0))
    available = int(found.get("AvailableInstanceCount", 0))
    what = "Capacity Block" if is_block else "reservation"
    described = f"active {what}: {total} x {itype} in {zone}"
    if isinstance(end, datetime) and end - now < timedelta(days=7):
        return CheckResult(
            check=Check.RESERVATION,
            subject=subject,
            status=Status.WARN,
            message=f"{described}, ends {_day(end)}"
            + ("; EC2 terminates its instances 30 minutes before" if is_block else ""),
            fix="extend it or plan the replacement capacity before it ends",
        )
    if ref.nodes and available < ref.nodes:
        return CheckResult(
            check=Check.RESERVATION,
            subject=subject,
            status=Status.WARN,
            message=f"{described}, only {available} available (other instances use it)",
            fix="free the reserved capacity the other instances use, or reserve more",
        )
    return CheckResult(check=Check.RESERVATION, subject=subject, status=Status.PASS, message=described)


# --------------------------------------------------------------------------- check: bedrock


def _arn_region(arn: str) -> str:
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 else ""


def check_bedrock(tier: TierConfig, *, region: str, bedrock: Callable[[str], Any]) -> list[CheckResult]:
    """One row per model with a Bedrock fallback: its model or inference profile is offered.

    `bedrock(region)` returns a Bedrock control-plane client for a region (the call region is the
    model's `bedrock.region`, else the preflight region).
    """
    from botocore.exceptions import ClientError

    if not tier.fallback.enabled or not any(m.bedrock_target for m in tier.models):
        return [
            CheckResult(
                check=Check.BEDROCK,
                subject="fallback",
                status=Status.PASS,
                message="no model falls back to Bedrock",
            )
        ]
    catalogs: dict[str, dict[str, dict[str, Any]]] = {}
    rows = []
    for model in tier.models:
        target = model.bedrock_target
        if target is None:
            continue
        call_region = target.region or region
        subject = f"model {model.name}: {target.model_id}"
        client = bedrock(call_region)
        if profile_prefix(target.model_id) is not None:
            try:
                profile = client.get_inference_profile(inferenceProfileIdentifier=target.model_id)
            except ClientError as exc:
                if _error_code(exc) not in {"ResourceNotFoundException", "ValidationException"}:
                    raise
                rows.append(
                    CheckResult(
                        check=Check.BEDROCK,
                        subject=subject,
                        status=Status.FAIL,
                        message=f"inference profile {target.model_id} is not available in {call_region}",
                        fix=f"choose a profile listed by `aws bedrock list-inference-profiles --region "
                        f"{call_region}`, or set models '{model.name}'.bedrock.region",
                    )
                )
                continue
            rows.append(_profile_row(model, profile, subject=subject, region=region, call_region=call_region))
            continue
        if call_region not in catalogs:
            summaries = client.list_foundation_models().get("modelSummaries", [])
            catalogs[call_region] = {str(s["modelId"]): dict(s) for s in summaries}
        summary = catalogs[call_region].get(target.model_id)
        if summary is None:
            rows.append(
                CheckResult(
                    check=Check.BEDROCK,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"foundation model {target.model_id} is not offered in {call_region}",
                    fix=f"choose a model listed by `aws bedrock list-foundation-models --region "
                    f"{call_region}`, or set models '{model.name}'.bedrock.region to a region that offers it",
                )
            )
            continue
        inference = [str(t) for t in summary.get("inferenceTypesSupported", [])]
        lifecycle = str(summary.get("modelLifecycle", {}).get("status", "ACTIVE"))
        if "ON_DEMAND" not in inference:
            rows.append(
                CheckResult(
                    check=Check.BEDROCK,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"{target.model_id} cannot be invoked on demand in {call_region} "
                    f"(supports {', '.join(inference) or 'no inference type'})",
                    fix=f"use an inference profile ID (such as 'us.{target.model_id}') in models "
                    f"'{model.name}'.bedrock.model_id",
                )
            )
        elif lifecycle != "ACTIVE":
            rows.append(
                CheckResult(
                    check=Check.BEDROCK,
                    subject=subject,
                    status=Status.WARN,
                    message=f"{target.model_id} is {lifecycle.lower()} in {call_region}; AWS retires "
                    "legacy models",
                    fix="move the fallback to a newer model",
                )
            )
        else:
            rows.append(
                CheckResult(
                    check=Check.BEDROCK,
                    subject=subject,
                    status=Status.PASS,
                    message=f"foundation model offered on demand in {call_region}",
                )
            )
    return rows


def _profile_row(
    model: ModelConfig, profile: Mapping[str, Any], *, subject: str, region: str, call_region: str
) -> CheckResult:
    target = model.bedrock_target
    assert target is not None
    status = str(profile.get("status", "ACTIVE"))
    if status != "ACTIVE":
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.FAIL,
            message=f"inference profile {target.model_id} is {status} in {call_region}",
            fix="choose an active inference profile",
        )
    routed = sorted({_arn_region(str(m.get("modelArn", ""))) for m in profile.get("models", [])} - {""})
    allowed = destination_regions(target, region)
    if allowed and (outside := [r for r in routed if r not in allowed]):
        return CheckResult(
            check=Check.BEDROCK,
            subject=subject,
            status=Status.WARN,
            message=f"the profile routes to {', '.join(outside)}, which the gateway's IAM policy does "
            f"not allow ({', '.join(allowed)}); requests routed there are denied",
            fix=f"set models '{model.name}'.bedrock.destination_regions to {', '.join(routed)}",
        )
    fm = foundation_model_id(target.model_id)
    return CheckResult(
        check=Check.BEDROCK,
        subject=subject,
        status=Status.PASS,
        message=f"inference profile active in {call_region}, routes {fm} to "
        f"{', '.join(routed) or 'its regions'}",
    )


# --------------------------------------------------------------------------- check: kubernetes


def _midnight(day: date | None) -> datetime | None:
    return datetime.combine(day, time(), UTC) if day is not None else None


def check_kubernetes_version(tier: TierConfig, *, region: str, eks: Any, now: datetime) -> list[CheckResult]:
    """EKS offers the configured Kubernetes version in standard support, not within 60 days of its
    end (that, and extended support, warn with the extended-support rate).

    The support dates come from EKS (DescribeClusterVersions); where EKS gives none, from
    gpufarm's support calendar (:mod:`gpufarm.eks_support`).
    """
    wanted = tier.cluster.kubernetes_version
    versions: list[dict[str, Any]] = []
    for page in eks.get_paginator("describe_cluster_versions").paginate(includeAll=True):
        versions.extend(dict(v) for v in page.get("clusterVersions", []))
    default = next((str(v["clusterVersion"]) for v in versions if v.get("defaultVersion")), None)
    fix_version = (
        f"set cluster.kubernetes_version to {default!r} (the EKS default)"
        if default
        else "set cluster.kubernetes_version to a version in standard support"
    )
    found = next((v for v in versions if str(v.get("clusterVersion")) == wanted), None)
    subject = f"Kubernetes {wanted}"
    if found is None:
        return [
            CheckResult(
                check=Check.KUBERNETES,
                subject=subject,
                status=Status.FAIL,
                message=f"EKS does not offer Kubernetes {wanted} in {region}",
                fix=fix_version,
            )
        ]
    status = str(found.get("versionStatus", ""))
    calendar = support_status(wanted, now.date())
    standard_end = found.get("endOfStandardSupportDate") or _midnight(calendar.standard_support_end)
    extended_end = found.get("endOfExtendedSupportDate") or _midnight(calendar.extended_support_end)
    eks_prices = load_prices().eks
    rates = (
        f"${eks_prices.extended_support_cluster_per_hour:.2f} instead of "
        f"${eks_prices.cluster_per_hour:.2f} per cluster hour"
    )
    if status == "STANDARD_SUPPORT":
        if isinstance(standard_end, datetime) and standard_end - now <= timedelta(days=WARN_DAYS):
            return [
                CheckResult(
                    check=Check.KUBERNETES,
                    subject=subject,
                    status=Status.WARN,
                    message=f"standard support ends {_day(standard_end)}; "
                    f"extended support then bills {rates}",
                    fix=f"plan the upgrade; {fix_version}",
                )
            ]
        return [
            CheckResult(
                check=Check.KUBERNETES,
                subject=subject,
                status=Status.PASS,
                message="in standard support"
                + (f" until {_day(standard_end)}" if isinstance(standard_end, datetime) else ""),
            )
        ]
    if status == "EXTENDED_SUPPORT":
        return [
            CheckResult(
                check=Check.KUBERNETES,
                subject=subject,
                status=Status.WARN,
                message="in extended support"
                + (f" until {_day(extended_end)}" if isinstance(extended_end, datetime) else "")
                + f", billed at {rates}",
                fix=fix_version,
            )
        ]
    return [
        CheckResult(
            check=Check.KUBERNETES,
            subject=subject,
            status=Status.FAIL,
            message=f"EKS no longer supports Kubernetes {wanted} ({status.lower() or 'unsupported'})",
            fix=fix_version,
        )
    ]


# --------------------------------------------------------------------------- check: network quotas

VPC_QUOTAS_DOC = "https://docs.aws.amazon.com/vpc/latest/userguide/amazon-vpc-limits.html"
ENDPOINT_QUOTAS_DOC = "https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-limits-endpoints.html"
ALB_QUOTAS_DOC = (
    "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-limits.html"
)


@dataclass(frozen=True, kw_only=True)
class AccountQuota:
    """A quota on what the tier's network creates: in Service Quotas (`service_code`, `code`), or
    fixed (`code` empty, `fixed_value` from the AWS documentation)."""

    name: str
    service_code: str
    code: str
    doc: str
    """The AWS documentation page that lists the quota and its code."""
    fixed_value: int | None = None


# Names, codes and defaults as the AWS documentation lists them (each quota's `doc`): the Amazon VPC
# quotas page (Elastic IPs L-0263D0A3 under service `ec2`; VPCs, security groups under `vpc`), the
# PrivateLink quotas page (interface and Gateway Load Balancer endpoints per VPC share L-29B6F2EB),
# and the Application Load Balancer quotas page (target groups per region L-B22855CB, shared by
# ALBs and NLBs; rules per ALB L-7EED9B64, default rules excluded; target groups per ALB: 100, not
# adjustable, so not in Service Quotas).
ELASTIC_IPS = AccountQuota(
    name="EC2-VPC Elastic IPs", service_code="ec2", code="L-0263D0A3", doc=VPC_QUOTAS_DOC
)
VPCS = AccountQuota(name="VPCs per Region", service_code="vpc", code="L-F678F1CE", doc=VPC_QUOTAS_DOC)
INTERFACE_ENDPOINTS = AccountQuota(
    name="Interface and Gateway Load Balancer endpoints per VPC",
    service_code="vpc",
    code="L-29B6F2EB",
    doc=ENDPOINT_QUOTAS_DOC,
)
TARGET_GROUPS = AccountQuota(
    name="Target Groups per Region",
    service_code="elasticloadbalancing",
    code="L-B22855CB",
    doc=ALB_QUOTAS_DOC,
)
TARGET_GROUPS_PER_ALB = AccountQuota(
    name="Target Groups per Application Load Balancer",
    service_code="elasticloadbalancing",
    code="",
    doc=ALB_QUOTAS_DOC,
    fixed_value=100,
)
RULES_PER_ALB = AccountQuota(
    name="Rules per Application Load Balancer",
    service_code="elasticloadbalancing",
    code="L-7EED9B64",
    doc=ALB_QUOTAS_DOC,
)
SECURITY_GROUP_RULES = AccountQuota(
    name="Inbound or outbound rules per security group",
    service_code="vpc",
    code="L-0EA8095F",
    doc=VPC_QUOTAS_DOC,
)
SECURITY_GROUPS_PER_INTERFACE = AccountQuota(
    name="Security groups per network interface", service_code="vpc", code="L-2AFB9258", doc=VPC_QUOTAS_DOC
)
NETWORK_QUOTAS: tuple[AccountQuota, ...] = (
    ELASTIC_IPS,
    VPCS,
    INTERFACE_ENDPOINTS,
    TARGET_GROUPS,
    TARGET_GROUPS_PER_ALB,
    RULES_PER_ALB,
    SECURITY_GROUP_RULES,
    SECURITY_GROUPS_PER_INTERFACE,
)
"""The network quotas preflight compares with the template, in the order it reports them."""


def _limit(quota: AccountQuota, quotas: Any) -> int:
    if quota.fixed_value is not None:
        return quota.fixed_value
    return int(_quota_value(quotas, quota.code, quota.service_code))


def _quota_row(
    quota: AccountQuota, *, region: str, limit: int, in_use: int, needed: int, detail: str, release: str = ""
) -> CheckResult:
    """One row: pass when what is in use plus what the tier needs fits the limit."""
    figures = QuotaFigures(name=quota.name, code=quota.code, limit=limit, in_use=in_use, needed=needed)
    subject = f"{quota.name} ({quota.code or 'fixed'})"
    message = f"limit {limit}, in use {in_use}, needed {needed}: {detail}"
    if in_use + needed <= limit:
        return CheckResult(
            check=Check.NETWORK_QUOTA, subject=subject, status=Status.PASS, message=message, quota=figures
        )
    if quota.fixed_value is not None:
        fix = f"this quota cannot be raised ({quota.doc}); {release}"
    else:
        fix = (
            f"request an increase to at least {in_use + needed}: aws service-quotas "
            f"request-service-quota-increase --service-code {quota.service_code} --quota-code "
            f"{quota.code} --desired-value {in_use + needed} --region {region}"
            + (f"; or {release}" if release else "")
        )
    return CheckResult(
        check=Check.NETWORK_QUOTA,
        subject=subject,
        status=Status.FAIL,
        message=message,
        fix=fix,
        quota=figures,
    )


def _largest(counts: list[Count], what: str, scope: str) -> tuple[int, str]:
    """The largest count and how to say where it is."""
    if not counts:
        return 0, f"the template creates no {scope}"
    top = max(counts, key=lambda c: c.count)
    others = f" (the most of {len(counts)} {scope}s)" if len(counts) > 1 else ""
    return top.count, f"{what} on {top.scope}{others}"


def network_quota_checks(
    template: Mapping[str, Any], *, region: str, quotas: Any, ec2: Any, elbv2: Any, account: str | None = None
) -> list[tuple[AccountQuota, Callable[[], list[CheckResult]]]]:
    """One check per network quota: what `template` creates against the account's quota and use.

    Elastic IPs, VPCs and target groups per region also count what the account already has
    (`DescribeAddresses`, `DescribeVpcs`, `DescribeTargetGroups`); the other quotas apply to each
    new VPC, load balancer, security group or network interface, which starts empty. With
    `account`, VPCs that other accounts share with it are not counted as its own (assumed to count
    against their owner's quota; the Amazon VPC quotas page does not say).
    """

    def elastic_ips() -> list[CheckResult]:
        needed = network_demand.elastic_ips(template)
        in_use = len(ec2.describe_addresses().get("Addresses", []))
        return [
            _quota_row(
                ELASTIC_IPS,
                region=region,
                limit=_limit(ELASTIC_IPS, quotas),
                in_use=in_use,
                needed=needed,
                detail="AWS::EC2::EIP resources (one per NAT gateway, one per AZ of an internet-facing NLB)",
                release="release Elastic IPs the account no longer uses",
            )
        ]

    def vpcs() -> list[CheckResult]:
        needed = network_demand.vpcs(template)
        in_use = sum(
            1
            for page in ec2.get_paginator("describe_vpcs").paginate()
            for vpc in page.get("Vpcs", [])
            if account is None or vpc.get("OwnerId", account) == account
        )
        return [
            _quota_row(
                VPCS,
                region=region,
                limit=_limit(VPCS, quotas),
                in_use=in_use,
                needed=needed,
                detail="AWS::EC2::VPC resources",
                release="delete VPCs the account no longer uses",
            )
        ]

    def endpoints() -> list[CheckResult]:
        needed, where = _largest(network_demand.interface_endpoints_per_vpc(template), "endpoints", "VPC")
        limit = _limit(INTERFACE_ENDPOINTS, quotas)
        return [
            _quota_row(INTERFACE_ENDPOINTS, region=region, limit=limit, in_use=0, needed=needed, detail=where)
        ]

    def target_groups() -> list[CheckResult]:
        needed = network_demand.target_groups(template)
        in_use = sum(
            1
            for page in elbv2.get_paginator("describe_target_groups").paginate()
            for group in page.get("TargetGroups", [])
            if group.get("Protocol") != "GENEVE"
        )
        return [
            _quota_row(
                TARGET_GROUPS,
                region=region,
                limit=_limit(TARGET_GROUPS, quotas),
                in_use=in_use,
                needed=needed,
                detail="ALB and NLB target groups",
                release="delete target groups the account no longer uses",
            )
        ]

    def per_alb() -> list[CheckResult]:
        needed, where = _largest(
            network_demand.target_groups_per_alb(template), "target groups", "load balancer"
        )
        return [
            _quota_row(
                TARGET_GROUPS_PER_ALB,
                region=region,
                limit=_limit(TARGET_GROUPS_PER_ALB, quotas),
                in_use=0,
                needed=needed,
                detail=where,
                release="serve fewer models and shares behind one load balancer",
            )
        ]

    def rules() -> list[CheckResult]:
        needed, where = _largest(network_demand.rules_per_alb(template), "listener rules", "load balancer")
        limit = _limit(RULES_PER_ALB, quotas)
        return [_quota_row(RULES_PER_ALB, region=region, limit=limit, in_use=0, needed=needed, detail=where)]

    def group_rules() -> list[CheckResult]:
        inbound, outbound = network_demand.security_group_rules(template)
        most_in, where_in = _largest(inbound, "inbound rules", "security group")
        most_out, where_out = _largest(outbound, "outbound rules", "security group")
        # The quota is enforced for inbound and outbound rules apart: the larger side decides.
        needed, where = (most_in, where_in) if most_in >= most_out else (most_out, where_out)
        limit = _limit(SECURITY_GROUP_RULES, quotas)
        return [
            _quota_row(
                SECURITY_GROUP_RULES, region=region, limit=limit, in_use=0, needed=needed, detail=where
            )
        ]

    def per_interface() -> list[CheckResult]:
        needed, where = _largest(
            network_demand.security_groups_per_interface(template), "security groups", "resource"
        )
        limit = _limit(SECURITY_GROUPS_PER_INTERFACE, quotas)
        return [
            _quota_row(
                SECURITY_GROUPS_PER_INTERFACE,
                region=region,
                limit=limit,
                in_use=0,
                needed=needed,
                detail=where,
            )
        ]

    return [
        (ELASTIC_IPS, elastic_ips),
        (VPCS, vpcs),
        (INTERFACE_ENDPOINTS, endpoints),
        (TARGET_GROUPS, target_groups),
        (TARGET_GROUPS_PER_ALB, per_alb),
        (RULES_PER_ALB, rules),
        (SECURITY_GROUP_RULES, group_rules),
        (SECURITY_GROUPS_PER_INTERFACE, per_interface),
    ]


def check_network_quotas(
    template: Mapping[str, Any], *, region: str, quotas: Any, ec2: Any, elbv2: Any, account: str | None = None
) -> list[CheckResult]:
    """Every network quota row; an AWS error other than credentials turns that quota into a warning."""
    rows: list[CheckResult] = []
    checks = network_quota_checks(
        template, region=region, quotas=quotas, ec2=ec2, elbv2=elbv2, account=account
    )
    for quota, run in checks:
        found = _guarded(Check.NETWORK_QUOTA, run)
        rows += [
            r
            if r.quota is not None
            else replace(r, subject=f"{quota.name} ({quota.code or 'fixed'}): {r.subject}")
            for r in found
        ]
    return rows


def no_template_row(tier: TierConfig) -> CheckResult:
    """The warning when preflight has no template to count the network resources from."""
    return CheckResult(
        check=Check.NETWORK_QUOTA,
        subject="network quotas",
        status=Status.WARN,
        message="not checked: Elastic IPs, VPCs, endpoints, target groups, listener rules and "
        "security groups are counted from the synthesized template",
        fix=f"run `gpufarm synth` for the tier and give --template cdk.out/{tier.stack_name}.template.json",
    )


# --------------------------------------------------------------------------- run


def check_placeholders(tier: TierConfig) -> list[CheckResult]:
    """A failed row per documentation value left in the tier (:mod:`gpufarm.config.placeholders`),
    naming the field; one passing row when there is none. Needs no AWS call."""
    found = find_placeholders(tier)
    if not found:
        return [
            CheckResult(
                check=Check.PLACEHOLDER,
                subject="tier",
                status=Status.PASS,
                message="no documentation account, address range, resource ID or bucket; "
                "every image pinned by digest",
            )
        ]
    return [
        CheckResult(
            check=Check.PLACEHOLDER,
            subject=p.path,
            status=Status.FAIL,
            message=f"{p.value!r} is {p.kind} ({p.why}); the stack refuses to deploy",
            fix=f"set {p.path} to your own value"
            if p.kind != UNPINNED_IMAGE
            else f"set {p.path} to an image digest read from the registry "
            "(docs/operations.md, Refreshing image digests)",
        )
        for p in found
    ]


def run_preflight(
    tier: TierConfig,
    *,
    region: str,
    session: Any | None = None,
    now: datetime | None = None,
    template: Mapping[str, Any] | None = None,
) -> PreflightReport:
    """Run every check for `tier` in `region` with a boto3 session (default: the ambient one).

    `template` is the tier's synthesized CloudFormation template: the network quotas are counted
    from it. Without one (the default) they are not checked, and a warning row says so.

    Raises :class:`PreflightError` when the credentials are missing, rejected or expired, or AWS
    cannot be reached.
    """
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        session = session or boto3.Session()  # AWS_PROFILE naming no profile fails here
    except BotoCoreError as exc:
        raise _fatal(exc) or PreflightError(f"cannot start an AWS session: {exc}") from None
    config = Config(retries={"mode": "standard", "max_attempts": 5})
    moment = now or datetime.now(UTC)

    def client(service: str, in_region: str = region) -> Any:
        return session.client(service, region_name=in_region, config=config)

    try:
        account = str(client("sts").get_caller_identity()["Account"])
    except (ClientError, BotoCoreError) as exc:
        fatal = _fatal(exc, connectivity=True)
        if fatal is not None:
            raise fatal from None
        raise PreflightError(f"cannot identify the caller: {_error_message(exc)}") from None

    ec2 = client("ec2")
    info: dict[str, InstanceInfo] = {}
    offered: dict[str, set[str]] = {}

    def quotas() -> list[CheckResult]:
        info.update(describe_instance_types(ec2, instance_types_of(tier)))
        return check_vcpu_quotas(tier, region=region, info=info, quotas=client("service-quotas"))

    def offerings() -> list[CheckResult]:
        if not info:
            info.update(describe_instance_types(ec2, instance_types_of(tier)))
        offered.update(
            describe_offerings(ec2, instance_types_of(tier), list(tier.environment.availability_zones))
        )
        return check_offerings(tier, info=info, offered=offered)

    bedrock_clients: dict[str, Any] = {}

    def bedrock(in_region: str) -> Any:
        if in_region not in bedrock_clients:
            bedrock_clients[in_region] = client("bedrock", in_region)
        return bedrock_clients[in_region]

    results: list[CheckResult] = []
    if tier.environment.region != region:
        results.append(
            CheckResult(
                check=Check.REGION,
                subject="region",
                status=Status.WARN,
                message=f"the tier deploys to {tier.environment.region}; these checks ran in {region}",
                fix=f"run preflight with --region {tier.environment.region}, or set environment.region",
            )
        )
    results += check_placeholders(tier)
    results += _guarded(Check.QUOTA, quotas)
    results += _guarded(Check.OFFERING, offerings)
    results += _guarded(
        Check.RESERVATION, lambda: check_reservations(tier, region=region, ec2=ec2, now=moment)
    )
    results += _guarded(Check.BEDROCK, lambda: check_bedrock(tier, region=region, bedrock=bedrock))
    results += _guarded(
        Check.KUBERNETES, lambda: check_kubernetes_version(tier, region=region, eks=client("eks"), now=moment)
    )
    if template is None:
        results.append(no_template_row(tier))
    else:
        results += check_network_quotas(
            template,
            region=region,
            quotas=client("service-quotas"),
            ec2=ec2,
            elbv2=client("elbv2"),
            account=account,
        )
    return PreflightReport(tier=tier.name, region=region, account=account, results=tuple(results))
