"""The usage `gpufarm cost` assumes for the lines a template bills by use rather than by the hour.

Logs ingested, requests inspected, keys and secrets called, bytes pulled through NAT: the config
cannot say how much of these a tier will use, so each has a documented default here. A user
replaces any of them with a YAML file of the same keys (`gpufarm cost --usage FILE`), read by
:func:`load_usage`; the keys a file leaves out keep their defaults.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpufarm.config.errors import ConfigError, ConfigIssue
from gpufarm.debug import kind_of, yaml_problem


@dataclass(frozen=True, kw_only=True)
class Usage:
    """Monthly usage the bill assumes where the config does not fix it. Every figure is >= 0."""

    requests_per_month: float = 10_000_000
    """Requests through the load balancer in a month (WAF inspects each; the logs record each).
    Ten million: about four requests a second, a steady internal inference service."""

    kib_per_request: float = 16
    """Request plus response bytes of one request, KiB: a prompt and a streamed completion of a
    few thousand tokens. Sets the data through GWLB endpoints and the Guardrail text screened."""

    control_plane_log_gb_per_type: float = 5
    """GB each enabled EKS control-plane log type writes in a month. The audit log dominates in
    practice; 5 GB per type averages it with the quieter scheduler and authenticator logs."""

    flow_log_gb_per_vpc: float = 10
    """GB of VPC flow log records per VPC and month (all traffic, the default record format)."""

    waf_log_bytes_per_request: float = 1500
    """Bytes of one WAF log record (a JSON record with the request's headers)."""

    access_log_bytes_per_request: float = 500
    """Bytes of one load balancer access log line, stored in S3 for the configured retention."""

    unexpiring_log_months: float = 12
    """Months of data a log group without retention holds: EKS creates the control-plane log
    group with none, so its storage grows each month; priced as it stands after a year."""

    kms_requests_per_key: float = 100_000
    """Requests each customer managed key serves in a month (data keys for log groups, volumes,
    secrets and the file system)."""

    secret_api_calls_per_secret: float = 10_000
    """Secrets Manager calls each referenced secret serves in a month (pods reading it at start,
    the provider refreshing it)."""

    interface_endpoint_gb: float = 50
    """GB through the VPC interface endpoints in a month (ECR manifests, logs, STS, SSM, the
    Bedrock fallback's requests)."""

    image_gb_per_node_launch: float = 10
    """GB of container images a new GPU node pulls through NAT: the vLLM image is published on
    Docker Hub, which no VPC endpoint reaches. With `images.pull_through_cache` the nodes pull
    from ECR instead, and this is the GB the cache stores."""

    launches_per_base_node: float = 1
    """Times a month each base GPU node is replaced (Karpenter's `expire_after` of 720h)."""

    scale_ups_per_month: float = 30
    """Times a month the pools scale from base to peak and back (a daily peak)."""

    def to_json(self) -> dict[str, float]:
        """Every figure by key."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


USAGE_KEYS = tuple(f.name for f in dataclasses.fields(Usage))
"""The keys a usage file may set, in the order they are documented."""


def usage_issues(document: dict[str, Any]) -> list[ConfigIssue]:
    """Every problem in a usage document: unknown keys, values that are not numbers >= 0."""
    issues: list[ConfigIssue] = []
    for key, value in document.items():
        if key not in USAGE_KEYS:
            issues.append(
                ConfigIssue(path=str(key), message=f"unknown key; the keys are {', '.join(USAGE_KEYS)}")
            )
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or math.isnan(value) or math.isinf(value) or value < 0:
            shown = kind_of(value) if value is None or isinstance(value, bool) else repr(value)
            issues.append(ConfigIssue(path=key, message=f"must be a number of at least 0, got {shown}"))
    return issues


def build_usage(document: dict[str, Any], *, source: str = "usage") -> Usage:
    """A :class:`Usage` from a mapping of some of its keys; ConfigError listing every problem."""
    issues = usage_issues(document)
    if issues:
        raise ConfigError(issues, source=source)
    return Usage(**{key: float(value) for key, value in document.items()})


def load_usage(path: str | Path) -> Usage:
    """The usage YAML file at `path` over the defaults; ConfigError when it cannot be read or is invalid."""
    source = f"usage file {str(path)!r}"
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue(path="", message=f"cannot be read: {exc.strerror}")], source=source
        ) from None
    except UnicodeDecodeError:
        raise ConfigError([ConfigIssue(path="", message="is not UTF-8 text")], source=source) from None
    except yaml.YAMLError as exc:
        raise ConfigError(
            [ConfigIssue(path="", message=f"is not valid YAML{yaml_problem(exc)}")], source=source
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            [ConfigIssue(path="", message=f"must hold a mapping of usage keys, got {kind_of(data)}")],
            source=source,
        )
    return build_usage(data, source=source)
