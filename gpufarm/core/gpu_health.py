"""How a vLLM pod's health is read, and how long a failed GPU keeps (or stops) getting traffic.

One answer for the probes (`k8s/serving.py`, `k8s/lws.py`), the target groups
(`constructs/ingress.py`, `constructs/nlb.py`) and the operations guide's table "When a GPU
fails" (docs/operations.md), which a test renders from :func:`failure_timeline`.

What vLLM 0.31.0 answers, by state (vllm-project/vllm, `vllm/entrypoints/openai/api_server.py`,
`vllm/entrypoints/launcher.py`, `vllm/entrypoints/serve/instrumentator/health.py`):

- **loading**: `setup_server` binds the port before the engine is built, but uvicorn starts
  listening only after the weights are loaded (`build_async_engine_client`, then
  `build_and_serve`). Until then a connection is refused: every probe fails, and only the
  startup probe's budget keeps the kubelet from acting.
- **serving**: `GET /health` runs `engine_client.check_health()` and answers 200. It makes no
  call into the engine core, so it stays fast under load.
- **engine dead**: `check_health()` raises `EngineDeadError` and `/health` answers 503. A
  watchdog checks every 5 s (`VLLM_WATCHDOG_TIME_S`) and stops the server when the engine has
  errored, unless `VLLM_KEEP_ALIVE_ON_ENGINE_DEATH` is set (gpufarm never sets it): the
  container exits and the kubelet restarts it, which loads the model again under the startup
  probe.

The probes follow: the startup probe allows the model's `startup_timeout_seconds` to load; the
readiness probe takes a pod out of its Service (and out of target groups that use readiness
gates) within :data:`READINESS_PERIOD_SECONDS` x :data:`READINESS_FAILURE_THRESHOLD`; the
liveness probe starts only after startup succeeds (Kubernetes disables liveness and readiness
until the startup probe passes, https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/),
so it never kills a loading engine, and restarts an API server that hangs without exiting.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from gpufarm.config.model import ModelConfig, TierConfig

STARTUP_PERIOD_SECONDS: Final = 10
"""Startup probe period; the failure threshold covers the model's `startup_timeout_seconds`."""
STARTUP_TIMEOUT_SECONDS: Final = 5
READINESS_PERIOD_SECONDS: Final = 5
READINESS_TIMEOUT_SECONDS: Final = 4
READINESS_FAILURE_THRESHOLD: Final = 2
"""Two failed `/health` calls 5 s apart take a pod out of its Service: one slow answer does not."""
LIVENESS_PERIOD_SECONDS: Final = 15
LIVENESS_TIMEOUT_SECONDS: Final = 10
LIVENESS_FAILURE_THRESHOLD: Final = 4
"""A minute of failed `/health` calls restarts the container: a backstop for a hung server, since a
dead engine already makes vLLM exit."""

AGENT_PERIOD_SECONDS: Final = 10
AGENT_TIMEOUT_SECONDS: Final = 2
AGENT_FAILURE_THRESHOLD: Final = 3
"""The Target Optimizer agent's TCP probes on its data port. The agent publishes no health
endpoint (ELB user guide, "Target optimizer"; the load balancer controller's injector sets no
probe either, aws-load-balancer-controller `pkg/inject/albtargetcontrol`), so the kubelet checks
that it accepts connections."""

VLLM_WATCHDOG_SECONDS: Final = 5
"""vLLM's watchdog period (`VLLM_WATCHDOG_TIME_S` in `vllm/entrypoints/launcher.py`): the API
server exits at most this long after its engine dies."""

TARGET_UNHEALTHY_THRESHOLD: Final = 3
"""Failed load-balancer health checks before a target is unhealthy (ALB and NLB target groups)."""

NODE_MONITORING_AGENT_ADDON: Final = "eks-node-monitoring-agent"
"""The EKS add-on that sets `AcceleratedHardwareReady` and the other node conditions repair acts on
(https://docs.aws.amazon.com/eks/latest/userguide/node-health.html)."""

GPU_FAULT_REPAIR_SECONDS: Final = 600
"""How long `AcceleratedHardwareReady=False` is tolerated before the node is replaced (10 min;
the same for Auto Mode, managed node groups and Karpenter: EKS user guide, "Automatically
repair nodes in EKS clusters", https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html;
Karpenter, https://karpenter.sh/docs/concepts/disruption/#node-auto-repair)."""

NODE_FAULT_REPAIR_SECONDS: Final = 1800
"""How long the agent's `KernelReady`, `NetworkingReady`, `StorageReady` or
`ContainerRuntimeReady` may be False before the node is replaced (30 min, same pages); Karpenter
also replaces a node that stays `Ready=False` or `Unknown` that long."""


def startup_failure_threshold(model: ModelConfig) -> int:
    """Startup probe failures allowed: the model's `startup_timeout_seconds` in probe periods."""
    return math.ceil(model.startup_timeout_seconds / STARTUP_PERIOD_SECONDS)


def readiness_seconds() -> int:
    """Longest a pod whose `/health` fails stays in its Service's endpoints."""
    return READINESS_PERIOD_SECONDS * READINESS_FAILURE_THRESHOLD


def liveness_seconds() -> int:
    """Longest a hung vLLM server runs before the kubelet restarts its container."""
    return LIVENESS_PERIOD_SECONDS * LIVENESS_FAILURE_THRESHOLD


def target_unhealthy_seconds(health_check_interval_seconds: int) -> int:
    """Longest a failing target keeps receiving new requests from the load balancer."""
    return health_check_interval_seconds * TARGET_UNHEALTHY_THRESHOLD


@dataclass(frozen=True, kw_only=True)
class TimelineStep:
    """One step between a GPU failing and its replacement serving, with its bound in seconds."""

    step: str
    seconds: int
    rule: str
    """How the number is computed (what the table shows next to it)."""


def failure_timeline(config: TierConfig) -> list[TimelineStep]:
    """The steps and their upper bounds for one tier, in the order they happen.

    The longest model startup of the tier bounds the last step. Propagation of an endpoint
    change to kube-proxy and to the load balancer controller has no documented bound and is not
    counted.
    """
    interval = config.ingress.health_check_interval_seconds
    load = max((m.startup_timeout_seconds for m in config.models), default=0)
    return [
        TimelineStep(
            step="vLLM exits after its engine dies",
            seconds=VLLM_WATCHDOG_SECONDS,
            rule="vLLM watchdog period",
        ),
        TimelineStep(
            step="pod leaves its Service (gateway and in-cluster route)",
            seconds=readiness_seconds(),
            rule=f"readiness {READINESS_PERIOD_SECONDS} s x {READINESS_FAILURE_THRESHOLD}",
        ),
        TimelineStep(
            step="load balancer stops sending new requests",
            seconds=target_unhealthy_seconds(interval),
            rule=f"health-check interval x {TARGET_UNHEALTHY_THRESHOLD}",
        ),
        TimelineStep(
            step="hung server restarted by liveness",
            seconds=liveness_seconds(),
            rule=f"liveness {LIVENESS_PERIOD_SECONDS} s x {LIVENESS_FAILURE_THRESHOLD}",
        ),
        TimelineStep(
            step="node with a failed GPU replaced",
            seconds=GPU_FAULT_REPAIR_SECONDS,
            rule="AcceleratedHardwareReady=False tolerated 10 min",
        ),
        TimelineStep(
            step="node with a failed kernel, network, storage or runtime replaced",
            seconds=NODE_FAULT_REPAIR_SECONDS,
            rule="condition False tolerated 30 min",
        ),
        TimelineStep(
            step="replacement pod loads the model",
            seconds=load,
            rule="longest startup_timeout_seconds",
        ),
    ]


def timeline_table(configs: dict[str, TierConfig]) -> list[str]:
    """The Markdown table of docs/operations.md, "When a GPU fails": one column per tier."""
    names = list(configs)
    rows = {name: failure_timeline(cfg) for name, cfg in configs.items()}
    first = rows[names[0]]
    lines = [
        "| Step | Rule | " + " | ".join(names) + " |",
        "|---|---|" + "---:|" * len(names),
    ]
    for i, step in enumerate(first):
        cells = " | ".join(f"{rows[n][i].seconds} s" for n in names)
        lines.append(f"| {step.step} | {step.rule} | {cells} |")
    return lines
