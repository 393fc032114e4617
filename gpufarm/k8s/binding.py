"""TargetGroupBinding: joins a Service's pods to a load balancer target group that CDK owns."""

from __future__ import annotations

from typing import Any

from gpufarm.config.model import Provisioning, TierConfig
from gpufarm.k8s.labels import common_labels

AUTO_MODE_TGB_API = "eks.amazonaws.com/v1"
"""EKS Auto Mode's built-in load balancer controller."""

LBC_TGB_API = "elbv2.k8s.aws/v1beta1"
"""The AWS Load Balancer Controller (clusters without Auto Mode)."""

TGB_APIS = (AUTO_MODE_TGB_API, LBC_TGB_API)
"""The TargetGroupBinding APIs gpufarm renders."""

READINESS_GATE_INJECT_LABEL = "elbv2.k8s.aws/pod-readiness-gate-inject"
"""Namespace label (value `enabled`) that makes the AWS Load Balancer Controller inject a readiness
gate into each new pod behind a TargetGroupBinding: the pod is Ready only once its target is
healthy in the target group (kubernetes-sigs/aws-load-balancer-controller
docs/deploy/pod_readiness_gate.md; IP targets only, injected at pod creation)."""

TARGET_HEALTHY_THRESHOLD = 2
"""Consecutive passed health checks before a new target of gpufarm's target groups is healthy."""

REGISTRATION_ALLOWANCE_SECONDS = 30
"""Time allowed for the controller to register a Ready pod in its target group. Not a documented
AWS figure: an allowance on top of the health checks, which are."""


def binding_api(tier: TierConfig) -> str:
    """The TargetGroupBinding API of a tier's cluster: Auto Mode's built-in controller, else the LBC."""
    return AUTO_MODE_TGB_API if tier.cluster.provisioning is Provisioning.AUTO_MODE else LBC_TGB_API


def rollout_min_ready_seconds(tier: TierConfig) -> int:
    """:func:`min_ready_seconds` for the pods a tier registers in its target groups."""
    return min_ready_seconds(binding_api(tier), tier.ingress.health_check_interval_seconds)


def readiness_gates(api_version: str) -> bool:
    """Whether the controller behind a TargetGroupBinding API injects pod readiness gates.

    The AWS Load Balancer Controller does, for namespaces labelled
    :data:`READINESS_GATE_INJECT_LABEL`. EKS Auto Mode's built-in load balancing is not
    documented to: support is an open request (aws/containers-roadmap#2511, "Support AWS Load
    Balancer Pod Readiness Gate with Auto Mode"), so gpufarm treats it as unsupported.
    """
    return api_version == LBC_TGB_API


def min_ready_seconds(api_version: str, health_check_interval_seconds: int) -> int:
    """`minReadySeconds` for a Deployment whose pods a TargetGroupBinding of `api_version` registers.

    With readiness gates, 0: a pod is Ready only once healthy in its target group. Without them
    (Auto Mode) a rollout waits, after each new pod is Ready, for its registration
    (:data:`REGISTRATION_ALLOWANCE_SECONDS`) and the health checks that make it healthy
    (:data:`TARGET_HEALTHY_THRESHOLD` x the interval) before it removes an old pod.
    """
    if readiness_gates(api_version):
        return 0
    return REGISTRATION_ALLOWANCE_SECONDS + TARGET_HEALTHY_THRESHOLD * health_check_interval_seconds


def target_group_binding(
    *,
    name: str,
    namespace: str,
    service_name: str,
    service_port: int,
    target_group_arn: str,
    api_version: str = AUTO_MODE_TGB_API,
) -> dict[str, Any]:
    """A TargetGroupBinding registering the Service's pod IPs in the target group.

    The binding only registers targets; security-group rules are written by CDK next to the
    load balancer, so nothing outside the template opens a port (no `spec.networking`, which
    would let the controller edit security groups). `spec.targetType` is always `ip`: Auto Mode
    requires it and the AWS Load Balancer Controller refuses to change it later. That
    controller also refuses a new `targetGroupARN` on an existing binding, so a replaced target
    group gets a binding under a new name. `api_version` is one of :data:`TGB_APIS`
    (default: Auto Mode's).
    """
    if api_version not in TGB_APIS:
        raise ValueError(
            f"'api_version' must be one of {', '.join(repr(a) for a in TGB_APIS)}, got {api_version!r}"
        )
    return {
        "apiVersion": api_version,
        "kind": "TargetGroupBinding",
        "metadata": {"name": name, "namespace": namespace, "labels": common_labels("ingress")},
        "spec": {
            "serviceRef": {"name": service_name, "port": service_port},
            "targetGroupARN": target_group_arn,
            "targetType": "ip",
        },
    }
