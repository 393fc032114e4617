"""Each tier's serving namespace enforces a Pod Security Standards profile every one of its pods passes.

The profile is the strictest the pods allow: `restricted` for the poc and production tiers; the
enterprise tier's multi-node model sends over EFA, whose engines keep IPC_LOCK (outside even
`baseline`), so its namespace enforces `privileged` while auditing and warning at `restricted`.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufarm.config import load_preset
from tests.unit.pod_security import BASELINE, PRIVILEGED, RESTRICTED, pod_specs, violations

from .helpers import manifests

PSA = "pod-security.kubernetes.io"
EXPECTED = {"poc": RESTRICTED, "production": RESTRICTED, "enterprise": PRIVILEGED}


def _namespace_labels(template: dict[str, Any], name: str) -> dict[str, str]:
    [ns] = [m for m in manifests(template) if m["kind"] == "Namespace" and m["metadata"]["name"] == name]
    labels: dict[str, str] = ns["metadata"]["labels"]
    return labels


def _pods(template: dict[str, Any], namespace: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        pod
        for m in manifests(template)
        if m["metadata"].get("namespace") == namespace
        for pod in pod_specs(m)
    ]


@pytest.mark.parametrize("tier", sorted(EXPECTED))
def test_namespace_enforces_the_strictest_level_its_pods_pass(
    tier: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(f"{tier}_template")
    config = load_preset(tier)
    namespace = config.serving.namespace
    labels = _namespace_labels(template, namespace)
    level = EXPECTED[tier]
    version = f"v{config.cluster.kubernetes_version}"
    assert {k: v for k, v in labels.items() if k.startswith(PSA)} == {
        f"{PSA}/enforce": level,
        f"{PSA}/enforce-version": version,
        f"{PSA}/audit": RESTRICTED,
        f"{PSA}/audit-version": version,
        f"{PSA}/warn": RESTRICTED,
        f"{PSA}/warn-version": version,
    }
    pods = _pods(template, namespace)
    assert pods, "the tier renders pods in its serving namespace"
    failing = {name: violations(spec, level) for name, spec in pods if violations(spec, level)}
    assert failing == {}
    # The level is no laxer than it has to be: a stricter one would reject some pod.
    stricter = {PRIVILEGED: BASELINE, RESTRICTED: None}[level]
    if stricter is not None:
        assert any(violations(spec, stricter) for _, spec in pods)


def test_only_the_efa_engines_fall_short_of_restricted(enterprise_template: dict[str, Any]) -> None:
    namespace = load_preset("enterprise").serving.namespace
    short = {
        name: violations(spec, RESTRICTED)
        for name, spec in _pods(enterprise_template, namespace)
        if violations(spec, RESTRICTED)
    }
    assert short, "the enterprise preset runs an EFA multi-node model"
    for name, found in short.items():
        assert name.startswith("LeaderWorkerSet/"), name
        assert found == [
            "container 'vllm' adds non-default capabilities ['IPC_LOCK']",
            "container 'vllm' sets runAsNonRoot=false",
            "container 'vllm' sets runAsUser=0",
            "container 'vllm' must not add ['IPC_LOCK']",
        ]
