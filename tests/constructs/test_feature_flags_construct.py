"""A user's app whose CDK feature flags differ from gpufarm's is told so at synth, flag by flag."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk.assertions import Annotations, Match

from gpufarm import cdk_context
from gpufarm.cdk_context import FEATURE_FLAG_WARNING_ID
from gpufarm.config import NetworkConfig
from gpufarm.constructs import InferenceNetwork
from tests.constructs.helpers import AZS, REGION

LOG_GROUPS = "@aws-cdk/aws-lambda:useCdkManagedLogGroup"
CROSS_STACK = "@aws-cdk/core:defaultCrossStackReferences"


def _warnings(context: dict[str, Any], *, networks: int = 1) -> list[str]:
    """The feature-flag warnings of a stack holding `networks` InferenceNetworks in an app with `context`."""
    stack = cdk.Stack(cdk.App(context=context), "Net", env=cdk.Environment(region=REGION))
    for n in range(networks):
        InferenceNetwork(
            stack, f"Network{n}", config=NetworkConfig(cidr=f"10.{n}.0.0/16"), availability_zones=AZS
        )
    found = Annotations.from_stack(stack).find_warning("*", Match.string_like_regexp(".*"))
    return [
        str(w.entry.data) for w in found if str(w.entry.data).endswith(f"[ack: {FEATURE_FLAG_WARNING_ID}]")
    ]


def test_an_app_with_gpufarms_flags_gets_no_warning() -> None:
    assert _warnings(cdk_context.tested_context()) == []


def test_an_app_with_other_flags_is_warned_naming_each_flag_and_both_values() -> None:
    """A user's cdk.json that turns off CDK-managed Lambda log groups and leaves out the
    cross-stack reference flag: the two differences the poc tier showed (86 resources, not 88)."""
    context = cdk_context.tested_context()
    context[LOG_GROUPS] = False
    del context[CROSS_STACK]
    (warning,) = _warnings(context)
    assert warning.startswith(
        f"2 of the {len(cdk_context.tested_context())} CDK feature flags gpufarm is tested under"
    )
    assert f'{LOG_GROUPS}=false (gpufarm: true); {CROSS_STACK}=unset (gpufarm: "weak").' in warning


def test_an_unset_flag_whose_aws_cdk_lib_default_is_gpufarms_value_is_not_reported() -> None:
    context = cdk_context.tested_context()
    del context["@aws-cdk/aws-lambda:createNewPoliciesWithAddToRolePolicy"]  # gpufarm: false
    del context[LOG_GROUPS]  # gpufarm: true, aws-cdk-lib's default: false
    (warning,) = _warnings(context)
    assert warning.startswith("1 of the")
    assert f"{LOG_GROUPS}=unset, so false (gpufarm: true)" in warning


def test_a_stack_with_several_gpufarm_constructs_is_warned_once() -> None:
    context = cdk_context.tested_context()
    context[LOG_GROUPS] = False
    assert len(_warnings(context, networks=2)) == 1
