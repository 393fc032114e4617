"""One CloudWatch dashboard per tier (:class:`InferenceDashboard`), its body built as JSON here."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from gpufarm.config.model import LoadBalancerKind
from gpufarm.constructs.alarms import (
    ALB_NAMESPACE,
    NLB_NAMESPACE,
    PERIOD_SECONDS,
    _check_target_optimizer,
    load_balancer_kind,
)
from gpufarm.core.engine_metrics import Role, all_engine_metrics

_DASHBOARD_NAME = re.compile(r"^[A-Za-z0-9_-]{1,255}$")

# =============================================================================== dashboard


def _lb_metric(namespace: str, metric: str, label: str, stat: str, **dimensions: str) -> list[Any]:
    entry: list[Any] = [namespace, metric]
    for name, value in dimensions.items():
        entry += [name, value]
    entry.append({"label": label, "stat": stat})
    return entry


def _alb_metric(metric: str, label: str, stat: str, **dimensions: str) -> list[Any]:
    return _lb_metric(ALB_NAMESPACE, metric, label, stat, **dimensions)


def _nlb_metric(metric: str, label: str, stat: str, **dimensions: str) -> list[Any]:
    return _lb_metric(NLB_NAMESPACE, metric, label, stat, **dimensions)


def _graph(title: str, region: str, metrics: list[list[Any]], *, y_label: str) -> dict[str, Any]:
    return {
        "type": "metric",
        "width": 12,
        "height": 6,
        "properties": {
            "title": title,
            "region": region,
            "view": "timeSeries",
            "stacked": False,
            "period": PERIOD_SECONDS,
            "metrics": metrics,
            "yAxis": {"left": {"label": y_label, "min": 0, "showUnits": False}},
        },
    }


def _text(markdown: str, *, height: int) -> dict[str, Any]:
    return {"type": "text", "width": 24, "height": height, "properties": {"markdown": markdown}}


def _placed(widgets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Widgets with x/y set: left to right in a 24-column grid, a new row when one is full."""
    x = y = row_height = 0
    placed = []
    for widget in widgets:
        if x + widget["width"] > 24:
            x, y, row_height = 0, y + row_height, 0
        placed.append({**widget, "x": x, "y": y})
        x += widget["width"]
        row_height = max(row_height, widget["height"])
    return placed


PROMQL_QUERIES = (
    ("Requests waiting, per model", "sum by (model) (vllm:num_requests_waiting)"),
    ("Requests running, per model", "sum by (model) (vllm:num_requests_running)"),
    ("KV-cache use, per pod", "max by (model, pod) (vllm:kv_cache_usage_perc)"),
    ("GPU utilisation, per node", "avg by (node) (DCGM_FI_DEV_GPU_UTIL)"),
    ("GPU memory used (MiB), per pod", "sum by (namespace, pod) (DCGM_FI_DEV_FB_USED)"),
)
"""PromQL for the engine and GPU series in the AMP workspace, which CloudWatch cannot graph
(vLLM's series; :func:`promql_queries` gives those of other engines)."""


def promql_queries(engines: Sequence[str] = ("vllm",)) -> tuple[tuple[str, str], ...]:
    """The workspace's PromQL rows for a tier whose models run `engines` (values of
    :class:`~gpufarm.config.model.Engine`): vLLM's rows as :data:`PROMQL_QUERIES`, then each other
    engine's queue, running and KV-cache rows (titled with the engine; a series the engine lacks
    gets no row), then the GPU rows."""
    rows: list[tuple[str, str]] = []
    for metrics in all_engine_metrics():
        if metrics.engine not in engines:
            continue
        suffix = "" if metrics.engine == "vllm" else f" ({metrics.engine})"
        for title, role, shape in (
            ("Requests waiting, per model", Role.WAITING, "sum by (model) ({})"),
            ("Requests running, per model", Role.RUNNING, "sum by (model) ({})"),
            ("KV-cache use, per pod", Role.KV_CACHE_USAGE, "max by (model, pod) ({})"),
        ):
            name = metrics.name(role)
            if name is not None:
                rows.append((title + suffix, shape.format(name)))
    return (*rows, *PROMQL_QUERIES[3:])


def dashboard_body(
    *,
    load_balancer_full_name: str,
    target_groups: Mapping[str, str],
    region: str,
    target_optimizer: bool,
    workspace_query: bool = False,
    kind: LoadBalancerKind = LoadBalancerKind.ALB,
    engines: Sequence[str] = ("vllm",),
) -> dict[str, Any]:
    """The dashboard body (the `DashboardBody` JSON, as a dict) for one load balancer and its models.

    Rows: requests and 5xx per model; p50/p99 time to first byte per model; healthy and
    unhealthy targets, one widget per model; Target Optimizer requests and rejections (when
    `target_optimizer`); with `workspace_query`, the PromQL to run against the AMP workspace
    for queue depth, KV-cache use and GPU utilisation, for each of `engines` (default vLLM only).

    `kind` NLB (a Network Load Balancer, which sees connections, not requests) replaces the
    request, error and latency rows with what `AWS/NetworkELB` publishes: new and active flows,
    bytes, and TCP resets by who sent them (load-balancer-wide: an NLB publishes these per load
    balancer and zone only), and the target rows come from the same namespace.
    """
    lb = load_balancer_full_name
    models = sorted(target_groups.items())
    if kind is LoadBalancerKind.NLB:
        widgets = _network_widgets(lb, models, region)
    else:
        widgets = _application_widgets(lb, models, region, target_optimizer)
    if workspace_query:
        rows = "\n".join(f"| {title} | `{query}` |" for title, query in promql_queries(engines))
        widgets.append(
            _text(
                "## Engine and GPU metrics (Amazon Managed Prometheus)\n"
                "Run these in the workspace (Grafana or `awscurl` against its query endpoint):\n\n"
                "| Signal | PromQL |\n|---|---|\n" + rows,
                height=6,
            )
        )
    return {"start": "-PT3H", "periodOverride": "inherit", "widgets": _placed(widgets)}


def _network_widgets(lb: str, models: list[tuple[str, str]], region: str) -> list[dict[str, Any]]:
    widgets = [
        _text(
            "# Inference\nNetwork Load Balancer metrics (`AWS/NetworkELB`). An NLB sees TCP flows, "
            "not HTTP requests: time to first token and errors are vLLM's, in Amazon Managed "
            "Prometheus.",
            height=2,
        ),
        _graph(
            "Flows",
            region,
            [
                _nlb_metric("NewFlowCount", "new per minute", "Sum", LoadBalancer=lb),
                _nlb_metric("ActiveFlowCount", "active", "Average", LoadBalancer=lb),
            ],
            y_label="flows",
        ),
        _graph(
            "Bytes processed per minute",
            region,
            [_nlb_metric("ProcessedBytes", "bytes", "Sum", LoadBalancer=lb)],
            y_label="bytes",
        ),
        _graph(
            "TCP resets per minute",
            region,
            [
                _nlb_metric("TCP_Target_Reset_Count", "from vLLM pods", "Sum", LoadBalancer=lb),
                _nlb_metric("TCP_Client_Reset_Count", "from clients", "Sum", LoadBalancer=lb),
                _nlb_metric("TCP_ELB_Reset_Count", "from the load balancer", "Sum", LoadBalancer=lb),
            ],
            y_label="resets",
        ),
    ]
    widgets += [
        _graph(
            f"Targets: {m}",
            region,
            [
                _nlb_metric("HealthyHostCount", "healthy", "Minimum", TargetGroup=tg, LoadBalancer=lb),
                _nlb_metric("UnHealthyHostCount", "unhealthy", "Maximum", TargetGroup=tg, LoadBalancer=lb),
            ],
            y_label="pods",
        )
        for m, tg in models
    ]
    return widgets


def _application_widgets(
    lb: str, models: list[tuple[str, str]], region: str, target_optimizer: bool
) -> list[dict[str, Any]]:
    widgets: list[dict[str, Any]] = [
        _text(
            "# Inference\nLoad balancer metrics (`AWS/ApplicationELB`), one line per model. "
            "Response time is the time to the first response byte.",
            height=2,
        ),
        _graph(
            "Requests per minute",
            region,
            [_alb_metric("RequestCount", m, "Sum", TargetGroup=tg, LoadBalancer=lb) for m, tg in models],
            y_label="requests",
        ),
        _graph(
            "5xx per minute",
            region,
            [_alb_metric("HTTPCode_ELB_5XX_Count", "load balancer", "Sum", LoadBalancer=lb)]
            + [
                _alb_metric("HTTPCode_Target_5XX_Count", m, "Sum", TargetGroup=tg, LoadBalancer=lb)
                for m, tg in models
            ],
            y_label="responses",
        ),
        _graph(
            "Response time p50",
            region,
            [
                _alb_metric("TargetResponseTime", m, "p50", TargetGroup=tg, LoadBalancer=lb)
                for m, tg in models
            ],
            y_label="seconds",
        ),
        _graph(
            "Response time p99",
            region,
            [
                _alb_metric("TargetResponseTime", m, "p99", TargetGroup=tg, LoadBalancer=lb)
                for m, tg in models
            ],
            y_label="seconds",
        ),
    ]
    widgets += [
        _graph(
            f"Targets: {m}",
            region,
            [
                _alb_metric("HealthyHostCount", "healthy", "Minimum", TargetGroup=tg, LoadBalancer=lb),
                _alb_metric("UnHealthyHostCount", "unhealthy", "Maximum", TargetGroup=tg, LoadBalancer=lb),
            ],
            y_label="pods",
        )
        for m, tg in models
    ]
    if target_optimizer:
        widgets.append(
            _graph(
                "Target Optimizer",
                region,
                [
                    _alb_metric("TargetControlRequestCount", "requests", "Sum", LoadBalancer=lb),
                    _alb_metric("TargetControlRequestRejectCount", "rejected", "Sum", LoadBalancer=lb),
                ],
                y_label="requests",
            )
        )
    return widgets


class InferenceDashboard(Construct):
    """A CloudWatch dashboard for one tier: traffic, errors, latency and target health per model.

    The body is built by :func:`dashboard_body` and handed to one `AWS::CloudWatch::Dashboard`
    named `name` (letters, digits, '-' and '_', at most 255). Defaults: the last 3 hours,
    one-minute periods; no Target Optimizer row unless `target_optimizer`; no PromQL panel
    unless `workspace_query`; Application Load Balancer metrics unless `kind` is NLB (a Network
    Load Balancer: flows, bytes, resets and target health). `network=True` is the deprecated
    spelling of `kind=LoadBalancerKind.NLB`.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        load_balancer_full_name: str,
        target_groups: Mapping[str, str],
        region: str,
        target_optimizer: bool,
        workspace_query: bool = False,
        kind: LoadBalancerKind | None = None,
        network: bool | None = None,
        engines: Sequence[str] = ("vllm",),
    ) -> None:
        super().__init__(scope, id)
        self.kind = load_balancer_kind(kind, network, "InferenceDashboard")
        """The load balancer whose metrics the dashboard charts."""
        _check_target_optimizer(self.kind, target_optimizer)
        if not cdk.Token.is_unresolved(name) and not _DASHBOARD_NAME.match(name):
            raise ValueError(f"'name' must be 1-255 letters, digits, '-' or '_', got {name!r}")
        if not target_groups:
            raise ValueError("'target_groups' must map at least one model to its target group, got {}")
        self.body = dashboard_body(
            load_balancer_full_name=load_balancer_full_name,
            target_groups=target_groups,
            region=region,
            target_optimizer=target_optimizer,
            workspace_query=workspace_query,
            kind=self.kind,
            engines=engines,
        )
        # Tokens (the load balancer and target group names) stay whole strings inside the JSON;
        # CloudFormation joins them in at deploy time.
        self.dashboard = cloudwatch.CfnDashboard(
            self, "Resource", dashboard_name=name, dashboard_body=json.dumps(self.body, separators=(",", ":"))
        )

    @property
    def dashboard_name(self) -> str:
        """Name of the dashboard."""
        return self.dashboard.ref
