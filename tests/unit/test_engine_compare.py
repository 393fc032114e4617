"""`gpufarm plan --compare-engines`: each engine sized from its own anchors on the planned GPU.

The tables here are built so every figure can be worked out by hand (the arithmetic is in the
comments): one GPU (h100, 3,350 GB/s), anchors whose implied efficiency is a round number.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import pytest

from gpufarm.config.model import Engine
from gpufarm.pricing import load_prices
from gpufarm.sizing import Demand, ModelSpec, load_throughput_table, make_plan
from gpufarm.sizing.engine_compare import compare_engines
from gpufarm.sizing.throughput import ANCHOR_ENGINES, Anchor, GpuSpec, ThroughputTable

PRICES = load_prices()
SHIPPED = load_throughput_table()

# The model planned: 10B at fp16 (20 GB of weights), 10 layers x 8 KV heads x head dim 128 x 2
# bytes x 2 (key, value) = 40,960 bytes of KV cache per token.
MODEL = ModelSpec(params_b=10, precision="fp16", layers=10, kv_heads=8, head_dim=128)
WEIGHTS = 20e9
KV_PER_TOKEN = 40_960
# 432 users at 50 tokens/s each, 512 in / 512 out: a sequence holds 512 + 512 / 2 = 768 tokens
# on average while it decodes.
DEMAND = Demand(
    concurrency=432, context_length=1024, input_tokens=512, output_tokens=512, target_tokens_per_s=50
)
CONTEXT = 768
H100_BANDWIDTH = 3350e9


def anchor(anchor_id: str, engine: str, *, tokens_per_s: float, **overrides: Any) -> Anchor:
    """A one-GPU anchor at 1,000 GB/s whose 'ideal' replica makes 1,000 tokens/s at 10 sequences.

    4.995B fp16 parameters are 9.99 GB; 10 sequences x 1,000 tokens x 1,000 bytes (1 layer x 1 KV
    head x head dim 250 x 2 bytes x 2) are 0.01 GB: a step reads 10 GB, 0.01 s at 1,000 GB/s, so
    the replica would make 10 / 0.01 = 1,000 tokens/s at full bandwidth, and `tokens_per_s`
    measured implies an efficiency of tokens_per_s / 1,000.
    """
    values: dict[str, Any] = {
        "id": anchor_id,
        "gpu": "h100",
        "gpus": 1,
        "memory_bandwidth_gb_s": 1000,
        "precision": "fp16",
        "model": {
            "name": "org/test-model",
            "active_params_b": 4.995,
            "layers": 1,
            "kv_heads": 1,
            "head_dim": 250,
        },
        "concurrency": 10,
        "workload": {"input_tokens": 900, "output_tokens": 200},
        "output_tokens_per_s": tokens_per_s,
        "engine": engine,
        "software": "test",
        "source": "test",
        "date": dt.date(2026, 12, 2),
    }
    values.update(overrides)
    return Anchor.model_validate(values)


def table(*anchors: Anchor) -> ThroughputTable:
    """Only the h100; the plan's own efficiency 0.5, so the comparison's figures are the anchors' own."""
    return ThroughputTable(
        as_of=dt.date(2026, 12, 2),
        efficiency=0.5,
        gpus={"h100": GpuSpec(memory_bandwidth_gb_s=3350, precisions=["fp16", "fp8"], source="test")},
        anchors=list(anchors),
    )


def compare(*anchors: Anchor, engine: Engine = Engine.VLLM) -> Any:
    planned = ModelSpec(**{**MODEL.__dict__, "engine": engine})
    throughput = table(*anchors)
    plan = make_plan(planned, DEMAND, table=throughput, prices=PRICES)
    return plan, compare_engines(plan, table=throughput, prices=PRICES)


def row(comparison: Any, engine: Engine) -> Any:
    return next(r for r in comparison.rows if r.engine is engine)


def by_rate(efficiency: float) -> int:
    """Sequences that each still decode at 50 tokens/s on one h100: (B x eff / 50 - W) / (c x kv)."""
    return int((H100_BANDWIDTH * efficiency / 50 - WEIGHTS) // (CONTEXT * KV_PER_TOKEN))


def test_the_anchor_helper_implies_the_efficiency_it_says() -> None:
    assert anchor("a", "vllm", tokens_per_s=400).efficiency() == pytest.approx(0.4)


def test_each_engine_is_sized_with_its_own_anchors() -> None:
    plan, comparison = compare(anchor("v", "vllm", tokens_per_s=400), anchor("s", "sglang", tokens_per_s=300))
    assert plan.chosen.layout.instance_type == "p5.4xlarge"  # one h100, one replica per instance
    vllm, sglang = row(comparison, Engine.VLLM), row(comparison, Engine.SGLANG)
    assert (vllm.efficiency, sglang.efficiency) == (pytest.approx(0.4), pytest.approx(0.3))
    # vLLM: (3350e9 x 0.4 / 50 - 20e9) / (768 x 40960) = 6.8e9 / 31,457,280 = 216 sequences (the KV
    # budget, (80 GiB x 0.9 - 2 GiB - 20 GB) / (1024 x 40960) = 1,315, and 256 are more).
    # SGLang: (3350e9 x 0.3 / 50 - 20e9) / 31,457,280 = 0.1e9 / 31,457,280 = 3 sequences.
    assert (by_rate(0.4), by_rate(0.3)) == (216, 3)
    assert (vllm.sizing.sequences_per_replica, sglang.sizing.sequences_per_replica) == (216, 3)
    # Replicas: ceil(432 / 216) = 2 and ceil(432 / 3) = 144, one h100 each.
    assert (vllm.sizing.replicas, vllm.sizing.gpus) == (2, 2)
    assert (sglang.sizing.replicas, sglang.sizing.gpus) == (144, 144)
    # A replica at B sequences makes B / ((W + B x c x kv) / (bandwidth x eff)) tokens/s.
    step = (WEIGHTS + 216 * CONTEXT * KV_PER_TOKEN) / (H100_BANDWIDTH * 0.4)
    assert vllm.sizing.replica_tokens_per_s == pytest.approx(216 / step)
    hourly = PRICES.on_demand("p5.4xlarge")
    assert sglang.on_demand_monthly == pytest.approx(144 * hourly * PRICES.hours_per_month)


def test_anchors_measured_alike_compare_like_for_like() -> None:
    _, comparison = compare(anchor("v", "vllm", tokens_per_s=400), anchor("s", "sglang", tokens_per_s=300))
    assert comparison.comparable is True
    assert comparison.statement == (
        "the engines were measured alike (test-model fp16 on 1 x h100, 900 in / 200 out, 10 concurrent): "
        "the rows compare them like for like at those conditions"
    )


@pytest.mark.parametrize(
    ("overrides", "differs"),
    [
        ({"workload": {"input_tokens": 2000, "output_tokens": 200}}, "2000 in / 200 out, 10 concurrent"),
        ({"concurrency": 64}, "900 in / 200 out, 64 concurrent"),
    ],
    ids=["request-lengths", "concurrency"],
)
def test_anchors_measured_differently_are_not_ranked(overrides: dict[str, Any], differs: str) -> None:
    # The SGLang anchor implies its own efficiency either way; only the conditions differ.
    _, comparison = compare(
        anchor("v", "vllm", tokens_per_s=400), anchor("s", "sglang", tokens_per_s=300, **overrides)
    )
    assert comparison.comparable is False
    assert comparison.statement == (
        "not comparable: the anchors were measured under different conditions (vllm: v, test-model fp16 "
        f"on 1 x h100, 900 in / 200 out, 10 concurrent; sglang: s, test-model fp16 on 1 x h100, {differs}), "
        "so the rows are each engine's own estimate, not a ranking"
    )


def test_an_engine_without_an_anchor_gets_no_figures() -> None:
    _, comparison = compare(anchor("v", "vllm", tokens_per_s=400))
    trtllm = row(comparison, Engine.TRTLLM)
    assert (trtllm.anchors, trtllm.efficiency, trtllm.sizing, trtllm.on_demand_monthly) == (
        (),
        None,
        None,
        None,
    )
    assert trtllm.reason == "no measured anchor on h100 for a dense model"
    assert comparison.statement == (
        "only vllm has a measured anchor on h100 for a dense model: nothing to compare it with"
    )


@pytest.mark.parametrize(
    "elsewhere",
    [
        {"gpu": "a100"},
        {
            "model": {
                "name": "org/moe",
                "active_params_b": 4.995,
                "layers": 1,
                "kv_heads": 1,
                "head_dim": 250,
                "moe": True,
            }
        },
    ],
    ids=["another-gpu", "a-mixture-of-experts"],
)
def test_an_anchor_of_another_gpu_or_model_class_is_not_used(elsewhere: dict[str, Any]) -> None:
    _, comparison = compare(anchor("t", "trtllm", tokens_per_s=400, **elsewhere))
    assert [r.reason for r in comparison.rows] == ["no measured anchor on h100 for a dense model"] * 3
    assert comparison.statement.startswith("no engine has a measured anchor on h100 for a dense model")


def test_an_anchor_naming_no_engine_is_used_for_none() -> None:
    _, comparison = compare(anchor("n", "other", tokens_per_s=400))
    assert all(r.sizing is None for r in comparison.rows)


def test_the_plan_itself_uses_every_anchor_but_the_comparison_only_its_engine() -> None:
    # Without the table's `efficiency`, the plan's is the mean of all anchors: (0.4 + 0.2) / 2.
    throughput = table(anchor("v", "vllm", tokens_per_s=400), anchor("t", "trtllm", tokens_per_s=200))
    throughput = throughput.model_copy(update={"efficiency": None})
    plan = make_plan(MODEL, DEMAND, table=throughput, prices=PRICES)
    comparison = compare_engines(plan, table=throughput, prices=PRICES)
    assert plan.chosen.efficiency == pytest.approx(0.3)
    assert [r.efficiency for r in comparison.rows] == [pytest.approx(0.4), None, pytest.approx(0.2)]


def test_an_engine_whose_anchor_cannot_reach_the_rate_says_why() -> None:
    # At 0.25: one sequence reads 20 GB + 31.5 MB at 3350e9 x 0.25 bytes/s: 41.8 tokens/s < 50.
    _, comparison = compare(anchor("v", "vllm", tokens_per_s=400), anchor("s", "sglang", tokens_per_s=250))
    sglang = row(comparison, Engine.SGLANG)
    one = 1 / ((WEIGHTS + CONTEXT * KV_PER_TOKEN) / (H100_BANDWIDTH * 0.25))
    assert sglang.sizing is None
    assert (
        sglang.reason
        == f"one sequence decodes at {one:.1f} tokens/s on it, below the 50 tokens/s each user needs"
    )


def test_the_planned_engine_is_marked() -> None:
    _, comparison = compare(anchor("v", "vllm", tokens_per_s=400), engine=Engine.SGLANG)
    assert comparison.chosen is Engine.SGLANG
    assert comparison.to_json()["chosen"] == "sglang"


# --------------------------------------------------------------------------- the shipped anchors


def test_every_shipped_anchor_names_an_engine_and_its_software() -> None:
    assert all(a.engine in ANCHOR_ENGINES and a.software for a in SHIPPED.anchors)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_each_engine_has_a_sourced_shipped_anchor(engine: str) -> None:
    measured = [a for a in SHIPPED.anchors if a.engine == engine]
    assert measured and all(a.source.startswith("https://") for a in measured)


def test_a_replica_of_the_shipped_trtllm_anchor_on_h100_is_what_its_efficiency_implies() -> None:
    # 547 output tokens/s per GPU x 2 GPUs; Llama-2-70B at fp8 (68.98 GB), fp8 KV cache:
    # 2 x 80 x 8 x 128 x 1 = 163,840 bytes per token, 64 sequences x (2048 + 1024) tokens.
    trt = next(a for a in SHIPPED.anchors if a.id == "trtllm-llama-2-70b-fp8-h100x2")
    ideal = 64 / ((68.98e9 + 64 * 3072 * 163_840) / (2 * 3350e9))
    assert trt.efficiency() == pytest.approx(1094 / ideal)
    assert math.isclose(trt.output_tokens_per_s, 547 * 2)
