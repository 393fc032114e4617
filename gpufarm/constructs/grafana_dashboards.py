"""The Grafana dashboards of a tier, built with Grafana's own SDK (`grafana-foundation-sdk`).

Pure functions: a tier config in, dashboard JSON (as the Grafana HTTP API's
`POST /api/dashboards/db` takes it under `dashboard`) out, so the panels and their queries can be
read and tested without synthesizing a stack. :class:`~gpufarm.constructs.grafana.ManagedGrafana`
provisions them into the workspace.

Three dashboards:

* **models** (Prometheus): time to first token, time per output token, tokens/s, queue, KV cache
  and prefix-cache hits, replicas, per model. Each panel has a target per engine the tier runs,
  with that engine's series (:mod:`gpufarm.core.engine_metrics`); a series an engine lacks is
  left out and the panel's description says so. The managed scraper adds `model` (the pod's
  `gpufarm.io/model` label) and `pod` to every engine's series
  (:func:`gpufarm.k8s.observability.scrape_configuration`).
* **GPU fleet** (Prometheus): utilization, framebuffer memory, temperature and XID errors, per node
  and per pool. The series are the DCGM exporter's default counters
  (`../shared/upstream-ref/dcgm-exporter@4.6.0-metrics.json`); the scraper adds `node`, and the
  exporter names the pod holding each GPU (`namespace`, `pod`). No scraped series carries the
  pool, so a pool's panels select the pods of the workloads placed on it
  (:func:`gpufarm.core.placement.placement_of`), as their names are known at synth time.
* **gateway**: the fallback rate per model and the Bedrock spend of the last hour from the
  gateway's own counters (:mod:`gpufarm.k8s.demand`, scraped into the workspace), with the same
  expressions as the FallbackRateHigh and BedrockSpendHigh alerts
  (:mod:`gpufarm.k8s.alerting`); from CloudWatch, the time the gateway route takes against the
  direct routes, Bedrock tokens and Bedrock's month-to-date charges. Without the gateway's
  counters in Prometheus the fallback rate is estimated from CloudWatch instead. LiteLLM's own
  Prometheus metrics are not used: LiteLLM made that integration an enterprise feature
  (BerriAI/litellm pull request 5769, "enforce prometheus metrics as enterprise feature").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import cloudwatch as cw
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.builders import timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import cloudwatch as cwm
from grafana_foundation_sdk.models import dashboard as dm

from gpufarm.config.model import LoadBalancerKind, TierConfig
from gpufarm.core.engine_metrics import EngineMetrics, Role, all_engine_metrics, models_by_engine
from gpufarm.core.fallback import bedrock_model_ids
from gpufarm.core.names import workload_name
from gpufarm.core.placement import placement_of
from gpufarm.k8s.alerting import (
    FALLBACK_WINDOW,
    GatewayObjective,
    bedrock_spend_expression,
    fallback_rate_expression,
    gateway_objective,
)

PROMETHEUS_UID = "gpufarm-amp"
"""UID of the Prometheus data source (the tier's AMP workspace) the provisioner creates."""
CLOUDWATCH_UID = "gpufarm-cloudwatch"
"""UID of the CloudWatch data source the provisioner creates."""
FOLDER_UID = "gpufarm"
"""UID of the folder that holds the dashboards."""

MODELS_UID = "gpufarm-models"
GPU_FLEET_UID = "gpufarm-gpu-fleet"
GATEWAY_UID = "gpufarm-gateway"

RATE_WINDOW = "5m"
"""Window of every rate(): at least four scrapes at the slowest interval the scraper allows (60 s
would do for the default 30 s; 5m keeps panels smooth at 300 s too)."""

BILLING_REGION = "us-east-1"
"""CloudWatch's billing metrics are published in US East (N. Virginia) only ("Billing metric data
is stored in the US East (N. Virginia) Region", Billing user guide, "Creating a billing alarm")."""

_PROMETHEUS = dm.DataSourceRef(type_val="prometheus", uid=PROMETHEUS_UID)
_CLOUDWATCH = dm.DataSourceRef(type_val="cloudwatch", uid=CLOUDWATCH_UID)
_MODEL_FILTER = 'model=~"$model"'


@dataclass(frozen=True, kw_only=True)
class GatewayTargets:
    """What the gateway dashboard reads from CloudWatch.

    `load_balancer` is the load balancer's full name (`app/<name>/<id>`), `gateway` the gateway
    target group's full name and `models` each model's (or share's) target group full name, as
    :meth:`~gpufarm.constructs.load_balancer.LoadBalancer.target_group_full_names` gives them;
    they may be CDK tokens, which CloudFormation resolves in the provisioner's properties.
    """

    kind: LoadBalancerKind
    load_balancer: str
    gateway: str
    models: Mapping[str, str]


def _json(built: cogbuilder.Builder[dm.Dashboard]) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(json.dumps(built.build(), cls=JSONEncoder, sort_keys=True))
    return loaded


def _prom(expr: str, legend: str, ref: str) -> prom.Dataquery:
    return prom.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(_PROMETHEUS).range()


def _panel(title: str, unit: str, description: str, *targets: cogbuilder.Builder[Any]) -> timeseries.Panel:
    panel = timeseries.Panel().title(title).description(description).unit(unit).height(8).span(12)
    for target in targets:
        panel = panel.with_target(target)
    return panel


def _quantile(q: float, metric: str, by: str) -> str:
    return (
        f"histogram_quantile({q}, sum by ({by}, le) "
        f"(rate({metric}_bucket{{{_MODEL_FILTER}}}[{RATE_WINDOW}])))"
    )


def _model_variable(tier: TierConfig) -> gd.CustomVariable:
    names = [m.name for m in tier.models]
    return (
        gd.CustomVariable("model")
        .label("Model")
        .values(",".join(names))
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .current(dm.VariableOption(selected=True, text="All", value="$__all"))
    )


_Target = tuple[Callable[[EngineMetrics], str | None], str]
"""An engine's expression for a panel (None: the engine lacks the series) and its legend."""


def _rate(metric: str | None) -> str | None:
    return None if metric is None else f"sum by (model) (rate({metric}{{{_MODEL_FILTER}}}[{RATE_WINDOW}]))"


def _prefix_hits(e: EngineMetrics) -> str | None:
    hits, queries = e.name(Role.PREFIX_CACHE_HITS), e.name(Role.PREFIX_CACHE_QUERIES)
    if hits is not None and queries is not None:
        return f"{_rate(hits)} / {_rate(queries)}"
    rate = e.name(Role.PREFIX_CACHE_HIT_RATE)
    return None if rate is None else f"avg by (model) ({rate}{{{_MODEL_FILTER}}})"


def _engine_panel(
    engines: Sequence[EngineMetrics],
    title: str,
    unit: str,
    description: Callable[[Sequence[EngineMetrics]], str],
    *targets: _Target,
) -> timeseries.Panel | None:
    """A panel with each engine's targets (refs A, B, ... in engine order); None when no engine
    of the tier has the series. The description names the engines left out."""
    queries = [(expr, legend) for e in engines for build, legend in targets if (expr := build(e)) is not None]
    if not queries:
        return None
    shown = [e for e in engines if any(build(e) is not None for build, _ in targets)]
    text = description(shown)
    lacking = [e.label for e in engines if e not in shown]
    if lacking:
        text += f" Not exported by {', '.join(lacking)} (docs/operations.md)."
    return _panel(
        title, unit, text, *[_prom(q, legend, chr(ord("A") + i)) for i, (q, legend) in enumerate(queries)]
    )


def _names(engines: Sequence[EngineMetrics], role: Role) -> str:
    return ", ".join(str(e.name(role)) for e in engines)


def _model_panels(engines: Sequence[EngineMetrics]) -> list[timeseries.Panel]:
    """The models dashboard's panels, each with the series of every engine the tier runs."""

    def quantile(role: Role, q: float) -> Callable[[EngineMetrics], str | None]:
        return lambda e: None if (m := e.name(role)) is None else _quantile(q, m, "model")

    def by_model(op: str, role: Role) -> Callable[[EngineMetrics], str | None]:
        return lambda e: None if (m := e.name(role)) is None else f"{op} by (model) ({m}{{{_MODEL_FILTER}}})"

    only_vllm = [e.engine for e in engines] == ["vllm"]
    panels = [
        _engine_panel(
            engines,
            "Time to first token (p50, p99)",
            "s",
            lambda shown: (
                f"{_names(shown, Role.TTFT)}: the default objective is 2 s at p99 "
                "(models[].ttft_p99_seconds)."
            ),
            (quantile(Role.TTFT, 0.99), "{{model}} p99"),
            (quantile(Role.TTFT, 0.5), "{{model}} p50"),
        ),
        _engine_panel(
            engines,
            "Time per output token (p50, p99)",
            "s",
            lambda shown: f"{_names(shown, Role.TPOT)}: decode time per generated token.",
            (quantile(Role.TPOT, 0.99), "{{model}} p99"),
            (quantile(Role.TPOT, 0.5), "{{model}} p50"),
        ),
        _engine_panel(
            engines,
            "Tokens per second",
            "short",
            lambda shown: "Generated and prompt tokens per second, all replicas of the model.",
            (lambda e: _rate(e.name(Role.GENERATION_TOKENS)), "{{model}} generated"),
            (lambda e: _rate(e.name(Role.PROMPT_TOKENS)), "{{model}} prompt"),
        ),
        _engine_panel(
            engines,
            "Queue: waiting and running requests per replica",
            "short",
            lambda shown: "Above 10 waiting per replica, sustained, the model needs more replicas.",
            (by_model("avg", Role.WAITING), "{{model}} waiting"),
            (by_model("avg", Role.RUNNING), "{{model}} running"),
        ),
        _engine_panel(
            engines,
            "KV cache usage and prefix-cache hit rate",
            "percentunit",
            lambda shown: (
                f"{_names(shown, Role.KV_CACHE_USAGE)} (1 = full); hits over queries of the prefix cache."
            ),
            (by_model("max", Role.KV_CACHE_USAGE), "{{model}} KV cache"),
            (_prefix_hits, "{{model}} prefix hits"),
        ),
        _engine_panel(
            engines,
            "Replicas serving",
            "short",
            lambda shown: (
                "vLLM pods the scraper reaches (Running, serving metrics), per model."
                if only_vllm
                else "Engine pods the scraper reaches (Running, serving metrics), per model."
            ),
            (by_model("count", Role.RUNNING), "{{model}}"),
        ),
    ]
    return [panel for panel in panels if panel is not None]


def _tier_engines(tier: TierConfig) -> list[EngineMetrics]:
    """The series of each engine the tier's models run, in engine order (vLLM first)."""
    used = models_by_engine(tier)
    return [e for e in all_engine_metrics() if e.engine in {engine.value for engine in used}]


def model_dashboard(tier: TierConfig) -> dict[str, Any]:
    """The models dashboard: TTFT, TPOT, tokens/s, queue, KV cache and replicas, per model."""
    built = (
        gd.Dashboard(f"{tier.stack_name}: models")
        .uid(MODELS_UID)
        .tags(["gpufarm", tier.name])
        .refresh("1m")
        .time("now-3h", "now")
        .timezone("utc")
        .with_variable(_model_variable(tier))
    )
    for panel in _model_panels(_tier_engines(tier)):
        built = built.with_panel(panel)
    return _json(built)


def pool_pods(tier: TierConfig) -> dict[str, str]:
    """By pool or node group: a regex of the names of the vLLM pods placed on it.

    A Deployment's pods are named `<workload>-<template hash>-<5 characters>` and a
    LeaderWorkerSet's `<workload>-<group>[-<worker>]`; the patterns match those shapes only, so
    `vllm-a` does not also match the pods of a model named `a-b`.
    """
    found: dict[str, list[str]] = {}
    for model in tier.models:
        for share, part in model.parts():
            # DNS labels: no regex metacharacter but `-`, literal outside brackets; escaping it
            # would put `\-` into a PromQL string, which PromQL refuses as an unknown escape.
            workload = workload_name(model.name, share)
            pattern = f"{workload}-[a-z0-9]{{1,10}}-[a-z0-9]{{5}}|{workload}-[0-9]+(-[0-9]+)?"
            for target in placement_of(tier, part):
                found.setdefault(target.name, [])
                if pattern not in found[target.name]:
                    found[target.name].append(pattern)
    return {pool: "|".join(patterns) for pool, patterns in found.items()}


_DCGM = (
    (
        "GPU utilization",
        "percent",
        "DCGM_FI_DEV_GPU_UTIL",
        "avg",
        "Below 70% is idle money; above 90%, saturation.",
    ),
    ("GPU temperature", "celsius", "DCGM_FI_DEV_GPU_TEMP", "max", "Hottest GPU."),
)


def _fleet_panels(tier: TierConfig) -> list[timeseries.Panel]:
    pools = pool_pods(tier)
    namespace = tier.serving.namespace
    panels: list[timeseries.Panel] = []
    for title, unit, metric, agg, description in _DCGM:
        panels.append(
            _panel(
                f"{title} by node", unit, description, _prom(f"{agg} by (node) ({metric})", "{{node}}", "A")
            )
        )
        by_pool = [
            _prom(f'{agg}({metric}{{namespace="{namespace}", pod=~"{regex}"}})', pool, chr(ord("A") + i))
            for i, (pool, regex) in enumerate(sorted(pools.items()))
        ]
        panels.append(_panel(f"{title} by pool", unit, f"{description} GPUs held by vLLM pods.", *by_pool))
    used = "DCGM_FI_DEV_FB_USED"
    free = "DCGM_FI_DEV_FB_FREE"
    panels.append(
        _panel(
            "GPU memory used by node",
            "percentunit",
            "Framebuffer used over used + free, per node.",
            _prom(
                f"sum by (node) ({used}) / (sum by (node) ({used}) + sum by (node) ({free}))", "{{node}}", "A"
            ),
        )
    )
    panels.append(
        _panel(
            "GPU memory used by pool",
            "percentunit",
            "Framebuffer used over used + free, GPUs held by vLLM pods.",
            *[
                _prom(
                    f'sum({used}{{namespace="{namespace}", pod=~"{regex}"}}) / '
                    f'(sum({used}{{namespace="{namespace}", pod=~"{regex}"}}) + '
                    f'sum({free}{{namespace="{namespace}", pod=~"{regex}"}}))',
                    pool,
                    chr(ord("A") + i),
                )
                for i, (pool, regex) in enumerate(sorted(pools.items()))
            ],
        )
    )
    panels.append(
        _panel(
            "XID errors by node and GPU",
            "short",
            "DCGM_FI_DEV_XID_ERRORS holds the last XID error code of a GPU (0: none). Any other "
            "value names a driver-reported fault: see NVIDIA's XID catalogue for the code.",
            _prom("max by (node, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0", "{{node}} GPU {{gpu}}", "A"),
        )
    )
    return panels


def gpu_fleet_dashboard(tier: TierConfig) -> dict[str, Any]:
    """The GPU fleet dashboard: utilization, memory, temperature and XID, per node and per pool."""
    built = (
        gd.Dashboard(f"{tier.stack_name}: GPU fleet")
        .uid(GPU_FLEET_UID)
        .tags(["gpufarm", tier.name])
        .refresh("1m")
        .time("now-3h", "now")
        .timezone("utc")
    )
    for panel in _fleet_panels(tier):
        built = built.with_panel(panel)
    return _json(built)


def _cw(
    ref: str,
    region: str,
    namespace: str,
    metric: str,
    stat: str,
    dimensions: Mapping[str, str],
    label: str,
    *,
    hide: bool = False,
) -> cw.CloudWatchMetricsQuery:
    return (
        _cw_query(ref, region, cwm.MetricEditorMode.BUILDER)
        .namespace(namespace)
        .metric_name(metric)
        .statistic(stat)
        .dimensions(dict(dimensions))
        .match_exact(True)
        .period("60")
        .label(label)
        .hide(hide)
    )


def _cw_query(ref: str, region: str, mode: cwm.MetricEditorMode) -> cw.CloudWatchMetricsQuery:
    """A CloudWatch metrics query on the CloudWatch data source, by reference `ref`, in `region`."""
    return (
        cw.CloudWatchMetricsQuery()
        .datasource(_CLOUDWATCH)
        .ref_id(ref)
        .id(ref.lower())
        .query_mode(cwm.CloudWatchQueryMode.METRICS)
        .metric_query_type(cwm.MetricQueryType.SEARCH)
        .metric_editor_mode(mode)
        .region(region)
    )


def _cw_math(ref: str, region: str, expression: str, label: str) -> cw.CloudWatchMetricsQuery:
    return _cw_query(ref, region, cwm.MetricEditorMode.CODE).expression(expression).label(label)


def _gateway_prometheus_panels(objective: GatewayObjective) -> list[timeseries.Panel]:
    """The gateway's panels read from its own counters: the same expressions as its alerts."""
    panels: list[timeseries.Panel] = []
    if objective.models:
        panels.append(
            _panel(
                "Fallback rate by model (% of answers from Bedrock)",
                "percent",
                f"Bedrock's answers over all of the model's answers (vLLM's on either route, and "
                f"Bedrock's), over {FALLBACK_WINDOW}: the expression of the FallbackRateHigh alert, "
                f"whose threshold is {objective.fallback_rate_percent:g}%.",
                *(
                    _prom(fallback_rate_expression(model), model.name, f"F{i}")
                    for i, model in enumerate(sorted(objective.models, key=lambda m: m.name))
                ),
            )
        )
    if objective.spend:
        panels.append(
            _panel(
                "Bedrock spend over the last hour (USD, list prices)",
                "currencyUSD",
                "The gateway's Bedrock tokens times the on-demand list prices gpufarm ships: the "
                f"expression of the BedrockSpendHigh alert, whose threshold is "
                f"${objective.bedrock_spend_per_hour:g} an hour.",
                _prom(bedrock_spend_expression(objective.spend), "Bedrock", "S"),
            )
        )
    return panels


def gateway_expressions(tier: TierConfig) -> list[str]:
    """The PromQL of the gateway dashboard's Prometheus panels (none without the gateway's counters)."""
    objective = gateway_objective(tier)
    if objective is None:
        return []
    board = gd.Dashboard("gateway")
    for panel in _gateway_prometheus_panels(objective):
        board = board.with_panel(panel)
    return prometheus_expressions([_json(board)])


def _gateway_panels(tier: TierConfig, targets: GatewayTargets) -> list[timeseries.Panel]:
    region = tier.environment.region
    objective = gateway_objective(tier)
    panels: list[timeseries.Panel] = []
    if objective is not None:
        panels.extend(_gateway_prometheus_panels(objective))
    ids = bedrock_model_ids(tier)
    namespace = "AWS/ApplicationELB" if targets.kind is LoadBalancerKind.ALB else "AWS/NetworkELB"
    if targets.kind is LoadBalancerKind.ALB:
        # AWS/ApplicationELB RequestCount and TargetResponseTime by TargetGroup and LoadBalancer:
        # https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-cloudwatch-metrics.html
        gateway = {"LoadBalancer": targets.load_balancer, "TargetGroup": targets.gateway}
        # Without the gateway's own counters (no Prometheus), the fallback rate is estimated
        # from CloudWatch: Bedrock's invocations over the gateway route's requests.
        if objective is None:
            invocations = [
                _cw(
                    f"B{i}",
                    region,
                    "AWS/Bedrock",
                    "Invocations",
                    "Sum",
                    {"ModelId": model_id},
                    model_id,
                    hide=True,
                )
                for i, model_id in enumerate(ids)
            ]
            rate = [
                *invocations,
                _cw("G", region, namespace, "RequestCount", "Sum", gateway, "gateway requests", hide=True),
            ]
            if ids:
                total = " + ".join(f"b{i}" for i in range(len(ids)))
                rate.append(_cw_math("R", region, f"100 * ({total}) / g", "fallback rate"))
            panels.append(
                _panel(
                    "Fallback rate",
                    "percent",
                    "Bedrock invocations of the tier's fallback models over the gateway's requests.",
                    *rate,
                )
            )
        latency = [_cw("G", region, namespace, "TargetResponseTime", "p99", gateway, "gateway route p99")]
        for i, (name, group) in enumerate(sorted(targets.models.items())):
            dims = {"LoadBalancer": targets.load_balancer, "TargetGroup": group}
            latency.append(
                _cw(f"M{i}", region, namespace, "TargetResponseTime", "p99", dims, f"{name} direct p99")
            )
        panels.append(
            _panel(
                "Time to first byte: gateway route against the direct routes (p99)",
                "s",
                "The gap between the gateway route and a model's direct route is what the gateway "
                "adds (its route also carries the requests that fell back to Bedrock).",
                *latency,
            )
        )
    tokens = [
        _cw(f"I{i}", region, "AWS/Bedrock", metric, "Sum", {"ModelId": model_id}, f"{model_id} {kind}")
        for i, model_id in enumerate(ids)
        for metric, kind in (("InputTokenCount", "input"), ("OutputTokenCount", "output"))
    ]
    for i, query in enumerate(tokens):
        query.ref_id(f"T{i}").id(f"t{i}")
    if tokens:
        panels.append(
            _panel(
                "Bedrock tokens per minute",
                "short",
                "AWS/Bedrock InputTokenCount and OutputTokenCount of the fallback models.",
                *tokens,
            )
        )
    panels.append(
        _panel(
            "Bedrock charges, month to date (USD)",
            "currencyUSD",
            "AWS/Billing EstimatedCharges of the Bedrock service for the whole account; needs "
            "billing alerts enabled (Billing preferences), published in us-east-1 a few times a day.",
            _cw_math(
                "C",
                BILLING_REGION,
                'SEARCH(\'{AWS/Billing,Currency,ServiceName} MetricName="EstimatedCharges" '
                "Bedrock', 'Maximum', 21600)",
                "Bedrock",
            ),
        )
    )
    return panels


def gateway_dashboard(tier: TierConfig, *, targets: GatewayTargets) -> dict[str, Any]:
    """The gateway dashboard: fallback rate, time the gateway adds, Bedrock tokens and charges."""
    built = (
        gd.Dashboard(f"{tier.stack_name}: gateway")
        .uid(GATEWAY_UID)
        .tags(["gpufarm", tier.name])
        .refresh("5m")
        .time("now-24h", "now")
        .timezone("utc")
    )
    for panel in _gateway_panels(tier, targets):
        built = built.with_panel(panel)
    return _json(built)


def tier_dashboards(tier: TierConfig, *, targets: GatewayTargets | None) -> list[dict[str, Any]]:
    """Every dashboard of the tier: models and GPU fleet, and the gateway's when it has one."""
    boards = [model_dashboard(tier), gpu_fleet_dashboard(tier)]
    if targets is not None:
        boards.append(gateway_dashboard(tier, targets=targets))
    return boards


def prometheus_expressions(boards: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every PromQL expression of `boards`' Prometheus panels, in panel order."""
    found: list[str] = []
    for board in boards:
        for panel in board.get("panels", []):
            for target in panel.get("targets", []):
                if target.get("datasource", {}).get("type") == "prometheus":
                    found.append(target["expr"])
    return found


def dashboard_expressions(tier: TierConfig) -> list[str]:
    """Every PromQL expression the tier's dashboards query, the gateway's when it runs included."""
    gateway = gateway_expressions(tier) if tier.fallback.enabled else []
    return [*prometheus_expressions([model_dashboard(tier), gpu_fleet_dashboard(tier)]), *gateway]
