"""The CDK bootstrap check: the account and region are bootstrapped at the version the stack needs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufarm.aws.preflight.calls import _error_code
from gpufarm.aws.preflight.results import Check, CheckResult, Status

BOOTSTRAP_VERSION_PARAMETER = "/cdk-bootstrap/hnb659fds/version"
"""Where the default bootstrap stack (qualifier hnb659fds) records its version: the template's
`BootstrapVersion` parameter reads it (see a synthesized template's Parameters)."""

DEFAULT_REQUIRED_VERSION = 6
"""The version aws-cdk-lib's default synthesizer requires: its templates' CheckBootstrapVersion
rule refuses versions 1-5 ("CDK bootstrap stack version 6 required"), as in
integ/cases/integ_production.py.snapshot/gpufarm-integ-production.template.json."""


def required_version(template: Mapping[str, Any] | None) -> int:
    """The bootstrap version a synthesized template requires: one above the highest version its
    CheckBootstrapVersion rule refuses; DEFAULT_REQUIRED_VERSION without a template or rule."""
    if template is None:
        return DEFAULT_REQUIRED_VERSION
    refused: list[int] = []
    rule = template.get("Rules", {}).get("CheckBootstrapVersion", {})
    for assertion in rule.get("Assertions", []):
        contains = assertion.get("Assert", {}).get("Fn::Not", [{}])[0].get("Fn::Contains", [[]])
        refused += [int(v) for v in contains[0] if str(v).isdigit()]
    return max(refused) + 1 if refused else DEFAULT_REQUIRED_VERSION


def check_cdk_bootstrap(
    *, region: str, account: str, ssm: Any, template: Mapping[str, Any] | None = None
) -> list[CheckResult]:
    """The SSM parameter of the bootstrap stack exists and holds at least the required version."""
    from botocore.exceptions import ClientError

    needed = required_version(template)
    subject = f"aws://{account}/{region}"
    fix = f"run `cdk bootstrap aws://{account}/{region}` with the pinned CDK CLI (npx cdk)"
    try:
        value = str(ssm.get_parameter(Name=BOOTSTRAP_VERSION_PARAMETER)["Parameter"]["Value"])
    except ClientError as exc:
        if _error_code(exc) != "ParameterNotFound":
            raise
        return [
            CheckResult(
                check=Check.CDK_BOOTSTRAP,
                subject=subject,
                status=Status.FAIL,
                message=f"not bootstrapped for the CDK (no {BOOTSTRAP_VERSION_PARAMETER} parameter)",
                fix=fix,
            )
        ]
    version = int(value) if value.isdigit() else 0
    if version < needed:
        return [
            CheckResult(
                check=Check.CDK_BOOTSTRAP,
                subject=subject,
                status=Status.FAIL,
                message=f"bootstrap version {value}; the stack needs {needed} or later",
                fix=fix,
            )
        ]
    return [
        CheckResult(
            check=Check.CDK_BOOTSTRAP,
            subject=subject,
            status=Status.PASS,
            message=f"bootstrap version {version} (the stack needs {needed} or later)",
        )
    ]
