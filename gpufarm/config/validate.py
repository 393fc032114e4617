"""Rules that tie several fields of a tier together.

Each narrow validator yields :class:`ConfigIssue` objects; :func:`validate_tier` runs them all so
the user sees every problem in one go. The rules live in :mod:`gpufarm.config.checks`, one module
per section (`cluster`, `capacity`, `serving`, `model_store`, `ingress`, `gateway`, and `tier` for
the tier as a whole); this module runs them in document order and gathers the limits other
modules read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from gpufarm.config.checks.capacity import (
    AUTO_MODE_MAX_EXPIRE_HOURS,
    _node_groups,
    _pods_fit_hosts,
    _pool_deployable,
    _pools,
)
from gpufarm.config.checks.cluster import (
    GPUFARM_CONTROLLER_NAMESPACES,
    KUBECTL_VERSION,
    KUBERNETES_SYSTEM_NAMESPACES,
    SUPPORTED_KUBERNETES_VERSIONS,
    _cluster,
    _environment,
    _namespaces,
    _network,
    _system_nodes,
)
from gpufarm.config.checks.ec2 import _ec2
from gpufarm.config.checks.engine_metrics import _engine_metrics
from gpufarm.config.checks.gateway import _fallback, _gateway_scaling
from gpufarm.config.checks.grafana import _grafana
from gpufarm.config.checks.hybrid import _hybrid_nodes
from gpufarm.config.checks.images import _image_cache, _image_pull
from gpufarm.config.checks.ingress import HEALTH_CHECK_TIMEOUT_SECONDS, _health_check, _ingress
from gpufarm.config.checks.model_store import _model_store, _s3_buckets, s3_bucket_problem
from gpufarm.config.checks.regions import _regions
from gpufarm.config.checks.sagemaker import _sagemaker
from gpufarm.config.checks.serving import (
    MULTI_NODE_RESERVED_VLLM_FLAGS,
    RESERVED_VLLM_FLAGS,
    _kv_cache_routing,
    _models,
    _prefill_decode,
)
from gpufarm.config.checks.tier import (
    CFN_DESCRIPTION_MAX_BYTES,
    MAX_SCRAPER_SUBNETS,
    MIN_APPLIANCE_SUBNET_PREFIX,
    _compliance,
    _construct_limits,
    _description,
    _secrets,
)
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.image_pins import chart_version_issues
from gpufarm.config.model import TierConfig
from gpufarm.config.placeholders import open_choice_issues
from gpufarm.config.regions import regional_tier

_Validator = Callable[[TierConfig], Iterator[ConfigIssue]]


VALIDATORS: tuple[_Validator, ...] = (
    _environment,
    _network,
    _cluster,
    _pools,
    _node_groups,
    _models,
    _hybrid_nodes,
    _model_store,
    _ingress,
    _fallback,
    _gateway_scaling,
    _kv_cache_routing,
    _prefill_decode,
    _compliance,
    _pool_deployable,
    _pods_fit_hosts,
    _system_nodes,
    _health_check,
    _secrets,
    _s3_buckets,
    _description,
    _namespaces,
    _construct_limits,
    _grafana,
    _image_cache,
    _image_pull,
    _engine_metrics,
    _sagemaker,
    _ec2,
    open_choice_issues,
    chart_version_issues,
    _regions,
)


def validate_tier(cfg: TierConfig) -> list[ConfigIssue]:
    """Every cross-field problem in `cfg`, in document order; empty when the tier can be built.

    With `regions.secondary`, and once the tier itself is clean, every check also runs on the tier
    each secondary region's stack builds (:func:`gpufarm.config.regions.regional_tier`), its
    problems reported under that region (:func:`_regional_issues`).
    """
    issues = [issue for validator in VALIDATORS for issue in validator(cfg)]
    if issues or cfg.secondary_region is not None:
        return issues
    for i, region in enumerate(cfg.regions.secondary):
        derived = regional_tier(cfg, region)
        issues += [
            _regional_issue(cfg, i, issue)
            for validator in VALIDATORS
            if validator is not _regions
            for issue in validator(derived)
        ]
    return issues


_REGIONAL_FIELDS = {
    "environment.availability_zones": "availability_zones",
    "network.cidr": "network_cidr",
    "ingress.certificate_arn": "certificate_arn",
    "images.docker_hub_credential_arn": "docker_hub_credential_arn",
    "images.github_credential_arn": "github_credential_arn",
}
"""Fields of the tier that a secondary region replaces -> the field of `regions.secondary[i]`."""


def _regional_issue(cfg: TierConfig, i: int, issue: ConfigIssue) -> ConfigIssue:
    """A problem of the tier derived for `regions.secondary[i]`, at the field the user wrote.

    A field the region replaces is named as the region's own (`network.cidr` ->
    `regions.secondary[0].network_cidr`, the region's `node_groups` when it lists them); any
    other is the tier's field as that region's stack builds it, named with the region.
    """
    region = cfg.regions.secondary[i]
    where = f"regions.secondary[{i}]"
    for field, own in _REGIONAL_FIELDS.items():
        if issue.path == field or issue.path.startswith(f"{field}["):
            return ConfigIssue(path=f"{where}.{own}{issue.path[len(field) :]}", message=issue.message)
    if region.node_groups is not None and issue.path.startswith("node_groups"):
        return ConfigIssue(path=f"{where}.{issue.path}", message=issue.message)
    return ConfigIssue(path=where, message=f"in {region.region}, {issue.path or 'the tier'} {issue.message}")


__all__ = [
    "AUTO_MODE_MAX_EXPIRE_HOURS",
    "CFN_DESCRIPTION_MAX_BYTES",
    "GPUFARM_CONTROLLER_NAMESPACES",
    "HEALTH_CHECK_TIMEOUT_SECONDS",
    "KUBECTL_VERSION",
    "KUBERNETES_SYSTEM_NAMESPACES",
    "MAX_SCRAPER_SUBNETS",
    "MIN_APPLIANCE_SUBNET_PREFIX",
    "MULTI_NODE_RESERVED_VLLM_FLAGS",
    "RESERVED_VLLM_FLAGS",
    "SUPPORTED_KUBERNETES_VERSIONS",
    "VALIDATORS",
    "s3_bucket_problem",
    "validate_tier",
]
