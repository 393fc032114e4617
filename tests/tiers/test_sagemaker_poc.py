"""The sagemaker-poc tier, synthesized once: a SageMaker endpoint behind the gateway, no Kubernetes."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from gpufarm.config import load_preset
from gpufarm.core import sagemaker as sm
from gpufarm.review import CreateOnlyProperties, StackTemplate, diff_resources
from tests.conftest import cfn_lint_errors
from tests.tiers.billing_walk import costing_gaps
from tests.tiers.helpers import (
    default_target_group,
    flatten,
    gateway_listener,
    model_target_groups,
    resources,
)

TIER = load_preset("sagemaker-poc")


def test_no_cluster_and_no_gpu_instances_of_its_own(sagemaker_poc_template: dict[str, Any]) -> None:
    types = {r["Type"] for r in sagemaker_poc_template["Resources"].values()}
    assert not {t for t in types if t.startswith(("AWS::EKS::", "Custom::AWSCDK-EKS"))}
    groups = resources(sagemaker_poc_template, "AWS::AutoScaling::AutoScalingGroup")
    # The gateway's CPU group only.
    assert all(k.startswith("GatewayGroup") for k in groups)


def test_one_endpoint_holds_both_models_as_inference_components(
    sagemaker_poc_template: dict[str, Any],
) -> None:
    (endpoint,) = resources(sagemaker_poc_template, "AWS::SageMaker::Endpoint").values()
    assert endpoint["Properties"]["EndpointName"] == "gpufarm-sagemaker-poc"
    components = resources(sagemaker_poc_template, "AWS::SageMaker::InferenceComponent").values()
    assert sorted(c["Properties"]["InferenceComponentName"] for c in components) == sorted(
        c.name for c in sm.components_of(TIER)
    )


def test_the_load_balancer_routes_only_to_the_gateway(sagemaker_poc_template: dict[str, Any]) -> None:
    assert model_target_groups(sagemaker_poc_template) == {}
    assert gateway_listener(sagemaker_poc_template) is None
    assert default_target_group(sagemaker_poc_template) is not None


def test_the_gateway_calls_the_components_and_may_invoke_exactly_this_endpoint(
    sagemaker_poc_template: dict[str, Any],
) -> None:
    text = json.dumps(sagemaker_poc_template)
    for component in sm.components_of(TIER):
        assert component.name in text
    statements = [
        s
        for k, p in resources(sagemaker_poc_template, "AWS::IAM::Policy").items()
        if k.startswith("Gateway")
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    (invoke,) = [s for s in statements if "sagemaker:InvokeEndpoint" in json.dumps(s["Action"])]
    assert invoke["Action"] == "sagemaker:InvokeEndpoint"
    assert flatten(invoke["Resource"]).endswith(":endpoint/gpufarm-sagemaker-poc")


def test_the_runtime_endpoint_admits_only_the_gateway(sagemaker_poc_template: dict[str, Any]) -> None:
    endpoints = resources(sagemaker_poc_template, "AWS::EC2::VPCEndpoint")
    (runtime,) = [
        e for e in endpoints.values() if "sagemaker.runtime" in flatten(e["Properties"]["ServiceName"])
    ]
    assert runtime["Properties"]["PrivateDnsEnabled"] is True
    (group_ref,) = runtime["Properties"]["SecurityGroupIds"]
    group_id = group_ref["Fn::GetAtt"][0]
    ingress = [
        r["Properties"]
        for r in resources(sagemaker_poc_template, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
    ]
    inline = sagemaker_poc_template["Resources"][group_id]["Properties"].get("SecurityGroupIngress", [])
    sources = [flatten(r.get("SourceSecurityGroupId", r.get("CidrIp", ""))) for r in [*ingress, *inline]]
    assert sources and all("GatewaySecurityGroup" in s for s in sources)


def test_every_resource_is_priced_or_free(
    sagemaker_poc_template: dict[str, Any],
) -> None:
    assert costing_gaps(sagemaker_poc_template) == []


def test_cfn_lint_finds_no_errors(sagemaker_poc_dir: Path) -> None:
    assert cfn_lint_errors(sagemaker_poc_dir / "gpufarm-sagemaker-poc.template.json") == []


def test_review_a_new_instance_type_replaces_the_endpoint_config_and_updates_the_endpoint(
    sagemaker_poc_template: dict[str, Any],
) -> None:
    old = StackTemplate(name="gpufarm-sagemaker-poc", region="us-east-1", template=sagemaker_poc_template)
    changed = copy.deepcopy(sagemaker_poc_template)
    (config_id,) = resources(changed, "AWS::SageMaker::EndpointConfig")
    changed["Resources"][config_id]["Properties"]["ProductionVariants"][0]["InstanceType"] = "ml.g5.12xlarge"
    new = StackTemplate(name="gpufarm-sagemaker-poc", region="us-east-1", template=changed)
    diff = diff_resources(old, new, CreateOnlyProperties())
    # ProductionVariants is create-only: a new config; the endpoint takes its new name in place,
    # and the inference components, which name the endpoint, are untouched.
    assert [r.logical_id for r in diff.replacements] == [config_id]
    (endpoint_id,) = resources(changed, "AWS::SageMaker::Endpoint")
    assert endpoint_id not in {r.logical_id for r in diff.replacements}
