"""Observability: Amazon Managed Prometheus with its managed scraper, CloudWatch alarms and a dashboard.

* :class:`PrometheusMonitoring`: an AMP workspace, an AWS managed scraper (`AWS::APS::Scraper`)
  that collects the vLLM and DCGM exporter metrics, and NVIDIA's DCGM exporter on GPU nodes.
  KEDA reads the workspace through :attr:`PrometheusMonitoring.query_endpoint`.
* :class:`InferenceAlarms`: load balancer alarms (5xx, p99 latency, unhealthy targets, Target
  Optimizer rejections) sent to an encrypted SNS topic.
* :class:`InferenceDashboard`: one CloudWatch dashboard per tier, its body built as JSON.

Each lives in its own module (:mod:`gpufarm.constructs.prometheus`, :mod:`gpufarm.constructs.alarms`,
:mod:`gpufarm.constructs.dashboard`); this module keeps the names importable from here.
See docs/decisions/0016-managed-scraper.md.
"""

from gpufarm.constructs.alarms import (
    ALB_NAMESPACE,
    CLOUDWATCH_SERVICE,
    LOAD_BALANCER_NAMESPACES,
    NLB_NAMESPACE,
    PERIOD_SECONDS,
    InferenceAlarms,
    load_balancer_kind,
)
from gpufarm.constructs.dashboard import PROMQL_QUERIES, InferenceDashboard, dashboard_body
from gpufarm.constructs.prometheus import (
    DCGM_CHART,
    DCGM_NAMESPACE,
    DCGM_REPOSITORY,
    SCRAPER_SERVICE,
    PrometheusMonitoring,
)

__all__ = [
    "ALB_NAMESPACE",
    "CLOUDWATCH_SERVICE",
    "DCGM_CHART",
    "DCGM_NAMESPACE",
    "DCGM_REPOSITORY",
    "LOAD_BALANCER_NAMESPACES",
    "NLB_NAMESPACE",
    "PERIOD_SECONDS",
    "PROMQL_QUERIES",
    "SCRAPER_SERVICE",
    "InferenceAlarms",
    "InferenceDashboard",
    "PrometheusMonitoring",
    "dashboard_body",
    "load_balancer_kind",
]
