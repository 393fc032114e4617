"""AWS Key Management Service: what CreateKey and EnableKeyRotation refuse."""

from __future__ import annotations

from collections.abc import Iterator

from gpufarm.deploy_rules.rule import Resource, Rule, Template, literal_str
from gpufarm.deploy_rules.shapes import KMS_KEY, kms_key

KEY = KMS_KEY

_ENABLE_KEY_ROTATION = "https://docs.aws.amazon.com/kms/latest/APIReference/API_EnableKeyRotation.html"

SYMMETRIC = "SYMMETRIC_DEFAULT"


def _rotation_symmetric(res: Resource, _template: Template) -> Iterator[str]:
    # EnableKeyRotation: "Automatic key rotation is supported only on symmetric encryption KMS
    # keys. You cannot enable automatic rotation of asymmetric KMS keys, HMAC KMS keys, KMS keys
    # with imported key material, or KMS keys in a custom key store."
    if literal_str(res.prop("EnableKeyRotation")) != "true":
        return
    spec = literal_str(res.prop("KeySpec", SYMMETRIC))
    origin = literal_str(res.prop("Origin", "AWS_KMS"))
    if spec is not None and spec != SYMMETRIC:
        yield f"EnableKeyRotation with KeySpec {spec}: only symmetric encryption keys rotate automatically"
    elif origin is not None and origin != "AWS_KMS":
        yield (
            f"EnableKeyRotation with Origin {origin}: keys with imported or "
            "external key material do not rotate"
        )


RULES: tuple[Rule, ...] = (
    Rule(
        id="KMS-KEY-ROTATION-SYMMETRIC",
        resource_type=KEY,
        title="Automatic rotation only on symmetric keys with AWS KMS key material",
        doc_url=_ENABLE_KEY_ROTATION,
        check=_rotation_symmetric,
        bad={"Key": kms_key(EnableKeyRotation=True, KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")},
        good={"Key": kms_key(EnableKeyRotation=False, KeySpec="RSA_2048", KeyUsage="SIGN_VERIFY")},
    ),
)
