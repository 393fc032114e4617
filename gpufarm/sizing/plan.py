"""Size a model for serving: memory, GPU layout, replicas, tier and monthly cost. Pure, no AWS.

The rules, in the order :func:`make_plan` applies them (docs/cli.md has them with examples):

* **Weights memory** = parameters x bytes per parameter (fp16/bf16 2, fp8/int8 1, int4 0.5).
  A mixture-of-experts model holds all its parameters in memory.
* **KV cache per sequence** = 2 (key, value) x layers x KV heads x head dim x bytes per element
  (2 for a 16-bit cache, 1 with an fp8 cache) x context length: what one sequence holds at the
  full context length.
* **Fit.** A replica of G GPUs of M GiB gives vLLM G x M x GPU_MEMORY_UTILIZATION; it must hold
  the weights, RUNTIME_RESERVE_GIB_PER_GPU per GPU (activations, CUDA graphs, NCCL buffers),
  and the KV cache of the sequences it serves, each at the full context length. A layout that
  cannot hold one such sequence does not fit.
* **Per-user rate** r = the larger of `target_tokens_per_s` and output_tokens / latency_slo_s
  (a response of `output_tokens` within the latency SLO).
* **Sequences per replica** = the fewest of: what memory holds; the largest batch at which every
  sequence still decodes at r (:mod:`gpufarm.sizing.throughput`); MAX_SEQUENCES_PER_REPLICA.
* **Replicas** = ceil(concurrent users / sequences per replica). As a throughput formula: the
  users need users x r tokens/s, a replica delivers its sequences x r (it decodes each of them
  at r or faster), so replicas = ceil(users x r / replica throughput at that batch).
* **Layout.** Every priced GPU instance type of the catalog, with tensor parallelism 1, 2, 4 or 8
  up to its GPUs; a replica spans 2 to MAX_NODES_PER_REPLICA whole 8-GPU instances (pipeline
  parallel) only when no single instance holds it. Replicas smaller than an instance share it
  (instances = ceil(replicas / replicas per instance)). The layout chosen is the cheapest
  on-demand month; ties go to fewer GPUs per replica.
* **Tier** by total parameters: up to POC_MAX_PARAMS_B (32B) poc; up to PRODUCTION_MAX_PARAMS_B
  (200B) production; above, enterprise. The design's bands are <=32B, 70-200B and 700B+ MoE;
  models between 32B and 70B need tensor parallelism or an 80 GB GPU, which production
  provides, and models between 200B and 700B need the multi-GPU H100/H200 nodes of enterprise.
  A replica that spans nodes is enterprise whatever its size (multi-node serving is there).
* **Monthly cost** = instances x hourly price x the price table's hours per month, for each
  capacity type: reserved (an ODCR bills the on-demand rate; `gpufarm plan` prices no commitment:
  `gpufarm cost --commitment` does), on-demand and spot (measured,
  else on-demand x (1 - spot discount)), as :meth:`gpufarm.pricing.PriceTable.instance_monthly`
  prices them for `gpufarm cost` too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from gpufarm.config.model import TENSOR_PARALLEL_SIZES, Engine
from gpufarm.core.instances import GPU_FAMILIES, family_of, gpus_in, host_of
from gpufarm.pricing import PriceNotFoundError, PriceTable
from gpufarm.sizing.instances import pod_requests
from gpufarm.sizing.throughput import (
    BYTES_PER_PARAM,
    DecodeSetup,
    Precision,
    ThroughputTable,
    kv_bytes_per_token,
)

GB = 1e9
GIB = 2**30

GPU_MEMORY_UTILIZATION = 0.9
"""Share of GPU memory vLLM may use (its --gpu-memory-utilization; the written tier sets it)."""

RUNTIME_RESERVE_GIB_PER_GPU = 2.0
"""GPU memory per GPU kept for activations, CUDA graphs and communication buffers, GiB."""

MAX_SEQUENCES_PER_REPLICA = 256
"""Most sequences a replica is planned to batch (vLLM's --max-num-seqs default for most GPUs)."""

MAX_NODES_PER_REPLICA = 4
"""Most instances one replica may span (pipeline parallelism over a LeaderWorkerSet)."""

POC_MAX_PARAMS_B = 32.0
PRODUCTION_MAX_PARAMS_B = 200.0
TIERS = ("poc", "production", "enterprise")

KvCacheDtype = Literal["auto", "fp8"]


class PlanInputError(ValueError):
    """An input to the planner is invalid; the message names the command-line option."""


class NoLayoutError(LookupError):
    """No GPU layout holds the model, or none reaches the per-user rate."""


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """The model to serve.

    `moe_active_params_b` (default: none, a dense model) is the parameters a token activates in
    a mixture-of-experts model; `kv_cache_dtype` 'auto' (default) keeps the KV cache in the
    16-bit activation type, 'fp8' halves it. `engine` (default vLLM) is the engine that serves it:
    the tier file `--write` produces runs it, and ``--compare-engines`` marks it.
    """

    params_b: float
    precision: Precision
    layers: int
    kv_heads: int
    head_dim: int
    moe_active_params_b: float | None = None
    kv_cache_dtype: KvCacheDtype = "auto"
    engine: Engine = Engine.VLLM

    @property
    def active_params_b(self) -> float:
        """Parameters read per decoded token, billions."""
        return self.moe_active_params_b if self.moe_active_params_b is not None else self.params_b

    @property
    def bytes_per_param(self) -> float:
        """Bytes per weight at the model's precision."""
        return BYTES_PER_PARAM[self.precision]

    @property
    def kv_cache_bytes(self) -> float:
        """Bytes per KV-cache element."""
        return 1.0 if self.kv_cache_dtype == "fp8" else 2.0

    @property
    def weights_bytes(self) -> float:
        """GPU memory the weights take: parameters x bytes per parameter."""
        return weights_bytes(self.params_b, self.precision)

    @property
    def active_weight_bytes(self) -> float:
        """Weight bytes one decoded token reads."""
        return weights_bytes(self.active_params_b, self.precision)

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes one token of context takes."""
        return kv_bytes_per_token(
            layers=self.layers,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            kv_cache_bytes=self.kv_cache_bytes,
        )

    def kv_bytes_per_sequence(self, context_tokens: int) -> float:
        """KV-cache bytes of one sequence holding `context_tokens` tokens."""
        return kv_cache_bytes_per_sequence(
            layers=self.layers,
            kv_heads=self.kv_heads,
            head_dim=self.head_dim,
            kv_cache_bytes=self.kv_cache_bytes,
            context_tokens=context_tokens,
        )


@dataclass(frozen=True, kw_only=True)
class Demand:
    """The traffic: concurrent users, context, request shape and the speed each user needs."""

    concurrency: int
    context_length: int
    input_tokens: int
    output_tokens: int
    target_tokens_per_s: float | None = None
    latency_slo_s: float | None = None

    @property
    def per_user_tokens_per_s(self) -> float:
        """The decode rate each user needs: the target, or output tokens within the SLO (the larger)."""
        rates = [self.target_tokens_per_s] if self.target_tokens_per_s is not None else []
        if self.latency_slo_s is not None:
            rates.append(self.output_tokens / self.latency_slo_s)
        return max(rates)

    @property
    def mean_context_tokens(self) -> float:
        """Tokens a sequence holds on average while it decodes: input + output / 2."""
        return self.input_tokens + self.output_tokens / 2


@dataclass(frozen=True, kw_only=True)
class Layout:
    """How one replica sits on GPU instances."""

    instance_type: str
    gpu: str
    gpu_memory_gib: int
    gpus_per_instance: int
    tensor_parallel: int
    nodes: int = 1

    @property
    def family(self) -> str:
        """The instance family ('g6e')."""
        return family_of(self.instance_type)

    @property
    def gpus_per_replica(self) -> int:
        """GPUs one replica holds: tensor parallel x nodes."""
        return self.tensor_parallel * self.nodes

    @property
    def replicas_per_instance(self) -> int:
        """Replicas one instance holds (0 when a replica spans several instances)."""
        return self.gpus_per_instance // self.tensor_parallel if self.nodes == 1 else 0

    def instances_for(self, replicas: int) -> int:
        """Instances that `replicas` replicas need."""
        if self.nodes > 1:
            return replicas * self.nodes
        return math.ceil(replicas / self.replicas_per_instance)

    def describe(self) -> str:
        """'4 x l40s on g6e.12xlarge (TP 4)' or '16 x h100 on 2 x p5.48xlarge (TP 8, PP 2)'."""
        where = f"{self.nodes} x {self.instance_type}" if self.nodes > 1 else self.instance_type
        parallel = f"TP {self.tensor_parallel}" + (f", PP {self.nodes}" if self.nodes > 1 else "")
        return f"{self.gpus_per_replica} x {self.gpu} on {where} ({parallel})"


@dataclass(frozen=True, kw_only=True)
class Sizing:
    """A layout measured against the model and the demand."""

    layout: Layout
    usable_bytes: float
    reserve_bytes: float
    kv_budget_bytes: float
    sequences_by_memory: int
    sequences_by_rate: int
    sequences_per_replica: int
    limited_by: str
    replicas: int
    instances: int
    per_sequence_tokens_per_s: float
    replica_tokens_per_s: float
    bandwidth_gb_s: float
    efficiency: float
    on_demand_hourly: float

    @property
    def gpus(self) -> int:
        """GPUs the plan runs: instances x GPUs per instance."""
        return self.instances * self.layout.gpus_per_instance

    def to_json(self) -> dict[str, Any]:
        """The sizing as a JSON-ready mapping."""
        layout = self.layout
        return {
            "instance_type": layout.instance_type,
            "gpu": layout.gpu,
            "gpu_memory_gib": layout.gpu_memory_gib,
            "tensor_parallel": layout.tensor_parallel,
            "nodes_per_replica": layout.nodes,
            "gpus_per_replica": layout.gpus_per_replica,
            "replicas_per_instance": layout.replicas_per_instance,
            "usable_gb_per_replica": round(self.usable_bytes / GB, 2),
            "reserve_gb_per_replica": round(self.reserve_bytes / GB, 2),
            "kv_budget_gb_per_replica": round(self.kv_budget_bytes / GB, 2),
            "sequences_by_memory": self.sequences_by_memory,
            "sequences_by_rate": self.sequences_by_rate,
            "sequences_per_replica": self.sequences_per_replica,
            "limited_by": self.limited_by,
            "replicas": self.replicas,
            "instances": self.instances,
            "gpus": self.gpus,
            "per_sequence_tokens_per_s": round(self.per_sequence_tokens_per_s, 1),
            "replica_tokens_per_s": round(self.replica_tokens_per_s, 1),
            "memory_bandwidth_gb_s": self.bandwidth_gb_s,
            "efficiency": round(self.efficiency, 4),
            "on_demand_hourly_usd": round(self.on_demand_hourly, 4),
        }


@dataclass(frozen=True, kw_only=True)
class Plan:
    """The outcome: memory figures, the chosen layout, replicas, tier and monthly cost."""

    model: ModelSpec
    demand: Demand
    tier: str
    tier_reason: str
    chosen: Sizing
    alternatives: list[Sizing]
    monthly_cost_usd: dict[str, float]
    reserved_discount: float
    prices_as_of: str
    prices_region: str
    hours_per_month: float

    @property
    def weights_bytes(self) -> float:
        """GPU memory of the weights, bytes."""
        return self.model.weights_bytes

    @property
    def kv_bytes_per_sequence(self) -> float:
        """KV cache of one sequence at the full context length, bytes."""
        return self.model.kv_bytes_per_sequence(self.demand.context_length)

    def to_json(self) -> dict[str, Any]:
        """The plan as a JSON-ready mapping (the `gpufarm plan --json` document)."""
        model, demand = self.model, self.demand
        return {
            "model": {
                "params_b": model.params_b,
                "active_params_b": model.active_params_b,
                "moe": model.moe_active_params_b is not None,
                "precision": model.precision,
                "layers": model.layers,
                "kv_heads": model.kv_heads,
                "head_dim": model.head_dim,
                "kv_cache_dtype": model.kv_cache_dtype,
                "engine": model.engine.value,
            },
            "demand": {
                "concurrency": demand.concurrency,
                "context_length": demand.context_length,
                "input_tokens": demand.input_tokens,
                "output_tokens": demand.output_tokens,
                "target_tokens_per_s": demand.target_tokens_per_s,
                "latency_slo_s": demand.latency_slo_s,
                "per_user_tokens_per_s": round(demand.per_user_tokens_per_s, 3),
            },
            "memory": {
                "weights_bytes": self.weights_bytes,
                "weights_gb": round(self.weights_bytes / GB, 2),
                "kv_cache_bytes_per_token": model.kv_bytes_per_token,
                "kv_cache_bytes_per_sequence": self.kv_bytes_per_sequence,
                "kv_cache_gb_per_sequence": round(self.kv_bytes_per_sequence / GB, 2),
                "gpu_memory_utilization": GPU_MEMORY_UTILIZATION,
                "runtime_reserve_gib_per_gpu": RUNTIME_RESERVE_GIB_PER_GPU,
            },
            "layout": self.chosen.to_json(),
            "replicas": self.chosen.replicas,
            "tier": self.tier,
            "tier_reason": self.tier_reason,
            "monthly_cost_usd": {k: round(v, 2) for k, v in self.monthly_cost_usd.items()},
            "prices": {
                "as_of": self.prices_as_of,
                "region": self.prices_region,
                "reserved_discount": self.reserved_discount,
            },
            "alternatives": [
                {
                    "layout": s.layout.describe(),
                    "instance_type": s.layout.instance_type,
                    "tensor_parallel": s.layout.tensor_parallel,
                    "nodes_per_replica": s.layout.nodes,
                    "replicas": s.replicas,
                    "instances": s.instances,
                    "on_demand_monthly_usd": round(s.on_demand_hourly * self.hours_per_month, 2),
                }
                for s in self.alternatives
            ],
        }


# --------------------------------------------------------------------------- formulas


def weights_bytes(params_b: float, precision: Precision) -> float:
    """Bytes the weights of `params_b` billion parameters take at `precision`."""
    return params_b * GB * BYTES_PER_PARAM[precision]


def kv_cache_bytes_per_sequence(
    *, layers: int, kv_heads: int, head_dim: int, kv_cache_bytes: float, context_tokens: int
) -> float:
    """2 x layers x kv_heads x head_dim x bytes per element x context tokens."""
    return (
        kv_bytes_per_token(layers=layers, kv_heads=kv_heads, head_dim=head_dim, kv_cache_bytes=kv_cache_bytes)
        * context_tokens
    )


def tier_for(params_b: float, *, multi_node: bool = False) -> tuple[str, str]:
    """The tier a model of `params_b` billion parameters belongs to, and why."""
    if multi_node:
        return "enterprise", "a replica spans several nodes (multi-node serving is an enterprise feature)"
    if params_b <= POC_MAX_PARAMS_B:
        return "poc", f"{params_b:g}B parameters <= {POC_MAX_PARAMS_B:g}B"
    if params_b <= PRODUCTION_MAX_PARAMS_B:
        return (
            "production",
            f"{POC_MAX_PARAMS_B:g}B < {params_b:g}B parameters <= {PRODUCTION_MAX_PARAMS_B:g}B",
        )
    return "enterprise", f"{params_b:g}B parameters > {PRODUCTION_MAX_PARAMS_B:g}B"


def replicas_for(concurrency: int, sequences_per_replica: int) -> int:
    """ceil(concurrent users / sequences each replica serves)."""
    return math.ceil(concurrency / sequences_per_replica)


def candidate_layouts(prices: PriceTable, *, multi_node: bool = False) -> list[Layout]:
    """Every layout on priced instance types of the catalog (see the module docstring)."""
    out: list[Layout] = []
    for family in GPU_FAMILIES.values():
        for instance_type in family.instance_types():
            gpus = gpus_in(instance_type)
            if gpus is None or host_of(instance_type) is None or not _priced(prices, instance_type):
                continue
            if multi_node:
                if gpus == 8:
                    out += [
                        Layout(
                            instance_type=instance_type,
                            gpu=family.gpu_name,
                            gpu_memory_gib=family.gpu_memory_gib,
                            gpus_per_instance=gpus,
                            tensor_parallel=gpus,
                            nodes=nodes,
                        )
                        for nodes in range(2, MAX_NODES_PER_REPLICA + 1)
                    ]
                continue
            out += [
                Layout(
                    instance_type=instance_type,
                    gpu=family.gpu_name,
                    gpu_memory_gib=family.gpu_memory_gib,
                    gpus_per_instance=gpus,
                    tensor_parallel=tp,
                )
                for tp in TENSOR_PARALLEL_SIZES
                if tp <= gpus
            ]
    return out


def _priced(prices: PriceTable, instance_type: str) -> bool:
    try:
        prices.on_demand(instance_type)
    except PriceNotFoundError:
        return False
    return True


def size_layout(
    layout: Layout,
    model: ModelSpec,
    demand: Demand,
    *,
    table: ThroughputTable,
    prices: PriceTable,
    efficiency: float | None = None,
) -> Sizing | str:
    """The sizing of `layout`, or why it cannot serve the model (a sentence).

    `efficiency` (default: the table's for the layout's GPU) is the share of peak bandwidth
    decoding reaches; ``--compare-engines`` passes each engine's own.
    """
    spec = table.gpus.get(layout.gpu)
    if spec is None:
        return f"the throughput table has no figures for GPU {layout.gpu!r}"
    if model.precision not in spec.precisions:
        return f"{layout.gpu} does not serve {model.precision}"
    gpus = layout.gpus_per_replica
    usable = gpus * layout.gpu_memory_gib * GIB * GPU_MEMORY_UTILIZATION
    reserve = gpus * RUNTIME_RESERVE_GIB_PER_GPU * GIB
    kv_budget = usable - reserve - model.weights_bytes
    per_sequence = model.kv_bytes_per_sequence(demand.context_length)
    by_memory = int(kv_budget // per_sequence) if kv_budget > 0 else 0
    if by_memory < 1:
        return (
            f"{gpus} x {layout.gpu_memory_gib} GiB x {GPU_MEMORY_UTILIZATION:g} cannot hold the weights, "
            f"the runtime reserve and one sequence of {demand.context_length} tokens"
        )
    if efficiency is None:
        efficiency = table.efficiency_of(layout.gpu)
    setup = DecodeSetup(
        gpus=gpus,
        bandwidth_gb_s=spec.memory_bandwidth_gb_s,
        efficiency=efficiency,
        weight_bytes=model.active_weight_bytes,
        context_tokens=demand.mean_context_tokens,
        kv_per_token=model.kv_bytes_per_token,
    )
    rate = demand.per_user_tokens_per_s
    by_rate = setup.max_batch(rate)
    if by_rate < 1:
        return (
            f"one sequence decodes at {setup.at(1).per_sequence_tokens_per_s:.1f} tokens/s on it, "
            f"below the {rate:g} tokens/s each user needs"
        )
    sequences = min(by_memory, by_rate, MAX_SEQUENCES_PER_REPLICA)
    limited_by = "memory" if sequences == by_memory else "rate" if sequences == by_rate else "max-sequences"
    decode = setup.at(sequences)
    replicas = replicas_for(demand.concurrency, sequences)
    instances = layout.instances_for(replicas)
    return Sizing(
        layout=layout,
        usable_bytes=usable,
        reserve_bytes=reserve,
        kv_budget_bytes=kv_budget,
        sequences_by_memory=by_memory,
        sequences_by_rate=by_rate,
        sequences_per_replica=sequences,
        limited_by=limited_by,
        replicas=replicas,
        instances=instances,
        per_sequence_tokens_per_s=decode.per_sequence_tokens_per_s,
        replica_tokens_per_s=decode.replica_tokens_per_s,
        bandwidth_gb_s=spec.memory_bandwidth_gb_s,
        efficiency=efficiency,
        on_demand_hourly=instances * prices.on_demand(layout.instance_type),
    )


def monthly_costs(sizing: Sizing, prices: PriceTable, *, reserved_discount: float) -> dict[str, float]:
    """Monthly cost of the plan's instances for each capacity type (see the module docstring)."""
    return prices.instance_monthly(
        sizing.layout.instance_type, sizing.instances, reserved_discount=reserved_discount
    )


def make_plan(
    model: ModelSpec,
    demand: Demand,
    *,
    table: ThroughputTable,
    prices: PriceTable,
    reserved_discount: float = 0.0,
    alternatives: int = 4,
) -> Plan:
    """Size `model` for `demand`: the cheapest layout that fits (see the module docstring).

    Raises :class:`NoLayoutError` when no layout holds the model or none reaches the per-user
    rate, naming the closest reasons.
    """
    check_inputs(model, demand)
    sized, reasons = _size_all(candidate_layouts(prices), model, demand, table=table, prices=prices)
    multi_node = False
    if not sized:
        sized, more = _size_all(
            candidate_layouts(prices, multi_node=True), model, demand, table=table, prices=prices
        )
        reasons.update(more)
        multi_node = bool(sized)
    if not sized:
        raise NoLayoutError(_no_layout_message(model, demand, reasons))
    ranked = sorted(
        sized,
        key=lambda s: (
            round(s.on_demand_hourly, 6),
            s.layout.gpus_per_replica,
            s.layout.instance_type,
            s.layout.tensor_parallel,
        ),
    )
    chosen = ranked[0]
    tier, reason = tier_for(model.params_b, multi_node=multi_node)
    return Plan(
        model=model,
        demand=demand,
        tier=tier,
        tier_reason=reason,
        chosen=chosen,
        alternatives=ranked[1 : 1 + alternatives],
        monthly_cost_usd=monthly_costs(chosen, prices, reserved_discount=reserved_discount),
        reserved_discount=reserved_discount,
        prices_as_of=prices.as_of.isoformat(),
        prices_region=prices.region,
        hours_per_month=prices.hours_per_month,
    )


def _size_all(
    layouts: list[Layout], model: ModelSpec, demand: Demand, *, table: ThroughputTable, prices: PriceTable
) -> tuple[list[Sizing], dict[str, str]]:
    sized: list[Sizing] = []
    reasons: dict[str, str] = {}
    for layout in layouts:
        result = size_layout(layout, model, demand, table=table, prices=prices)
        if isinstance(result, Sizing):
            sized.append(result)
        else:
            reasons[layout.describe()] = result
    return sized, reasons


def _no_layout_message(model: ModelSpec, demand: Demand, reasons: dict[str, str]) -> str:
    biggest = max(
        (layout for layout in reasons),
        key=lambda d: int(d.split(" x ", 1)[0]),
        default=None,
    )
    head = (
        f"no GPU layout serves a {model.params_b:g}B model at {model.precision} "
        f"({model.weights_bytes / GB:.1f} GB of weights, "
        f"{model.kv_bytes_per_sequence(demand.context_length) / GB:.2f} GB of KV cache per "
        f"{demand.context_length}-token sequence) at {demand.per_user_tokens_per_s:g} tokens/s per user"
    )
    if biggest is None:
        return f"{head}: no priced GPU instance type is known"
    return f"{head}; the largest, {biggest}: {reasons[biggest]}"


# --------------------------------------------------------------------------- input checks


def check_inputs(model: ModelSpec, demand: Demand) -> None:
    """Raise :class:`PlanInputError` for the first invalid input, naming its option."""
    if not model.params_b > 0:
        raise PlanInputError(f"--params-b must be above 0 (billions of parameters), got {model.params_b:g}")
    active = model.moe_active_params_b
    if active is not None and not 0 < active <= model.params_b:
        raise PlanInputError(
            "--moe-active-params-b must be above 0 and at most --params-b "
            f"({model.params_b:g}), got {active:g}"
        )
    for flag, value in (
        ("--layers", model.layers),
        ("--kv-heads", model.kv_heads),
        ("--head-dim", model.head_dim),
    ):
        if value < 1:
            raise PlanInputError(f"{flag} must be at least 1, got {value}")
    if not 256 <= demand.context_length <= 1_048_576:
        raise PlanInputError(
            "--context-length must be 256 to 1048576 tokens (vLLM's --max-model-len), "
            f"got {demand.context_length}"
        )
    if demand.concurrency < 1:
        raise PlanInputError(f"--concurrency must be at least 1 (concurrent users), got {demand.concurrency}")
    for flag, tokens in (("--input-tokens", demand.input_tokens), ("--output-tokens", demand.output_tokens)):
        if tokens < 1:
            raise PlanInputError(f"{flag} must be at least 1, got {tokens}")
    if demand.input_tokens + demand.output_tokens > demand.context_length:
        raise PlanInputError(
            f"--input-tokens + --output-tokens ({demand.input_tokens + demand.output_tokens}) must fit in "
            f"--context-length ({demand.context_length})"
        )
    if demand.target_tokens_per_s is None and demand.latency_slo_s is None:
        raise PlanInputError("give --target-tokens-per-s and/or --latency-slo-s (the speed each user needs)")
    for flag, number in (
        ("--target-tokens-per-s", demand.target_tokens_per_s),
        ("--latency-slo-s", demand.latency_slo_s),
    ):
        if number is not None and not number > 0:
            raise PlanInputError(f"{flag} must be above 0, got {number:g}")


def head_dim_of(*, head_dim: int | None, hidden_size: int | None, heads: int | None) -> int:
    """--head-dim, or --hidden-size / --heads; raises :class:`PlanInputError` when neither or both."""
    derived = hidden_size is not None or heads is not None
    if head_dim is not None and derived:
        raise PlanInputError("give either --head-dim or --hidden-size and --heads, not both")
    if head_dim is not None:
        return head_dim
    if hidden_size is None or heads is None:
        raise PlanInputError("give --head-dim, or --hidden-size and --heads to derive it")
    if heads < 1 or hidden_size < 1:
        raise PlanInputError(f"--hidden-size and --heads must be at least 1, got {hidden_size} and {heads}")
    if hidden_size % heads:
        raise PlanInputError(f"--hidden-size ({hidden_size}) must be a multiple of --heads ({heads})")
    return hidden_size // heads


def kv_heads_of(*, kv_heads: int | None, heads: int | None) -> int:
    """--kv-heads, else --heads (multi-head attention); raises :class:`PlanInputError` without either."""
    if kv_heads is None:
        if heads is None:
            raise PlanInputError("--kv-heads is required (key/value heads per layer, e.g. 8 for Llama-3-70B)")
        return heads
    if heads is not None and kv_heads >= 1 and heads % kv_heads:
        raise PlanInputError(f"--kv-heads ({kv_heads}) must divide --heads ({heads}) evenly")
    return kv_heads


_NAME_CHARS = re.compile(r"[^a-z0-9]+")


def model_name_from(weights: str) -> str:
    """A DNS-label model name from a weights reference: 'meta-llama/Llama-3.3-70B' -> 'llama-3-3-70b'."""
    last = weights.rstrip("/").rsplit("/", 1)[-1].lower()
    name = _NAME_CHARS.sub("-", last).strip("-")
    name = name.lstrip("0123456789-") or "model"
    return name[:40].rstrip("-")


def pod_resources(layout: Layout) -> tuple[int, int]:
    """(cpu, memory_gib) requests of one replica's pod on the layout's instance type."""
    return pod_requests(
        layout.instance_type, gpus_per_pod=layout.tensor_parallel, gpus_per_instance=layout.gpus_per_instance
    )
