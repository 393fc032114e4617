"""The integration test of one tier: deploy it, wait for the model, chat with it, destroy it.

Each `integ_*.py` file under `cases/` (the default variants) and `full/` (the presets) is a CDK
app in the integ-runner's layout (`integ_*.py`, snapshot in `<file>.snapshot/`) with
integ-tests assertions. `integ/run.py` synthesizes it and compares the templates with the
committed snapshot (`make test`, offline), or deploys it, reads the assertions' results and
destroys it (`make integ`); see docs/decisions/0032-integration-tests.md for why the
integ-runner itself does not run them yet, and docs/operations.md, "Integration tests".

The app holds three stacks:

- the tier, built from a tier file of `integ/tiers/` by the same loader and stack as `cdk deploy`;
- `<tier stack>-probe`: a Lambda function in the tier's private subnets that sends a chat
  completion to the model's route and to the gateway (the load balancer may be internal);
- the integ-tests assertion stack, which invokes the probe until both answers are HTTP 200 with
  a non-empty `choices[0].message.content`, or fails after :data:`READY_TIMEOUT`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.integ_tests_alpha import ExpectedResult, IntegTest, Match
from cdk_nag import AwsSolutionsChecks
from constructs import Construct, IConstruct

from gpufarm.app import new_app
from gpufarm.config import load_tier_file
from gpufarm.constructs._util import acknowledge, private_subnets
from gpufarm.deploy_rules import DeployRulesPlugin
from gpufarm.stacks import GpuFarmStack

INTEG_DIR = Path(__file__).resolve().parent
REPO = INTEG_DIR.parent
TIER_FILE_ENV = "GPUFARM_INTEG_TIER_FILE"
"""A tier file to deploy instead of the full preset's (`full/` tests only)."""
READY_TIMEOUT = cdk.Duration.minutes(60)
"""How long the assertion waits for both routes to answer after the deploy has finished.

`cdk deploy` ends when the manifests are applied; the GPU node, the image pull and the weight
download come after (several minutes; docs/operations.md, "Deploying").
"""
POLL_INTERVAL = cdk.Duration.seconds(30)
KMS_PENDING_DAYS = 7
"""The shortest waiting period AWS KMS allows before a key scheduled for deletion is deleted.

"The range is 7-30 days and the default value is 30 days"
(https://docs.aws.amazon.com/kms/latest/cryptographic-details/key-deletion.html).
"""
EXPECTED = {"direct": {"status": 200, "content": True}, "gateway": {"status": 200, "content": True}}
"""The probe's answer once the model serves through both routes."""


def tier_file(tier: str, *, full: bool) -> Path:
    """The tier file a test deploys: the default variant, or the preset in full (`full`).

    poc's default variant is its preset as shipped already, so poc has no separate full file.
    """
    if full and os.environ.get(TIER_FILE_ENV):
        return Path(os.environ[TIER_FILE_ENV])
    name = f"{tier}-full" if full and tier != "poc" else tier
    return INTEG_DIR / "tiers" / f"{name}.yaml"


def cdk_context() -> dict[str, Any]:
    """The feature flags of cdk.json, as `cdk deploy` of the app would use them."""
    context: dict[str, Any] = json.loads((REPO / "cdk.json").read_text())["context"]
    return context


@jsii.implements(cdk.IAspect)
class _ShortKeyDeletion:
    """Schedule KMS key deletion after the shortest waiting period (:data:`KMS_PENDING_DAYS`)."""

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, kms.CfnKey):
            node.pending_window_in_days = KMS_PENDING_DAYS


class _TierAwsSolutionsChecks(AwsSolutionsChecks):
    """The AwsSolutions pack over the tier's stack only (the gate `gpufarm.app` puts on a tier).

    The probe and the integ-tests assertion stack are test scaffolding and are not gated.
    """

    def __init__(self, stack: GpuFarmStack) -> None:
        super().__init__(stack)
        self._stack = stack

    def validate(self, context: Any) -> Any:
        return self.validate_scope(self._stack)


def tier_env(tier: GpuFarmStack) -> cdk.Environment:
    """The tier's account and region: the probe and the assertions live beside it."""
    return cdk.Environment(region=tier.config.environment.region, account=tier.config.environment.account)


class ChatProbe(cdk.Stack):
    """A Lambda function in the tier's VPC that chats with one model by both routes."""

    def __init__(self, scope: Construct, id: str, *, tier: GpuFarmStack) -> None:
        super().__init__(scope, id, env=tier_env(tier))
        model = tier.config.models[0]
        security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=tier.network.vpc, description="Integration test chat probe"
        )
        self.function = lambda_.Function(
            self,
            "Function",
            runtime=lambda_.Runtime.PYTHON_3_13,
            handler="index.handler",
            code=lambda_.Code.from_inline((INTEG_DIR / "probe.py").read_text()),
            timeout=cdk.Duration.seconds(100),
            vpc=tier.network.vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=private_subnets(tier.network.vpc)),
            security_groups=[security_group],
            environment={
                "MODEL": model.api_model_name,
                "DIRECT_URL": tier.ingress.base_url(model.name),
                "GATEWAY_URL": tier.ingress.base_url_default(),
            },
            log_group=logs.LogGroup(
                self,
                "Logs",
                retention=logs.RetentionDays.ONE_DAY,
                removal_policy=cdk.RemovalPolicy.DESTROY,
            ),
        )


def build(tier: str, *, full: bool = False) -> cdk.App:
    """The integration test app of `tier` (see the module docstring)."""
    app = new_app(context=cdk_context())
    config = load_tier_file(tier_file(tier, full=full))
    stack = GpuFarmStack(app, config=config)
    # Deploy rules (what AWS APIs refuse) hold for every stack the test deploys, scaffolding too.
    cdk.Validations.of(app).add_plugins(_TierAwsSolutionsChecks(stack), DeployRulesPlugin())
    if not config.ingress.access_logs.enabled:
        acknowledge(
            stack.ingress.load_balancer,
            "AwsSolutions-ELB2",
            "Integration test stack: access logs are off so that the stack deletes completely (a "
            "bucket receiving logs cannot be deleted); the tier tests gate the presets' logging.",
        )
    probe = ChatProbe(app, f"{config.stack_name}-probe", tier=stack)
    asserts = cdk.Stack(app, f"{config.stack_name}-assert", env=tier_env(stack))
    for scope in (stack, probe, asserts):
        # Nothing outlives the run: log groups and keys the tier retains go with the stack
        # (RemovalPolicies overrides every resource's policy in the scope, aws-cdk-lib 2.275).
        cdk.RemovalPolicies.of(scope).destroy()
        cdk.Aspects.of(scope).add(_ShortKeyDeletion())
    integ = IntegTest(
        app,
        f"{config.stack_name}-test",
        test_cases=[stack, probe],
        assertion_stack=asserts,
        # A first deploy is the test: no deploy of the previous snapshot before it (the
        # integ-runner then also keeps asset folders out of a snapshot it writes).
        stack_update_workflow=False,
        regions=[config.environment.region],
    )
    # The invoke's `Payload` is the function's answer as a JSON string; `Match.serialized_json`
    # parses it, and `wait_for_assertions` repeats the call until it matches or times out
    # (integ-tests-alpha 2.275.0a0 README: "Invoke a Lambda Function", "Match", "Wait for results").
    integ.assertions.invoke_function(function_name=probe.function.function_name).expect(
        ExpectedResult.object_like({"Payload": Match.serialized_json(EXPECTED)})
    ).wait_for_assertions(total_timeout=READY_TIMEOUT, interval=POLL_INTERVAL)
    return app


def main(tier: str, *, full: bool = False) -> None:
    """Synthesize the integration test app of `tier` (the integ-runner runs this)."""
    build(tier, full=full).synth()
