"""Sizing a model for serving: memory, GPU layout, replicas, tier and cost (`gpufarm plan`).

Pure functions over the catalog, the price table and the throughput table; no AWS call, no CDK.
"""

from gpufarm.sizing.plan import (
    Demand,
    Layout,
    ModelSpec,
    NoLayoutError,
    Plan,
    PlanInputError,
    Sizing,
    kv_cache_bytes_per_sequence,
    make_plan,
    replicas_for,
    tier_for,
    weights_bytes,
)
from gpufarm.sizing.throughput import ThroughputTable, ThroughputTableError, load_throughput_table

__all__ = [
    "Demand",
    "Layout",
    "ModelSpec",
    "NoLayoutError",
    "Plan",
    "PlanInputError",
    "Sizing",
    "ThroughputTable",
    "ThroughputTableError",
    "kv_cache_bytes_per_sequence",
    "load_throughput_table",
    "make_plan",
    "replicas_for",
    "tier_for",
    "weights_bytes",
]
