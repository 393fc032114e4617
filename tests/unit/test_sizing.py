"""`gpufarm plan`'s arithmetic: memory, fit, the decode formula, replicas, tiers, cost, tier files.

Expected figures are worked out by hand here (the arithmetic is in the comments), not by calling
the planner's own helpers.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest
import yaml

from gpufarm.config import ConfigError, load_tier_file
from gpufarm.core.instances import HOSTS
from gpufarm.pricing import load_prices
from gpufarm.sizing import (
    Demand,
    Layout,
    ModelSpec,
    NoLayoutError,
    Plan,
    PlanInputError,
    Sizing,
    ThroughputTableError,
    kv_cache_bytes_per_sequence,
    load_throughput_table,
    make_plan,
    replicas_for,
    tier_for,
    weights_bytes,
)
from gpufarm.sizing.instances import pod_requests
from gpufarm.sizing.plan import (
    candidate_layouts,
    check_inputs,
    head_dim_of,
    kv_heads_of,
    model_name_from,
    size_layout,
)
from gpufarm.sizing.throughput import DecodeSetup, GpuSpec, ThroughputTable
from gpufarm.sizing.tierfile import WriteOptions, tier_document, write_tier_file

PRICES = load_prices()
SHIPPED = load_throughput_table()
GIB = 2**30

# A table with a round efficiency, so rates can be worked out by hand.
HALF = ThroughputTable(
    as_of=dt.date(2026, 11, 30),
    efficiency=0.5,
    gpus={
        "h100": GpuSpec(memory_bandwidth_gb_s=3350, precisions=["fp16", "bf16", "fp8", "int4"], source="test")
    },
)
ONE_H100 = Layout(
    instance_type="p5.4xlarge", gpu="h100", gpu_memory_gib=80, gpus_per_instance=1, tensor_parallel=1
)

LLAMA_70B = {"layers": 80, "kv_heads": 8, "head_dim": 128}
LLAMA_8B = {"layers": 32, "kv_heads": 8, "head_dim": 128}


def demand(**overrides: object) -> Demand:
    """8192-token context, 2048 in / 512 out, 20 tokens/s per user, 10 users unless overridden."""
    values: dict[str, object] = {
        "concurrency": 10,
        "context_length": 8192,
        "input_tokens": 2048,
        "output_tokens": 512,
        "target_tokens_per_s": 20.0,
    }
    values.update(overrides)
    return Demand(**values)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- memory


def test_70b_at_fp16_needs_140_gb_of_weights() -> None:
    assert weights_bytes(70, "fp16") == 140e9


def test_70b_at_int4_needs_35_gb_of_weights() -> None:
    assert weights_bytes(70, "int4") == 35e9


def test_70b_at_fp8_needs_70_gb_of_weights() -> None:
    assert weights_bytes(70, "fp8") == 70e9


def test_kv_cache_of_llama_3_70b_at_8192_tokens_is_2_68_gb() -> None:
    # 2 x 80 layers x 8 KV heads x 128 head dim x 2 bytes x 8192 tokens = 2,684,354,560 bytes.
    per_sequence = kv_cache_bytes_per_sequence(
        layers=80, kv_heads=8, head_dim=128, kv_cache_bytes=2, context_tokens=8192
    )
    assert per_sequence == 2_684_354_560
    assert round(per_sequence / 1e9, 2) == 2.68


def test_fp8_kv_cache_halves_the_kv_cache() -> None:
    model = ModelSpec(params_b=70, precision="fp8", kv_cache_dtype="fp8", **LLAMA_70B)
    assert model.kv_bytes_per_sequence(8192) == 1_342_177_280


def test_moe_holds_every_expert_but_reads_only_the_active_ones() -> None:
    model = ModelSpec(
        params_b=671, precision="fp8", moe_active_params_b=37, layers=61, kv_heads=1, head_dim=576
    )
    assert (model.weights_bytes, model.active_weight_bytes) == (671e9, 37e9)


# --------------------------------------------------------------------------- fit


def test_70b_at_fp16_does_not_fit_one_80_gb_gpu() -> None:
    model = ModelSpec(params_b=70, precision="fp16", **LLAMA_70B)
    # 80 GiB x 0.9 = 77.3 GB < 140 GB of weights.
    result = size_layout(ONE_H100, model, demand(), table=HALF, prices=PRICES)
    assert result == (
        "1 x 80 GiB x 0.9 cannot hold the weights, the runtime reserve and one sequence of 8192 tokens"
    )


def test_70b_at_int4_fits_one_80_gb_gpu_with_14_sequences() -> None:
    model = ModelSpec(params_b=70, precision="int4", **LLAMA_70B)
    result = size_layout(ONE_H100, model, demand(), table=HALF, prices=PRICES)
    assert isinstance(result, Sizing)
    # usable 80 x 2^30 x 0.9 = 77,309,411,328; reserve 2 x 2^30 = 2,147,483,648; weights 35e9:
    # KV budget 40,161,927,680 / 2,684,354,560 per sequence = 14.96 -> 14.
    assert result.kv_budget_bytes == 77_309_411_328 - 2_147_483_648 - 35e9
    assert result.sequences_by_memory == 14


def test_the_chosen_layout_of_70b_at_fp16_spans_more_than_one_gpu() -> None:
    model = ModelSpec(params_b=70, precision="fp16", **LLAMA_70B)
    plan = make_plan(model, demand(), table=SHIPPED, prices=PRICES)
    assert plan.chosen.layout.gpus_per_replica * plan.chosen.layout.gpu_memory_gib * GIB * 0.9 > 140e9


# --------------------------------------------------------------------------- decode formula and replicas


def test_memory_limits_an_8b_replica_on_one_h100() -> None:
    model = ModelSpec(params_b=8, precision="fp16", **LLAMA_8B)
    result = size_layout(ONE_H100, model, demand(concurrency=120), table=HALF, prices=PRICES)
    assert isinstance(result, Sizing)
    # KV per sequence: 2 x 32 x 8 x 128 x 2 x 8192 = 2^30. Budget: 72 GiB - 2 GiB - 16e9 bytes
    # = 59,162,918,912 bytes -> 55 sequences.
    # Rate: 3350e9 x 0.5 / 20 - 16e9 = 67.75e9 bytes of room; a sequence reads
    # (2048 + 512 / 2) x 131,072 = 301,989,888 bytes per step -> 224 sequences.
    assert (result.sequences_by_memory, result.sequences_by_rate) == (55, 224)
    assert (result.sequences_per_replica, result.limited_by) == (55, "memory")


def test_replicas_are_users_over_sequences_per_replica() -> None:
    model = ModelSpec(params_b=8, precision="fp16", **LLAMA_8B)
    result = size_layout(ONE_H100, model, demand(concurrency=120), table=HALF, prices=PRICES)
    assert isinstance(result, Sizing)
    # ceil(120 / 55) = 3 replicas, one p5.4xlarge each.
    assert (result.replicas, result.instances) == (3, 3)
    assert result.on_demand_hourly == pytest.approx(3 * 6.88)


def test_the_per_user_rate_limits_a_replica() -> None:
    model = ModelSpec(params_b=8, precision="fp16", **LLAMA_8B)
    result = size_layout(
        ONE_H100, model, demand(concurrency=10, target_tokens_per_s=100.0), table=HALF, prices=PRICES
    )
    assert isinstance(result, Sizing)
    # 3350e9 x 0.5 / 100 - 16e9 = 0.75e9 bytes of room / 301,989,888 = 2.48 -> 2 sequences;
    # ceil(10 users / 2) = 5 replicas.
    assert (result.sequences_per_replica, result.limited_by, result.replicas) == (2, "rate", 5)


def test_the_replica_decodes_each_sequence_at_least_at_the_rate() -> None:
    model = ModelSpec(params_b=8, precision="fp16", **LLAMA_8B)
    result = size_layout(ONE_H100, model, demand(target_tokens_per_s=100.0), table=HALF, prices=PRICES)
    assert isinstance(result, Sizing)
    # Step at 2 sequences: (16e9 + 2 x 301,989,888) / 1.675e12 = 9.913 ms -> 100.88 tokens/s each.
    assert result.per_sequence_tokens_per_s == pytest.approx(1.675e12 / (16e9 + 2 * 301_989_888))
    assert result.replica_tokens_per_s == pytest.approx(2 * result.per_sequence_tokens_per_s)


def test_a_rate_one_sequence_cannot_reach_rejects_the_layout() -> None:
    model = ModelSpec(params_b=8, precision="fp16", **LLAMA_8B)
    result = size_layout(ONE_H100, model, demand(target_tokens_per_s=200.0), table=HALF, prices=PRICES)
    # One sequence: 1.675e12 / (16e9 + 301,989,888) = 102.75 tokens/s.
    assert result == "one sequence decodes at 102.7 tokens/s on it, below the 200 tokens/s each user needs"


def test_a_latency_slo_sets_the_rate_from_the_output_tokens() -> None:
    assert demand(target_tokens_per_s=None, latency_slo_s=16.0).per_user_tokens_per_s == 32.0


def test_the_stricter_of_rate_and_latency_slo_applies() -> None:
    assert demand(target_tokens_per_s=20.0, latency_slo_s=16.0).per_user_tokens_per_s == 32.0


def test_replicas_for_rounds_up() -> None:
    assert (replicas_for(100, 30), replicas_for(90, 30), replicas_for(1, 30)) == (4, 3, 1)


def test_decode_setup_max_batch_is_the_largest_batch_at_the_rate() -> None:
    setup = DecodeSetup(
        gpus=2, bandwidth_gb_s=1000, efficiency=0.5, weight_bytes=10e9, context_tokens=1000, kv_per_token=1e6
    )
    # 1e12 bytes/s / 10 tokens/s = 100e9 bytes per step; (100e9 - 10e9) / 1e9 per sequence = 90.
    assert setup.max_batch(10.0) == 90
    assert setup.at(90).per_sequence_tokens_per_s == pytest.approx(10.0)


# --------------------------------------------------------------------------- throughput table


def test_the_nim_anchor_implies_its_efficiency() -> None:
    anchor = next(a for a in SHIPPED.anchors if a.id == "nim-llama-3.3-70b-fp8-h100x2")
    # Bytes per step at 50 sequences: 70.6e9 + 50 x (5000 + 500/2) x 327,680 = 156.616e9.
    # At full bandwidth (2 x 3350e9) that is 2139.05 tokens/s; 814.37 measured.
    assert anchor.efficiency() == pytest.approx(814.37 * 156.616e9 / (50 * 6.7e12))


def test_the_table_efficiency_is_the_mean_of_its_anchors() -> None:
    assert SHIPPED.derived_efficiency() == pytest.approx(
        sum(a.efficiency() for a in SHIPPED.anchors) / len(SHIPPED.anchors)
    )


def test_a_gpu_efficiency_overrides_the_table() -> None:
    table = HALF.model_copy(
        update={"gpus": {"h100": HALF.gpus["h100"].model_copy(update={"efficiency": 0.25})}}
    )
    assert (table.efficiency_of("h100"), table.efficiency_of("l40s")) == (0.25, 0.5)


def test_every_shipped_anchor_is_sourced_and_dated() -> None:
    assert all(a.source.startswith("https://") and a.date for a in SHIPPED.anchors)


def test_every_catalog_gpu_has_a_sourced_bandwidth() -> None:
    from gpufarm.core.instances import GPU_FAMILIES

    assert {f.gpu_name for f in GPU_FAMILIES.values()} <= set(SHIPPED.gpus)


# One anchor; `engine` and `software` filled in per case.
_ANCHOR_TABLE = (
    "as_of: 2026-11-30\ngpus:\n  h100: {{memory_bandwidth_gb_s: 3350, precisions: [fp8], source: x}}\n"
    "anchors:\n  - id: a\n    gpu: h100\n    gpus: 1\n    memory_bandwidth_gb_s: 3350\n    precision: fp8\n"
    "    model: {{name: m, active_params_b: 8, layers: 32, kv_heads: 8, head_dim: 128}}\n"
    "    concurrency: 8\n    workload: {{input_tokens: 100, output_tokens: 100}}\n"
    "    output_tokens_per_s: 500\n    engine: {engine}{software}\n    source: x\n    date: 2026-11-30\n"
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- a list\n", "must hold a mapping, got a list"),
        (
            "as_of: 2026-11-30\ngpus:\n  h100: {memory_bandwidth_gb_s: 3350, precisions: [fp8], source: x}\n",
            "is not a valid throughput table: (top): needs `efficiency` or at least one entry under "
            "`anchors` to derive it from",
        ),
        (
            "as_of: 2026-11-30\nefficiency: 0.5\ngpus:\n"
            "  h100: {memory_bandwidth_gb_s: 0, precisions: [fp8], source: x}\n",
            "is not a valid throughput table: gpus.h100.memory_bandwidth_gb_s: "
            "Input should be greater than 0",
        ),
        ("as_of: [\n", "is not valid YAML"),
        (
            _ANCHOR_TABLE.format(engine="vLLM 0.31.0", software="\n    software: vLLM 0.31.0"),
            "is not a valid throughput table: anchors.0.engine: must be vllm, sglang, trtllm, or other "
            "when the source names none of them, got 'vLLM 0.31.0'",
        ),
        (
            _ANCHOR_TABLE.format(engine="vllm", software=""),
            "is not a valid throughput table: anchors.0.software: Field required",
        ),
    ],
    ids=["not-a-mapping", "no-calibration", "zero-bandwidth", "bad-yaml", "anchor-engine", "anchor-software"],
)
def test_an_invalid_throughput_table_is_reported(tmp_path: Path, text: str, expected: str) -> None:
    file = tmp_path / "t.yaml"
    file.write_text(text)
    with pytest.raises(ThroughputTableError) as caught:
        load_throughput_table(file)
    assert expected in str(caught.value)


def test_a_missing_throughput_table_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ThroughputTableError) as caught:
        load_throughput_table(tmp_path / "none.yaml")
    assert str(caught.value) == (
        f"cannot read the throughput table {str(tmp_path / 'none.yaml')!r}: No such file or directory"
    )


# --------------------------------------------------------------------------- tiers


@pytest.mark.parametrize(
    ("params_b", "tier"),
    [
        (8, "poc"),
        (32, "poc"),
        (32.5, "production"),
        (70, "production"),
        (200, "production"),
        (201, "enterprise"),
    ],
)
def test_tier_boundaries(params_b: float, tier: str) -> None:
    assert tier_for(params_b)[0] == tier


def test_a_700b_moe_is_enterprise() -> None:
    model = ModelSpec(
        params_b=671, precision="fp8", moe_active_params_b=37, layers=61, kv_heads=1, head_dim=576
    )
    assert make_plan(model, demand(), table=SHIPPED, prices=PRICES).tier == "enterprise"


def test_a_replica_that_spans_nodes_is_enterprise() -> None:
    assert tier_for(70, multi_node=True)[0] == "enterprise"


def test_a_model_no_instance_holds_spans_nodes() -> None:
    # 1000B at fp16 = 2 TB; the largest instance (8 x 179 GiB x 0.9 = 1.38 TB) cannot hold it.
    model = ModelSpec(params_b=1000, precision="fp16", layers=100, kv_heads=8, head_dim=128)
    plan = make_plan(model, demand(), table=SHIPPED, prices=PRICES)
    assert (plan.chosen.layout.nodes > 1, plan.tier) == (True, "enterprise")


def test_a_model_nothing_holds_raises() -> None:
    model = ModelSpec(params_b=20000, precision="fp16", layers=100, kv_heads=8, head_dim=128)
    with pytest.raises(NoLayoutError, match=r"^no GPU layout serves a 20000B model at fp16 \(40000.0 GB"):
        make_plan(model, demand(), table=SHIPPED, prices=PRICES)


# --------------------------------------------------------------------------- layouts and cost


def test_the_cheapest_layout_is_chosen() -> None:
    model = ModelSpec(params_b=70, precision="fp8", **LLAMA_70B)
    plan = make_plan(model, demand(concurrency=100), table=SHIPPED, prices=PRICES)
    assert all(plan.chosen.on_demand_hourly <= s.on_demand_hourly for s in plan.alternatives)


def test_candidates_are_priced_catalog_types_with_tensor_parallel_up_to_their_gpus() -> None:
    layouts = {(x.instance_type, x.tensor_parallel) for x in candidate_layouts(PRICES)}
    assert {("g6e.xlarge", 1), ("g6e.12xlarge", 4), ("p5.48xlarge", 8)} <= layouts
    assert ("g6e.xlarge", 2) not in layouts
    assert not any(t.startswith("p5e.") for t, _ in layouts)  # no price in the table


def test_replicas_smaller_than_an_instance_share_it() -> None:
    layout = Layout(
        instance_type="g6e.12xlarge", gpu="l40s", gpu_memory_gib=48, gpus_per_instance=4, tensor_parallel=2
    )
    assert (layout.replicas_per_instance, layout.instances_for(3)) == (2, 2)


def test_monthly_cost_per_capacity_type() -> None:
    model = ModelSpec(params_b=8, precision="fp16", **LLAMA_8B)
    plan = make_plan(model, demand(concurrency=120), table=HALF, prices=PRICES, reserved_discount=0.3)
    hourly = PRICES.on_demand(plan.chosen.layout.instance_type) * plan.chosen.instances
    assert plan.monthly_cost_usd == pytest.approx(
        {"on-demand": hourly * 730, "spot": hourly * 0.6 * 730, "reserved": hourly * 0.7 * 730}
    )


def test_plan_lists_capacity_types_in_the_cost_reports_order() -> None:
    # One CAPACITY_TYPES (gpufarm.pricing) for `gpufarm plan` and `gpufarm cost`.
    model = ModelSpec(params_b=8, precision="fp16", **LLAMA_8B)
    plan = make_plan(model, demand(concurrency=120), table=HALF, prices=PRICES)
    assert list(plan.monthly_cost_usd) == ["reserved", "on-demand", "spot"]


def test_pod_requests_leave_room_for_the_system() -> None:
    # g6e.12xlarge: 48 vCPU, 384 GiB, 4 GPUs; a 2-GPU pod gets half: 24 - 1 vCPU, 192 x 0.85 GiB.
    assert pod_requests("g6e.12xlarge", gpus_per_pod=2, gpus_per_instance=4) == (23, 163)


def test_pod_requests_need_the_hosts_vcpus_and_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpufarm.core import instances

    # Every catalog size has its host now; a type whose host were unknown is refused.
    monkeypatch.delitem(instances.HOSTS, "g7e.4xlarge")
    with pytest.raises(
        ValueError, match=r"^instance type 'g7e\.4xlarge' has no vCPUs and memory in the instance catalog$"
    ):
        pod_requests("g7e.4xlarge", gpus_per_pod=1, gpus_per_instance=1)
    with pytest.raises(ValueError, match=r"^instance type 'm7i\.xlarge' is not in the GPU catalog "):
        pod_requests("m7i.xlarge", gpus_per_pod=1, gpus_per_instance=1)


def test_every_priced_gpu_type_of_the_catalog_has_a_shape_or_is_not_offered() -> None:
    offered = {x.instance_type for x in candidate_layouts(PRICES)}
    assert offered <= set(HOSTS)


# --------------------------------------------------------------------------- input checks


@pytest.mark.parametrize(
    ("model", "need", "message"),
    [
        ({"params_b": 0}, {}, "--params-b must be above 0 (billions of parameters), got 0"),
        (
            {"moe_active_params_b": 80},
            {},
            "--moe-active-params-b must be above 0 and at most --params-b (70), got 80",
        ),
        ({"layers": 0}, {}, "--layers must be at least 1, got 0"),
        ({"kv_heads": 0}, {}, "--kv-heads must be at least 1, got 0"),
        ({"head_dim": -1}, {}, "--head-dim must be at least 1, got -1"),
        (
            {},
            {"context_length": 100},
            "--context-length must be 256 to 1048576 tokens (vLLM's --max-model-len), got 100",
        ),
        ({}, {"concurrency": 0}, "--concurrency must be at least 1 (concurrent users), got 0"),
        ({}, {"input_tokens": 0}, "--input-tokens must be at least 1, got 0"),
        ({}, {"output_tokens": 0}, "--output-tokens must be at least 1, got 0"),
        (
            {},
            {"input_tokens": 8000, "output_tokens": 512},
            "--input-tokens + --output-tokens (8512) must fit in --context-length (8192)",
        ),
        (
            {},
            {"target_tokens_per_s": None},
            "give --target-tokens-per-s and/or --latency-slo-s (the speed each user needs)",
        ),
        ({}, {"target_tokens_per_s": 0.0}, "--target-tokens-per-s must be above 0, got 0"),
        ({}, {"latency_slo_s": -1.0}, "--latency-slo-s must be above 0, got -1"),
    ],
    ids=[
        "params",
        "moe-active",
        "layers",
        "kv-heads",
        "head-dim",
        "context",
        "concurrency",
        "input",
        "output",
        "tokens-exceed-context",
        "no-rate",
        "rate",
        "latency",
    ],
)
def test_invalid_inputs_are_named(model: dict[str, object], need: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"params_b": 70.0, "precision": "fp16", **LLAMA_70B, **model}
    with pytest.raises(PlanInputError) as caught:
        check_inputs(ModelSpec(**values), demand(**need))  # type: ignore[arg-type]
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"head_dim": 128, "hidden_size": 8192, "heads": 64},
            "give either --head-dim or --hidden-size and --heads, not both",
        ),
        ({}, "give --head-dim, or --hidden-size and --heads to derive it"),
        ({"hidden_size": 8192}, "give --head-dim, or --hidden-size and --heads to derive it"),
        ({"hidden_size": 8192, "heads": 60}, "--hidden-size (8192) must be a multiple of --heads (60)"),
        ({"hidden_size": 8192, "heads": 0}, "--hidden-size and --heads must be at least 1, got 8192 and 0"),
    ],
    ids=["both", "neither", "no-heads", "not-a-multiple", "zero-heads"],
)
def test_invalid_head_dim_inputs(args: dict[str, int], message: str) -> None:
    with pytest.raises(PlanInputError) as caught:
        head_dim_of(
            head_dim=args.get("head_dim"), hidden_size=args.get("hidden_size"), heads=args.get("heads")
        )
    assert str(caught.value) == message


def test_head_dim_is_hidden_size_over_heads() -> None:
    assert head_dim_of(head_dim=None, hidden_size=8192, heads=64) == 128


def test_kv_heads_default_to_heads() -> None:
    assert kv_heads_of(kv_heads=None, heads=64) == 64


@pytest.mark.parametrize(
    ("kv_heads", "heads", "message"),
    [
        (None, None, "--kv-heads is required (key/value heads per layer, e.g. 8 for Llama-3-70B)"),
        (7, 64, "--kv-heads (7) must divide --heads (64) evenly"),
    ],
    ids=["missing", "not-a-divisor"],
)
def test_invalid_kv_heads(kv_heads: int | None, heads: int | None, message: str) -> None:
    with pytest.raises(PlanInputError) as caught:
        kv_heads_of(kv_heads=kv_heads, heads=heads)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("weights", "name"),
    [
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3-3-70b-instruct"),
        ("s3://bucket/models/Qwen3-8B/", "qwen3-8b"),
        ("org/3b-model", "b-model"),
    ],
)
def test_model_name_from_weights(weights: str, name: str) -> None:
    assert model_name_from(weights) == name


# --------------------------------------------------------------------------- tier files

LLAMA_OPTIONS = WriteOptions(
    name="llama",
    weights="meta-llama/Llama-3.3-70B-Instruct",
    hf_token_secret="gpufarm/hf-token",
    bedrock_model_id="us.meta.llama3-3-70b-instruct-v1:0",
)


def _production_plan() -> Plan:
    model = ModelSpec(params_b=70, precision="fp8", **LLAMA_70B)
    return make_plan(model, demand(concurrency=100), table=SHIPPED, prices=PRICES)


def _dsv3_plan() -> Plan:
    model = ModelSpec(
        params_b=671, precision="fp8", moe_active_params_b=37, layers=61, kv_heads=1, head_dim=576
    )
    return make_plan(model, demand(concurrency=64), table=SHIPPED, prices=PRICES)


def test_the_tier_file_extends_the_tier_with_one_model_on_its_pool() -> None:
    plan = _production_plan()
    document = tier_document(plan, LLAMA_OPTIONS)
    layout = plan.chosen.layout
    assert document["extends"] == "production"
    assert [m["name"] for m in document["models"]] == ["llama"]
    assert document["models"][0]["node_pool"] == document["node_pools"][0]["name"] == "serving"
    assert document["node_pools"][0]["instance_types"] == [layout.instance_type]


def test_the_pool_has_room_for_the_most_replicas_and_a_rolling_update() -> None:
    plan = _production_plan()
    document = tier_document(plan, LLAMA_OPTIONS)
    sizing = plan.chosen
    # production scales its models: at most twice the planned replicas, plus the one replica a
    # Deployment's rolling update adds before it removes one (maxSurge 1).
    most = 2 * sizing.replicas
    assert document["models"][0]["autoscaling"] == {"min_replicas": sizing.replicas, "max_replicas": most}
    assert document["node_pools"][0]["gpu_limit"] == (
        sizing.layout.instances_for(most + 1) * sizing.layout.gpus_per_instance
    )


def test_s3_weights_on_fsx_set_the_import_path_and_size() -> None:
    plan = _production_plan()
    options = WriteOptions(
        name="llama", weights="s3://my-models/meta/Llama-3.3-70B/", bedrock_model_id="us.meta.x-v1:0"
    )
    document = tier_document(plan, options)
    # 70e9 bytes / 2^30 = 65.19 GiB, rounded up to a tenth.
    assert document["models"][0]["weights_gib"] == 65.2
    assert document["model_store"] == {"fsx": {"import_path": "s3://my-models/meta/"}}


def test_the_written_tier_file_loads(tmp_path: Path) -> None:
    plan = _production_plan()
    written = write_tier_file(plan, tmp_path / "t.yaml", LLAMA_OPTIONS)
    tier = written.tier
    assert tier == load_tier_file(tmp_path / "t.yaml")
    assert (tier.name, tier.models[0].gpus, tier.models[0].max_num_seqs) == (
        "llama",
        plan.chosen.layout.tensor_parallel,
        plan.chosen.sequences_per_replica,
    )


def test_an_enterprise_tier_file_reserves_the_replicas() -> None:
    plan = _dsv3_plan()
    options = WriteOptions(
        name="dsv3", weights="deepseek-ai/DeepSeek-V3", bedrock_model_id="us.deepseek.r1-v1:0",
        public_weights=True,
    )  # fmt: skip
    document = tier_document(plan, options)
    group = document["node_groups"][0]
    assert (group["nodes"], group["capacity"]) == (
        plan.chosen.instances,
        {"kind": "create", "instance_count": plan.chosen.instances},
    )
    assert (
        document["models"][0]["capacity_class"]
        == group["capacity_class"]
        == document["node_pools"][0]["capacity_class"]
    )


def test_an_invalid_tier_file_is_not_written(tmp_path: Path) -> None:
    # A tier name the config refuses (not a DNS label) reaches the loader: nothing is written.
    options = WriteOptions(
        name="dsv3", weights="deepseek-ai/DeepSeek-V3", bedrock_model_id="us.deepseek.r1-v1:0",
        public_weights=True, tier_name="DeepSeek_V3",
    )  # fmt: skip
    with pytest.raises(ConfigError) as caught:
        write_tier_file(_dsv3_plan(), tmp_path / "e.yaml", options)
    assert caught.value.render().splitlines() == [
        f"invalid {tmp_path / 'e.yaml'}:",
        "  - name: must be a lowercase DNS label (a-z, 0-9, '-', starting with a letter, at most 40 "
        "characters), got 'DeepSeek_V3'",
    ]
    assert list(tmp_path.iterdir()) == []


def test_the_tier_file_header_says_where_it_comes_from(tmp_path: Path) -> None:
    plan = _production_plan()
    write_tier_file(plan, tmp_path / "t.yaml", LLAMA_OPTIONS)
    text = (tmp_path / "t.yaml").read_text()
    assert text.startswith("# Written by `gpufarm plan`: a 70B model at fp8, 100 concurrent users")
    assert yaml.safe_load(text)["extends"] == "production"


def test_sequences_fit_the_written_max_num_seqs_bounds() -> None:
    plan = _production_plan()
    assert 1 <= plan.chosen.sequences_per_replica <= 256
    assert math.isfinite(plan.chosen.replica_tokens_per_s)


def test_the_throughput_table_example_in_the_docs_is_a_valid_table(tmp_path: Path) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    section = docs.split("### The throughput table", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "t.yaml").write_text(example)
    table = load_throughput_table(tmp_path / "t.yaml")
    assert [a.id for a in table.anchors] == ["ours-qwen3-32b-fp8-l40s-x4"]
