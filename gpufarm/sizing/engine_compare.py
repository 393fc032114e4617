"""Compare serving engines on the planned layout, from their measured anchors only (`--compare-engines`).

For each engine of :class:`gpufarm.config.model.Engine`, the anchors that measured that engine
on the plan's GPU, for a model of the plan's class (dense, or a mixture of experts), fix the
engine's efficiency: the mean of what they imply (:meth:`gpufarm.sizing.throughput.Anchor.efficiency`).
The planned layout (same instance type, tensor and pipeline parallelism) is then sized with that
efficiency, exactly as the plan itself is (:func:`gpufarm.sizing.plan.size_layout`): sequences
per replica, replica throughput, replicas, instances, GPUs and the on-demand month.

An engine without such an anchor gets no figures ("no measured anchor"): an efficiency measured
with one engine is never used for another, and an anchor of another GPU or model class is not
used either. Where the anchors behind two engines were measured on different models,
precisions, GPUs per replica, request lengths or concurrency, the rows are each engine's own
estimate, and :attr:`EngineComparison.comparable` is False: the output says so instead of
ranking them. Why: docs/decisions/0064-engine-throughput-anchors.md.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from gpufarm.config.model import Engine
from gpufarm.pricing import PriceTable
from gpufarm.sizing.plan import Plan, Sizing, size_layout
from gpufarm.sizing.throughput import Anchor, ThroughputTable


@dataclass(frozen=True, kw_only=True)
class EngineRow:
    """One engine on the planned layout: its anchors, and the sizing they imply (or why none)."""

    engine: Engine
    anchors: tuple[Anchor, ...]
    efficiency: float | None
    sizing: Sizing | None
    reason: str | None
    on_demand_monthly: float | None

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready mapping."""
        sizing = self.sizing
        return {
            "engine": self.engine.value,
            "anchors": [a.id for a in self.anchors],
            "efficiency": round(self.efficiency, 4) if self.efficiency is not None else None,
            "sequences_per_replica": sizing.sequences_per_replica if sizing else None,
            "replica_tokens_per_s": round(sizing.replica_tokens_per_s, 1) if sizing else None,
            "replicas": sizing.replicas if sizing else None,
            "instances": sizing.instances if sizing else None,
            "gpus": sizing.gpus if sizing else None,
            "on_demand_monthly_usd": (
                round(self.on_demand_monthly, 2) if self.on_demand_monthly is not None else None
            ),
            "reason": self.reason,
        }


@dataclass(frozen=True, kw_only=True)
class EngineComparison:
    """Every engine sized on the plan's layout, the planned engine first marked by `chosen`."""

    layout_description: str
    gpu: str
    model_class: str
    chosen: Engine
    rows: tuple[EngineRow, ...]
    comparable: bool
    statement: str

    def to_json(self) -> dict[str, Any]:
        """The comparison as a JSON-ready mapping (`engines` in `gpufarm plan --json`)."""
        return {
            "layout": self.layout_description,
            "gpu": self.gpu,
            "model_class": self.model_class,
            "chosen": self.chosen.value,
            "comparable": self.comparable,
            "statement": self.statement,
            "rows": [row.to_json() for row in self.rows],
        }


def conditions(anchor: Anchor) -> str:
    """What an anchor measured: 'Llama-2-70b fp8 on 2 x h100, 2048 in / 2048 out, 64 concurrent'."""
    model = anchor.model.name.rsplit("/", 1)[-1]
    return (
        f"{model} {anchor.precision} on {anchor.gpus} x {anchor.gpu}, {anchor.workload.input_tokens} in / "
        f"{anchor.workload.output_tokens} out, {anchor.concurrency} concurrent"
    )


def compare_engines(plan: Plan, *, table: ThroughputTable, prices: PriceTable) -> EngineComparison:
    """Size the plan's layout with each engine's own anchors (see the module docstring)."""
    layout = plan.chosen.layout
    moe = plan.model.moe_active_params_b is not None
    model_class = "mixture-of-experts" if moe else "dense"
    rows: list[EngineRow] = []
    for engine in Engine:
        anchors = tuple(table.anchors_of(engine, gpu=layout.gpu, moe=moe))
        if not anchors:
            rows.append(
                EngineRow(
                    engine=engine,
                    anchors=(),
                    efficiency=None,
                    sizing=None,
                    reason=f"no measured anchor on {layout.gpu} for a {model_class} model",
                    on_demand_monthly=None,
                )
            )
            continue
        efficiency = statistics.fmean(a.efficiency() for a in anchors)
        sized = size_layout(
            layout, plan.model, plan.demand, table=table, prices=prices, efficiency=efficiency
        )
        if isinstance(sized, str):
            rows.append(
                EngineRow(
                    engine=engine,
                    anchors=anchors,
                    efficiency=efficiency,
                    sizing=None,
                    reason=sized,
                    on_demand_monthly=None,
                )
            )
            continue
        rows.append(
            EngineRow(
                engine=engine,
                anchors=anchors,
                efficiency=efficiency,
                sizing=sized,
                reason=None,
                on_demand_monthly=sized.on_demand_hourly * prices.hours_per_month,
            )
        )
    comparable, statement = _statement(rows, gpu=layout.gpu, model_class=model_class)
    return EngineComparison(
        layout_description=layout.describe(),
        gpu=layout.gpu,
        model_class=model_class,
        chosen=plan.model.engine,
        rows=tuple(rows),
        comparable=comparable,
        statement=statement,
    )


def _statement(rows: list[EngineRow], *, gpu: str, model_class: str) -> tuple[bool, str]:
    """Whether the measured rows compare like for like, and the sentence that says so."""
    measured = [row for row in rows if row.anchors]
    if not measured:
        return False, (
            f"no engine has a measured anchor on {gpu} for a {model_class} model: nothing to compare; "
            "add anchors measured on your GPUs with --throughput-table (docs/cli.md, The throughput table)"
        )
    if len(measured) == 1:
        only = measured[0]
        return False, (
            f"only {only.engine.value} has a measured anchor on {gpu} for a {model_class} model: "
            "nothing to compare it with"
        )
    distinct = {conditions(a) for row in measured for a in row.anchors}
    if len(distinct) == 1:
        return True, (
            f"the engines were measured alike ({distinct.pop()}): the rows compare them like for like "
            "at those conditions"
        )
    return False, (
        "not comparable: the anchors were measured under different conditions ("
        + "; ".join(f"{row.engine.value}: {_described(row)}" for row in measured)
        + "), so the rows are each engine's own estimate, not a ranking"
    )


def _described(row: EngineRow) -> str:
    return ", ".join(f"{a.id}, {conditions(a)}" for a in row.anchors)
