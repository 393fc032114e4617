"""The tier file `gpufarm plan --write` produces: the plan's preset, one model, its capacity.

The file starts with ``extends: <tier>`` and replaces the preset's lists (lists replace, they do
not merge): ``models`` holds the planned model; ``node_pools`` holds the preset's serving pool
narrowed to the planned instance type, its GPU limit the planned instances' GPUs. A tier with
reserved node groups (enterprise) gets the preset's first node group on the planned instance
type with one node per planned instance (its reservation created for them), and its burst pool
keeps room for one more replica; the model runs on their capacity class.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from gpufarm.config import ConfigError, ModelStoreKind, PoolPurpose, TierConfig, load_preset, load_tier_file
from gpufarm.core.s3 import split_s3_uri
from gpufarm.k8s.karpenter import efa_interfaces
from gpufarm.sizing.plan import GB, GIB, GPU_MEMORY_UTILIZATION, Plan, pod_resources

LONG_STARTUP_WEIGHTS_GB = 200.0
"""Weights above this many GB get STARTUP_TIMEOUT_LONG_SECONDS to download and load."""

STARTUP_TIMEOUT_LONG_SECONDS = 3600

_DTYPE = {"fp16": "float16", "bf16": "bfloat16"}


def tier_document(
    plan: Plan, *, name: str, weights: str, bedrock_model_id: str | None = None
) -> dict[str, Any]:
    """The tier file's content (a mapping ready for YAML)."""
    base = load_preset(plan.tier)
    sizing, layout, model = plan.chosen, plan.chosen.layout, plan.model
    cpu, memory_gib = pod_resources(layout)
    entry: dict[str, Any] = {"name": name, "weights": weights, "gpus": layout.tensor_parallel}
    if layout.nodes > 1:
        entry["pipeline_parallel"] = layout.nodes
    entry |= {
        "replicas": sizing.replicas,
        "max_model_len": plan.demand.context_length,
        "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
        "max_num_seqs": sizing.sequences_per_replica,
        "cpu": cpu,
        "memory_gib": memory_gib,
        "critical": True,
    }
    if model.precision in _DTYPE:
        entry["dtype"] = _DTYPE[model.precision]
    elif model.precision == "fp8":
        entry["quantization"] = "fp8"
    if model.kv_cache_dtype == "fp8":
        entry["extra_args"] = ["--kv-cache-dtype", "fp8"]
    if weights.startswith("s3://"):
        entry["weights_gib"] = round(model.weights_bytes / GIB + 0.05, 1)
    if model.weights_bytes / GB > LONG_STARTUP_WEIGHTS_GB:
        entry["startup_timeout_seconds"] = STARTUP_TIMEOUT_LONG_SECONDS
    entry["bedrock"] = {"model_id": bedrock_model_id} if bedrock_model_id else "none"

    serving = next((p for p in base.node_pools if p.purpose is PoolPurpose.SERVING), base.node_pools[0])
    pool: dict[str, Any] = serving.model_dump(mode="json", exclude_unset=True)
    pool |= {"instance_families": [layout.family], "instance_types": [layout.instance_type]}
    document: dict[str, Any] = {"extends": plan.tier}
    if base.node_groups:
        group: dict[str, Any] = base.node_groups[0].model_dump(mode="json", exclude_unset=True)
        capacity_class = base.node_groups[0].capacity_class_name
        group |= {
            "instance_type": layout.instance_type,
            "nodes": sizing.instances,
            "efa": layout.nodes > 1 and efa_interfaces(layout.instance_type) is not None,
            "capacity_class": capacity_class,
            "capacity": {"kind": "create", "instance_count": sizing.instances},
        }
        pool |= {"capacity_class": capacity_class, "gpu_limit": layout.nodes * layout.gpus_per_instance}
        entry["capacity_class"] = capacity_class
        document["node_groups"] = [group]
    else:
        pool["gpu_limit"] = sizing.instances * layout.gpus_per_instance
        entry["node_pool"] = pool["name"]
    document["node_pools"] = [pool]
    document["models"] = [entry]
    if weights.startswith("s3://") and base.model_store.kind is ModelStoreKind.FSX_LUSTRE:
        bucket, prefix = split_s3_uri(weights)
        parent = prefix.rstrip("/").rpartition("/")[0]
        document["model_store"] = {"fsx": {"import_path": f"s3://{bucket}/{parent + '/' if parent else ''}"}}
    return document


def render(plan: Plan, document: dict[str, Any]) -> str:
    """The tier file's text: a header saying where it comes from, then the YAML."""
    sizing = plan.chosen
    header = [
        "# Written by `gpufarm plan`: a "
        f"{plan.model.params_b:g}B model at {plan.model.precision}, {plan.demand.concurrency} concurrent "
        f"users at {plan.demand.per_user_tokens_per_s:g} tokens/s each, "
        f"{plan.demand.context_length}-token context.",
        f"# Layout: {sizing.layout.describe()}; {sizing.replicas} replica(s) of "
        f"{sizing.sequences_per_replica} sequences on {sizing.instances} instance(s); "
        f"tier {plan.tier} ({plan.tier_reason}).",
        f"# Monthly on-demand estimate: ${plan.monthly_cost_usd['on-demand']:,.0f} for the GPU instances "
        f"(prices as of {plan.prices_as_of}); `gpufarm cost --tier-file` prices the whole tier.",
    ]
    return "\n".join(header) + "\n" + yaml.safe_dump(document, sort_keys=False, default_flow_style=False)


def write_tier_file(
    plan: Plan, path: str | Path, *, name: str, weights: str, bedrock_model_id: str | None = None
) -> TierConfig:
    """Write the tier file to `path` once it validates; return the tier it loads as.

    The file is written next to `path` under a temporary name, loaded with
    :func:`gpufarm.config.load_tier_file`, and renamed into place only when it is valid;
    otherwise :class:`ConfigError` is raised (naming `path`) and nothing is left behind.
    """
    target = Path(path)
    text = render(plan, tier_document(plan, name=name, weights=weights, bedrock_model_id=bedrock_model_id))
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".yaml", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        try:
            tier = load_tier_file(temp)
        except ConfigError as exc:
            raise ConfigError(exc.issues, source=str(target)) from None
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return tier
