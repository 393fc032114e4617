"""How many gateway pods a tier needs, from the gateway's measured ceiling.

The figures come from `benchmarks/gateway.py` and are recorded twice: as a table with its date
and the machine's load in benchmarks/README.md ("The gateway under concurrency"), and as data
in `gpufarm/data/gateway_capacity.yaml`, which this module reads (a test keeps the two equal).

The rule (docs/fallback.md, "Sizing the gateway"; ADR 0048):

1. **Design concurrency**: the most requests the tier's models take at once, the sum over the
   models of their most replicas times the concurrency one replica is sent
   (`ModelConfig.max_replicas` x `ModelConfig.max_concurrency`: the Target Optimizer's cap,
   else `max_num_seqs`, else 64). Every one of them may pass the gateway.
2. **Concurrency per worker**: the highest measured concurrency at which one LiteLLM worker adds
   at most :data:`ADDED_P99_GOAL_MS` at p99, streamed or not (the worse of the two). The stand-in
   behind the benchmark answers at once, so these are requests the worker is busy with, the
   worst case of a real stream, which spends most of its time waiting for tokens.
3. **Pods for the goal**: design concurrency over (concurrency per worker x workers per pod),
   rounded up. The HPA's upper bound is that, within :data:`MAX_GATEWAY_REPLICAS`; when the
   goal needs more pods than that (or no measured concurrency meets it), the goal is not met
   by the gateway and :attr:`GatewaySizing.goal_met` says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from gpufarm.config.model import TierConfig

ADDED_P99_GOAL_MS = 40.0
"""The most the gateway may add at p99: 2% of the 2 s time-to-first-token target (issue 14)."""

MAX_GATEWAY_REPLICAS = 20
"""The most gateway pods gpufarm sizes for (the bound of `fallback.replicas` and `max_replicas`)."""


@dataclass(frozen=True)
class GatewayCapacity:
    """What one LiteLLM worker process carried in `benchmarks/gateway.py`, as recorded."""

    measured: str
    """Day of the run (ISO date)."""
    load_average: str
    """The machine's load average during the run (read the figures against it)."""
    setting: str
    """The proxy setting measured (server, workers, log level)."""
    added_p99_ms: dict[int, float]
    """Concurrent streams per worker -> added p99 (ms), the worse of JSON and streamed."""
    requests_per_second: float
    """Completed requests per second per worker at its ceiling."""
    chunks_per_second: float
    """Streamed content chunks (tokens) per second per worker at its ceiling."""
    cpu_ms_per_request: float
    """CPU time the proxy spent per request."""

    def concurrency_within(self, goal_ms: float) -> int:
        """The highest measured concurrency whose added p99 is at most `goal_ms`; 0 if none."""
        return max((c for c, ms in self.added_p99_ms.items() if ms <= goal_ms), default=0)


def capacity_from(data: dict[str, Any]) -> GatewayCapacity:
    """A :class:`GatewayCapacity` from the data file's mapping."""
    return GatewayCapacity(
        measured=str(data["measured"]),
        load_average=str(data["load_average"]),
        setting=str(data["setting"]),
        added_p99_ms={int(c): float(ms) for c, ms in data["added_p99_ms"].items()},
        requests_per_second=float(data["requests_per_second"]),
        chunks_per_second=float(data["chunks_per_second"]),
        cpu_ms_per_request=float(data["cpu_ms_per_request"]),
    )


@cache
def measured_capacity() -> GatewayCapacity:
    """The recorded figures (`gpufarm/data/gateway_capacity.yaml`)."""
    text = (resources.files("gpufarm") / "data" / "gateway_capacity.yaml").read_text(encoding="utf-8")
    return capacity_from(yaml.safe_load(text))


@dataclass(frozen=True)
class GatewaySizing:
    """The gateway pods a tier needs for the latency goal, and what gpufarm deploys."""

    design_concurrency: int
    """Requests the tier's models take at once at their most replicas."""
    workers: int
    """LiteLLM worker processes per pod."""
    concurrency_per_pod: int
    """Concurrent requests one pod carries within the goal (0: none does)."""
    pods_for_goal: int | None
    """Pods that keep the added p99 within the goal at the design concurrency (None: unreachable)."""
    min_replicas: int
    """Pods always running (`fallback.replicas`)."""
    max_replicas: int
    """The HPA's upper bound (`fallback.max_replicas`, else the pods for the goal within the cap)."""

    @property
    def goal_met(self) -> bool:
        """Whether `max_replicas` pods keep the added p99 within the goal at the design concurrency."""
        return self.pods_for_goal is not None and self.pods_for_goal <= self.max_replicas

    @property
    def autoscaled(self) -> bool:
        """Whether an HPA scales the pods (its bounds differ)."""
        return self.max_replicas > self.min_replicas


def design_concurrency(tier: TierConfig) -> int:
    """The sum over the tier's models of their most replicas x the concurrency one replica is sent."""
    return sum(model.max_replicas * model.max_concurrency for model in tier.models)


def pods_for(design: int, concurrency_per_pod: int) -> int | None:
    """Pods that carry `design` concurrent requests at `concurrency_per_pod` each (None: 0 each)."""
    if concurrency_per_pod <= 0:
        return None
    return max(1, math.ceil(design / concurrency_per_pod))


def gateway_sizing(tier: TierConfig, capacity: GatewayCapacity | None = None) -> GatewaySizing:
    """The gateway's sizing for `tier` from `capacity` (default: the recorded figures).

    Workers per pod: `fallback.workers`. The HPA's upper bound: `fallback.max_replicas` when
    set; otherwise the pods for the goal, at least `fallback.replicas` and at most
    :data:`MAX_GATEWAY_REPLICAS`, or `fallback.replicas` where the tier has no resource metrics
    for an HPA (:func:`resource_metrics_available`).
    """
    capacity = capacity or measured_capacity()
    fb = tier.fallback
    design = design_concurrency(tier)
    per_pod = capacity.concurrency_within(ADDED_P99_GOAL_MS) * fb.workers
    needed = pods_for(design, per_pod)
    if fb.max_replicas is not None:
        most = fb.max_replicas
    elif not resource_metrics_available(tier):
        most = fb.replicas
    else:
        most = min(MAX_GATEWAY_REPLICAS, max(fb.replicas, needed or MAX_GATEWAY_REPLICAS))
    return GatewaySizing(
        design_concurrency=design,
        workers=fb.workers,
        concurrency_per_pod=per_pod,
        pods_for_goal=needed,
        min_replicas=fb.replicas,
        max_replicas=most,
    )


def resource_metrics_available(tier: TierConfig) -> bool:
    """Whether the cluster serves the resource metrics API an HPA on CPU reads.

    gpufarm installs metrics-server as the EKS add-on `metrics-server` (`cluster.core_addons`)
    on clusters with karpenter provisioning. On Auto Mode the add-ons are not installed and Auto
    Mode does not include the Metrics Server (EKS user guide, "Considerations for Amazon EKS Auto
    Mode"), so it counts as absent there (docs/decisions/0048-gateway-capacity.md).
    """
    from gpufarm.config.sections.cluster import CoreAddon, Provisioning

    cluster = tier.cluster
    return (
        cluster.provisioning is not Provisioning.AUTO_MODE and CoreAddon.METRICS_SERVER in cluster.core_addons
    )
