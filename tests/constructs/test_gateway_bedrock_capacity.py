"""The gateway's Bedrock grant for capacity the account owns: a provisioned-model ARN and an
application-inference-profile ARN, each named exactly, with cdk-nag and cfn-lint on the result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Template

from gpufarm.config import TierConfig
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.gateway import INVOKE_ACTIONS, FallbackGateway, bedrock_grants
from gpufarm.review.iam import iam_grants
from gpufarm.review.templates import load_assembly
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import REGION, imported_cluster, resources
from tests.unit.factories import make_production, production_document

ACCOUNT = "123456789012"
PROVISIONED = f"arn:aws:bedrock:us-east-1:{ACCOUNT}:provisioned-model/abc123def456"
PROFILE = f"arn:aws:bedrock:us-east-1:{ACCOUNT}:application-inference-profile/k2l3m4n5o6p7"
LLAMA_FM = "meta.llama3-3-70b-instruct-v1:0"
HAIKU_FM = "anthropic.claude-3-5-haiku-20241022-v1:0"
US_REGIONS = ("us-east-1", "us-east-2", "us-west-1", "us-west-2")


def _capacity_tier() -> TierConfig:
    """Production whose two models fall back to a Provisioned Throughput and an application profile."""
    models = production_document()["models"]
    models[0]["bedrock"] = {
        "model_id": PROVISIONED,
        "base_model_id": LLAMA_FM,
        "provisioned": {"model_units": 1, "commitment": "six-months"},
    }
    models[1]["bedrock"] = {"model_id": PROFILE, "base_model_id": f"us.{HAIKU_FM}"}
    return make_production({"models": models})


TIER = _capacity_tier()


def test_a_provisioned_model_is_granted_by_its_arn_alone() -> None:
    grants = bedrock_grants(TIER.models[:1], region=REGION, partition="aws", account=ACCOUNT)
    # No foundation model: the Provisioned Throughput answers the request itself.
    assert (grants.direct, grants.through_profiles, grants.profiles) == ((PROVISIONED,), (), ())


def test_an_application_profile_is_granted_with_its_models_only_through_it() -> None:
    grants = bedrock_grants(TIER.models[1:2], region=REGION, partition="aws", account=ACCOUNT)
    assert grants.direct == grants.profiles == (PROFILE,)
    # The model of the `us.` profile it copies, in each region that profile routes to.
    assert grants.through_profiles == tuple(
        f"arn:aws:bedrock:{r}::foundation-model/{HAIKU_FM}" for r in US_REGIONS
    )


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stack holding only the gateway for TIER, synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("gateway-capacity")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "CapacityGateway", env=cdk.Environment(region=REGION, account=ACCOUNT))
    FallbackGateway(stack, "Gateway", cluster=imported_cluster(stack), tier=TIER, namespace="gpufarm")
    app.synth()  # raises on an unacknowledged cdk-nag finding
    return outdir / "CapacityGateway.template.json"


def _statements(template_file: Path) -> dict[str, dict[str, Any]]:
    template = Template.from_json(json.loads(template_file.read_text()))
    [policy] = resources(template, "AWS::IAM::Policy").values()
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_the_role_names_exactly_the_capacity_arns(synthesized: Path) -> None:
    statements = _statements(synthesized)
    assert statements["InvokeModels"] == {
        "Sid": "InvokeModels",
        "Effect": "Allow",
        "Action": list(INVOKE_ACTIONS),
        "Resource": sorted([PROVISIONED, PROFILE]),  # CDK writes a statement's resources sorted
    }
    assert statements["InvokeModelsThroughProfiles"] == {
        "Sid": "InvokeModelsThroughProfiles",
        "Effect": "Allow",
        "Action": list(INVOKE_ACTIONS),
        "Resource": [f"arn:aws:bedrock:{r}::foundation-model/{HAIKU_FM}" for r in US_REGIONS],
        "Condition": {"ArnEquals": {"bedrock:InferenceProfileArn": [PROFILE]}},
    }


def test_the_capacity_gateway_passes_cdk_nag_and_cfn_lint(synthesized: Path) -> None:
    assert nag_violations(synthesized.parent, annotations=False) == {}
    assert cfn_lint_errors(synthesized) == []


def test_the_review_lists_the_capacity_grants_without_a_wildcard(synthesized: Path) -> None:
    stack = load_assembly(synthesized.parent)["CapacityGateway"]
    bedrock = sorted(
        (g.resource, g.conditional, g.wildcard)
        for g in iam_grants(stack)
        if g.kind == "permission" and g.action == "bedrock:InvokeModel"
    )
    assert bedrock == sorted(
        [(PROVISIONED, False, False), (PROFILE, False, False)]
        + [(f"arn:aws:bedrock:{r}::foundation-model/{HAIKU_FM}", True, False) for r in US_REGIONS]
    )
