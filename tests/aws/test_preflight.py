"""Preflight checks against moto (STS, EC2 types and offerings, ACM, S3, Secrets Manager, SSM) and
botocore Stubbers for the APIs moto does not implement (Service Quotas for EC2, Bedrock, including
GetFoundationModelAvailability, EKS cluster versions, EC2 capacity reservations)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gpufarm.aws.preflight import (
    Check,
    CheckResult,
    InstanceInfo,
    PreflightError,
    Status,
    check_bedrock,
    check_kubernetes_version,
    check_offerings,
    check_reservations,
    check_vcpu_quotas,
    describe_instance_types,
    describe_offerings,
    no_template_row,
    quota_for,
    run_preflight,
    vcpu_demands,
)
from gpufarm.config import CapacityType, TierConfig, load_preset
from gpufarm.core.pools import gpu_instance_types
from tests.aws.moto_account import moto_account
from tests.aws.test_network_quotas import SMALL
from tests.unit.factories import (
    enterprise_document,
    enterprise_part,
    make_enterprise,
    make_tier,
    share,
    split,
)

REGION = "us-east-1"
NOW = datetime(2026, 8, 1, 12, 0, tzinfo=UTC)
OWN_POC = make_tier({"cluster": {"public_access_cidrs": ["10.20.0.0/16"]}})
"""The poc with its documentation range replaced, so that only the AWS checks decide."""
G_ON_DEMAND, P_ON_DEMAND, G_SPOT = "L-DB2E81BA", "L-417A185B", "L-3819A6DF"
POC_PROFILE = "us.meta.llama3-1-8b-instruct-v1:0"
RESERVATION = "cr-0123456789abcdef0"


class AwsStubs:
    """A boto3 session for preflight: moto answers STS and EC2; botocore Stubbers answer Service
    Quotas, Bedrock, EKS versions and EC2 capacity reservations (moto implements none of them)."""

    STUBBED = ("service-quotas", "bedrock", "eks")

    def __init__(self) -> None:
        self.session = boto3.Session(region_name=REGION)
        self.clients: dict[tuple[str, str], Any] = {}
        self.stubbers: dict[tuple[str, str], Stubber] = {}
        self.reservations_client = self.session.client("ec2", region_name=REGION)
        self.reservations = Stubber(self.reservations_client)
        self.reservations.activate()

    def stub(self, service: str, region: str = REGION) -> Stubber:
        """The (active) stubber of a service's client in a region."""
        key = (service, region)
        if key not in self.stubbers:
            self.clients[key] = self.session.client(service, region_name=region)
            self.stubbers[key] = Stubber(self.clients[key])
            self.stubbers[key].activate()
        return self.stubbers[key]

    def client(self, service: str, region_name: str, config: Any = None) -> Any:
        """What preflight asks the session for."""
        if service in self.STUBBED:
            self.stub(service, region_name)
            return self.clients[(service, region_name)]
        real = self.session.client(service, region_name=region_name, config=config)
        return _Ec2(real, self.reservations_client) if service == "ec2" else real

    def verify(self) -> None:
        """Every queued response was used."""
        for stubber in [*self.stubbers.values(), self.reservations]:
            stubber.assert_no_pending_responses()


class _Ec2:
    """moto's EC2 client, with capacity reservations answered by a stubbed client."""

    def __init__(self, real: Any, reservations: Any) -> None:
        self._real, self._reservations = real, reservations

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reservations if name == "describe_capacity_reservations" else self._real, name)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsStubs]:
    """moto with fake credentials, and the stubs."""
    with moto_account(monkeypatch, REGION):
        yield AwsStubs()


# --------------------------------------------------------------------------- response builders


def add_quota(aws: AwsStubs, code: str, value: float) -> None:
    aws.stub("service-quotas").add_response(
        "get_service_quota",
        {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": value}},
        {"ServiceCode": "ec2", "QuotaCode": code},
    )


NETWORK_QUOTA_VALUES = [
    ("ec2", "L-0263D0A3", 5.0),
    ("vpc", "L-F678F1CE", 5.0),
    ("vpc", "L-29B6F2EB", 50.0),
    ("elasticloadbalancing", "L-B22855CB", 3000.0),
    ("elasticloadbalancing", "L-7EED9B64", 100.0),
    ("vpc", "L-0EA8095F", 60.0),
    ("vpc", "L-2AFB9258", 5.0),
]
"""The network quotas preflight reads from Service Quotas, in order, at the AWS defaults."""


def add_network_quotas(aws: AwsStubs) -> None:
    for service, code, value in NETWORK_QUOTA_VALUES:
        aws.stub("service-quotas").add_response(
            "get_service_quota",
            {"Quota": {"ServiceCode": service, "QuotaCode": code, "Value": value}},
            {"ServiceCode": service, "QuotaCode": code},
        )


def add_profile(aws: AwsStubs, profile_id: str, regions: list[str], *, status: str = "ACTIVE") -> None:
    model = profile_id.split(".", 1)[1]
    aws.stub("bedrock").add_response(
        "get_inference_profile",
        {
            "inferenceProfileName": profile_id,
            "inferenceProfileArn": f"arn:aws:bedrock:{REGION}:123456789012:inference-profile/{profile_id}",
            "inferenceProfileId": profile_id,
            "status": status,
            "type": "SYSTEM_DEFINED",
            "models": [{"modelArn": f"arn:aws:bedrock:{r}::foundation-model/{model}"} for r in regions],
        },
        {"inferenceProfileIdentifier": profile_id},
    )


def add_foundation_models(aws: AwsStubs, *models: tuple[str, list[str]], region: str = REGION) -> None:
    aws.stub("bedrock", region).add_response(
        "list_foundation_models",
        {
            "modelSummaries": [
                {
                    "modelArn": f"arn:aws:bedrock:{region}::foundation-model/{model_id}",
                    "modelId": model_id,
                    "inferenceTypesSupported": inference,
                    "modelLifecycle": {"status": "ACTIVE"},
                }
                for model_id, inference in models
            ]
        },
        {},
    )


def add_access(aws: AwsStubs, model_id: str, region: str = REGION, **answer: Any) -> None:
    """GetFoundationModelAvailability for `model_id`: authorized and available unless `answer` says."""
    aws.stub("bedrock", region).add_response(
        "get_foundation_model_availability",
        {
            "modelId": model_id,
            "agreementAvailability": {"status": "AVAILABLE"},
            "authorizationStatus": "AUTHORIZED",
            "entitlementAvailability": "AVAILABLE",
            "regionAvailability": "AVAILABLE",
            **answer,
        },
        {"modelId": model_id},
    )


def bootstrap(version: str = "21", region: str = REGION) -> None:
    """The CDK bootstrap stack's version parameter, in moto's SSM."""
    boto3.client("ssm", region_name=region).put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value=version, Type="String"
    )


def account_ready(aws: AwsStubs) -> None:
    """What the poc's fallback and a deploy need beyond the quotas: access to the fallback's
    model, and a bootstrapped account."""
    add_access(aws, "meta.llama3-1-8b-instruct-v1:0")
    bootstrap()


def add_versions(aws: AwsStubs, *versions: dict[str, Any]) -> None:
    aws.stub("eks").add_response(
        "describe_cluster_versions", {"clusterVersions": list(versions)}, {"includeAll": True}
    )


def version(
    number: str, status: str, *, default: bool = False, standard_end: datetime | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"clusterVersion": number, "versionStatus": status, "defaultVersion": default}
    if standard_end is not None:
        out["endOfStandardSupportDate"] = standard_end
    return out


def add_reservation(aws: AwsStubs, reservation_id: str = RESERVATION, **fields: Any) -> None:
    found = {
        "CapacityReservationId": reservation_id,
        "InstanceType": "p5.48xlarge",
        "AvailabilityZone": "us-east-1a",
        "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2,
        "State": "active",
        "ReservationType": "default",
        "StartDate": NOW - timedelta(days=10),
        **fields,
    }
    aws.reservations.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [found]},
        {"CapacityReservationIds": [reservation_id]},
    )


def rows(results: list[CheckResult]) -> dict[str, tuple[Status, str, str]]:
    return {r.subject: (r.status, r.message, r.fix) for r in results}


def facts(aws: AwsStubs, tier: TierConfig) -> dict[str, InstanceInfo]:
    return describe_instance_types(aws.session.client("ec2", region_name=REGION), gpu_instance_types(tier))


# --------------------------------------------------------------------------- the passing account


def test_a_passing_account_passes_every_check(aws: AwsStubs) -> None:
    add_quota(aws, G_ON_DEMAND, 64)
    add_profile(aws, POC_PROFILE, ["us-east-1", "us-east-2", "us-west-2"])
    add_versions(
        aws, version("1.35", "STANDARD_SUPPORT", default=True, standard_end=datetime(2027, 3, 23, tzinfo=UTC))
    )
    add_network_quotas(aws)
    account_ready(aws)
    report = run_preflight(OWN_POC, region=REGION, session=aws, now=NOW, template=SMALL)
    aws.verify()
    assert (report.account, report.failed, report.counts()) == (
        "123456789012",
        False,
        # The one warning: Hugging Face weights with no token secret (gated or not cannot be told).
        {"pass": 19, "warn": 1, "fail": 0},
    )
    assert [(r.check, r.subject, r.message) for r in report.results] == [
        (
            Check.PLACEHOLDER,
            "tier",
            "no documentation account, address range, resource ID or bucket; every image pinned by digest",
        ),
        (
            Check.QUOTA,
            "Running On-Demand G and VT instances (L-DB2E81BA)",
            "64 vCPUs cover the 32 the tier may use at its pools' GPU limits",
        ),
        (
            Check.OFFERING,
            "pool l40s",
            "every model fits an instance type offered in each AZ (us-east-1a, us-east-1b)",
        ),
        (Check.RESERVATION, "reservations", "the tier references no existing reservation"),
        (
            Check.BEDROCK,
            f"model qwen3-8b: {POC_PROFILE}",
            "inference profile active in us-east-1, routes meta.llama3-1-8b-instruct-v1:0 to us-east-1, "
            "us-east-2, us-west-2",
        ),
        (
            Check.BEDROCK_ACCESS,
            "model qwen3-8b: meta.llama3-1-8b-instruct-v1:0",
            "the account may invoke meta.llama3-1-8b-instruct-v1:0 in us-east-1",
        ),
        (Check.KUBERNETES, "Kubernetes 1.35", "in standard support until 2027-03-23 00:00 UTC"),
        (
            Check.NETWORK_QUOTA,
            "EC2-VPC Elastic IPs (L-0263D0A3)",
            "limit 5, in use 0, needed 1: AWS::EC2::EIP resources (one per NAT gateway, one per AZ of an "
            "internet-facing NLB)",
        ),
        # moto's account has its default VPC.
        (
            Check.NETWORK_QUOTA,
            "VPCs per Region (L-F678F1CE)",
            "limit 5, in use 1, needed 1: AWS::EC2::VPC resources",
        ),
        (
            Check.NETWORK_QUOTA,
            "Interface and Gateway Load Balancer endpoints per VPC (L-29B6F2EB)",
            "limit 50, in use 0, needed 3: endpoints on Vpc",
        ),
        (
            Check.NETWORK_QUOTA,
            "Target Groups per Region (L-B22855CB)",
            "limit 3000, in use 0, needed 2: ALB and NLB target groups",
        ),
        (
            Check.NETWORK_QUOTA,
            "Target Groups per Application Load Balancer (fixed)",
            "limit 100, in use 0, needed 2: target groups on Alb",
        ),
        (
            Check.NETWORK_QUOTA,
            "Rules per Application Load Balancer (L-7EED9B64)",
            "limit 100, in use 0, needed 1: listener rules on Alb",
        ),
        (
            Check.NETWORK_QUOTA,
            "Inbound or outbound rules per security group (L-0EA8095F)",
            "limit 60, in use 0, needed 2: inbound rules on Sg0",
        ),
        (
            Check.NETWORK_QUOTA,
            "Security groups per network interface (L-2AFB9258)",
            "limit 5, in use 0, needed 2: security groups on NodeTemplate",
        ),
        (Check.CERTIFICATE, "certificate", "the tier names no certificate (no TLS listener to check)"),
        (Check.MODEL_BUCKET, "weights", "no weights come from S3 (nothing to check)"),
        (
            Check.HF_TOKEN,
            "models[0]: Qwen/Qwen3-8B",
            "Hugging Face weights with no token secret: a gated repo refuses the download",
        ),
        (
            Check.CDK_BOOTSTRAP,
            "aws://123456789012/us-east-1",
            "bootstrap version 21 (the stack needs 6 or later)",
        ),
        (Check.HYBRID_GATEWAY, "hybrid_nodes", "the tier has no hybrid nodes (no gateway to check)"),
    ]


def test_without_a_template_the_network_quotas_are_one_warning(aws: AwsStubs) -> None:
    add_quota(aws, G_ON_DEMAND, 64)
    add_profile(aws, POC_PROFILE, ["us-east-1"])
    add_versions(aws, version("1.35", "STANDARD_SUPPORT", default=True))
    account_ready(aws)
    report = run_preflight(OWN_POC, region=REGION, session=aws, now=NOW)
    aws.verify()
    assert (report.failed, report.counts()) == (False, {"pass": 11, "warn": 2, "fail": 0})
    assert [r for r in report.results if r.check is Check.NETWORK_QUOTA] == [no_template_row(OWN_POC)]


def test_the_report_serializes_every_row(aws: AwsStubs) -> None:
    add_quota(aws, G_ON_DEMAND, 64)
    add_profile(aws, POC_PROFILE, ["us-east-1"])
    add_versions(aws, version("1.35", "STANDARD_SUPPORT", default=True))
    account_ready(aws)
    data = run_preflight(OWN_POC, region=REGION, session=aws, now=NOW).to_dict()
    assert (data["ok"], data["region"], data["tier"], len(data["results"])) == (True, REGION, "poc", 13)
    assert data["results"][1] == {
        "check": "vcpu-quota",
        "subject": "Running On-Demand G and VT instances (L-DB2E81BA)",
        "status": "pass",
        "message": "64 vCPUs cover the 32 the tier may use at its pools' GPU limits",
        "fix": "",
    }


# --------------------------------------------------------------------------- quotas


def test_the_gpu_quotas_are_the_g_and_p_codes_by_capacity_type() -> None:
    assert [
        quota_for(t, c).code  # type: ignore[union-attr]
        for t, c in [
            ("g6e.xlarge", CapacityType.ON_DEMAND),
            ("p5.48xlarge", CapacityType.ON_DEMAND),
            ("g6e.xlarge", CapacityType.SPOT),
            ("p5.48xlarge", CapacityType.SPOT),
        ]
    ] == ["L-DB2E81BA", "L-417A185B", "L-3819A6DF", "L-7212CCBC"]


def test_vcpu_demand_follows_placement_and_reserved_node_groups_first(aws: AwsStubs) -> None:
    tier = load_preset("enterprise")
    on_demand, spot = CapacityType.ON_DEMAND, CapacityType.SPOT
    assert [
        (d.source, d.instance_type, d.capacity_type, d.vcpus_per_instance, d.instances, d.limit_instances)
        for d in vcpu_demands(tier, facts(aws, tier))
    ] == [
        ("node group h100-base", "p5.48xlarge", on_demand, 192, 1, 1),
        ("node group h100-multinode", "p5.48xlarge", on_demand, 192, 2, 2),
        # llama-3-3-70b: 4 replicas of 4 GPUs, two on the reserved base node, two on one burst node;
        # the burst pool's limit of 24 GPUs is three p5.48xlarge.
        ("pool h100-burst", "p5.48xlarge", on_demand, 192, 1, 3),
        # qwen3-32b-batch: 4 replicas of 2 GPUs, two per g6e.12xlarge; 16 GPUs are four of them.
        ("pool background", "g6e.12xlarge", on_demand, 48, 2, 4),
        ("pool background", "g6e.12xlarge", spot, 48, 2, 4),
    ]


def test_vcpu_demand_places_each_share_on_its_own_pool(aws: AwsStubs) -> None:
    # llama-3-3-70b split: 2 x 4 GPUs on class h100 (both on the reserved base node), 1 x 4 on l40s.
    tier = make_enterprise(split())
    on_demand, spot = CapacityType.ON_DEMAND, CapacityType.SPOT
    assert [
        (d.source, d.instance_type, d.capacity_type, d.vcpus_per_instance, d.instances, d.limit_instances)
        for d in vcpu_demands(tier, facts(aws, tier))
    ] == [
        ("node group h100-base", "p5.48xlarge", on_demand, 192, 1, 1),
        ("node group h100-multinode", "p5.48xlarge", on_demand, 192, 2, 2),
        ("pool h100-burst", "p5.48xlarge", on_demand, 192, 0, 3),
        ("pool background", "g6e.12xlarge", on_demand, 48, 2, 4),
        ("pool background", "g6e.12xlarge", spot, 48, 2, 4),
        ("pool l40s", "g6e.12xlarge", on_demand, 48, 1, 4),
    ]
    # A third H100 replica no longer fits the base node: one burst node.
    burst = [d for d in vcpu_demands(make_enterprise(share(0, replicas=3)), facts(aws, tier))]
    assert [(d.source, d.instances) for d in burst if d.source == "pool h100-burst"] == [
        ("pool h100-burst", 1)
    ]


def test_a_quota_below_the_models_fails_with_the_increase_command(aws: AwsStubs) -> None:
    tier = load_preset("poc")
    add_quota(aws, G_ON_DEMAND, 4)
    result = check_vcpu_quotas(
        tier, region=REGION, info=facts(aws, tier), quotas=aws.client("service-quotas", REGION)
    )
    assert rows(result) == {
        "Running On-Demand G and VT instances (L-DB2E81BA)": (
            Status.FAIL,
            "4 vCPUs, but the models at their most replicas need 8 (pool l40s: 1 x g6e.2xlarge)",
            "request an increase to at least 32 vCPUs: aws service-quotas request-service-quota-increase "
            "--service-code ec2 --quota-code L-DB2E81BA --desired-value 32 --region us-east-1",
        )
    }


def test_a_quota_below_the_pool_limits_only_warns(aws: AwsStubs) -> None:
    tier = load_preset("poc")
    add_quota(aws, G_ON_DEMAND, 16)
    result = check_vcpu_quotas(
        tier, region=REGION, info=facts(aws, tier), quotas=aws.client("service-quotas", REGION)
    )
    assert [(r.status, r.message) for r in result] == [
        (
            Status.WARN,
            "16 vCPUs cover the models at their most replicas (8) but not the pools at their GPU limits "
            "(32: pool l40s: 4 x g6e.2xlarge)",
        )
    ]


def test_spot_and_p_quotas_are_checked_for_the_pools_that_use_them(aws: AwsStubs) -> None:
    tier = load_preset("enterprise")
    add_quota(aws, G_ON_DEMAND, 192)
    add_quota(aws, P_ON_DEMAND, 1152)
    add_quota(aws, G_SPOT, 64)
    result = check_vcpu_quotas(
        tier, region=REGION, info=facts(aws, tier), quotas=aws.client("service-quotas", REGION)
    )
    assert [(r.subject, r.status) for r in result] == [
        ("Running On-Demand G and VT instances (L-DB2E81BA)", Status.PASS),
        ("Running On-Demand P instances (L-417A185B)", Status.PASS),
        ("All G and VT Spot Instance Requests (L-3819A6DF)", Status.FAIL),
    ]


def test_a_quota_without_an_applied_value_reads_the_aws_default(aws: AwsStubs) -> None:
    tier = load_preset("poc")
    stub = aws.stub("service-quotas")
    stub.add_client_error("get_service_quota", "NoSuchResourceException", "no applied value")
    stub.add_response(
        "get_aws_default_service_quota",
        {"Quota": {"QuotaCode": G_ON_DEMAND, "Value": 64.0}},
        {"ServiceCode": "ec2", "QuotaCode": G_ON_DEMAND},
    )
    result = check_vcpu_quotas(
        tier, region=REGION, info=facts(aws, tier), quotas=aws.client("service-quotas", REGION)
    )
    assert [r.status for r in result] == [Status.PASS]


# --------------------------------------------------------------------------- offerings


def offering_rows(aws: AwsStubs, tier: TierConfig) -> dict[str, tuple[Status, str, str]]:
    ec2 = aws.session.client("ec2", region_name=REGION)
    offered = describe_offerings(ec2, gpu_instance_types(tier), list(tier.environment.availability_zones))
    return rows(check_offerings(tier, info=facts(aws, tier), offered=offered))


def test_a_node_group_type_not_offered_in_its_az_fails(aws: AwsStubs) -> None:
    tier = make_enterprise(
        enterprise_part("node_groups", 0, instance_type="p5en.48xlarge", availability_zone="us-east-1b")
    )
    assert offering_rows(aws, tier)["node group h100-base"] == (
        Status.FAIL,
        "p5en.48xlarge is not offered in us-east-1b (offered in us-east-1a, us-east-1c)",
        "move node_groups 'h100-base' to an AZ that offers p5en.48xlarge (us-east-1a, us-east-1c), "
        "or choose another instance type",
    )


def test_a_node_group_type_offered_in_its_az_passes(aws: AwsStubs) -> None:
    tier = make_enterprise(enterprise_part("node_groups", 0, availability_zone="us-east-1a"))
    assert offering_rows(aws, tier)["node group h100-base"] == (
        Status.PASS,
        "p5.48xlarge is offered in us-east-1a",
        "",
    )


def test_a_pool_missing_from_one_az_warns(aws: AwsStubs) -> None:
    tier = make_tier({"environment": {"availability_zones": ["us-east-1a", "us-east-1f"]}})
    assert offering_rows(aws, tier)["pool l40s"] == (
        Status.WARN,
        "model 'qwen3-8b' cannot be placed in us-east-1f: no instance type of the pool that fits it is "
        "offered there; its nodes run in the other AZs",
        "choose availability zones that offer the pool's instance types, or add instance types offered there",
    )


def test_a_pool_no_az_can_serve_fails(aws: AwsStubs) -> None:
    tier = make_tier({"environment": {"availability_zones": ["us-east-1e", "us-east-1f"]}})
    assert offering_rows(aws, tier)["pool l40s"] == (
        Status.FAIL,
        "no AZ of the tier (us-east-1e, us-east-1f) offers an instance type of the pool (g6e.*) that fits "
        "model 'qwen3-8b' (1 GPU(s), 6 CPU, 48 GiB)",
        "add instance types or families to node_pools 'l40s' that the region offers, or choose other "
        "availability zones",
    )


# --------------------------------------------------------------------------- reservations


def odcr_tier(kind: str = "odcr") -> TierConfig:
    """The enterprise tier with its first node group (2 x p5.48xlarge in us-east-1a) on a reservation."""
    return make_enterprise(
        enterprise_part(
            "node_groups",
            0,
            availability_zone="us-east-1a",
            nodes=2,
            capacity={"kind": kind, "reservation_ids": [RESERVATION]},
        )
    )


def reservation_rows(aws: AwsStubs, tier: TierConfig) -> dict[str, tuple[Status, str, str]]:
    result = rows(check_reservations(tier, region=REGION, ec2=aws.client("ec2", REGION), now=NOW))
    aws.verify()
    return result


def test_a_matching_active_reservation_passes(aws: AwsStubs) -> None:
    add_reservation(aws)
    assert reservation_rows(aws, odcr_tier()) == {
        f"{RESERVATION} (node group h100-base)": (
            Status.PASS,
            "active reservation: 2 x p5.48xlarge in us-east-1a",
            "",
        )
    }


def test_a_reservation_in_the_wrong_az_fails(aws: AwsStubs) -> None:
    add_reservation(aws, AvailabilityZone="us-east-1b")
    assert reservation_rows(aws, odcr_tier())[f"{RESERVATION} (node group h100-base)"] == (
        Status.FAIL,
        "is in us-east-1b, not us-east-1a",
        "reference a reservation in us-east-1a, or move node_groups 'h100-base' to us-east-1b",
    )


def test_an_expired_reservation_fails(aws: AwsStubs) -> None:
    add_reservation(aws, State="expired", EndDate=datetime(2026, 7, 30, 8, 0, tzinfo=UTC))
    assert reservation_rows(aws, odcr_tier())[f"{RESERVATION} (node group h100-base)"] == (
        Status.FAIL,
        "expired on 2026-07-30 08:00 UTC",
        "buy or create a new reservation and reference its ID",
    )


def test_a_reservation_of_another_type_fails(aws: AwsStubs) -> None:
    add_reservation(aws, InstanceType="p5en.48xlarge")
    status, message, _ = reservation_rows(aws, odcr_tier())[f"{RESERVATION} (node group h100-base)"]
    assert (status, message) == (Status.FAIL, "reserves p5en.48xlarge, not p5.48xlarge")


def test_a_missing_reservation_fails(aws: AwsStubs) -> None:
    aws.reservations.add_client_error(
        "describe_capacity_reservations",
        "InvalidCapacityReservationId.NotFound",
        f"The capacity reservation ID '{RESERVATION}' does not exist",
    )
    assert reservation_rows(aws, odcr_tier()) == {
        f"{RESERVATION} (node group h100-base)": (
            Status.FAIL,
            f"{RESERVATION} does not exist in us-east-1 or is not shared with this account",
            "check the reservation ID and region, or share the reservation with this account (AWS RAM)",
        )
    }


def test_a_reservation_smaller_than_the_node_group_fails(aws: AwsStubs) -> None:
    add_reservation(aws, TotalInstanceCount=1, AvailableInstanceCount=1)
    assert reservation_rows(aws, odcr_tier())["node group h100-base"] == (
        Status.FAIL,
        "its reservations hold 1 instance(s), the group runs 2",
        "reserve 1 more p5.48xlarge in us-east-1a, or lower node_groups 'h100-base'.nodes",
    )


def test_a_capacity_block_that_has_not_started_fails(aws: AwsStubs) -> None:
    add_reservation(
        aws,
        ReservationType="capacity-block",
        State="scheduled",
        StartDate=datetime(2026, 8, 3, 11, 30, tzinfo=UTC),
        EndDate=datetime(2026, 8, 10, 11, 30, tzinfo=UTC),
    )
    assert reservation_rows(aws, odcr_tier("capacity-block"))[f"{RESERVATION} (node group h100-base)"] == (
        Status.FAIL,
        "does not cover now: the Capacity Block starts 2026-08-03 11:30 UTC",
        "deploy the node group once the block is active, or use a block that covers now",
    )


def test_a_capacity_block_ending_within_a_week_warns(aws: AwsStubs) -> None:
    add_reservation(aws, ReservationType="capacity-block", EndDate=datetime(2026, 8, 4, 11, 30, tzinfo=UTC))
    assert reservation_rows(aws, odcr_tier("capacity-block"))[f"{RESERVATION} (node group h100-base)"] == (
        Status.WARN,
        "active Capacity Block: 2 x p5.48xlarge in us-east-1a, ends 2026-08-04 11:30 UTC; EC2 terminates "
        "its instances 30 minutes before",
        "extend it or plan the replacement capacity before it ends",
    )


# --------------------------------------------------------------------------- bedrock


def bedrock_rows(aws: AwsStubs, tier: TierConfig) -> dict[str, tuple[Status, str, str]]:
    result = rows(check_bedrock(tier, region=REGION, bedrock=lambda r: aws.client("bedrock", r)))
    aws.verify()
    return result


def test_a_missing_bedrock_model_fails(aws: AwsStubs) -> None:
    add_foundation_models(aws, ("meta.llama3-3-70b-instruct-v1:0", ["ON_DEMAND"]))
    tier = make_tier(
        {
            "models": [
                {
                    **load_preset("poc").models[0].model_dump(mode="json"),
                    "bedrock": {"model_id": "meta.llama9-v1:0"},
                }
            ]
        }
    )
    assert bedrock_rows(aws, tier) == {
        "model qwen3-8b: meta.llama9-v1:0": (
            Status.FAIL,
            "foundation model meta.llama9-v1:0 is not offered in us-east-1",
            "choose a model listed by `aws bedrock list-foundation-models --region us-east-1`, or set models "
            "'qwen3-8b'.bedrock.region to a region that offers it",
        )
    }


def test_a_missing_inference_profile_fails(aws: AwsStubs) -> None:
    aws.stub("bedrock").add_client_error("get_inference_profile", "ResourceNotFoundException", "not found")
    assert bedrock_rows(aws, load_preset("poc")) == {
        f"model qwen3-8b: {POC_PROFILE}": (
            Status.FAIL,
            f"inference profile {POC_PROFILE} is not available in us-east-1",
            "choose a profile listed by `aws bedrock list-inference-profiles --region us-east-1`, or set "
            "models 'qwen3-8b'.bedrock.region",
        )
    }


def test_a_model_that_needs_a_profile_fails_when_named_directly(aws: AwsStubs) -> None:
    add_foundation_models(aws, ("meta.llama3-1-8b-instruct-v1:0", ["INFERENCE_PROFILE"]))
    tier = make_tier(
        {
            "models": [
                {
                    **load_preset("poc").models[0].model_dump(mode="json"),
                    "bedrock": {"model_id": "meta.llama3-1-8b-instruct-v1:0"},
                }
            ]
        }
    )
    assert bedrock_rows(aws, tier)["model qwen3-8b: meta.llama3-1-8b-instruct-v1:0"] == (
        Status.FAIL,
        "meta.llama3-1-8b-instruct-v1:0 cannot be invoked on demand in us-east-1 "
        "(supports INFERENCE_PROFILE)",
        "use an inference profile ID (such as 'us.meta.llama3-1-8b-instruct-v1:0') in models "
        "'qwen3-8b'.bedrock.model_id",
    )


def test_a_profile_routing_outside_the_granted_regions_warns(aws: AwsStubs) -> None:
    add_profile(aws, POC_PROFILE, ["us-east-1", "ca-central-1"])
    status, message, fix = bedrock_rows(aws, load_preset("poc"))[f"model qwen3-8b: {POC_PROFILE}"]
    assert (status, message, fix) == (
        Status.WARN,
        "the profile routes to ca-central-1, which the gateway's IAM policy does not allow (us-east-1, "
        "us-east-2, us-west-1, us-west-2); requests routed there are denied",
        "set models 'qwen3-8b'.bedrock.destination_regions to ca-central-1, us-east-1",
    )


def test_a_model_in_another_region_is_looked_up_there(aws: AwsStubs) -> None:
    add_profile(aws, "us.meta.llama3-3-70b-instruct-v1:0", ["us-east-1", "us-east-2", "us-west-2"])
    add_foundation_models(aws, ("meta.llama3-1-405b-instruct-v1:0", ["ON_DEMAND"]), region="us-west-2")
    result = bedrock_rows(aws, load_preset("enterprise"))
    assert result["model llama-3-1-405b: meta.llama3-1-405b-instruct-v1:0"] == (
        Status.PASS,
        "foundation model offered on demand in us-west-2",
        "",
    )


# --------------------------------------------------------------------------- kubernetes


def kubernetes_rows(aws: AwsStubs, tier: TierConfig) -> dict[str, tuple[Status, str, str]]:
    return rows(check_kubernetes_version(tier, region=REGION, eks=aws.client("eks", REGION), now=NOW))


def test_a_kubernetes_version_eks_does_not_offer_fails(aws: AwsStubs) -> None:
    add_versions(aws, version("1.36", "STANDARD_SUPPORT", default=True), version("1.34", "STANDARD_SUPPORT"))
    assert kubernetes_rows(aws, load_preset("poc")) == {
        "Kubernetes 1.35": (
            Status.FAIL,
            "EKS does not offer Kubernetes 1.35 in us-east-1",
            "set cluster.kubernetes_version to '1.36' (the EKS default)",
        )
    }


def test_a_kubernetes_version_out_of_support_fails(aws: AwsStubs) -> None:
    add_versions(aws, version("1.35", "UNSUPPORTED"), version("1.37", "STANDARD_SUPPORT", default=True))
    assert kubernetes_rows(aws, load_preset("poc"))["Kubernetes 1.35"] == (
        Status.FAIL,
        "EKS no longer supports Kubernetes 1.35 (unsupported)",
        "set cluster.kubernetes_version to '1.37' (the EKS default)",
    )


def test_a_kubernetes_version_in_extended_support_warns_with_the_rate(aws: AwsStubs) -> None:
    tier = make_tier({"cluster": {"kubernetes_version": "1.34"}})
    add_versions(aws, version("1.34", "EXTENDED_SUPPORT"), version("1.36", "STANDARD_SUPPORT", default=True))
    assert kubernetes_rows(aws, tier)["Kubernetes 1.34"] == (
        Status.WARN,
        # EKS gave no end date: the support calendar's.
        "in extended support until 2027-12-02 00:00 UTC, billed at $0.60 instead of $0.10 per cluster hour",
        "set cluster.kubernetes_version to '1.36' (the EKS default)",
    )


@pytest.mark.parametrize(("days_left", "status"), [(61, Status.PASS), (60, Status.WARN), (1, Status.WARN)])
def test_standard_support_ending_within_60_days_warns(aws: AwsStubs, days_left: int, status: Status) -> None:
    end = NOW + timedelta(days=days_left)
    add_versions(aws, version("1.35", "STANDARD_SUPPORT", default=True, standard_end=end))
    row = kubernetes_rows(aws, load_preset("poc"))["Kubernetes 1.35"]
    if status is Status.PASS:
        assert row == (Status.PASS, f"in standard support until {end:%Y-%m-%d %H:%M} UTC", "")
    else:
        assert row == (
            Status.WARN,
            f"standard support ends {end:%Y-%m-%d %H:%M} UTC; extended support then bills $0.60 instead "
            "of $0.10 per cluster hour",
            "plan the upgrade; set cluster.kubernetes_version to '1.35' (the EKS default)",
        )


def test_the_support_calendar_gives_the_end_date_eks_leaves_out(aws: AwsStubs) -> None:
    tier = make_tier({"cluster": {"kubernetes_version": "1.34"}})
    add_versions(aws, version("1.34", "STANDARD_SUPPORT", default=True))
    later = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    rows_ = rows(check_kubernetes_version(tier, region=REGION, eks=aws.client("eks", REGION), now=later))
    assert rows_["Kubernetes 1.34"][:2] == (
        Status.WARN,
        "standard support ends 2026-12-02 00:00 UTC; extended support then bills $0.60 instead of "
        "$0.10 per cluster hour",
    )


# --------------------------------------------------------------------------- errors


def test_missing_credentials_stop_the_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for key in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_ROLE_ARN",
    ):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(PreflightError) as raised:
        run_preflight(OWN_POC, region=REGION, session=boto3.Session(), now=NOW)
    assert str(raised.value) == (
        "no usable AWS credentials (Unable to locate credentials); configure credentials for the account "
        "(aws configure, AWS_PROFILE, or aws sso login) and try again"
    )


def test_rejected_credentials_stop_the_run(aws: AwsStubs, monkeypatch: pytest.MonkeyPatch) -> None:
    sts = aws.session.client("sts", region_name=REGION)
    stub = Stubber(sts)
    stub.add_client_error(
        "get_caller_identity", "ExpiredToken", "The security token included in the request is expired"
    )
    stub.activate()
    monkeypatch.setattr(aws, "client", lambda service, region_name, config=None: sts)
    with pytest.raises(PreflightError) as raised:
        run_preflight(OWN_POC, region=REGION, session=aws, now=NOW)
    assert str(raised.value).startswith(
        "AWS rejected the credentials: The security token included in the request is expired;"
    )


def test_a_denied_api_turns_its_check_into_a_warning(aws: AwsStubs) -> None:
    aws.stub("service-quotas").add_client_error(
        "get_service_quota", "AccessDeniedException", "not authorized"
    )
    add_profile(aws, POC_PROFILE, ["us-east-1"])
    add_versions(aws, version("1.35", "STANDARD_SUPPORT", default=True))
    account_ready(aws)
    report = run_preflight(OWN_POC, region=REGION, session=aws, now=NOW)
    assert rows([r for r in report.results if r.check is Check.QUOTA]) == {
        "permissions": (
            Status.WARN,
            "could not check: access denied (not authorized)",
            "allow servicequotas:GetServiceQuota, servicequotas:GetAWSDefaultServiceQuota, "
            "ec2:DescribeInstanceTypes to the caller",
        )
    }
    assert not report.failed


def test_checking_another_region_than_the_tiers_warns(aws: AwsStubs) -> None:
    tier = make_tier(
        {"environment": {"region": "us-west-2", "availability_zones": ["us-west-2a", "us-west-2b"]}}
    )
    add_quota(aws, G_ON_DEMAND, 64)
    add_profile(aws, POC_PROFILE, ["us-east-1"])
    add_versions(aws, version("1.35", "STANDARD_SUPPORT", default=True))
    account_ready(aws)
    report = run_preflight(tier, region=REGION, session=aws, now=NOW)
    assert rows(report.results)["region"] == (
        Status.WARN,
        "the tier deploys to us-west-2; these checks ran in us-east-1",
        "run preflight with --region us-west-2, or set environment.region",
    )


def test_prefill_pods_count_as_vcpu_demand_where_their_model_runs(aws: AwsStubs) -> None:
    tier = make_enterprise(
        {"ingress": {"target_optimizer": {"enabled": False}}},
        enterprise_part("models", 1, prefill_decode={"prefill_replicas": 4}),
    )
    burst = [
        (d.instance_type, d.instances)
        for d in vcpu_demands(tier, facts(aws, tier))
        if d.source == "pool h100-burst"
    ]
    # 4 decode replicas (two on the reserved node, two on a burst node) and 4 prefill pods of
    # 4 GPUs: two more burst nodes than without prefill pods.
    assert burst == [("p5.48xlarge", 3)]


def test_prefill_pods_share_a_node_with_decode_pods(aws: AwsStubs) -> None:
    tier = make_enterprise(
        {"ingress": {"target_optimizer": {"enabled": False}}},
        enterprise_part(
            "models",
            1,
            autoscaling={"min_replicas": 1, "max_replicas": 3, "queue_target": 5},
            prefill_decode={"prefill_replicas": 1},
        ),
    )
    burst = [
        (d.instance_type, d.instances)
        for d in vcpu_demands(tier, facts(aws, tier))
        if d.source == "pool h100-burst"
    ]
    # 3 decode pods and 1 prefill pod of 4 GPUs: two decode pods on the reserved node, the third
    # and the prefill pod together on one 8-GPU burst node (they used to count a node each).
    assert burst == [("p5.48xlarge", 1)]


def test_a_class_spills_past_a_pools_gpu_limit_to_its_next_pool(aws: AwsStubs) -> None:
    burst, background = enterprise_document()["node_pools"]
    more = {**burst, "name": "h100-more", "weight": 20, "gpu_limit": 16}
    tier = make_enterprise(
        {"node_pools": [{**burst, "gpu_limit": 8}, background, more]},
        enterprise_part("models", 1, autoscaling={"min_replicas": 1, "max_replicas": 6, "queue_target": 5}),
    )
    # 24 GPUs at peak: 8 on the reserved node, 8 on burst (its GPU limit), 8 on the next pool
    # (it used to count all 16 on burst, beyond its limit, and none on h100-more).
    assert [
        (d.source, d.instance_type, d.instances, d.limit_instances)
        for d in vcpu_demands(tier, facts(aws, tier))
        if d.source in ("pool h100-burst", "pool h100-more")
    ] == [
        ("pool h100-burst", "p5.48xlarge", 1, 1),
        ("pool h100-more", "p5.48xlarge", 1, 2),
    ]
