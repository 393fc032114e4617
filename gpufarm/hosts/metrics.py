"""The CloudWatch agent on a GPU instance: it scrapes the engine's Prometheus endpoint and publishes
the queue-depth series the Auto Scaling group's target tracking policy reads.

The agent takes two files (Amazon CloudWatch user guide, "Set up and configure Prometheus metrics
collection on Amazon EC2 instances",
https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch-Agent-PrometheusEC2.html):
a standard Prometheus scrape config (`global`, `scrape_configs` with `static_configs`), and its own
JSON config whose `logs.metrics_collected.prometheus` names that file
(`prometheus_config_path`), the log group the embedded-metric-format events go to
(`log_group_name`), the metric namespace, and `emf_processor.metric_declaration`: which series
become CloudWatch metrics (`metric_selectors`, regular expressions), for which targets
(`source_labels` matched by `label_matcher`) and with which `dimensions`.

Each instance labels its scrape target with its Auto Scaling group's name, so the metric has the
one dimension `AutoScalingGroupName` and CloudWatch averages it over the group's instances: the
"average per instance" a target tracking policy on a customized metric wants.
"""

from __future__ import annotations

import json
import re

import yaml

METRICS_NAMESPACE = "gpufarm/Engines"
"""CloudWatch namespace of the engine series the agents publish."""
SCRAPE_JOB = "gpufarm-engine"
GROUP_DIMENSION = "AutoScalingGroupName"
SCRAPE_INTERVAL_SECONDS = 15


def scrape_config(*, port: int, metrics_path: str, group_name: str) -> str:
    """The Prometheus scrape config: the engine on this instance, labelled with its group's name."""
    config = {
        "global": {"scrape_interval": f"{SCRAPE_INTERVAL_SECONDS}s", "scrape_timeout": "10s"},
        "scrape_configs": [
            {
                "job_name": SCRAPE_JOB,
                "metrics_path": metrics_path,
                "static_configs": [
                    {"targets": [f"127.0.0.1:{port}"], "labels": {GROUP_DIMENSION: group_name}}
                ],
            }
        ],
    }
    return str(yaml.safe_dump(config, sort_keys=True))


def agent_config(*, queue_metric: str, log_group: str, prometheus_config_path: str) -> str:
    """The CloudWatch agent's JSON config: publish `queue_metric` by Auto Scaling group."""
    config = {
        "agent": {"metrics_collection_interval": 60},
        "logs": {
            "metrics_collected": {
                "prometheus": {
                    "prometheus_config_path": prometheus_config_path,
                    "log_group_name": log_group,
                    "metric_namespace": METRICS_NAMESPACE,
                    "emf_processor": {
                        "metric_declaration": [
                            {
                                "source_labels": ["job"],
                                "label_matcher": f"^{SCRAPE_JOB}$",
                                "dimensions": [[GROUP_DIMENSION]],
                                "metric_selectors": [f"^{re.escape(queue_metric)}$"],
                            }
                        ]
                    },
                }
            }
        },
    }
    return json.dumps(config, indent=2, sort_keys=True) + "\n"
