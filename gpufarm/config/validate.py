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
from gpufarm.config.checks.images import _image_cache, _image_pull
from gpufarm.config.checks.ingress import HEALTH_CHECK_TIMEOUT_SECONDS, _health_check, _ingress
from gpufarm.config.checks.model_store import _model_store, _s3_buckets, s3_bucket_problem
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

_Validator = Callable[[TierConfig], Iterator[ConfigIssue]]


VALIDATORS: tuple[_Validator, ...] = (
    _environment,
    _network,
    _cluster,
    _pools,
    _node_groups,
    _models,
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
)


def validate_tier(cfg: TierConfig) -> list[ConfigIssue]:
    """Every cross-field problem in `cfg`, in document order; empty when the tier can be built."""
    return [issue for validator in VALIDATORS for issue in validator(cfg)]


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
