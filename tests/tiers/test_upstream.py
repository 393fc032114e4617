"""What each synthesized template hands to Kubernetes and to the upstream releases it pins, checked
as the API server, Helm and the engines would: every custom object against its CRD's schema and
CEL rules, every Helm values key, engine flag, config key, label, image tag and queried series
against `../shared/upstream-ref/`.

The three presets and the variants the tier tests build (prefill/decode, KV-cache routing, a
model split into shares behind an ALB and an NLB, the enterprise NLB) are each synthesized once
per test run, in the same folders as the tier tests' own (tests/assemblies.py): each variant is
built here as the file that tests it builds it, and the configs' hash makes them one synth.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpufarm.config.model import PrefillDecodeConfig
from gpufarm.k8s import lws
from gpufarm.k8s import prefill_decode as k8s_prefill_decode
from tests.assemblies import shared_assembly, stack_template
from tests.tiers.conftest import variant
from tests.tiers.helpers import helm_releases, resolved_manifests
from tests.unit.factories import make_enterprise, overrides, split
from tests.unit.k8s_schema import crd_dir, crd_of, custom_object_errors
from tests.unit.upstream_ref import (
    REF_DIR,
    containers,
    image_tag,
    manifest_issues,
    pod_specs,
    ref_dir,
    runs_vllm_serve,
)

CORE_GROUPS = {
    "v1",
    "apps",
    "policy",
    "batch",
    "rbac.authorization.k8s.io",
    "autoscaling",
    "networking.k8s.io",
}
"""API groups of built-in kinds (checked by tests/unit/test_k8s_schemas.py with kubernetes-validate)."""

NO_CRD_HERE = {("eks.amazonaws.com/v1", "TargetGroupBinding")}
"""Custom kinds whose CRD is not under ../shared/k8s-crds: EKS Auto Mode installs and owns the
`eks.amazonaws.com` CRDs and does not publish them as files. Any other custom kind must have one."""

NLB_INGRESS = {
    "kind": "nlb",
    "target_optimizer": {"enabled": False},
    "waf": {"enabled": False},
    "lcu_reservation": None,
}


@pytest.fixture(scope="module")
def prefill_decode(
    production_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """As tests/tiers/test_prefill_decode.py: the 70B model split into prefill and decode pods."""
    models = [dict(m) for m in production_document["models"]]
    models[0]["prefill_decode"] = {
        "min_uncached_tokens": 1024,
        "prefill_autoscaling": {"min_replicas": 1, "max_replicas": 2, "queue_target": 3},
    }
    config = variant(
        production_document, {"models": models, "ingress": {"target_optimizer": {"enabled": False}}}
    )
    return stack_template(shared_assembly([config], tmp_path_factory), "gpufarm-production")


@pytest.fixture(scope="module")
def kv_routing(
    production_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """As tests/tiers/test_kv_cache_routing.py: the first model behind its KV-cache-aware router."""
    models = [dict(m) for m in production_document["models"]]
    models[0]["kv_cache_routing"] = True
    config = variant(
        production_document, {"models": models, "ingress": {"target_optimizer": {"enabled": False}}}
    )
    return stack_template(shared_assembly([config], tmp_path_factory), "gpufarm-production")


@pytest.fixture(scope="module")
def shares_alb(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """As tests/tiers/test_shares.py: the 70B model split across H100 and L40S, behind the ALB."""
    return stack_template(shared_assembly([make_enterprise(split())], tmp_path_factory), "gpufarm-enterprise")


@pytest.fixture(scope="module")
def shares_nlb(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """As tests/tiers/test_shares.py: the same split behind an NLB, one listener port per model."""
    base = split()
    ports = (8443, 9443, 10443)
    models = [dict(m, listener_port=p) for m, p in zip(base["models"], ports, strict=True)]
    return stack_template(
        shared_assembly(
            [make_enterprise(overrides(base, {"ingress": NLB_INGRESS}, {"models": models}))], tmp_path_factory
        ),
        "gpufarm-enterprise",
    )


@pytest.fixture(scope="module")
def enterprise_nlb(
    enterprise_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """As tests/tiers/test_enterprise.py: the enterprise preset behind an NLB."""
    models = [
        dict(m, listener_port=p)
        for m, p in zip(enterprise_document["models"], (8443, 9443, 10443), strict=True)
    ]
    config = variant(enterprise_document, {"models": models, "ingress": NLB_INGRESS})
    return stack_template(shared_assembly([config], tmp_path_factory), "gpufarm-enterprise")


TEMPLATES = [
    "poc_template",
    "production_template",
    "enterprise_template",
    "prefill_decode",
    "kv_routing",
    "shares_alb",
    "shares_nlb",
    "enterprise_nlb",
]


def _custom_objects(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in resolved_manifests(template) if m["apiVersion"].partition("/")[0] not in CORE_GROUPS]


# --------------------------------------------------------------------------- CRDs: schema and CEL


@pytest.mark.parametrize("name", TEMPLATES)
def test_every_custom_object_passes_its_crd(name: str, request: pytest.FixtureRequest) -> None:
    crd_dir()
    template = request.getfixturevalue(name)
    objects = _custom_objects(template)
    without_crd = {(m["apiVersion"], m["kind"]) for m in objects if crd_of(m) is None}
    assert without_crd <= NO_CRD_HERE
    checked = [m for m in objects if crd_of(m) is not None]
    errors = {f"{m['kind']}/{m['metadata']['name']}": custom_object_errors(m) for m in checked}
    assert {k: v for k, v in errors.items() if v} == {}
    if name != "poc_template":  # Auto Mode: its one NodePool; Karpenter tiers have classes and scalers too
        assert {"NodePool", "EC2NodeClass", "ScaledObject", "TargetGroupBinding"} <= {
            m["kind"] for m in checked
        }


def test_tokens_resolve_to_values_the_crds_accept(production_template: dict[str, Any]) -> None:
    # The cluster security group is a token in the template; its resolved shape must match the
    # EC2NodeClass pattern (sg-...), else the check above would hide behind the placeholder.
    nodeclass = next(m for m in resolved_manifests(production_template) if m["kind"] == "EC2NodeClass")
    ids = [t["id"] for t in nodeclass["spec"]["securityGroupSelectorTerms"] if "id" in t]
    assert ids == ["sg-0123456789abcdef0"]
    nodeclass["spec"]["securityGroupSelectorTerms"][1]["id"] = "<GetAtt:Cluster.ClusterSecurityGroupId>"
    assert custom_object_errors(nodeclass) == [
        "spec.securityGroupSelectorTerms.1.id: "
        "'<GetAtt:Cluster.ClusterSecurityGroupId>' does not match 'sg-[0-9a-z]+'"
    ]


# --------------------------------------------------------------------------- upstream releases


def pending(template: dict[str, Any]) -> list[str]:
    """Findings that changes under way elsewhere remove; each goes away when its change merges.

    - LWS pinned at 0.11.0 (`gpufarm.k8s.lws.LWS_CHART_VERSION`): no such release is confirmed
      (../shared/upstream-ref/README.md); the pin moves to 0.10.0.
    - llm-d's `disagg-headers-handler` (`gpufarm.k8s.prefill_decode.plugins_config`): deprecated in
      llm-d-router v0.9.0; `disagg-profile-handler` sets the header now.

    Both are derived from the code, so once a change lands its findings are no longer expected.
    """
    charts = {chart: version for chart, version, _ in helm_releases(template)}
    out = []
    if charts.get("lws") == "0.11.0" == lws.LWS_CHART_VERSION:
        out += [
            "lws 0.11.0: no upstream reference data for this pin: "
            f"{REF_DIR}/charts/lws@0.11.0.json is missing",
            "labels.json holds leaderworkerset.sigs.k8s.io labels of lws 0.10.0, "
            "the stack pins lws 0.11.0: no label data for the pinned release",
            "image registry.k8s.io/lws/lws:v0.11.0: tag 'v0.11.0' of registry.k8s.io/lws/lws "
            "is not confirmed published (nearest known: 'v0.10.0')",
        ]
    if "disagg-headers-handler" in k8s_prefill_decode.plugins_config(PrefillDecodeConfig()):
        out += [
            f"Deployment/{m['metadata']['name']} container {c['name']}: "
            "epp-llm-d@v0.9.0.json: plugin type 'disagg-headers-handler' is deprecated"
            for m in resolved_manifests(template)
            if m["kind"] == "Deployment"
            for c in m["spec"]["template"]["spec"]["containers"]
            if c["image"] == k8s_prefill_decode.PREFILL_DECODE_EPP_IMAGE
        ]
    return out


@pytest.mark.parametrize("name", TEMPLATES)
def test_everything_handed_upstream_is_known_to_the_pinned_release(
    name: str, request: pytest.FixtureRequest
) -> None:
    ref_dir()
    template = request.getfixturevalue(name)
    issues = manifest_issues(resolved_manifests(template), helm_releases(template), json.dumps(template))
    assert sorted(issues) == sorted(pending(template))


EXPECTED_UPSTREAM = {
    "poc_template": {"vllm", "litellm"},
    "production_template": {"vllm", "litellm", "keda"},
    "enterprise_template": {"vllm", "litellm", "keda"},
    "prefill_decode": {"vllm", "litellm", "keda", "llm-d picker", "llm-d sidecar", "envoy"},
    "kv_routing": {"vllm", "litellm", "keda", "gaie picker", "envoy"},
    "shares_alb": {"vllm", "litellm", "keda"},
    "shares_nlb": {"vllm", "litellm", "keda"},
    "enterprise_nlb": {"vllm", "litellm", "keda"},
}
"""What each template must hand to an upstream component, so the check above is never vacuous
(a renamed image or a changed entrypoint would otherwise leave it nothing to check)."""


def _components(template: dict[str, Any]) -> set[str]:
    found = set()
    for manifest in resolved_manifests(template):
        if manifest["kind"] == "ScaledObject":
            found.add("keda")
        for pod in pod_specs(manifest):
            for container in containers(pod):
                repository = image_tag(container["image"])[0]
                if runs_vllm_serve(container) and container.get("args"):
                    found.add("vllm")
                found |= {
                    label
                    for label, repo in COMPONENT_IMAGES.items()
                    if repository == repo and (container.get("args") or label == "llm-d sidecar")
                }
    return found


COMPONENT_IMAGES = {
    "litellm": "ghcr.io/berriai/litellm",
    "gaie picker": "registry.k8s.io/gateway-api-inference-extension/epp",
    "llm-d picker": "ghcr.io/llm-d/llm-d-router-endpoint-picker",
    "llm-d sidecar": "ghcr.io/llm-d/llm-d-router-disagg-sidecar",
    "envoy": "docker.io/envoyproxy/envoy",
}


@pytest.mark.parametrize("name", TEMPLATES)
def test_the_upstream_check_sees_each_component(name: str, request: pytest.FixtureRequest) -> None:
    assert _components(request.getfixturevalue(name)) == EXPECTED_UPSTREAM[name]
