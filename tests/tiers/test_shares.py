"""A model split into weighted shares across GPU pools, end to end through the enterprise tier.

Two variants of the enterprise preset, each synthesized once with both compliance packs: an L40S
pool is added and `llama-3-3-70b` runs 2 replicas on the H100 class (weight 3) and 1 on the L40S
pool (weight 1), behind the preset's ALB, and behind an NLB.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufarm.config import TierConfig
from gpufarm.k8s.gateway import route_env_name, vllm_deployment_id
from gpufarm.k8s.labels import CAPACITY_CLASS_LABEL, NODEPOOL_LABEL, SHARE_LABEL, workload_name
from tests.assemblies import shared_assembly
from tests.conftest import cfn_lint_errors, nag_violations
from tests.tiers.billing_walk import costing_gaps
from tests.tiers.helpers import (
    STATEFUL_TYPES,
    client_listener,
    gateway_listener,
    manifest_of,
    manifests,
    resources,
    rules_of,
    stateful_logical_ids,
)
from tests.unit.factories import make_enterprise, overrides, split

MODEL = "llama-3-3-70b"
SHARES = {"h100": 3, "l40s": 1}
"""Share -> weight, as tests.unit.factories.SHARES sets them."""
NLB = {
    "ingress": {
        "kind": "nlb",
        "target_optimizer": {"enabled": False},
        "waf": {"enabled": False},
        "lcu_reservation": None,
    }
}
TARGET_GROUP = "AWS::ElasticLoadBalancingV2::TargetGroup"


def _nlb_split() -> dict[str, Any]:
    base = split()
    ports = (8443, 9443, 10443)
    return overrides(
        base, NLB, {"models": [dict(m, listener_port=p) for m, p in zip(base["models"], ports, strict=True)]}
    )


@pytest.fixture(scope="module")
def alb_tier() -> TierConfig:
    return make_enterprise(split())


@pytest.fixture(scope="module")
def alb_dir(alb_tier: TierConfig, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Both compliance packs gate this synth; tests/tiers/test_upstream.py builds the same variant
    # and shares it (tests/assemblies.py).
    return shared_assembly([alb_tier], tmp_path_factory)


@pytest.fixture(scope="module")
def alb(alb_dir: Path) -> dict[str, Any]:
    template: dict[str, Any] = json.loads((alb_dir / "gpufarm-enterprise.template.json").read_text())
    return template


@pytest.fixture(scope="module")
def nlb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_assembly([make_enterprise(_nlb_split())], tmp_path_factory)


@pytest.fixture(scope="module")
def nlb(nlb_dir: Path) -> dict[str, Any]:
    template: dict[str, Any] = json.loads((nlb_dir / "gpufarm-enterprise.template.json").read_text())
    return template


def _share_target_groups(template: dict[str, Any]) -> dict[str, str]:
    """Share -> logical ID of its target group (the model's construct path names the share)."""
    out = {}
    for share in SHARES:
        (found,) = [
            k
            for k in resources(template, TARGET_GROUP)
            if k.startswith(f"IngressLlama3370bTargetGroup{share.capitalize()}")
        ]
        out[share] = found
    return out


def _forward(actions: list[dict[str, Any]]) -> dict[str, Any]:
    (forward,) = [a for a in actions if a["Type"] == "forward"]
    return forward


# --------------------------------------------------------------------------- the load balancers


@pytest.mark.parametrize("listener", ["client", "gateway"])
def test_alb_rule_forwards_to_every_share_by_weight(alb: dict[str, Any], listener: str) -> None:
    """The client listener's rule, and the gateway listener's (ADR 0050), weigh the same shares."""
    found = client_listener(alb) if listener == "client" else gateway_listener(alb)
    assert found is not None
    (rule,) = [
        r["Properties"]
        for r in rules_of(alb, found[0])
        if r["Properties"]["Conditions"][0]["PathPatternConfig"]["Values"] == [f"/{MODEL}/*"]
    ]
    groups = _share_target_groups(alb)
    assert _forward(rule["Actions"]) == {
        "Type": "forward",
        "ForwardConfig": {
            "TargetGroups": [
                {"TargetGroupArn": {"Ref": groups[s]}, "Weight": weight} for s, weight in SHARES.items()
            ]
        },
    }


def test_nlb_listener_forwards_to_every_share_by_weight(nlb: dict[str, Any]) -> None:
    (listener,) = [
        r["Properties"]
        for k, r in resources(nlb, "AWS::ElasticLoadBalancingV2::Listener").items()
        if k.startswith("Ingress") and r["Properties"]["Port"] == 9443
    ]
    groups = _share_target_groups(nlb)
    assert _forward(listener["DefaultActions"])["ForwardConfig"] == {
        "TargetGroups": [
            {"TargetGroupArn": {"Ref": groups[s]}, "Weight": weight} for s, weight in SHARES.items()
        ]
    }
    assert resources(nlb, TARGET_GROUP)[groups["l40s"]]["Properties"]["Protocol"] == "TCP"


@pytest.mark.parametrize("variant", ["alb", "nlb"])
def test_one_binding_per_share_service(variant: str, request: pytest.FixtureRequest) -> None:
    template = request.getfixturevalue(variant)
    groups = _share_target_groups(template)
    bindings = {
        b["spec"]["serviceRef"]["name"]: b["spec"]["targetGroupARN"]
        for b in manifests(template)
        if b["kind"] == "TargetGroupBinding" and b["spec"]["serviceRef"]["name"].startswith(f"vllm-{MODEL}")
    }
    assert bindings == {workload_name(MODEL, s): f"<Ref:{groups[s]}>" for s in SHARES}


# --------------------------------------------------------------------------- the pods


def test_each_share_runs_on_its_own_hardware(alb: dict[str, Any], alb_tier: TierConfig) -> None:
    h100 = manifest_of(alb, "Deployment", workload_name(MODEL, "h100"))["spec"]
    l40s = manifest_of(alb, "Deployment", workload_name(MODEL, "l40s"))["spec"]
    assert h100["template"]["spec"]["nodeSelector"] == {CAPACITY_CLASS_LABEL: "h100"}
    assert l40s["template"]["spec"]["nodeSelector"] == {NODEPOOL_LABEL: "gpu-l40s"}
    assert (h100["replicas"], l40s["replicas"]) == (2, 1)
    for spec, name in ((h100, "h100"), (l40s, "l40s")):
        assert spec["selector"]["matchLabels"][SHARE_LABEL] == name
        assert (
            manifest_of(alb, "Service", workload_name(MODEL, name))["spec"]["selector"][SHARE_LABEL] == name
        )
    # No Deployment, Service or KEDA scaler for the model as a whole.
    names = {m["metadata"]["name"] for m in manifests(alb) if m["kind"] in ("Deployment", "Service")}
    assert workload_name(MODEL) not in names
    assert not [m for m in manifests(alb) if m["kind"] == "ScaledObject" and MODEL in m["metadata"]["name"]]


def test_the_models_manifest_waits_for_every_pool_of_its_shares(alb: dict[str, Any]) -> None:
    (manifest,) = [
        r
        for k, r in resources(alb, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if k.startswith("ServingModelLlama3370b")
    ]
    depends = " ".join(manifest["DependsOn"])
    for part in ("GpuPoolL40s", "GpuPoolH100Burst", "NodeGroupH100Base"):
        assert part in depends, part


def test_gateway_sends_the_model_to_its_shares_then_to_bedrock(
    alb: dict[str, Any], alb_tier: TierConfig
) -> None:
    model = alb_tier.models[1]
    config = yaml.safe_load(manifest_of(alb, "ConfigMap", "gateway-config")["data"]["config.yaml"])
    entries = [e for e in config["model_list"] if e["model_name"] == model.api_model_name]
    # One deployment on the model's route: the ALB's weighted forward picks the share (ADR 0050).
    assert [(e["model_info"]["id"], e["litellm_params"]) for e in entries] == [
        (
            vllm_deployment_id(model),
            {
                "model": f"hosted_vllm/{model.api_model_name}",
                "api_base": f"os.environ/{route_env_name(model)}",
                "timeout": alb_tier.fallback.request_timeout_seconds,
                "stream_timeout": alb_tier.fallback.stream_timeout_seconds,
            },
        )
    ]
    assert {model.api_model_name: [f"{model.api_model_name}@bedrock"]} in config["router_settings"][
        "fallbacks"
    ]


# --------------------------------------------------------------------------- monitoring


@pytest.mark.parametrize("variant", ["alb", "nlb"])
def test_every_share_target_group_has_an_unhealthy_alarm(
    variant: str, request: pytest.FixtureRequest
) -> None:
    template = request.getfixturevalue(variant)
    groups = _share_target_groups(template)
    alarmed = {
        json.dumps(d["Value"])
        for a in resources(template, "AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "UnHealthyHostCount"
        for d in a["Properties"]["Dimensions"]
        if d["Name"] == "TargetGroup"
    }
    for logical in groups.values():
        assert json.dumps({"Fn::GetAtt": [logical, "TargetGroupFullName"]}) in alarmed


def test_alb_dashboard_charts_each_share(alb: dict[str, Any]) -> None:
    (dashboard,) = resources(alb, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for share in SHARES:
        assert f"Targets: {MODEL}/{share}" in body


# --------------------------------------------------------------------------- gates and stability


@pytest.mark.parametrize("variant", ["alb", "nlb"])
def test_compliance_packs_and_cfn_lint_pass(variant: str, request: pytest.FixtureRequest) -> None:
    outdir: Path = request.getfixturevalue(f"{variant}_dir")
    request.getfixturevalue(variant)
    # The Target Optimizer agent's ':latest' image (ALB) warns as a placeholder, not here.
    assert nag_violations(outdir) == {}
    assert cfn_lint_errors(outdir / "gpufarm-enterprise.template.json") == []


def test_splitting_a_model_replaces_only_its_own_target_group(alb: dict[str, Any]) -> None:
    # Against the preset's snapshot: every other stateful resource keeps its logical ID.
    before = json.loads(
        (Path(__file__).parent / "snapshots" / "enterprise-stateful-logical-ids.json").read_text()
    )
    after = stateful_logical_ids(alb)
    for type_name in STATEFUL_TYPES:
        gone = set(before.get(type_name, [])) - set(after.get(type_name, []))
        if type_name == TARGET_GROUP:
            assert sorted(gone) == sorted(
                g for g in before[type_name] if g.startswith("IngressLlama3370bTargetGroup")
            )
        else:
            assert not gone, type_name


def test_shares_bill_every_resource_type(alb: dict[str, Any], nlb: dict[str, Any]) -> None:
    # A model split into shares behind the ALB and behind an NLB (tests/tiers/billing_walk.py).
    assert (costing_gaps(alb), costing_gaps(nlb)) == ([], [])
