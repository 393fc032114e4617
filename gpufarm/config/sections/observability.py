"""Metrics, alarms and dashboards."""

from __future__ import annotations

from pydantic import Field

from gpufarm.config.sections.grafana import GrafanaConfig
from gpufarm.config.sections.values import ChartVersion, Email, _Model


class PrometheusConfig(_Model):
    """Amazon Managed Service for Prometheus: workspace, managed scraper and DCGM exporter."""

    enabled: bool = Field(False, description="Create the workspace and the managed scraper.")
    scrape_interval_seconds: int = Field(
        30, ge=30, le=300, description="How often metrics are scraped (the managed scraper allows 30-300)."
    )
    dcgm_exporter: bool = Field(True, description="Deploy NVIDIA's DCGM exporter on GPU nodes.")
    dcgm_exporter_chart_version: ChartVersion = Field(
        "4.6.0", description="DCGM exporter Helm chart version, pinned."
    )
    alerts: bool = Field(
        True,
        description="Alerting rules on the workspace (TTFT, queue, GPU use, KV cache, errors, "
        "availability burn rate, XID) and an alert manager sending to the alarm topic.",
    )
    fallback_rate_percent: float = Field(
        5,
        gt=0,
        le=100,
        description="Bedrock answers as a percentage of a model's gateway answers (over 15 minutes, "
        "for 15 minutes) that alert.",
    )
    bedrock_spend_per_hour: float = Field(
        20,
        gt=0,
        description="Dollars of Bedrock fallback tokens over the last hour (on-demand list prices) "
        "that alert.",
    )


class AlarmsConfig(_Model):
    """CloudWatch alarms on the load balancer, sent to an SNS topic."""

    enabled: bool = Field(True, description="Create the alarms and their SNS topic.")
    emails: list[Email] = Field([], description="Addresses subscribed to the alarm topic.")
    target_5xx_per_minute: int = Field(
        10, ge=1, description="5xx responses (targets and load balancer) per minute that alarm."
    )
    p99_response_seconds: float = Field(
        30, gt=0, le=4000, description="p99 time to first response byte that alarms, seconds."
    )
    evaluation_minutes: int = Field(5, ge=1, le=60, description="Minutes a breach must last.")
    error_rate_percent: float = Field(
        5,
        gt=0,
        le=100,
        description="5xx answers as a percentage of requests (per minute) that alarm (ALB only).",
    )


class ObservabilityConfig(_Model):
    """Metrics, alarms and dashboards."""

    prometheus: PrometheusConfig = Field(default_factory=PrometheusConfig, description="Managed Prometheus.")
    alarms: AlarmsConfig = Field(default_factory=AlarmsConfig, description="CloudWatch alarms.")
    dashboard: bool = Field(True, description="A CloudWatch dashboard for the tier.")
    grafana: GrafanaConfig = Field(
        default_factory=GrafanaConfig, description="Amazon Managed Grafana on the Prometheus workspace."
    )
