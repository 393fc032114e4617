"""The tier file `gpufarm plan --write` produces: the plan's preset, one model, its capacity.

The file starts with ``extends: <tier>`` and replaces the preset's lists (lists replace, they do
not merge): ``models`` holds the planned model; ``node_pools`` holds the preset's serving pool
narrowed to the planned instance type. A tier with reserved node groups (enterprise) gets the
preset's first node group on the planned instance type with one node per planned instance (its
reservation created for them); the model runs on their capacity class.

A tier that synthesizes can still be unsafe to run. :func:`plan_tier` refuses (every problem at
once, :class:`UnsafeTierError`) or fixes with a stated :class:`Change` each of these:

* Hugging Face weights with no token secret: gpufarm cannot tell offline whether a repo is
  gated, so `--hf-token-secret` or `--public-weights` must say (a repo id whose config.json was
  fetched without a token is public, and says so itself);
* an inherited FSx import from the preset's example bucket while the weights come from Hugging
  Face: the model store becomes Mountpoint for S3, which builds nothing without S3 weights;
* a `gpu_limit` with no room for a rolling update (a Deployment surges one replica,
  ``maxSurge: 1``; a LeaderWorkerSet replaces in place, ``maxSurge: 0``): the limit covers the
  most replicas plus the surge;
* no `name`: the plan would deploy as the preset's stack (``gpufarm-<preset>``); it gets
  `--tier-name`, else the model's name;
* the preset's Bedrock fallback and KEDA autoscaling silently dropped: `--bedrock-model-id` or
  `--no-fallback` must choose; on a preset that scales its models, the model scales from the
  planned replicas to `--max-replicas` (default twice that);
* pool, node group and capacity class names that name another GPU (``l40s``, ``h100-base``)
  are renamed after the planned GPU.
"""

from __future__ import annotations

import os
import re
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufarm.config import ConfigError, ModelStoreKind, PoolPurpose, TierConfig, load_preset, load_tier_file
from gpufarm.config.checks.images import RULE_PREFIX_MAX, max_root_length
from gpufarm.config.loader import preset_names
from gpufarm.config.model import Engine
from gpufarm.config.placeholders import classify, find_placeholders
from gpufarm.core.instances import GPU_FAMILIES
from gpufarm.core.s3 import split_s3_uri
from gpufarm.k8s.karpenter import efa_interfaces
from gpufarm.sizing.plan import GB, GIB, GPU_MEMORY_UTILIZATION, Plan, pod_resources

LONG_STARTUP_WEIGHTS_GB = 200.0
"""Weights above this many GB get STARTUP_TIMEOUT_LONG_SECONDS to download and load."""

STARTUP_TIMEOUT_LONG_SECONDS = 3600

_DTYPE = {"fp16": "float16", "bf16": "bfloat16"}

_GPU_NAMES = sorted({f.gpu_name for f in GPU_FAMILIES.values()}, key=len, reverse=True)

_WRITTEN_SECTIONS = {"extends", "name", "description", "models", "node_pools", "node_groups", "model_store"}


@dataclass(frozen=True, kw_only=True)
class WriteOptions:
    """What `gpufarm plan --write` was told about the model beyond its size.

    `public_weights` True states that a Hugging Face repo is not gated; `max_replicas` (default:
    twice the planned replicas) bounds autoscaling on a preset that scales its models.
    """

    name: str
    weights: str
    bedrock_model_id: str | None = None
    no_fallback: bool = False
    hf_token_secret: str | None = None
    public_weights: bool = False
    tier_name: str | None = None
    max_replicas: int | None = None


@dataclass(frozen=True)
class Problem:
    """Why the plan cannot be written as asked: the option to give, and what to do."""

    option: str
    message: str

    def __str__(self) -> str:
        return f"{self.option}: {self.message}"


class UnsafeTierError(ValueError):
    """The tier would synthesize but not work safely; every problem, each naming its option."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = problems


@dataclass(frozen=True)
class Change:
    """A field the written file sets differently from the preset, and why."""

    path: str
    value: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}: {self.value} ({self.why})"


@dataclass(frozen=True, kw_only=True)
class TierPlan:
    """The tier file's content, what it changes from the preset, and what it keeps."""

    document: dict[str, Any]
    changes: list[Change]
    inherited: list[str]
    dropped: list[str] = field(default_factory=list)


def _renamed(name: str, gpu: str) -> str:
    """`name` with the GPU it names replaced by `gpu` ('h100-base' -> 'h200-base')."""
    for other in _GPU_NAMES:
        if other != gpu and re.search(rf"(^|-){re.escape(other)}(-|$)", name):
            return re.sub(rf"(^|-){re.escape(other)}(-|$)", rf"\g<1>{gpu}\g<2>", name, count=1)
    return name


def _problems(base: TierConfig, plan: Plan, options: WriteOptions) -> list[Problem]:
    problems: list[Problem] = []
    hf = not options.weights.startswith("s3://")
    if hf and options.hf_token_secret is None and not options.public_weights:
        problems.append(
            Problem(
                "--hf-token-secret",
                f"the weights {options.weights!r} come from Hugging Face and gpufarm cannot tell offline "
                "whether the repo is gated; give --hf-token-secret SECRET (a Secrets Manager secret "
                "holding a token that can read it), or --public-weights if the repo is not gated",
            )
        )
    if not hf and options.hf_token_secret is not None:
        problems.append(
            Problem("--hf-token-secret", f"applies to Hugging Face weights only, got {options.weights!r}")
        )
    if hf and options.public_weights and options.hf_token_secret is not None:
        problems.append(Problem("--public-weights", "give it or --hf-token-secret, not both"))
    preset_targets = sorted({m.bedrock_target.model_id for m in base.models if m.bedrock_target})
    if options.bedrock_model_id is not None and options.no_fallback:
        problems.append(Problem("--no-fallback", "give it or --bedrock-model-id, not both"))
    elif base.fallback.enabled and options.bedrock_model_id is None and not options.no_fallback:
        problems.append(
            Problem(
                "--bedrock-model-id",
                f"the preset {base.name} falls back to Bedrock when the model is busy or down "
                f"({', '.join(preset_targets) or 'fallback.enabled'}); give --bedrock-model-id ID, or "
                "--no-fallback to write `bedrock: none`",
            )
        )
    elif options.no_fallback and base.fallback.guardrail.enabled:
        problems.append(
            Problem(
                "--no-fallback",
                f"the preset {base.name} applies a Bedrock guardrail (fallback.guardrail.enabled), "
                "which needs a model with a Bedrock fallback; give --bedrock-model-id ID",
            )
        )
    tier_name = options.tier_name or options.name
    if tier_name in preset_names():
        flag = "--tier-name" if options.tier_name else "--name"
        problems.append(
            Problem(
                flag,
                f"the tier would be named {tier_name!r} and deploy over the preset's stack "
                f"gpufarm-{tier_name}; give --tier-name NAME",
            )
        )
    scales = any(m.autoscaling for m in base.models)
    most = options.max_replicas
    if most is not None and not scales:
        problems.append(
            Problem(
                "--max-replicas",
                f"the preset {base.name} runs fixed replicas (no KEDA autoscaling); leave it out",
            )
        )
    elif most is not None and most < plan.chosen.replicas:
        problems.append(
            Problem(
                "--max-replicas",
                f"must be at least the planned replicas ({plan.chosen.replicas}), got {most}",
            )
        )
    return problems


def plan_tier(plan: Plan, options: WriteOptions) -> TierPlan:
    """The tier file for `plan` (see the module docstring); raises :class:`UnsafeTierError`."""
    base = load_preset(plan.tier)
    problems = _problems(base, plan, options)
    if problems:
        raise UnsafeTierError(problems)
    sizing, layout, model = plan.chosen, plan.chosen.layout, plan.model
    changes: list[Change] = []
    tier_name = options.tier_name or options.name
    changes.append(
        Change(
            "name",
            tier_name,
            f"stack gpufarm-{tier_name}; the preset's name would deploy over gpufarm-{base.name}",
        )
    )
    cache_prefix = _cache_prefix_for(base, tier_name)
    cpu, memory_gib = pod_resources(layout)
    entry: dict[str, Any] = {
        "name": options.name,
        "weights": options.weights,
        # The planned engine (`plan --engine`, default vllm), written even when it is the default.
        "engine": model.engine.value,
        "gpus": layout.tensor_parallel,
    }
    if options.hf_token_secret is not None:
        entry["hf_token_secret"] = options.hf_token_secret
    if layout.nodes > 1:
        entry["pipeline_parallel"] = layout.nodes
    entry["replicas"] = sizing.replicas
    entry |= {
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
    if options.weights.startswith("s3://"):
        entry["weights_gib"] = round(model.weights_bytes / GIB + 0.05, 1)
    if model.weights_bytes / GB > LONG_STARTUP_WEIGHTS_GB:
        entry["startup_timeout_seconds"] = STARTUP_TIMEOUT_LONG_SECONDS
    if model.engine is not Engine.VLLM:
        changes.append(
            Change("models[0].engine", model.engine.value, "--engine: the engine planned to serve it")
        )
    entry["bedrock"] = {"model_id": options.bedrock_model_id} if options.bedrock_model_id else "none"
    if options.no_fallback and base.fallback.enabled:
        changes.append(Change("models[0].bedrock", "none", "--no-fallback: no Bedrock answers for it"))
    most = sizing.replicas
    if any(m.autoscaling for m in base.models):
        most = options.max_replicas or 2 * sizing.replicas
        entry["autoscaling"] = {"min_replicas": sizing.replicas, "max_replicas": most}
        changes.append(
            Change(
                "models[0].autoscaling",
                f"{sizing.replicas} to {most} replicas",
                f"the preset {base.name} scales its models with KEDA; at least the planned replicas, "
                "at most --max-replicas (default twice that)",
            )
        )

    serving = next((p for p in base.node_pools if p.purpose is PoolPurpose.SERVING), base.node_pools[0])
    pool: dict[str, Any] = serving.model_dump(mode="json", exclude_unset=True)
    pool |= {"instance_families": [layout.family], "instance_types": [layout.instance_type]}
    pool_name = _renamed(serving.name, layout.gpu)
    if pool_name != serving.name:
        pool["name"] = pool_name
        changes.append(
            Change("node_pools[0].name", pool_name, f"was {serving.name}; the planned GPUs are {layout.gpu}")
        )
    # A Deployment's rolling update starts one more replica before it stops one (maxSurge 1); a
    # LeaderWorkerSet replaces a group in place (maxSurge 0).
    surge = 1 if layout.nodes == 1 else 0
    document: dict[str, Any] = {"extends": plan.tier, "name": tier_name}
    document["description"] = (
        f"{options.name} on {layout.describe()}, planned by gpufarm plan from the {plan.tier} preset"
    )
    dropped = [f"models {', '.join(m.name for m in base.models)}"]
    if base.node_groups:
        first = base.node_groups[0]
        group: dict[str, Any] = first.model_dump(mode="json", exclude_unset=True)
        capacity_class = _renamed(first.capacity_class_name, layout.gpu)
        group_name = _renamed(first.name, layout.gpu)
        group |= {
            "name": group_name,
            "instance_type": layout.instance_type,
            "nodes": sizing.instances,
            "efa": layout.nodes > 1 and efa_interfaces(layout.instance_type) is not None,
            "capacity_class": capacity_class,
            "capacity": {"kind": "create", "instance_count": sizing.instances},
        }
        if group_name != first.name:
            changes.append(
                Change(
                    "node_groups[0].name", group_name, f"was {first.name}; the planned GPUs are {layout.gpu}"
                )
            )
        if capacity_class != first.capacity_class_name:
            changes.append(
                Change(
                    "capacity_class",
                    capacity_class,
                    f"was {first.capacity_class_name}; the planned GPUs are {layout.gpu}",
                )
            )
        burst_replicas = max(most - sizing.replicas + surge, 1)
        burst_gpus = layout.instances_for(burst_replicas) * layout.gpus_per_instance
        pool |= {"capacity_class": capacity_class, "gpu_limit": burst_gpus}
        changes.append(
            Change(
                "node_pools[0].gpu_limit",
                str(burst_gpus),
                f"on-demand burst above the {sizing.instances} reserved instance(s): "
                f"{burst_replicas} more replica(s), "
                + ("the autoscaling maximum and " if most > sizing.replicas else "")
                + ("one for a rolling update" if surge else "room to replace one"),
            )
        )
        entry["capacity_class"] = capacity_class
        document["node_groups"] = [group]
        dropped += [f"node group {g.name}" for g in base.node_groups[1:]]
    else:
        limit = layout.instances_for(most + surge) * layout.gpus_per_instance
        pool["gpu_limit"] = limit
        entry["node_pool"] = pool.get("name", serving.name)
        changes.append(
            Change(
                "node_pools[0].gpu_limit",
                str(limit),
                f"{most} replica(s) at most"
                + (" plus 1 for a rolling update (maxSurge 1)" if surge else "")
                + f" on {layout.instance_type}",
            )
        )
    dropped += [f"node pool {p.name}" for p in base.node_pools if p.name != serving.name]
    document["node_pools"] = [pool]
    document["models"] = [entry]
    store = base.model_store
    if store.kind is ModelStoreKind.FSX_LUSTRE:
        if options.weights.startswith("s3://"):
            bucket, prefix = split_s3_uri(options.weights)
            parent = prefix.rstrip("/").rpartition("/")[0]
            import_path = f"s3://{bucket}/{parent + '/' if parent else ''}"
            document["model_store"] = {"fsx": {"import_path": import_path}}
            changes.append(Change("model_store.fsx.import_path", import_path, "the folder above the weights"))
        else:
            document["model_store"] = {"kind": ModelStoreKind.S3_MOUNTPOINT.value}
            inherited_path = store.fsx.import_path or ""
            example = classify(inherited_path) if inherited_path else None
            changes.append(
                Change(
                    "model_store.kind",
                    ModelStoreKind.S3_MOUNTPOINT.value,
                    f"the weights come from Hugging Face; the preset's FSx file system imports "
                    f"{inherited_path or 'nothing'}"
                    + (f" ({example})" if example else "")
                    + ", and Mountpoint builds nothing without S3 weights",
                )
            )
    if cache_prefix is not None:
        document["images"] = {"cache_prefix": cache_prefix}
        changes.append(
            Change(
                "images.cache_prefix",
                cache_prefix,
                f"the tier name {tier_name!r} is too long to head the image cache's rule prefixes "
                f"(ECR allows {RULE_PREFIX_MAX} characters); a shortened name with a hash of the whole",
            )
        )
    inherited = [key for key in base.model_dump(exclude_unset=True) if key not in _WRITTEN_SECTIONS]
    return TierPlan(document=document, changes=changes, inherited=inherited, dropped=dropped)


def _cache_prefix_for(base: TierConfig, tier_name: str) -> str | None:
    """An `images.cache_prefix` for a tier named `tier_name` whose name cannot head the cache's
    rule prefixes; None when the preset pulls no images through the cache, sets its own prefix,
    or the name fits.

    The default prefix is the tier name (`TierConfig.image_cache_prefix`), and ECR's repository
    prefix holds at most RULE_PREFIX_MAX characters with the upstream's part after it. The
    shortened prefix keeps the name's start and adds 4 hex digits of its CRC-32, so two long
    names with the same start still get two prefixes.
    """
    images = base.images
    if not images.pull_through_cache or images.cache_prefix:
        return None
    room = max_root_length()
    if len(tier_name) <= room:
        return None
    digest = f"{zlib.crc32(tier_name.encode()) & 0xFFFF:04x}"
    return f"{tier_name[: room - len(digest) - 1].rstrip('-._')}-{digest}"


def tier_document(plan: Plan, options: WriteOptions) -> dict[str, Any]:
    """The tier file's content (a mapping ready for YAML); raises :class:`UnsafeTierError`."""
    return plan_tier(plan, options).document


def review_items(tier: TierConfig) -> list[str]:
    """What to review in the written tier before a deploy: every documentation value it keeps,
    and the region it deploys to."""
    items = [p.describe() for p in find_placeholders(tier)]
    items.append(
        f"environment.region = {tier.environment.region!r}, availability_zones = "
        f"{', '.join(tier.environment.availability_zones)}: where the stack deploys"
    )
    return items


def render(plan: Plan, tier_plan: TierPlan, review: list[str]) -> str:
    """The tier file's text: a header saying where it comes from and what to review, then the YAML."""
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
        f"# Changed from the preset {plan.tier}:",
        *(f"#   - {c}" for c in tier_plan.changes),
        f"# Inherited from the preset unchanged: {', '.join(tier_plan.inherited)}.",
        f"# Dropped with the preset's lists: {'; '.join(tier_plan.dropped)}.",
        "# Review before a deploy:",
        *(f"#   - {item}" for item in review),
    ]
    return (
        "\n".join(header)
        + "\n"
        + yaml.safe_dump(tier_plan.document, sort_keys=False, default_flow_style=False)
    )


@dataclass(frozen=True, kw_only=True)
class Written:
    """A written tier file: the tier it loads as, what changed from the preset, what to review."""

    tier: TierConfig
    plan: TierPlan
    review: list[str]


def write_tier_file(plan: Plan, path: str | Path, options: WriteOptions) -> Written:
    """Write the tier file to `path` once it is safe and valid.

    Raises :class:`UnsafeTierError` before writing anything when the plan cannot be written
    safely as asked. The file is then written next to `path` under a temporary name, loaded with
    :func:`gpufarm.config.load_tier_file`, and renamed into place only when it is valid;
    otherwise :class:`ConfigError` is raised (naming `path`) and nothing is left behind.
    """
    target = Path(path)
    tier_plan = plan_tier(plan, options)
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".yaml", dir=target.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(yaml.safe_dump(tier_plan.document, sort_keys=False))
        try:
            tier = load_tier_file(temp)
        except ConfigError as exc:
            raise ConfigError(exc.issues, source=str(target)) from None
        review = review_items(tier)
        with open(temp, "w", encoding="utf-8") as out:
            out.write(render(plan, tier_plan, review))
        os.replace(temp, target)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return Written(tier=tier, plan=tier_plan, review=review)
