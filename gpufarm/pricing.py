"""The dated price table `gpufarm cost` uses: its typed model and its loader.

The table ships as `gpufarm/data/prices.yaml` (US East, N. Virginia, dated). A user file given
to :func:`load_prices` is merged over it key by key, so it may carry only the figures it
changes. :func:`gpufarm.aws.pricing.live_prices` replaces the EC2 section with live prices.
Nothing here calls AWS.
"""

from __future__ import annotations

import datetime as dt
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpufarm.config import merge
from gpufarm.config.bedrock import foundation_model_id
from gpufarm.debug import kind_of, yaml_problem

HOURS_PER_MONTH = 730.0
"""Hours AWS bills in an average month (8,760 / 12)."""

STALE_AFTER_DAYS = 90
"""A table whose oldest section was read more than this many days ago draws a warning from
`gpufarm cost`: list prices change, and an old table prices a tier at old rates."""

CAPACITY_TYPES = ("reserved", "on-demand", "spot")
"""EC2 purchase options a GPU instance is priced under (the values of the config's
`CapacityType`), in the order every report lists them: `gpufarm cost`, `gpufarm plan`,
`gpufarm synth` and `gpufarm review`."""


PRICE_SECTIONS = (
    "ec2",
    "eks",
    "ebs",
    "vpc",
    "elb",
    "fsx_lustre",
    "amp",
    "waf",
    "bedrock",
    "bedrock_provisioned",
    "capacity_blocks",
    "cloudwatch",
    "kms",
    "secrets_manager",
    "ebs_performance",
    "data_transfer",
    "bedrock_guardrails",
    "grafana",
    "s3",
    "route53",
    "ecr",
    "sagemaker",
)
"""The sections of the price table, each with its own source, date and estimates."""


class PriceTableError(ValueError):
    """A price file cannot be read or does not have the shape of the price table."""


class PriceNotFoundError(LookupError):
    """The price table has no price for an item the tier uses."""

    def __init__(self, item: str, key: str, hint: str) -> None:
        self.item = item
        self.key = key
        super().__init__(f"no {item} price for {key!r} in the price table ({hint})")


class _Section(BaseModel):
    """A part of the table with its own source and date."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1, description="Where the figures come from.")
    as_of: dt.date = Field(description="Date the figures were read.")
    estimates: dict[str, str] = Field(
        {}, description="Figures no source showed, each with the reason for its value."
    )


class Ec2Prices(_Section):
    """EC2 instance prices, $ per instance-hour (Linux, shared tenancy)."""

    on_demand_per_hour: dict[str, float] = Field(description="On-demand price by instance type.")
    spot_per_hour: dict[str, float] = Field({}, description="Measured spot price by instance type.")
    spot_discounts: dict[str, Annotated[float, Field(ge=0, lt=1)]] = Field(
        {},
        description="Observed spot discount by instance type or family ('p5en'), for types not measured.",
    )
    spot_discount: float = Field(
        ge=0,
        lt=1,
        description="Spot price = on-demand x (1 - discount) for types neither measured nor observed.",
    )


class EksPrices(_Section):
    """Amazon EKS."""

    cluster_per_hour: float = Field(
        ge=0, description="Control plane in standard support, $ per cluster-hour."
    )
    extended_support_cluster_per_hour: float = Field(
        ge=0, description="Control plane of a Kubernetes version in extended support, $ per cluster-hour."
    )
    auto_mode_fee_share: float = Field(
        ge=0, lt=1, description="Auto Mode management fee as a share of the on-demand price."
    )
    hybrid_nodes_per_vcpu_hour: float | None = Field(
        None,
        ge=0,
        description="EKS Hybrid Nodes fee, $ per vCPU-hour of an attached on-premises node (None: the "
        "table has no confirmed rate; give one with --prices).",
    )


class EbsPrices(_Section):
    """Amazon EBS."""

    gp3_per_gb_month: float = Field(ge=0, description="gp3 storage, $ per GB-month.")


class VpcPrices(_Section):
    """NAT gateways and VPC endpoints."""

    nat_gateway_per_hour: float = Field(ge=0, description="$ per NAT gateway-hour.")
    nat_gateway_per_gb: float = Field(ge=0, description="$ per GB processed by a NAT gateway.")
    interface_endpoint_per_az_hour: float = Field(ge=0, description="$ per interface endpoint, AZ and hour.")
    interface_endpoint_per_gb: float = Field(ge=0, description="$ per GB through interface endpoints.")
    gwlb_endpoint_per_az_hour: float = Field(ge=0, description="$ per Gateway Load Balancer endpoint-hour.")


class ElbPrices(_Section):
    """Elastic Load Balancing."""

    alb_per_hour: float = Field(ge=0, description="$ per Application Load Balancer-hour.")
    alb_per_lcu_hour: float = Field(ge=0, description="$ per ALB LCU-hour.")
    nlb_per_hour: float = Field(ge=0, description="$ per Network Load Balancer-hour.")
    nlb_per_lcu_hour: float = Field(ge=0, description="$ per NLCU-hour.")
    gwlb_per_hour: float = Field(ge=0, description="$ per Gateway Load Balancer-hour.")
    gwlb_per_lcu_hour: float = Field(ge=0, description="$ per GLCU-hour.")


class FsxLustrePrices(_Section):
    """Amazon FSx for Lustre."""

    persistent_2_per_gb_month: dict[int, float] = Field(
        description="PERSISTENT_2 SSD storage, $ per GB-month, by MB/s/TiB of throughput."
    )


class AmpPrices(_Section):
    """Amazon Managed Service for Prometheus."""

    ingest_per_10m_samples: float = Field(ge=0, description="$ per 10 million samples ingested.")
    storage_per_gb_month: float = Field(ge=0, description="$ per GB-month of stored samples.")
    query_per_billion_samples: float = Field(ge=0, description="$ per billion query samples processed.")
    collector_per_hour: float = Field(ge=0, description="$ per managed collector-hour.")
    collect_per_10m_samples: float = Field(ge=0, description="$ per 10 million samples collected.")


class WafPrices(_Section):
    """AWS WAF."""

    web_acl_per_month: float = Field(ge=0, description="$ per web ACL-month.")
    rule_per_month: float = Field(ge=0, description="$ per rule-month.")
    per_million_requests: float = Field(ge=0, description="$ per million requests inspected.")


class BedrockModelPrice(BaseModel):
    """On-demand price of one Bedrock model, $ per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_million: float = Field(ge=0, description="$ per million input tokens.")
    output_per_million: float = Field(ge=0, description="$ per million output tokens.")


class BedrockPrices(_Section):
    """Amazon Bedrock on-demand inference."""

    models: dict[str, BedrockModelPrice] = Field(description="Price by foundation-model ID.")


class BedrockProvisionedPrices(_Section):
    """Amazon Bedrock Provisioned Throughput: a flat rate per model unit and hour, by model and term."""

    per_model_unit_hour: dict[str, dict[Literal["one-month", "six-months"], float]] = Field(
        {},
        description="$ per model unit-hour by foundation-model ID and term ('one-month', 'six-months').",
    )


class CapacityBlockPrices(_Section):
    """EC2 Capacity Blocks for ML: a reservation fee paid up front, at the rate of the day of purchase."""

    per_instance_hour: dict[str, float] = Field(
        description="Effective reservation rate by instance type, $ per instance-hour of the block."
    )


class CloudWatchPrices(_Section):
    """Amazon CloudWatch: Logs, alarms and dashboards."""

    logs_ingest_per_gb: float = Field(ge=0, description="$ per GB ingested into a Standard log group.")
    vended_logs_ingest_per_gb: float = Field(
        ge=0, description="$ per GB of vended logs (VPC flow logs, WAF logs) delivered, first tier."
    )
    logs_storage_per_gb_month: float = Field(ge=0, description="$ per GB-month of archived log data.")
    alarm_per_month: float = Field(ge=0, description="$ per standard-resolution metric alarm-month.")
    dashboard_per_month: float = Field(ge=0, description="$ per custom dashboard-month.")


class KmsPrices(_Section):
    """AWS Key Management Service."""

    key_per_month: float = Field(ge=0, description="$ per customer managed key-month.")
    per_10k_requests: float = Field(ge=0, description="$ per 10,000 symmetric-key requests.")


class SecretsManagerPrices(_Section):
    """AWS Secrets Manager."""

    secret_per_month: float = Field(ge=0, description="$ per secret-month.")
    per_10k_api_calls: float = Field(ge=0, description="$ per 10,000 API calls.")


class EbsPerformancePrices(_Section):
    """Amazon EBS gp3 performance above the baseline included in the storage price."""

    gp3_baseline_iops: int = Field(ge=0, description="IOPS every gp3 volume includes.")
    gp3_baseline_throughput_mibps: int = Field(ge=0, description="MiB/s every gp3 volume includes.")
    gp3_iops_per_month: float = Field(ge=0, description="$ per provisioned IOPS-month above the baseline.")
    gp3_throughput_per_mibps_month: float = Field(
        ge=0, description="$ per provisioned MiB/s-month above the baseline."
    )


class DataTransferPrices(_Section):
    """Public IPv4 addresses, data between Availability Zones and through GWLB endpoints."""

    public_ipv4_per_hour: float = Field(ge=0, description="$ per public IPv4 address-hour.")
    inter_az_per_gb: float = Field(
        ge=0, description="$ per GB between Availability Zones, charged in each direction."
    )
    gwlb_endpoint_per_gb: float = Field(
        ge=0, description="$ per GB through a Gateway Load Balancer endpoint."
    )


class BedrockGuardrailPrices(_Section):
    """Amazon Bedrock Guardrails."""

    content_filter_per_1k_text_units: float = Field(
        ge=0, description="$ per 1,000 text units (1,000 characters each) screened by content filters."
    )
    text_unit_characters: int = Field(gt=0, description="Characters in one text unit.")


class GrafanaPrices(_Section):
    """Amazon Managed Grafana."""

    editor_per_month: float = Field(ge=0, description="$ per active editor license, workspace and month.")


class S3Prices(_Section):
    """Amazon S3."""

    standard_per_gb_month: float = Field(ge=0, description="S3 Standard storage, $ per GB-month.")


class Route53Prices(_Section):
    """Amazon Route 53."""

    health_check_per_month: float = Field(
        ge=0, description="A basic health check of an AWS endpoint, $ per health check-month."
    )


class EcrPrices(_Section):
    """Amazon ECR."""

    storage_per_gb_month: float = Field(ge=0, description="Private repository storage, $ per GB-month.")


class SageMakerPrices(_Section):
    """SageMaker real-time inference (hosting) instances, $ per instance-hour."""

    hosting_per_hour: dict[str, float] = Field(description="On-demand hosting price by `ml.*` instance type.")


class PriceTable(BaseModel):
    """Unit prices for one region, by service, each section with its source and date."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    as_of: dt.date = Field(description="Date of the table (its oldest section).")
    region: str = Field(description="Region the prices apply to.")
    currency: Literal["USD"] = Field("USD", description="Currency of every price.")
    hours_per_month: float = Field(HOURS_PER_MONTH, gt=0, le=744, description="Hours in a billed month.")
    ec2: Ec2Prices
    eks: EksPrices
    ebs: EbsPrices
    vpc: VpcPrices
    elb: ElbPrices
    fsx_lustre: FsxLustrePrices
    amp: AmpPrices
    waf: WafPrices
    bedrock: BedrockPrices
    bedrock_provisioned: BedrockProvisionedPrices
    capacity_blocks: CapacityBlockPrices
    cloudwatch: CloudWatchPrices
    kms: KmsPrices
    secrets_manager: SecretsManagerPrices
    ebs_performance: EbsPerformancePrices
    data_transfer: DataTransferPrices
    bedrock_guardrails: BedrockGuardrailPrices
    grafana: GrafanaPrices
    s3: S3Prices
    route53: Route53Prices
    ecr: EcrPrices
    sagemaker: SageMakerPrices

    def on_demand(self, instance_type: str) -> float:
        """On-demand $ per hour of `instance_type`; PriceNotFoundError when the table lacks it."""
        try:
            return self.ec2.on_demand_per_hour[instance_type]
        except KeyError:
            raise PriceNotFoundError(
                "EC2 on-demand", instance_type, "add it under ec2.on_demand_per_hour in a --prices file"
            ) from None

    def sagemaker_hosting(self, ml_type: str) -> float:
        """On-demand $ per hour of a SageMaker hosting instance; PriceNotFoundError when the table
        lacks it."""
        try:
            return self.sagemaker.hosting_per_hour[ml_type]
        except KeyError:
            raise PriceNotFoundError(
                "SageMaker hosting", ml_type, "add it under sagemaker.hosting_per_hour in a --prices file"
            ) from None

    def spot_discount(self, instance_type: str) -> float:
        """The spot discount a type without a measured spot price is priced at: the type's observed
        discount (`ec2.spot_discounts`), else its family's, else `ec2.spot_discount`."""
        observed = self.ec2.spot_discounts
        family = instance_type.split(".", 1)[0]
        return observed.get(instance_type, observed.get(family, self.ec2.spot_discount))

    def spot(self, instance_type: str) -> float:
        """Spot $ per hour: the measured price, else on-demand x (1 - :meth:`spot_discount`)."""
        measured = self.ec2.spot_per_hour.get(instance_type)
        if measured is not None:
            return measured
        return self.on_demand(instance_type) * (1 - self.spot_discount(instance_type))

    def spot_basis(self, instance_type: str) -> str:
        """Where the spot price of `instance_type` comes from, in words."""
        if instance_type in self.ec2.spot_per_hour:
            return "measured spot price"
        family = instance_type.split(".", 1)[0]
        discount = self.spot_discount(instance_type)
        if instance_type in self.ec2.spot_discounts:
            return f"observed spot discount of {instance_type}: {discount:.0%} off on-demand"
        if family in self.ec2.spot_discounts:
            return f"observed spot discount of the {family} family: {discount:.0%} off on-demand"
        return f"estimate: ec2.spot_discount, {discount:.0%} off on-demand"

    def instance_hourly(self, instance_type: str, capacity_type: str, *, reserved_discount: float) -> float:
        """$ per hour of one instance bought as `capacity_type` (one of :data:`CAPACITY_TYPES`).

        Reserved capacity is the on-demand price less `reserved_discount` (what a Reserved
        Instance or Savings Plan takes off); spot is :meth:`spot`.
        """
        if capacity_type == "spot":
            return self.spot(instance_type)
        if capacity_type == "reserved":
            return self.on_demand(instance_type) * (1 - reserved_discount)
        return self.on_demand(instance_type)

    def instance_monthly(
        self, instance_type: str, instances: int, *, reserved_discount: float
    ) -> dict[str, float]:
        """$ per month of `instances` instances under each of :data:`CAPACITY_TYPES`, in that order."""
        hours = self.hours_per_month * instances
        return {
            kind: self.instance_hourly(instance_type, kind, reserved_discount=reserved_discount) * hours
            for kind in CAPACITY_TYPES
        }

    def capacity_block(self, instance_type: str) -> float:
        """Capacity Block $ per instance-hour of `instance_type`; PriceNotFoundError when it is not listed."""
        try:
            return self.capacity_blocks.per_instance_hour[instance_type]
        except KeyError:
            raise PriceNotFoundError(
                "EC2 Capacity Block",
                instance_type,
                "add it under capacity_blocks.per_instance_hour in a --prices file, at the rate "
                "you bought the block at",
            ) from None

    def fsx_per_gb_month(self, throughput_per_tib: int) -> float:
        """FSx for Lustre PERSISTENT_2 $ per GB-month at `throughput_per_tib` MB/s/TiB."""
        try:
            return self.fsx_lustre.persistent_2_per_gb_month[throughput_per_tib]
        except KeyError:
            raise PriceNotFoundError(
                "FSx for Lustre PERSISTENT_2",
                f"{throughput_per_tib} MB/s/TiB",
                "add it under fsx_lustre.persistent_2_per_gb_month in a --prices file",
            ) from None

    def bedrock_model(self, model_id: str) -> BedrockModelPrice:
        """Price of a Bedrock model or inference profile (its geography prefix is dropped)."""
        key = foundation_model_id(model_id)
        try:
            return self.bedrock.models[key]
        except KeyError:
            raise PriceNotFoundError(
                "Amazon Bedrock", key, "add it under bedrock.models in a --prices file"
            ) from None

    def bedrock_model_unit_hour(self, model_id: str, commitment: str) -> float:
        """$ per model unit-hour of Provisioned Throughput for a foundation model at a commitment term."""
        terms = {
            str(term): rate
            for term, rate in self.bedrock_provisioned.per_model_unit_hour.get(model_id, {}).items()
        }
        rate = terms.get(commitment)
        if rate is None:
            raise PriceNotFoundError(
                "Amazon Bedrock Provisioned Throughput",
                f"{model_id} ({commitment})",
                f"add bedrock_provisioned.per_model_unit_hour.{model_id}.{commitment} in a --prices file, "
                "at the hourly rate per model unit the Bedrock console showed when you bought it",
            )
        return rate

    def section_dates(self) -> dict[str, dt.date]:
        """The date each section's figures were read, by section name."""
        return {name: getattr(self, name).as_of for name in PRICE_SECTIONS}

    def oldest_as_of(self) -> dt.date:
        """The date of the table's oldest section (a live lookup renews only the EC2 section)."""
        return min(self.section_dates().values())

    def age_days(self, day: dt.date) -> int:
        """Days between the oldest section's date and `day`."""
        return (day - self.oldest_as_of()).days

    def staleness(self, day: dt.date, *, max_age_days: int = STALE_AFTER_DAYS) -> str | None:
        """A warning when the oldest section is more than `max_age_days` older than `day`, else None."""
        age = self.age_days(day)
        if age <= max_age_days:
            return None
        old = sorted(name for name, when in self.section_dates().items() if (day - when).days > max_age_days)
        read = self.oldest_as_of().isoformat()
        return (
            f"the price table is {age} days old on {day.isoformat()} (read {read}; "
            f"more than {max_age_days} days: {', '.join(old)}); list prices may have changed: refresh "
            "them with --prices FILE, or --live for EC2"
        )

    def estimated_figures(self) -> dict[str, str]:
        """Every figure marked as an estimate, as 'section.key' -> reason."""
        out: dict[str, str] = {}
        for name in PRICE_SECTIONS:
            section: _Section = getattr(self, name)
            out.update({f"{name}.{key}": reason for key, reason in section.estimates.items()})
        return out

    def with_ec2(
        self,
        *,
        on_demand_per_hour: dict[str, float],
        spot_per_hour: dict[str, float],
        region: str,
        source: str,
        as_of: dt.date,
    ) -> PriceTable:
        """A copy whose EC2 prices are replaced by (merged with) the given measured ones."""
        ec2 = self.ec2.model_copy(
            update={
                "on_demand_per_hour": {**self.ec2.on_demand_per_hour, **on_demand_per_hour},
                "spot_per_hour": {**self.ec2.spot_per_hour, **spot_per_hour},
                "source": source,
                "as_of": as_of,
                "estimates": {k: v for k, v in self.ec2.estimates.items() if k not in on_demand_per_hour},
            }
        )
        return self.model_copy(update={"ec2": ec2, "region": region})


def shipped_prices_path() -> Path:
    """Path of the price table shipped with gpufarm."""
    return Path(str(resources.files("gpufarm") / "data" / "prices.yaml"))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PriceTableError(f"cannot read the price file {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise PriceTableError(
            f"the price file {str(path)!r} is not UTF-8 text: byte {exc.start} is "
            f"{exc.object[exc.start]:#04x}"
        ) from None
    except yaml.YAMLError as exc:
        raise PriceTableError(f"the price file {str(path)!r} is not valid YAML{yaml_problem(exc)}") from None
    if not isinstance(data, dict):
        raise PriceTableError(f"the price file {str(path)!r} must hold a mapping, got {kind_of(data)}")
    return data


@cache
def _shipped_document() -> dict[str, Any]:
    # Read once per process: `gpufarm synth` and `review` price several tiers.
    return _read(shipped_prices_path())


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The shipped price table, with the YAML file at `path` (if any) merged over it.

    Mappings merge key by key, any other value replaces the shipped one. Raises
    :class:`PriceTableError` when the file cannot be read or the result is not a price table.
    """
    document = _shipped_document()
    if path is not None:
        document = merge(document, _read(Path(path)))
    try:
        return PriceTable.model_validate(document)
    except ValidationError as exc:
        where = str(path) if path is not None else "the shipped price table"
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}" for err in exc.errors()
        )
        raise PriceTableError(f"{where} is not a valid price table: {problems}") from None
