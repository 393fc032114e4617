"""The compliance gate: cdk-nag rule packs run as CDK validation plugins on every synth."""

from __future__ import annotations

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks


def enable_compliance_checks(app: cdk.App) -> None:
    """Run the AwsSolutions pack on every stack of `app`; unacknowledged findings fail synth.

    Findings are written to `<outdir>/validation-report.json`; each accepted finding is
    acknowledged on the construct it concerns, with a reason about that resource.
    """
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
