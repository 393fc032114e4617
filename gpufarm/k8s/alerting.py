"""Alerting on the Amazon Managed Service for Prometheus workspace: rule groups and the alert manager.

Pure functions returning data. :func:`alert_rule_groups` builds the Prometheus rule groups gpufarm
loads into an `AWS::APS::RuleGroupsNamespace`, :func:`rules_document` serializes them (the
namespace's `Data`), and :func:`alert_manager_definition` builds the workspace's
`AlertManagerDefinition`, which routes every alert to one Amazon SNS topic.

The series read are those the managed scraper keeps (:mod:`gpufarm.k8s.observability`): each
model's engine's series (vLLM's `vllm:*`, SGLang's `sglang:*`, TensorRT-LLM's; the names per engine
are :mod:`gpufarm.core.engine_metrics`'), labelled `model` (the pod's `gpufarm.io/model`) and
`pod` whatever the engine, the DCGM
exporter's, labelled `node` by the scrape job, and the gateway's own counters (answers by
backend, Bedrock's tokens; :mod:`gpufarm.k8s.demand`), labelled `model_name`. The vLLM and
DCGM names are the engines' pinned releases' (gpufarm/data/engine_metrics.yaml) and the DCGM
exporter 4.6.0's default counters (`../shared/upstream-ref/dcgm-exporter@4.6.0-metrics.json`); a
test checks every name against them. A rule on several engines is one rule whose expression joins
each engine's with `or` (their models differ, so their series do); a rule whose series an engine
lacks leaves that engine's models out (docs/operations.md lists which).

What each alert means and what to do is in docs/operations.md ("On call").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from gpufarm.config.bedrock import token_priced_model_id
from gpufarm.config.model import TierConfig
from gpufarm.core.bedrock_prices import bedrock_token_price
from gpufarm.core.demand import exports_metrics
from gpufarm.core.engine_metrics import EngineMetrics, Role, all_engine_metrics, engine_metrics

RULES_NAMESPACE = "gpufarm-slo"
"""Name of the rule groups namespace (one per workspace)."""

AVAILABILITY_OBJECTIVE = 0.999
"""The availability objective the burn-rate alerts defend: 99.9% of finished requests succeed."""

QUEUE_PER_REPLICA = 10
"""Requests waiting per replica, sustained, that alert (the queue-depth KPI)."""

GPU_UTILIZATION_LOW = 70
GPU_UTILIZATION_HIGH = 90
"""The GPU utilization band (percent): below it the GPU is idle money, above it saturated."""

KV_CACHE_HIGH = 0.95
"""KV-cache use (0-1) above which vLLM starts preempting requests."""

PREFIX_CACHE_HIT_LOW = 0.1
"""Prefix-cache hit rate (0-1) below which caching no longer pays for its memory."""

BURN_RATES: tuple[tuple[str, str, str, float, str], ...] = (
    # (name, long window, short window, burn-rate factor, severity). The Google SRE workbook,
    # "Alerting on SLOs" (https://sre.google/workbook/alerting-on-slos/), "Multiwindow,
    # multi-burn-rate alerts": page at 2% of a 30-day budget spent in 1 h (factor 14.4, short
    # window 5 m) or 5% in 6 h (factor 6, short window 30 m); ticket at 10% in 3 days (factor 1,
    # short window 6 h). Each short window is 1/12 of its long one, so the alert stops soon
    # after the burning does.
    ("fast", "1h", "5m", 14.4, "page"),
    ("slow", "6h", "30m", 6.0, "page"),
    ("drift", "3d", "6h", 1.0, "ticket"),
)

XID_DRAIN = (46, 48, 79)
"""XID codes after which the node is drained and replaced rather than the app restarted:
46 (GPU stopped processing) and 48 (double-bit ECC error), both "drain" in NVIDIA's Xid checks
(https://docs.nvidia.com/health-validation/reference/checks/xid.md); 79 (GPU has fallen off the
bus, https://docs.nvidia.com/deploy/gpu-operational-events/latest/release-notes.html). The full
catalog, with each code's resolution, is https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html."""

DEFAULT_ENGINE = "vllm"
"""The engine of an objective that names none."""


FALLBACK_WINDOW = "15m"
"""Window of the fallback rate, and how long it must stay above its threshold."""

_RESPONSES = "gpufarm_gateway_responses_total"
_BEDROCK_TOKENS = "gpufarm_gateway_bedrock_tokens_total"
"""The gateway callback's counters (gpufarm/k8s/demand.py, RESPONSES_METRIC, BEDROCK_TOKENS_METRIC)."""


@dataclass(frozen=True, kw_only=True)
class BedrockSpend:
    """One model's Bedrock fallback: its client name (`model_name`) and its $ per 1,000 tokens."""

    model_name: str
    input_per_1k: float
    output_per_1k: float


@dataclass(frozen=True, kw_only=True)
class FallbackModel:
    """A model with a Bedrock fallback: its name in the tier (engine series' `model` label), the
    name clients send (the gateway counters' `model_name` label) and its engine."""

    name: str
    api_name: str
    engine: str = DEFAULT_ENGINE


@dataclass(frozen=True, kw_only=True)
class GatewayObjective:
    """The gateway's alerts: fallback rate (percent of a model's answers) and Bedrock spend ($ per hour).

    `models` lists the models with a Bedrock fallback (none: no fallback-rate alert); `spend` those
    of them with a known price (none: no spend alert).
    """

    fallback_rate_percent: float
    bedrock_spend_per_hour: float
    models: tuple[FallbackModel, ...] = ()
    spend: tuple[BedrockSpend, ...] = ()


def gateway_objective(tier: TierConfig) -> GatewayObjective | None:
    """The tier's gateway alerts, when its gateway exports its counters to Prometheus; else None.

    Each model with a Bedrock fallback whose model is in the shipped price table counts toward
    the spend (:func:`gpufarm.core.bedrock_prices.bedrock_token_price`); a model without a listed
    price still counts in the fallback rate.
    """
    if not (exports_metrics(tier) and tier.observability.prometheus.enabled):
        return None
    spend = []
    models = []
    for model in tier.models:
        target = model.bedrock_target
        if target is not None:
            models.append(
                FallbackModel(name=model.name, api_name=model.api_model_name, engine=model.engine.value)
            )
        priced = token_priced_model_id(target) if target is not None else None
        price = bedrock_token_price(priced) if priced is not None else None
        if price is not None:
            spend.append(
                BedrockSpend(
                    model_name=model.api_model_name,
                    input_per_1k=price.input_per_1k,
                    output_per_1k=price.output_per_1k,
                )
            )
    prometheus = tier.observability.prometheus
    return GatewayObjective(
        fallback_rate_percent=prometheus.fallback_rate_percent,
        bedrock_spend_per_hour=prometheus.bedrock_spend_per_hour,
        models=tuple(models),
        spend=tuple(spend),
    )


def fallback_rate_expression(model: FallbackModel, window: str = FALLBACK_WINDOW) -> str:
    """Percent of `model`'s answers that came from Bedrock over `window`, whatever the route.

    The denominator counts every answer: Bedrock's (the gateway's counter) and the engine's own
    finished requests (vLLM's `vllm:request_success_total`, SGLang's `sglang:num_requests_total`, ...:
    what the replicas served on the model's route and through the gateway alike). A client on the
    model's route that re-sends only the load balancer's refusals to the gateway (ADR 0051) would
    otherwise see a fallback rate near 100%: the gateway's own counters alone measure the share among
    the requests it was given, not among the model's. `or vector(0)` keeps a model whose replicas
    never answered (parked at zero, or down since start) at 100% instead of no value.
    """
    bedrock = f'sum(rate({_RESPONSES}{{model_name="{model.api_name}",backend="bedrock"}}[{window}]))'
    finished = with_matcher(engine_metrics(model.engine).finished, f'model="{model.name}"')
    served = f"sum(rate({finished}[{window}]))"
    return f"100 * {bedrock} / ({bedrock} + ({served} or vector(0)))"


def with_matcher(selector: str, matcher: str) -> str:
    """`selector` (`name` or `name{...}`) with `matcher` as its first label matcher."""
    if selector.endswith("}"):
        name, _, rest = selector.partition("{")
        return f"{name}{{{matcher},{rest}"
    return f"{selector}{{{matcher}}}"


def _union(parts: Sequence[str]) -> str:
    """One engine's expression as it is; several joined with `or` in parentheses."""
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def bedrock_spend_expression(spend: Sequence[BedrockSpend]) -> str:
    """Bedrock's $ over the last hour: each model's token increase x its price, summed.

    The terms are joined with `or` (their label sets differ), so a model with no series yet
    leaves the others' sum standing instead of emptying it.
    """
    terms = []
    for model in sorted(spend, key=lambda m: m.model_name):
        for direction, price in (("input", model.input_per_1k), ("output", model.output_per_1k)):
            selector = f'{_BEDROCK_TOKENS}{{model_name="{model.model_name}",direction="{direction}"}}'
            terms.append(f"increase({selector}[1h]) / 1000 * {price:g}")
    return f"sum({' or '.join(terms)})"


def _gateway_rules(objective: GatewayObjective) -> list[dict[str, Any]]:
    rate = objective.fallback_rate_percent
    window = FALLBACK_WINDOW
    rules = [
        _alert(
            "FallbackRateHigh",
            f"{fallback_rate_expression(model, window)} > {rate:g}",
            for_=window,
            severity="ticket",
            # One alert per model under one name: the labels keep the rules distinct and name it.
            labels={"model": model.name, "model_name": model.api_name},
            summary=f"{model.name}: Bedrock answers more than {rate:g}% of requests",
            description=(
                f'{model.name}: Amazon Bedrock answered {{{{ $value | printf "%.1f" }}}}% of its '
                f"requests over {window}, for {window}: vLLM is down, saturated or failing."
            ),
        )
        for model in sorted(objective.models, key=lambda m: m.name)
    ]
    if objective.spend:
        limit = objective.bedrock_spend_per_hour
        rules.append(
            _alert(
                "BedrockSpendHigh",
                f"{bedrock_spend_expression(objective.spend)} > {limit:g}",
                for_="15m",
                severity="ticket",
                summary=f"Bedrock fallback spend above ${limit:g} per hour",
                description=(
                    'The gateway\'s Bedrock answers cost ${{ $value | printf "%.2f" }} over the last '
                    f"hour (on-demand list prices), above ${limit:g}, for 15 minutes."
                ),
            )
        )
    return rules


@dataclass(frozen=True, kw_only=True)
class ModelObjective:
    """The per-model objective an alert checks: the model's `model` label, its TTFT target and
    the engine whose series it reads (default vllm)."""

    name: str
    ttft_p99_seconds: float
    engine: str = DEFAULT_ENGINE


def _error_ratio(window: str, engines: Sequence[EngineMetrics]) -> str:
    parts = [
        f"sum by (model) (rate({e.failed}[{window}])) / sum by (model) (rate({e.error_requests}[{window}]))"
        for e in engines
        if e.has_error_ratio
    ]
    return _union(parts)


def _ratio_record(window: str) -> str:
    return f"model:vllm_request_errors:ratio_rate{window}"


def _alert(
    name: str,
    expr: str,
    *,
    for_: str,
    severity: str,
    summary: str,
    description: str,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_ != "0m":
        rule["for"] = for_
    rule["labels"] = {"severity": severity, **(labels or {})}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def _ttft_rules(models: Sequence[ModelObjective]) -> list[dict[str, Any]]:
    rules = []
    for model in models:
        ttft = engine_metrics(model.engine).name(Role.TTFT)
        if ttft is None:
            continue
        quantile = (
            f'histogram_quantile(0.99, sum by (model, le) (rate({ttft}_bucket{{model="{model.name}"}}[5m])))'
        )
        rules.append(
            _alert(
                "TimeToFirstTokenP99High",
                f"{quantile} > {model.ttft_p99_seconds:g}",
                for_="10m",
                severity="page",
                # One alert per model under one name: the label keeps the rules distinct.
                labels={"model": model.name},
                summary=f"{model.name}: p99 time to first token above {model.ttft_p99_seconds:g} s",
                description=(
                    "p99 time to first token of {{ $labels.model }} is {{ $value | humanizeDuration }} "
                    f"(objective {model.ttft_p99_seconds:g} s) for 10 minutes."
                ),
            )
        )
    return rules


def alert_rule_groups(
    models: Iterable[ModelObjective], *, error_rate_percent: float, gateway: GatewayObjective | None = None
) -> list[dict[str, Any]]:
    """The rule groups of the workspace: serving KPIs, availability burn rates, GPU health.

    `models` gives each model's time-to-first-token objective (one alert each);
    `error_rate_percent` is the error percentage of finished requests that alerts (the same
    threshold as the load balancer's CloudWatch alarm). `gateway` (when the gateway runs and
    exports its counters) adds the fallback-rate and Bedrock-spend alerts.
    """
    objectives = sorted(models, key=lambda m: m.name)
    if not objectives:
        raise ValueError("'models' must name at least one model, got none")
    if not 0 < error_rate_percent <= 100:
        raise ValueError(f"'error_rate_percent' must be above 0 and at most 100, got {error_rate_percent}")
    if gateway is not None and not 0 < gateway.fallback_rate_percent <= 100:
        raise ValueError(
            f"'fallback_rate_percent' must be above 0 and at most 100, got {gateway.fallback_rate_percent}"
        )
    if gateway is not None and not gateway.bedrock_spend_per_hour > 0:
        raise ValueError(f"'bedrock_spend_per_hour' must be above 0, got {gateway.bedrock_spend_per_hour}")
    budget = 1 - AVAILABILITY_OBJECTIVE
    used = {m.engine for m in objectives}
    engines = [e for e in all_engine_metrics() if e.engine in used]
    erring = [e for e in engines if e.has_error_ratio]
    windows = sorted({w for _, long, short, _, _ in BURN_RATES for w in (long, short)}, key=_seconds)
    records = [{"record": _ratio_record(w), "expr": _error_ratio(w, engines)} for w in windows if erring]
    burn_alerts = [
        _alert(
            f"ErrorBudgetBurn{name.capitalize()}",
            f"{_ratio_record(long)} > ({factor:g} * {budget:.3f}) "
            f"and {_ratio_record(short)} > ({factor:g} * {budget:.3f})",
            for_="0m" if name == "fast" else "2m",
            severity=severity,
            summary=f"{{{{ $labels.model }}}}: error budget burning {factor:g}x over {long}",
            description=(
                "{{ $labels.model }} fails {{ $value | humanizePercentage }} of its requests over "
                f"{short} and more than {factor:g}x the 99.9% objective's budget over {long}."
            ),
        )
        for name, long, short, factor, severity in BURN_RATES
        if erring
    ]
    waiting = [
        f"avg by (model) (sum by (model, pod) ({e.name(Role.WAITING)}))"
        for e in engines
        if e.has(Role.WAITING)
    ]
    kv_cache = [
        f"max by (model, pod) ({e.name(Role.KV_CACHE_USAGE)})" for e in engines if e.has(Role.KV_CACHE_USAGE)
    ]
    prefix = [_prefix_hit_ratio(e) for e in engines if e.has_prefix_cache]
    serving = [*_ttft_rules(objectives)]
    if waiting:
        serving.append(
            _alert(
                "QueueDepthHigh",
                f"{_union(waiting)} > {QUEUE_PER_REPLICA}",
                for_="5m",
                severity="page",
                summary=f"{{{{ $labels.model }}}}: more than {QUEUE_PER_REPLICA} requests waiting "
                "per replica",
                description=(
                    "{{ $labels.model }} has {{ $value }} requests waiting per replica for 5 minutes: "
                    "more replicas, or fewer requests."
                ),
            )
        )
    if erring:
        serving.append(
            _alert(
                "ErrorRateHigh",
                f"100 * ({_error_ratio('5m', engines)}) > {error_rate_percent:g}",
                for_="5m",
                severity="page",
                summary=f"{{{{ $labels.model }}}}: more than {error_rate_percent:g}% of requests fail",
                description=(
                    '{{ $labels.model }} ends {{ $value | printf "%.1f" }}% of its requests in an '
                    "engine error."
                ),
            )
        )
    if kv_cache:
        serving.append(
            _alert(
                "KvCacheNearlyFull",
                f"{_union(kv_cache)} > {KV_CACHE_HIGH:g}",
                for_="15m",
                severity="ticket",
                summary="{{ $labels.pod }}: KV cache above 95% for 15 minutes",
                description=(
                    "{{ $labels.pod }} ({{ $labels.model }}) uses {{ $value | humanizePercentage }} of "
                    "its KV cache: requests get preempted and recomputed."
                ),
            )
        )
    if prefix:
        serving.append({"record": "model:vllm_prefix_cache_hit:ratio_rate30m", "expr": _union(prefix)})
        serving.append(
            _alert(
                "PrefixCacheHitRateLow",
                f"model:vllm_prefix_cache_hit:ratio_rate30m < {PREFIX_CACHE_HIT_LOW:g}",
                for_="1h",
                severity="ticket",
                summary="{{ $labels.model }}: prefix-cache hit rate below 10% for an hour",
                description=(
                    "{{ $labels.model }} finds {{ $value | humanizePercentage }} of prompt tokens in its "
                    "prefix cache: check that clients reuse system prompts, or route by cache."
                ),
            )
        )
    gpus = [
        _alert(
            "GpuUtilizationLow",
            f"avg by (node) (DCGM_FI_DEV_GPU_UTIL) < {GPU_UTILIZATION_LOW}",
            for_="1h",
            severity="ticket",
            summary=f"{{{{ $labels.node }}}}: GPUs below {GPU_UTILIZATION_LOW}% busy for an hour",
            description=(
                "The GPUs of {{ $labels.node }} average {{ $value }}% utilization: capacity paid for "
                "and idle (fewer replicas, a smaller pool, or scale to zero)."
            ),
        ),
        _alert(
            "GpuUtilizationSaturated",
            f"avg by (node) (DCGM_FI_DEV_GPU_UTIL) > {GPU_UTILIZATION_HIGH}",
            for_="15m",
            severity="ticket",
            summary=f"{{{{ $labels.node }}}}: GPUs above {GPU_UTILIZATION_HIGH}% busy for 15 minutes",
            description=(
                "The GPUs of {{ $labels.node }} average {{ $value }}% utilization: no headroom for a "
                "burst (raise max replicas or the pool's GPU limit)."
            ),
        ),
        _alert(
            "GpuXidCritical",
            " or ".join(f"max by (node) (DCGM_FI_DEV_XID_ERRORS) == {code}" for code in XID_DRAIN),
            for_="0m",
            severity="page",
            summary="{{ $labels.node }}: GPU XID {{ $value }}, drain and replace the node",
            description=(
                "Node {{ $labels.node }} reported XID {{ $value }}: the GPU cannot be trusted. "
                "Cordon and drain {{ $labels.node }}; node repair (or the on-call) replaces it."
            ),
        ),
        _alert(
            "GpuXid",
            "max by (node) (DCGM_FI_DEV_XID_ERRORS) > 0",
            for_="0m",
            severity="ticket",
            summary="{{ $labels.node }}: GPU XID {{ $value }}",
            description=(
                "Node {{ $labels.node }} reported XID {{ $value }}; look the code up in NVIDIA's Xid "
                "catalog (docs/operations.md, On call)."
            ),
        ),
    ]
    gateway_rules = _gateway_rules(gateway) if gateway is not None else []
    return [
        {"name": "gpufarm-availability", "rules": [*records, *burn_alerts]},
        {"name": "gpufarm-serving", "rules": serving},
        {"name": "gpufarm-gpu", "rules": gpus},
        *([{"name": "gpufarm-gateway", "rules": gateway_rules}] if gateway_rules else []),
    ]


def _prefix_hit_ratio(engine: EngineMetrics) -> str:
    """Prefix-cache hits over queries across 30 minutes, per model: from the engine's counters, or
    the average of its own hit-rate gauge (SGLang's `sglang:cache_hit_rate`)."""
    hits, queries = engine.name(Role.PREFIX_CACHE_HITS), engine.name(Role.PREFIX_CACHE_QUERIES)
    if hits is not None and queries is not None:
        return f"sum by (model) (rate({hits}[30m])) / sum by (model) (rate({queries}[30m]))"
    return f"avg by (model) (avg_over_time({engine.name(Role.PREFIX_CACHE_HIT_RATE)}[30m]))"


def _seconds(window: str) -> int:
    units = {"m": 60, "h": 3600, "d": 86400}
    return int(window[:-1]) * units[window[-1]]


def rules_document(groups: Sequence[dict[str, Any]]) -> str:
    """The rules file (YAML) of `groups`, as `AWS::APS::RuleGroupsNamespace` `Data` takes it."""
    return yaml.safe_dump({"groups": list(groups)}, sort_keys=False, default_flow_style=False, width=100)


def alert_manager_definition(*, topic_arn: str, region: str) -> str:
    """The workspace's alert manager definition: every alert to one SNS topic.

    AMP wraps the Alertmanager configuration in a document with `alertmanager_config` (and
    optional `template_files`) (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-config.html).
    SNS is the only receiver AMP supports; its `sigv4` must name the Region, and `api_url` and
    `http_config` are refused (https://docs.aws.amazon.com/prometheus/latest/userguide/AMP-alertmanager-receiver-config.html).
    Alerts are grouped by name and model or node; a firing group repeats every 4 hours (AMP
    caps `repeat_interval` at five days).
    """
    config = {
        "route": {
            "receiver": "sns",
            "group_by": ["alertname", "model", "node"],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
        },
        "receivers": [
            {
                "name": "sns",
                "sns_configs": [
                    {
                        "topic_arn": topic_arn,
                        "sigv4": {"region": region},
                        # SNS subjects are at most 100 ASCII characters: a short one of our own
                        # rather than the default, which lists every label.
                        "subject": "[{{ .Status | toUpper }}] {{ .GroupLabels.alertname }}",
                    }
                ],
            }
        ],
    }
    inner = yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
    return yaml.safe_dump({"alertmanager_config": inner}, sort_keys=False, default_style=None)
