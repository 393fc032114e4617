"""The compliance gate: cdk-nag rule packs run as CDK validation plugins on every synth."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks, NIST80053R5Checks

from gpufarm.config.model import CompliancePack
from gpufarm.deploy_rules import DeployRulesPlugin


def enable_compliance_checks(app: cdk.App) -> None:
    """Gate every stack of `app` on the AwsSolutions pack and on gpufarm's deploy rules.

    Unacknowledged cdk-nag findings and any deploy-rule breach fail synth. Findings are written to
    `<outdir>/validation-report.json`; each accepted cdk-nag finding is acknowledged on the
    construct it concerns, with a reason about that resource. Deploy rules (what AWS APIs refuse
    at create or update time, docs/deploy-rules.md) are never acknowledged: the API refuses the
    resource whatever the reason.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app), DeployRulesPlugin())


class _StackNist80053R5(NIST80053R5Checks):
    """The NIST 800-53 R5 pack over one stack only.

    A validation plugin is handed the whole app; a tier that asks for this pack must not make
    the other tiers of the same app answer to it.
    """

    def __init__(self, stack: cdk.Stack) -> None:
        super().__init__(stack)
        self._stack = stack

    def validate(self, context: Any) -> Any:
        return self.validate_scope(self._stack)


def require_compliance_pack(stack: cdk.Stack, pack: CompliancePack) -> None:
    """Gate `stack` on `pack` as well (AwsSolutions gates every stack already).

    Default: nothing beyond AwsSolutions. NIST 800-53 R5 findings are acknowledged with
    `NIST.800.53.R5-<rule>` ids next to the resources they concern, as AwsSolutions' are.
    """
    if pack is CompliancePack.NIST_800_53_R5:
        app = stack.node.root
        cdk.Validations.of(app).add_plugins(_StackNist80053R5(stack))
