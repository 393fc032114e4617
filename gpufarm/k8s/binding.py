"""TargetGroupBinding: joins a Service's pods to a load balancer target group that CDK owns."""

from __future__ import annotations

from typing import Any

from gpufarm.k8s.labels import common_labels

AUTO_MODE_TGB_API = "eks.amazonaws.com/v1"
"""EKS Auto Mode's built-in load balancer controller."""

LBC_TGB_API = "elbv2.k8s.aws/v1beta1"
"""The AWS Load Balancer Controller (clusters without Auto Mode)."""

TGB_APIS = (AUTO_MODE_TGB_API, LBC_TGB_API)
"""The TargetGroupBinding APIs gpufarm renders."""


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
