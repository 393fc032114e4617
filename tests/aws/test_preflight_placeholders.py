"""Preflight fails a row per documentation value left in the tier, naming the field."""

from __future__ import annotations

from gpufarm.aws.preflight import Check, CheckResult, Status, check_placeholders
from gpufarm.config import load_preset
from tests.unit.factories import make_tier


def test_each_documentation_value_fails_its_own_row() -> None:
    rows = check_placeholders(load_preset("production"))
    assert [(r.check, r.status, r.subject) for r in rows] == [
        (Check.PLACEHOLDER, Status.FAIL, "models[0].weights"),
        (Check.PLACEHOLDER, Status.FAIL, "models[1].weights"),
        (Check.PLACEHOLDER, Status.FAIL, "model_store.fsx.import_path"),
        (Check.PLACEHOLDER, Status.FAIL, "ingress.certificate_arn"),
        (Check.PLACEHOLDER, Status.FAIL, "ingress.allowed_cidrs[0]"),
        # The preset's example image cache credentials (a documentation account).
        (Check.PLACEHOLDER, Status.FAIL, "images.docker_hub_credential_arn"),
        (Check.PLACEHOLDER, Status.FAIL, "images.github_credential_arn"),
        (Check.PLACEHOLDER, Status.FAIL, "ingress.target_optimizer.agent_image"),
        (Check.PLACEHOLDER, Status.FAIL, "serving.sglang_image"),
        (Check.PLACEHOLDER, Status.FAIL, "images.digests.keda-operator"),
        (Check.PLACEHOLDER, Status.FAIL, "images.digests.keda-metrics-apiserver"),
        (Check.PLACEHOLDER, Status.FAIL, "images.digests.keda-admission-webhooks"),
        (Check.PLACEHOLDER, Status.FAIL, "images.digests.nvidia-device-plugin"),
        (Check.PLACEHOLDER, Status.FAIL, "images.digests.aws-load-balancer-controller"),
    ]
    assert rows[9] == CheckResult(
        check=Check.PLACEHOLDER,
        subject="images.digests.keda-operator",
        status=Status.FAIL,
        message="'ghcr.io/kedacore/keda:2.18.1' is an image not pinned by digest (gpufarm/data/images.yaml "
        "holds no confirmed digest for it; read the digest of this tag from the registry and set it); "
        "the stack refuses to deploy",
        fix="set images.digests.keda-operator to an image digest read from the registry "
        "(docs/operations.md, Refreshing image digests)",
    )
    assert rows[3] == CheckResult(
        check=Check.PLACEHOLDER,
        subject="ingress.certificate_arn",
        status=Status.FAIL,
        message="'arn:aws:acm:us-east-1:111122223333:certificate/00000000-0000-4000-8000-000000000000' is a "
        "documentation value (AWS documentation account 111122223333, all-zero resource ID "
        "00000000-0000-4000-8000-000000000000); the stack refuses to deploy",
        fix="set ingress.certificate_arn to your own value",
    )
    assert rows[0].message == (
        "'s3://gpufarm-production-models/meta-llama/Llama-3.3-70B-Instruct/' is a documentation value "
        "(the preset's example model bucket); the stack refuses to deploy"
    )
    assert rows[4].message == (
        "'203.0.113.0/24' is a documentation value (RFC 5737 TEST-NET-3, 203.0.113.0/24); "
        "the stack refuses to deploy"
    )


def test_the_enterprise_principal_account_fails_its_row() -> None:
    (row,) = [r for r in check_placeholders(load_preset("enterprise")) if "principals" in r.subject]
    assert (row.subject, row.status, row.message) == (
        "ingress.private_link.allowed_principals[0]",
        Status.FAIL,
        "'arn:aws:iam::444455556666:root' is a documentation value (AWS documentation account "
        "444455556666); the stack refuses to deploy",
    )


def test_a_tier_with_its_own_values_passes_one_row() -> None:
    own = make_tier({"cluster": {"public_access_cidrs": ["10.20.0.0/16"]}})
    assert check_placeholders(own) == [
        CheckResult(
            check=Check.PLACEHOLDER,
            subject="tier",
            status=Status.PASS,
            message="no documentation account, address range, resource ID or bucket; "
            "every image pinned by digest",
        )
    ]
