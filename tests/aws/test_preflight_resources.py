"""Preflight's checks of the account's resources: the ACM certificate, the model bucket, the Hugging
Face token secret and CDK bootstrap against moto, and Bedrock model access against a botocore
Stubber (moto does not implement GetFoundationModelAvailability)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gpufarm.aws.preflight import (
    Status,
    check_bedrock_access,
    check_cdk_bootstrap,
    check_certificate,
    check_hf_token_secrets,
    check_model_bucket,
    required_version,
)
from gpufarm.config import ModelStoreKind, TierConfig, load_preset
from tests.aws.moto_account import moto_account, table
from tests.unit.factories import make_tier

REGION = "us-east-1"
NOW = datetime.now(UTC).replace(microsecond=0)
"""moto's ACM refuses to import a certificate expired at the real present: certificates are made
around it, and the checks are run at a chosen moment."""
EXPIRES = (NOW + timedelta(days=365)).replace(hour=0, minute=0, second=0)


@pytest.fixture(autouse=True)
def account(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with moto_account(monkeypatch, REGION):
        yield


# --------------------------------------------------------------------------- certificate


def _self_signed(domain: str, not_after: datetime) -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, domain)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - timedelta(days=30))
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(domain)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return (
        cert.public_bytes(serialization.Encoding.PEM),
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ),
    )


def imported(domain: str = "llm.example.org", not_after: datetime = EXPIRES) -> str:
    cert, key = _self_signed(domain, not_after)
    acm = boto3.client("acm", region_name=REGION)
    return str(acm.import_certificate(Certificate=cert, PrivateKey=key)["CertificateArn"])


def with_certificate(arn: str) -> TierConfig:
    tier = load_preset("production")
    return tier.model_copy(update={"ingress": tier.ingress.model_copy(update={"certificate_arn": arn})})


def certificate_rows(tier: TierConfig, now: datetime = NOW) -> dict[str, tuple[Status, str, str]]:
    return table(check_certificate(tier, region=REGION, acm=boto3.client("acm", region_name=REGION), now=now))


def test_an_issued_certificate_passes() -> None:
    assert certificate_rows(with_certificate(imported())) == {
        "ingress.certificate_arn": (Status.PASS, "issued for llm.example.org in us-east-1", "")
    }


def test_a_certificate_expiring_within_30_days_warns() -> None:
    tier = with_certificate(imported())
    assert certificate_rows(tier, now=EXPIRES - timedelta(days=10))["ingress.certificate_arn"][:2] == (
        Status.WARN,
        f"the certificate for llm.example.org expires {EXPIRES:%Y-%m-%d}",
    )


def test_an_expired_certificate_fails() -> None:
    tier = with_certificate(imported())
    assert certificate_rows(tier, now=EXPIRES + timedelta(days=1))["ingress.certificate_arn"] == (
        Status.FAIL,
        f"the certificate for llm.example.org expired {EXPIRES:%Y-%m-%d}",
        "renew or replace it",
    )


def test_a_certificate_waiting_for_validation_fails() -> None:
    acm = boto3.client("acm", region_name=REGION)
    arn = acm.request_certificate(DomainName="llm.example.org", ValidationMethod="DNS")["CertificateArn"]
    assert certificate_rows(with_certificate(arn))["ingress.certificate_arn"] == (
        Status.FAIL,
        "the certificate for llm.example.org is pending validation, not issued",
        "complete its validation (DNS or email) or issue a new certificate",
    )


def test_a_missing_certificate_fails() -> None:
    arn = "arn:aws:acm:us-east-1:123456789012:certificate/5b1e7f0c-6a1d-4b1c-9b8e-0d6f1a2b3c4d"
    assert certificate_rows(with_certificate(arn))["ingress.certificate_arn"] == (
        Status.FAIL,
        f"ACM has no certificate {arn} in us-east-1",
        "request or import the certificate in ACM and set ingress.certificate_arn to its ARN",
    )


def test_a_certificate_of_another_region_fails_without_a_call() -> None:
    arn = "arn:aws:acm:eu-west-1:123456789012:certificate/5b1e7f0c-6a1d-4b1c-9b8e-0d6f1a2b3c4d"
    assert certificate_rows(with_certificate(arn))["ingress.certificate_arn"] == (
        Status.FAIL,
        "the certificate is in eu-west-1; the load balancer in us-east-1 can only use a certificate of its "
        "own region",
        "request or import the certificate in us-east-1 and set ingress.certificate_arn to it",
    )


def test_no_certificate_passes() -> None:
    assert certificate_rows(load_preset("poc")) == {
        "certificate": (Status.PASS, "the tier names no certificate (no TLS listener to check)", "")
    }


# --------------------------------------------------------------------------- model bucket


def s3_model_tier(weights: str = "s3://acme-models/qwen/Qwen3-8B/") -> TierConfig:
    model = load_preset("poc").models[0].model_dump(mode="json")
    return make_tier({"models": [{**model, "weights": weights, "weights_gib": 16}]})


def bucket_rows(tier: TierConfig) -> dict[str, tuple[Status, str, str]]:
    return table(check_model_bucket(tier, region=REGION, s3=boto3.client("s3", region_name=REGION)))


def upload(bucket: str, *keys: str, region: str = REGION) -> None:
    s3 = boto3.client("s3", region_name=region)
    if region == "us-east-1":
        s3.create_bucket(Bucket=bucket)
    else:
        s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": region})
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"{}")


SUBJECT = "models[0].weights: s3://acme-models/qwen/Qwen3-8B/"


def test_a_model_folder_with_its_config_passes() -> None:
    upload("acme-models", "qwen/Qwen3-8B/config.json", "qwen/Qwen3-8B/model.safetensors")
    assert bucket_rows(s3_model_tier()) == {SUBJECT: (Status.PASS, "2 object(s) in us-east-1", "")}


def test_a_missing_bucket_fails() -> None:
    assert bucket_rows(s3_model_tier()) == {
        SUBJECT: (
            Status.FAIL,
            "bucket acme-models does not exist",
            "create the bucket and upload the weights, or set models[0].weights",
        )
    }


def test_an_empty_prefix_fails() -> None:
    upload("acme-models", "other/config.json")
    assert bucket_rows(s3_model_tier())[SUBJECT] == (
        Status.FAIL,
        "nothing under s3://acme-models/qwen/Qwen3-8B/",
        "upload the weights there, or set models[0].weights",
    )


def test_a_folder_without_config_json_fails() -> None:
    upload("acme-models", "qwen/Qwen3-8B/original/config.json", "qwen/Qwen3-8B/model.safetensors")
    assert bucket_rows(s3_model_tier())[SUBJECT] == (
        Status.FAIL,
        "no config.json directly under s3://acme-models/qwen/Qwen3-8B/: vLLM loads a model from the folder "
        "holding its config.json and weights",
        "point models[0].weights at the folder that holds config.json",
    )


def test_a_bucket_in_another_region_warns() -> None:
    upload("acme-models", "qwen/Qwen3-8B/config.json", region="eu-west-1")
    assert bucket_rows(s3_model_tier())[SUBJECT] == (
        Status.WARN,
        "bucket acme-models is in eu-west-1, the tier in us-east-1: the weights are read across regions "
        "(inter-region data transfer on every load)",
        "copy the weights to a bucket in us-east-1",
    )


def test_the_fsx_import_path_is_checked_too() -> None:
    upload("acme-prod-models", "meta/Llama-3.3-70B/config.json")
    tier = load_preset("production")
    fsx = tier.model_store.fsx.model_copy(update={"import_path": "s3://acme-prod-models/"})
    models = [
        m.model_copy(update={"weights": "s3://acme-prod-models/meta/Llama-3.3-70B/"}) for m in tier.models[:1]
    ]
    tier = tier.model_copy(
        update={"model_store": tier.model_store.model_copy(update={"fsx": fsx}), "models": models}
    )
    assert [s for s, (status, _, _) in bucket_rows(tier).items() if status is Status.PASS] == [
        "models[0].weights: s3://acme-prod-models/meta/Llama-3.3-70B/",
        "model_store.fsx.import_path: s3://acme-prod-models/",
    ]


def streamed_tier() -> TierConfig:
    tier = s3_model_tier()
    store = tier.model_store.model_copy(update={"kind": ModelStoreKind.RUNAI_STREAMER})
    return tier.model_copy(update={"model_store": store})


def test_a_streamed_model_needs_safetensors() -> None:
    upload("acme-models", "qwen/Qwen3-8B/config.json", "qwen/Qwen3-8B/pytorch_model.bin")
    streamed = streamed_tier()
    assert bucket_rows(streamed)[SUBJECT] == (
        Status.FAIL,
        "no *.safetensors under s3://acme-models/qwen/Qwen3-8B/: the runai-streamer model store loads "
        "safetensors weights only",
        "upload the checkpoint as safetensors, or set model_store.kind to 's3-mountpoint' or 'fsx-lustre'",
    )
    # Mountpoint reads what vLLM's default loader reads: no such requirement.
    assert bucket_rows(s3_model_tier())[SUBJECT][0] is Status.PASS


def test_a_streamed_model_with_safetensors_passes() -> None:
    upload("acme-models", "qwen/Qwen3-8B/config.json", "qwen/Qwen3-8B/model-00001-of-00002.safetensors")
    streamed = streamed_tier()
    assert bucket_rows(streamed)[SUBJECT] == (Status.PASS, "2 object(s) in us-east-1", "")


def test_huggingface_weights_need_no_bucket() -> None:
    assert bucket_rows(load_preset("poc")) == {
        "weights": (Status.PASS, "no weights come from S3 (nothing to check)", "")
    }


# --------------------------------------------------------------------------- token secret


def with_secret(secret: str) -> TierConfig:
    model = load_preset("poc").models[0].model_dump(mode="json")
    return make_tier({"models": [{**model, "hf_token_secret": secret}]})


def secret_rows(tier: TierConfig) -> dict[str, tuple[Status, str, str]]:
    return table(
        check_hf_token_secrets(
            tier, region=REGION, secretsmanager=lambda r: boto3.client("secretsmanager", region_name=r)
        )
    )


def test_a_secret_with_a_value_passes() -> None:
    boto3.client("secretsmanager", region_name=REGION).create_secret(Name="hf/token", SecretString="hf_x")
    assert secret_rows(with_secret("hf/token")) == {
        "models[0].hf_token_secret": (Status.PASS, "secret 'hf/token' has a current value in us-east-1", "")
    }


def test_a_missing_secret_fails() -> None:
    assert secret_rows(with_secret("hf/token")) == {
        "models[0].hf_token_secret": (
            Status.FAIL,
            "Secrets Manager has no secret 'hf/token' in us-east-1",
            "create it (aws secretsmanager create-secret --name hf/token --secret-string <token>)",
        )
    }


def test_a_secret_without_a_value_fails() -> None:
    boto3.client("secretsmanager", region_name=REGION).create_secret(Name="hf/token")
    assert secret_rows(with_secret("hf/token"))["models[0].hf_token_secret"][:2] == (
        Status.FAIL,
        "secret 'hf/token' has no current value",
    )


def test_a_secret_scheduled_for_deletion_fails() -> None:
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secrets.create_secret(Name="hf/token", SecretString="hf_x")
    secrets.delete_secret(SecretId="hf/token", RecoveryWindowInDays=7)
    assert secret_rows(with_secret("hf/token"))["models[0].hf_token_secret"][:2] == (
        Status.FAIL,
        "secret 'hf/token' is scheduled for deletion",
    )


def test_huggingface_weights_without_a_secret_warn() -> None:
    assert secret_rows(load_preset("poc")) == {
        "models[0]: Qwen/Qwen3-8B": (
            Status.WARN,
            "Hugging Face weights with no token secret: a gated repo refuses the download",
            "if the repo is gated, set models[0].hf_token_secret to a Secrets Manager secret holding a token",
        )
    }


# --------------------------------------------------------------------------- CDK bootstrap


def bootstrap_rows(template: dict[str, Any] | None = None) -> dict[str, tuple[Status, str, str]]:
    ssm = boto3.client("ssm", region_name=REGION)
    return table(check_cdk_bootstrap(region=REGION, account="123456789012", ssm=ssm, template=template))


FIX = "run `cdk bootstrap aws://123456789012/us-east-1` with the pinned CDK CLI (npx cdk)"


def put_version(value: str) -> None:
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name="/cdk-bootstrap/hnb659fds/version", Value=value, Type="String"
    )


def test_an_account_never_bootstrapped_fails() -> None:
    assert bootstrap_rows() == {
        "aws://123456789012/us-east-1": (
            Status.FAIL,
            "not bootstrapped for the CDK (no /cdk-bootstrap/hnb659fds/version parameter)",
            FIX,
        )
    }


def test_an_old_bootstrap_fails() -> None:
    put_version("5")
    assert bootstrap_rows()["aws://123456789012/us-east-1"] == (
        Status.FAIL,
        "bootstrap version 5; the stack needs 6 or later",
        FIX,
    )


def test_a_recent_bootstrap_passes() -> None:
    put_version("21")
    assert bootstrap_rows()["aws://123456789012/us-east-1"][:2] == (
        Status.PASS,
        "bootstrap version 21 (the stack needs 6 or later)",
    )


def _rule(*refused: str) -> dict[str, Any]:
    return {
        "Resources": {},
        "Rules": {
            "CheckBootstrapVersion": {
                "Assertions": [
                    {"Assert": {"Fn::Not": [{"Fn::Contains": [list(refused), {"Ref": "BootstrapVersion"}]}]}}
                ]
            }
        },
    }


def test_the_template_sets_the_version_it_needs() -> None:
    put_version("21")
    assert required_version(_rule("1", "2", "3", "4", "5")) == 6
    assert required_version(None) == 6
    assert bootstrap_rows(_rule(*(str(v) for v in range(1, 25))))["aws://123456789012/us-east-1"][:2] == (
        Status.FAIL,
        "bootstrap version 21; the stack needs 25 or later",
    )


# --------------------------------------------------------------------------- Bedrock model access


POC_MODEL = "meta.llama3-1-8b-instruct-v1:0"


def access_rows(**answer: Any) -> dict[str, tuple[Status, str, str]]:
    client = boto3.client("bedrock", region_name=REGION)
    with Stubber(client) as stub:
        if "error" in answer:
            stub.add_client_error("get_foundation_model_availability", answer["error"], "no such model")
        else:
            stub.add_response(
                "get_foundation_model_availability",
                {
                    "modelId": POC_MODEL,
                    "agreementAvailability": {"status": "AVAILABLE"},
                    "authorizationStatus": "AUTHORIZED",
                    "entitlementAvailability": "AVAILABLE",
                    "regionAvailability": "AVAILABLE",
                    **answer,
                },
                {"modelId": POC_MODEL},
            )
        rows = check_bedrock_access(load_preset("poc"), region=REGION, bedrock=lambda r: client)
        stub.assert_no_pending_responses()
    return table(rows)


SUBJECT_ACCESS = f"model qwen3-8b: {POC_MODEL}"


def test_granted_access_passes_for_the_profiles_model() -> None:
    # The poc falls back to the 'us.' profile; access is granted on its foundation model.
    assert access_rows() == {
        SUBJECT_ACCESS: (Status.PASS, f"the account may invoke {POC_MODEL} in us-east-1", "")
    }


def test_access_not_granted_fails() -> None:
    assert access_rows(authorizationStatus="NOT_AUTHORIZED", entitlementAvailability="NOT_AVAILABLE") == {
        SUBJECT_ACCESS: (
            Status.FAIL,
            f"the account may not invoke {POC_MODEL} in us-east-1 (authorization NOT_AUTHORIZED, entitlement "
            "NOT_AVAILABLE)",
            f"request access to {POC_MODEL} in the Bedrock console (Model access) in us-east-1, and accept "
            "its end-user agreement",
        )
    }


def test_a_pending_agreement_warns() -> None:
    assert access_rows(agreementAvailability={"status": "PENDING"})[SUBJECT_ACCESS][:2] == (
        Status.WARN,
        "the model's agreement is pending in us-east-1; invocations fail until it is accepted",
    )


def test_an_unknown_model_fails() -> None:
    assert access_rows(error="ResourceNotFoundException")[SUBJECT_ACCESS][:2] == (
        Status.FAIL,
        f"Bedrock knows no foundation model {POC_MODEL} in us-east-1",
    )


def test_every_location_in_a_missing_bucket_gets_its_row() -> None:
    tier = load_preset("production")
    models = [
        m.model_copy(update={"weights": "s3://gone-models/meta/Llama-3.3-70B/"}) for m in tier.models[:1]
    ]
    fsx = tier.model_store.fsx.model_copy(update={"import_path": "s3://gone-models/"})
    tier = tier.model_copy(
        update={"model_store": tier.model_store.model_copy(update={"fsx": fsx}), "models": models}
    )
    assert {s: status for s, (status, _, _) in bucket_rows(tier).items()} == {
        "models[0].weights: s3://gone-models/meta/Llama-3.3-70B/": Status.FAIL,
        "model_store.fsx.import_path: s3://gone-models/": Status.FAIL,
    }
