"""A whole tier: the sections together, and the settings of the stack itself."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, Field

from gpufarm import images as image_table
from gpufarm.config.sections.capacity import NodeGroupConfig, NodePoolConfig
from gpufarm.config.sections.cluster import ClusterConfig, EnvironmentConfig, KarpenterConfig, NetworkConfig
from gpufarm.config.sections.ec2 import Ec2Config
from gpufarm.config.sections.gateway import FallbackConfig
from gpufarm.config.sections.hybrid import HybridNodesConfig
from gpufarm.config.sections.ingress import IngressConfig
from gpufarm.config.sections.model_store import ModelStoreConfig
from gpufarm.config.sections.observability import ObservabilityConfig
from gpufarm.config.sections.regions import RegionConfig, RegionsConfig
from gpufarm.config.sections.sagemaker import SageMakerConfig
from gpufarm.config.sections.serving import AutoscalingConfig, ModelConfig, ServingConfig
from gpufarm.config.sections.values import DnsLabel, _Model

TIER_METADATA_KEY = "gpufarm:tier"
"""Template `Metadata` key under which each stack carries the tier config it was built from.

Here rather than next to the stack, so reading an assembly back needs no aws-cdk-lib.
"""


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
    pull_through_cache: bool = Field(
        False,
        description="Pull every image through the account's ECR pull-through cache in the tier's "
        "region instead of from its upstream registry.",
    )
    cache_rules_only: bool = Field(
        False,
        description="With pull_through_cache: create the cache rules but keep pulling from the "
        "upstream registries. For the first deploy, before the cache is warmed (docs/operations.md).",
    )
    cache_prefix: str = Field(
        "",
        description="First part of the cache's repository names ('<prefix>/docker-hub/...'); empty: "
        "the tier name. ECR rule prefixes are registry-wide: two tiers in one account and region "
        "need two prefixes.",
    )
    docker_hub_credential_arn: str | None = Field(
        None,
        description="Secrets Manager secret (name 'ecr-pullthroughcache/...', `username` and "
        "`accessToken`) the Docker Hub cache rule signs in with; required with pull_through_cache.",
    )
    github_credential_arn: str | None = Field(
        None,
        description="Secrets Manager secret (name 'ecr-pullthroughcache/...', `username` and "
        "`accessToken`) the GitHub Container Registry cache rule signs in with; required with "
        "pull_through_cache.",
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
    ec2: Ec2Config = Field(default_factory=Ec2Config, description="With `cluster.provisioning: ec2`.")
    sagemaker: SageMakerConfig = Field(
        default_factory=SageMakerConfig, description="With `cluster.provisioning: sagemaker`."
    )
    hybrid_nodes: HybridNodesConfig = Field(
        default_factory=HybridNodesConfig, description="On-premises GPU nodes in the EKS cluster."
    )
    regions: RegionsConfig = Field(
        default_factory=RegionsConfig,
        description="Further regions the tier runs in, one stack each, behind Route 53 failover or "
        "latency records (enterprise option; docs/operations.md, 'A second region').",
    )

    @property
    def stack_name(self) -> str:
        """CloudFormation stack name: `gpufarm-<name>`, and `gpufarm-<name>-<region>` for the stack
        of a secondary region (:func:`gpufarm.config.regions.regional_tiers`)."""
        if self.secondary_region is not None:
            return f"gpufarm-{self.name}-{self.secondary_region.region}"
        return f"gpufarm-{self.name}"

    @property
    def secondary_region(self) -> RegionConfig | None:
        """The entry of `regions.secondary` this tier's stack is built for, or None for the primary.

        A tier derived for a secondary region has that region as `environment.region`; a tier file
        naming its own region under `regions.secondary` is refused by validation.
        """
        return next((r for r in self.regions.secondary if r.region == self.environment.region), None)

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

    @property
    def image_cache_prefix(self) -> str:
        """First part of the image cache's repository names: `images.cache_prefix` or the tier name."""
        return self.images.cache_prefix or self.name

    def pool_of(self, model: ModelConfig) -> NodePoolConfig:
        """The node pool a model runs on (its `node_pool`, or the first pool)."""
        wanted = model.node_pool or self.node_pools[0].name
        return next(p for p in self.node_pools if p.name == wanted)
