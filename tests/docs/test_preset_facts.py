"""Statements in the docs about the presets, rendered from the presets and the manifests they build.

Each fact is the sentence a doc must contain, written from the loaded preset (or from the
Kubernetes manifest gpufarm emits for it, or the synthesized template), not copied from the doc.
When a preset changes, the sentence changes and the test names the doc to correct; when a doc is
edited, the sentence must still be found. Whitespace is compared collapsed, so line wrapping is
free. To add one: write a function that renders the sentence and list it in FACTS.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpufarm.config import TierConfig, load_preset
from gpufarm.config.model import FallbackConfig, NodeGroupConfig
from gpufarm.core.instances import gpus_in
from gpufarm.estimate import gpu_capacity, monthly_cost
from gpufarm.k8s.lws import vllm_leader_worker_set
from tests.tiers.conftest import enterprise_dir, enterprise_template

__all__ = ["enterprise_dir", "enterprise_template"]

ROOT = Path(__file__).resolve().parents[2]
PRESETS = ("poc", "production", "enterprise")


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def _doc(name: str) -> str:
    return _flat((ROOT / name).read_text(encoding="utf-8"))


def _enterprise() -> TierConfig:
    return load_preset("enterprise")


def _groups() -> tuple[NodeGroupConfig, ...]:
    return tuple(_enterprise().node_groups)


# --------------------------------------------------------------------------- renderers


def _readme_reserved_base() -> list[str]:
    groups = _groups()
    (instance_type,) = {g.instance_type for g in groups}
    parts = [
        f"`{g.name}`: {g.nodes} node{'s' if g.nodes > 1 else ''}{' with EFA' if g.efa else ''} in "
        f"`{g.availability_zone}`"
        for g in groups
    ]
    return [f"a reserved base of {sum(g.nodes for g in groups)} `{instance_type}`", "; ".join(parts)]


def _enterprise_table_reserved_base() -> list[str]:
    return [
        f"node group `{g.name}`: {g.nodes} x `{g.instance_type}` in `{g.availability_zone}`, "
        f"{'EFA' if g.efa else 'no EFA'}"
        for g in _groups()
    ]


def _enterprise_capacity_mix() -> list[str]:
    out = []
    for g in _groups():
        out.append(f"{g.instance_type} x {g.nodes} in {g.availability_zone}")  # the diagram
        out.append(f"node group {g.name} {g.nodes} x {g.instance_type}, {g.availability_zone}")  # the text
    return out


def _multinode_model_placement() -> list[str]:
    tier = _enterprise()
    (model,) = [m for m in tier.models if m.pipeline_parallel > 1]
    assert model.node_pool is not None
    return [
        f"`{model.name}` on two nodes per replica (tensor {model.gpus} x pipeline "
        f"{model.pipeline_parallel}, node group `{model.node_pool}`)"
    ]


def _lws_rollout() -> dict[str, int]:
    tier = _enterprise()
    (model,) = [m for m in tier.models if m.pipeline_parallel > 1]
    manifest = vllm_leader_worker_set(
        model,
        tier.serving,
        node_selector={"gpufarm.io/pool": model.node_pool or ""},
        region=tier.environment.region,
    )
    rollout: dict[str, int] = manifest["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
    return rollout


def _lws_rollout_enterprise() -> list[str]:
    r = _lws_rollout()
    return [
        f"rollouts replace one group at a time in place (`maxSurge: {r['maxSurge']}`, "
        f"`maxUnavailable: {r['maxUnavailable']}`)"
    ]


def _lws_rollout_constructs() -> list[str]:
    r = _lws_rollout()
    return [
        f"rolling updates with `maxSurge: {r['maxSurge']}`, `maxUnavailable: {r['maxUnavailable']}`"
        " (one group at a time is removed, then recreated"
    ]


def _guardrail() -> list[str]:
    on = [t for t in PRESETS if load_preset(t).fallback.guardrail.enabled]
    off = [t for t in PRESETS if t not in on]
    assert (on, off) == (["enterprise"], ["poc", "production"]), "reword the sentence for the new split"
    return ["`fallback.guardrail.enabled: true` (on in the enterprise preset, off in poc and production)"]


def _every_preset_has_the_gateway() -> list[str]:
    assert all(load_preset(t).fallback.enabled for t in PRESETS), "no longer true of every preset"
    return ["While `fallback.enabled` is true (the default, and in every preset)"]


def _cost_table() -> list[str]:
    rows = []
    for name in PRESETS:
        tier = load_preset(name)
        estimate = monthly_cost(tier)
        gpus = gpu_capacity(tier)
        rows.append(
            f"| {name} | {estimate.total_usd:,.0f} | {estimate.expected_total_usd:,.0f} | "
            f"{estimate.peak_total_usd:,.0f} | {estimate.all_on_demand_at('ceiling'):,.0f} | "
            f"{estimate.saving_at('ceiling'):.1%} | "
            f"{gpus['reserved']} / {gpus['on-demand']} / {gpus['spot']} |"
        )
    return rows


def _gateway_timeout() -> list[str]:
    default = FallbackConfig.model_fields["request_timeout_seconds"].default
    poc, production, enterprise = (load_preset(t).fallback.request_timeout_seconds for t in PRESETS)
    assert poc == default and production == enterprise, "reword the row for the presets' values"
    return [
        f"| `fallback.request_timeout_seconds` | {default} "
        f"(production and enterprise presets: {production}) |"
    ]


def _gateway_replicas() -> list[str]:
    poc, production, enterprise = (load_preset(t).fallback.replicas for t in PRESETS)
    assert production == enterprise, "reword the sentence for the presets' values"
    return [f"({poc} in poc, {production} in the production and enterprise presets; at least 2)"]


def _secrets_endpoint() -> list[str]:
    having = [t for t in PRESETS if "secretsmanager" in load_preset(t).network.interface_endpoints]
    assert having == ["enterprise"], "reword the sentence for the presets that have the endpoint"
    return ["includes `secretsmanager` (the enterprise preset does; poc and production do not)"]


def _enterprise_on_demand_p_instances() -> list[str]:
    tier = _enterprise()
    (burst,) = [p for p in tier.node_pools if p.capacity_class == "h100"]
    (instance_type,) = burst.instance_types
    per_node = gpus_in(instance_type) or 0
    base = sum(g.nodes for g in tier.node_groups)
    burst_nodes = math.ceil(burst.gpu_limit / per_node)
    return [
        f"the preset's base ({base} nodes over {len(tier.node_groups)} node groups) plus a full burst "
        f"pool ({burst.gpu_limit} GPUs, {burst_nodes} nodes) is {base + burst_nodes} instances"
    ]


def _plan_keeps_the_first_node_group() -> list[str]:
    first, *others = _groups()
    return [
        f"the preset's first reserved node group (`{first.name}`) alone",
        *(f"(`{g.name}`) is dropped with the preset's models" for g in others),
    ]


def _production_system_nodes() -> list[str]:
    nodes = load_preset("production").cluster.system_nodes
    types = "`/`".join(nodes.instance_types)
    return [
        f"A managed node group `SystemNodes` runs the platform's own pods: {nodes.min_size} to "
        f"{nodes.max_size} nodes, desired {nodes.desired_size}, of `{types}` on-demand with AL2023, "
        f"{nodes.disk_gib} GiB encrypted gp3"
    ]


FACTS: list[tuple[str, Callable[[], list[str]]]] = [
    ("README.md", _readme_reserved_base),
    ("docs/enterprise.md", _enterprise_table_reserved_base),
    ("docs/enterprise.md", _enterprise_capacity_mix),
    ("docs/enterprise.md", _multinode_model_placement),
    ("docs/enterprise.md", _lws_rollout_enterprise),
    ("docs/constructs.md", _lws_rollout_constructs),
    ("docs/fallback.md", _guardrail),
    ("docs/calling-a-model.md", _every_preset_has_the_gateway),
    ("docs/cli.md", _cost_table),
    ("docs/fallback.md", _gateway_timeout),
    ("docs/fallback.md", _gateway_replicas),
    ("docs/fallback.md", _secrets_endpoint),
    ("docs/operations.md", _enterprise_on_demand_p_instances),
    ("docs/cli.md", _plan_keeps_the_first_node_group),
    ("docs/production.md", _production_system_nodes),
]


@pytest.mark.parametrize(("doc", "render"), FACTS, ids=[f"{d}:{r.__name__.lstrip('_')}" for d, r in FACTS])
def test_doc_states_the_preset(doc: str, render: Callable[[], list[str]]) -> None:
    text = _doc(doc)
    missing = [fact for fact in render() if _flat(fact) not in text]
    assert not missing, f"{doc} no longer says what the preset does; it should say: {missing}"


@pytest.mark.parametrize(
    "stale",
    [
        "a reserved base of 2 `p5.48xlarge`",
        "rollouts add a group before removing one (`maxSurge: 1`, `maxUnavailable: 0`)",
        "rolling updates with `maxSurge: 1`, `maxUnavailable: 0` (one spare group's GPUs)",
        "`fallback.guardrail.enabled: true` (off in both presets)",
        "node group `h100-base`: 2 x `p5.48xlarge` in `us-east-1a`",
        "| `fallback.request_timeout_seconds` | 600 (production preset: 900) |",
        "`network.interface_endpoints` includes `secretsmanager` (neither preset does)",
        "the preset's base plus a full burst pool is 5 instances, 960 vCPUs",
        "a rollout adds a group before removing one and waits for room",
    ],
)
def test_statements_that_were_false_are_gone(stale: str) -> None:
    docs = " ".join(
        _doc(n)
        for n in (
            "README.md",
            "docs/getting-started.md",
            "docs/calling-a-model.md",
            "docs/enterprise.md",
            "docs/constructs.md",
            "docs/fallback.md",
        )
    )
    assert _flat(stale) not in docs


def test_the_reserved_base_in_the_docs_is_the_one_the_template_reserves(
    enterprise_template: dict[str, Any],
) -> None:
    """The On-Demand Capacity Reservations of the synthesized enterprise template, as the docs say."""
    reservations = [
        r["Properties"]
        for r in enterprise_template["Resources"].values()
        if r["Type"] == "AWS::EC2::CapacityReservation"
    ]
    (instance_type,) = {r["InstanceType"] for r in reservations}
    total = sum(r["InstanceCount"] for r in reservations)
    assert _flat(f"a reserved base of {total} `{instance_type}`") in _doc("README.md")
    enterprise = _doc("docs/enterprise.md")
    for r in reservations:
        assert f"{r['InstanceCount']} x `{r['InstanceType']}` in `{r['AvailabilityZone']}`" in enterprise
