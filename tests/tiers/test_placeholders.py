"""A tier holding documentation values warns at synth and its template refuses to deploy; a
stated open choice synthesizes with its reason on the resource's acknowledgement."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import cx_api

from gpufarm.config import TierConfig, load_preset
from gpufarm.config.placeholders import find_placeholders
from gpufarm.constructs.placeholders import (
    PLACEHOLDER_PARAMETER_ID,
    PLACEHOLDER_RULE_ID,
    PLACEHOLDER_WARNING_ID,
)
from tests.conftest import cfn_lint_errors

from .conftest import synthesize, variant

OWN_CIDR = "10.20.0.0/16"
REASON = "public chat demo for the conference booth, no private data"


def placeholder_assertions(template: dict[str, Any]) -> list[str]:
    """The descriptions of the template's refusing assertions (empty without the rule)."""
    rule = template.get("Rules", {}).get(PLACEHOLDER_RULE_ID)
    if rule is None:
        return []
    for assertion in rule["Assertions"]:
        # An assertion that cannot hold: the parameter's only allowed value is 'no'.
        assert assertion["Assert"] == {"Fn::Equals": [{"Ref": PLACEHOLDER_PARAMETER_ID}, "yes"]}
    return [a["AssertDescription"] for a in rule["Assertions"]]


def expected_assertions(config: TierConfig) -> list[str]:
    return [
        f"{p.path} holds {p.kind} ({p.why}); replace it in the tier file and synthesize again"
        for p in find_placeholders(config)
    ]


@pytest.fixture(scope="module")
def own_poc(poc_document: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The poc with its documentation range replaced: no placeholder left."""
    config = variant(poc_document, {"cluster": {"public_access_cidrs": [OWN_CIDR]}})
    assert find_placeholders(config) == []
    return synthesize([config], tmp_path_factory.mktemp("own-poc"))["gpufarm-poc"]


def test_each_placeholder_is_a_warning_on_the_stack(poc_dir: Path) -> None:
    # The warnings as the CDK CLI reads them: from the assembly's manifest (the poc synth every
    # tier test shares), as `app.synth()` returns them.
    poc = load_preset("poc")
    stack = cx_api.CloudAssembly(str(poc_dir)).get_stack_by_name(poc.stack_name)
    ack = f"[ack: {PLACEHOLDER_WARNING_ID}]"
    warnings = [
        str(m.entry.data)
        for m in stack.messages
        if m.level == cx_api.SynthesisMessageLevel.WARNING and ack in str(m.entry.data)
    ]
    assert warnings == [
        "cluster.public_access_cidrs[0] = '198.51.100.0/24' is a documentation value (RFC 5737 TEST-NET-2, "
        f"198.51.100.0/24): replace it before deploying [ack: {PLACEHOLDER_WARNING_ID}]"
    ]


def test_the_poc_template_refuses_to_deploy(poc_template: dict[str, Any]) -> None:
    assert placeholder_assertions(poc_template) == [
        "cluster.public_access_cidrs[0] holds a documentation value (RFC 5737 TEST-NET-2, 198.51.100.0/24); "
        "replace it in the tier file and synthesize again"
    ]
    assert poc_template["Parameters"][PLACEHOLDER_PARAMETER_ID] == {
        "Type": "String",
        "Default": "no",
        "AllowedValues": ["no"],
        "Description": "Whether the tier's documentation values were replaced: they were not "
        "(see the template rule GpufarmPlaceholders).",
    }


def test_the_production_preset_warns_for_each_class_of_example_value(
    production_template: dict[str, Any], production_dir: Path
) -> None:
    metadata = json.loads((production_dir / "gpufarm-production.metadata.json").read_text())
    warnings = [
        entry["data"]
        for entry in metadata["/gpufarm-production"]
        if entry["type"] == "aws:cdk:warning" and f"[ack: {PLACEHOLDER_WARNING_ID}]" in entry["data"]
    ]
    tail = f": replace it before deploying [ack: {PLACEHOLDER_WARNING_ID}]"
    assert warnings == [
        "models[0].weights = 's3://gpufarm-production-models/meta-llama/Llama-3.3-70B-Instruct/' is a "
        f"documentation value (the preset's example model bucket){tail}",
        "models[1].weights = 's3://gpufarm-production-models/Qwen/Qwen3-32B/' is a documentation value "
        f"(the preset's example model bucket){tail}",
        "model_store.fsx.import_path = 's3://gpufarm-production-models/' is a documentation value "
        f"(the preset's example model bucket){tail}",
        "ingress.certificate_arn = 'arn:aws:acm:us-east-1:111122223333:certificate/"
        "00000000-0000-4000-8000-000000000000' is a documentation value (AWS documentation account "
        f"111122223333, all-zero resource ID 00000000-0000-4000-8000-000000000000){tail}",
        "ingress.allowed_cidrs[0] = '203.0.113.0/24' is a documentation value (RFC 5737 TEST-NET-3, "
        f"203.0.113.0/24){tail}",
        *(
            f"images.{kind}_credential_arn = 'arn:aws:secretsmanager:us-east-1:111122223333:secret:"
            f"ecr-pullthroughcache/{name}-AbCdEf' is a documentation value (AWS documentation account "
            f"111122223333){tail}"
            for kind, name in (("docker_hub", "docker-hub"), ("github", "github"))
        ),
        "ingress.target_optimizer.agent_image = "
        "'public.ecr.aws/aws-elb/target-optimizer/target-control-agent:latest' is an image not pinned "
        "by digest (AWS publishes the target control agent only as ':latest'; mirror it into your ECR "
        f"and set its digest){tail}",
        "serving.sglang_image = 'lmsysorg/sglang:v0.5.23' is an image not pinned by digest (no public "
        "record of this tag's digest was found (gpufarm/data/images.yaml); read it from the registry "
        f"and set the image as repository:tag@digest){tail}",
        *(
            f"images.digests.{name} = '{reference}' is an image not pinned by digest "
            "(gpufarm/data/images.yaml holds no confirmed digest for it; read the digest of this tag "
            f"from the registry and set it){tail}"
            for name, reference in (
                ("keda-operator", "ghcr.io/kedacore/keda:2.18.1"),
                ("keda-metrics-apiserver", "ghcr.io/kedacore/keda-metrics-apiserver:2.18.1"),
                ("keda-admission-webhooks", "ghcr.io/kedacore/keda-admission-webhooks:2.18.1"),
                ("nvidia-device-plugin", "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"),
                ("aws-load-balancer-controller", "public.ecr.aws/eks/aws-load-balancer-controller:v3.2.2"),
            )
        ),
    ]


def test_the_production_template_refuses_once_per_placeholder(production_template: dict[str, Any]) -> None:
    production = load_preset("production")
    assert placeholder_assertions(production_template) == expected_assertions(production)
    assert placeholder_assertions(production_template)[3] == (
        "ingress.certificate_arn holds a documentation value (AWS documentation account 111122223333, "
        "all-zero resource ID 00000000-0000-4000-8000-000000000000); replace it in the tier file and "
        "synthesize again"
    )
    assert placeholder_assertions(production_template)[7] == (
        "ingress.target_optimizer.agent_image holds an image not pinned by digest (AWS publishes the "
        "target control agent only as ':latest'; mirror it into your ECR and set its digest); replace "
        "it in the tier file and synthesize again"
    )
    assert len(placeholder_assertions(production_template)) == 14


def test_a_tier_without_placeholders_has_no_rule_and_no_parameter(own_poc: dict[str, Any]) -> None:
    assert placeholder_assertions(own_poc) == []
    assert PLACEHOLDER_PARAMETER_ID not in own_poc.get("Parameters", {})
    assert list(own_poc["Rules"]) == ["CheckBootstrapVersion"]


def test_cfn_lint_accepts_the_refusing_rule(poc_template: dict[str, Any], poc_dir: Path) -> None:
    assert PLACEHOLDER_RULE_ID in poc_template["Rules"]
    assert cfn_lint_errors(poc_dir / "gpufarm-poc.template.json") == []


# --------------------------------------------------------------------------- open choices


def test_stated_open_choices_synthesize_with_the_reason_on_the_resource(
    poc_document: dict[str, Any], tmp_path: Path
) -> None:
    config = variant(
        poc_document,
        {
            "cluster": {"public_access_cidrs": ["0.0.0.0/0"], "open_to_internet": {"reason": REASON}},
            "ingress": {"allowed_cidrs": ["0.0.0.0/0"], "open_to_internet": {"reason": REASON}},
        },
    )
    # synthesize() raises when cdk-nag reports an unacknowledged finding.
    template = synthesize([config], tmp_path)["gpufarm-poc"]
    metadata = json.loads((tmp_path / "gpufarm-poc.metadata.json").read_text())
    acknowledged = {
        path: entry["data"]
        for path, entries in metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules" and REASON in json.dumps(entry["data"])
    }
    assert acknowledged == {
        "/gpufarm-poc/Cluster/Resource": {
            "Annotation::AwsSolutions-EKS1": f"cluster.open_to_internet: {REASON}"
        },
        "/gpufarm-poc/Ingress/SecurityGroup": {
            "Annotation::AwsSolutions-EC23": f"ingress.open_to_internet: {REASON}"
        },
    }
    (cluster,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::EKS::Cluster"]
    assert cluster["Properties"]["ResourcesVpcConfig"]["PublicAccessCidrs"] == ["0.0.0.0/0"]
