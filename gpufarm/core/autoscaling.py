"""The rules of a KEDA scaling section, stated once.

The tier validator reports them under their config paths (`gpufarm.config.checks.serving`); the
KEDA manifests refuse a model that breaks them (`gpufarm.k8s.autoscaling`), since constructs used
on their own accept any ModelConfig. Both word them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Annotations only: gpufarm.config.validate imports this module, and importing the config
    # model at run time would start gpufarm.config (and so the validator) before it is defined.
    from gpufarm.config.model import ModelAutoscalingConfig


@dataclass(frozen=True)
class ScalingProblem:
    """A rule a scaling section breaks: the field it names (empty: the section itself) and why."""

    field: str
    message: str

    def path(self, section: str) -> str:
        """The problem's path under `section`, the path of the scaling section itself."""
        return f"{section}.{self.field}" if self.field else section


def scaling_problems(scaling: ModelAutoscalingConfig, *, critical: bool) -> list[ScalingProblem]:
    """What keeps KEDA from scaling a model's pods with `scaling`, in the order reported.

    `critical`: the pods serve a latency-critical model, which never scales to zero.
    """
    problems = []
    if scaling.min_replicas > scaling.max_replicas:
        problems.append(
            ScalingProblem(
                "min_replicas",
                f"must be at most max_replicas ({scaling.max_replicas}), got {scaling.min_replicas}",
            )
        )
    if scaling.min_replicas == 0 and critical:
        problems.append(
            ScalingProblem(
                "min_replicas",
                "must be at least 1 for a critical model (scale to zero needs critical: false), got 0",
            )
        )
    if scaling.queue_target is None and scaling.kv_cache_target is None:
        problems.append(
            ScalingProblem(
                "",
                "must set queue_target and/or kv_cache_target (the metrics it scales on), got neither",
            )
        )
    return problems


def prefill_scaling_problems(scaling: ModelAutoscalingConfig) -> list[ScalingProblem]:
    """What keeps KEDA from scaling a prefill/decode model's prefill pods with `scaling`.

    The rules of a non-critical model's pods, and one more: prefill pods never scale to zero.
    """
    problems = []
    if scaling.min_replicas == 0:
        problems.append(
            ScalingProblem(
                "min_replicas",
                "must be at least 1 (the picker sends a long prompt to a prefill pod whenever it "
                "disaggregates), got 0",
            )
        )
    return problems + scaling_problems(scaling, critical=False)
