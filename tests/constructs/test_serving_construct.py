"""VllmServing: namespace, per-model Deployment + Service (+ S3 or FSx volume), agent, Pod Identity."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from aws_cdk.assertions import Template

from gpufarm.config import ModelConfig, ServingConfig
from gpufarm.config.model import TargetOptimizerConfig
from gpufarm.constructs import VllmServing
from gpufarm.k8s import serving as k8s_serving
from gpufarm.k8s.security import PodSecurityLevel
from gpufarm.k8s.storage import fsx_sub_path, s3_weights_volume
from tests.constructs.helpers import (
    CLUSTER_NAME,
    KUBERNETES_RESOURCE,
    REGION,
    imported_cluster,
    kinds,
    logical_id,
    manifest_of,
    new_stack,
    resources,
)

SECRET_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:gated/other-AbCdEf"
SERVING = ServingConfig(namespace="inference", port=8080)
S3_MODEL = ModelConfig(
    name="qwen3-8b", weights="s3://model-bucket/qwen/8b/", hf_token_secret="gated/hf-token"
)
HF_MODEL = ModelConfig(
    name="llama", weights="meta-llama/Llama-3.1-8B-Instruct", hf_token_secret=SECRET_ARN, node_pool="h100"
)
OPEN_MODEL = ModelConfig(name="mistral", weights="mistralai/Mistral-7B-Instruct-v0.3")
FSX_MODEL = ModelConfig(name="qwen3-32b", weights="s3://model-bucket/Qwen/Qwen3-32B/", max_num_seqs=16)
FSX_CLAIM = "fsx-models"
IMPORT_PATH = "s3://model-bucket/"
OPTIMIZER = TargetOptimizerConfig(enabled=True, data_port=9090, control_port=3000)


@dataclass(frozen=True)
class Built:
    serving: VllmServing
    template: Template


@pytest.fixture(scope="module")
def gated() -> Built:
    """Two gated models (a secret by name and one by ARN), one of them from S3."""
    stack = new_stack("GatedServing")
    serving = VllmServing(
        stack,
        "Serving",
        cluster=imported_cluster(stack),
        config=SERVING,
        models=[S3_MODEL, HF_MODEL],
        default_pool="l40s",
        region=REGION,
        termination_grace_seconds=120,
    )
    return Built(serving, Template.from_stack(stack))


@pytest.fixture(scope="module")
def open_models() -> Built:
    """One model with public weights: no secret, no role."""
    stack = new_stack("OpenServing")
    serving = VllmServing(
        stack,
        "Serving",
        cluster=imported_cluster(stack),
        config=ServingConfig(),
        models=[OPEN_MODEL],
        default_pool="l40s",
        region=REGION,
    )
    return Built(serving, Template.from_stack(stack))


@pytest.fixture(scope="module")
def fsx() -> Built:
    """An S3 model read from an FSx for Lustre claim and a Hugging Face model, Target Optimizer on."""
    stack = new_stack("FsxServing")
    serving = VllmServing(
        stack,
        "Serving",
        cluster=imported_cluster(stack),
        config=SERVING,
        models=[FSX_MODEL, OPEN_MODEL],
        default_pool="l40s",
        region=REGION,
        target_optimizer=OPTIMIZER,
        fsx_claim=FSX_CLAIM,
        fsx_import_path=IMPORT_PATH,
    )
    return Built(serving, Template.from_stack(stack))


# --------------------------------------------------------------------------- manifests


def test_namespace_manifest(gated: Built, open_models: Built) -> None:
    assert manifest_of(open_models.template, open_models.serving.namespace_manifest) == [
        k8s_serving.namespace("gpufarm")
    ]
    assert manifest_of(gated.template, gated.serving.namespace_manifest) == [
        k8s_serving.namespace("inference"),
        k8s_serving.service_account("inference"),
    ]


def test_one_manifest_per_model_plus_the_namespace(gated: Built, open_models: Built) -> None:
    gated.template.resource_count_is(KUBERNETES_RESOURCE, 3)
    open_models.template.resource_count_is(KUBERNETES_RESOURCE, 2)
    assert sorted(gated.serving.model_manifests) == ["llama", "qwen3-8b"]


def test_hugging_face_model_has_deployment_and_service(gated: Built) -> None:
    docs = manifest_of(gated.template, gated.serving.model_manifests["llama"])
    assert kinds(docs) == ["Deployment", "Service"]
    assert docs == [
        k8s_serving.vllm_deployment(
            HF_MODEL, SERVING, pool_name="h100", region=REGION, termination_grace_seconds=120
        ),
        k8s_serving.vllm_service(HF_MODEL, SERVING),
    ]


def test_s3_model_adds_its_volume_and_claim(gated: Built) -> None:
    docs = manifest_of(gated.template, gated.serving.model_manifests["qwen3-8b"])
    assert kinds(docs) == ["PersistentVolume", "PersistentVolumeClaim", "Deployment", "Service"]
    volume = s3_weights_volume(
        model_name="qwen3-8b", namespace="inference", s3_uri="s3://model-bucket/qwen/8b/", region=REGION
    )
    # No node_pool on the model: it runs on the default pool.
    deployment = k8s_serving.vllm_deployment(
        S3_MODEL, SERVING, pool_name="l40s", region=REGION, termination_grace_seconds=120
    )
    assert docs == [*volume, deployment, k8s_serving.vllm_service(S3_MODEL, SERVING)]


def test_fsx_model_reads_its_folder_of_the_claim_and_has_no_mountpoint_volume(fsx: Built) -> None:
    docs = manifest_of(fsx.template, fsx.serving.model_manifests["qwen3-32b"])
    assert kinds(docs) == ["Deployment", "Service"]
    deployment = k8s_serving.vllm_deployment(
        FSX_MODEL,
        SERVING,
        pool_name="l40s",
        region=REGION,
        target_optimizer=OPTIMIZER,
        fsx_claim=FSX_CLAIM,
        fsx_sub_path=fsx_sub_path(IMPORT_PATH, FSX_MODEL.weights),
    )
    assert docs == [deployment, k8s_serving.vllm_service(FSX_MODEL, SERVING, target_optimizer=OPTIMIZER)]


def test_fsx_sub_path_is_the_weights_folder_under_the_import_path(fsx: Built) -> None:
    [deployment, _] = manifest_of(fsx.template, fsx.serving.model_manifests["qwen3-32b"])
    [vllm] = deployment["spec"]["template"]["spec"]["containers"]
    [mount] = [m for m in vllm["volumeMounts"] if m["name"] == "weights"]
    assert mount["subPath"] == fsx_sub_path(IMPORT_PATH, "s3://model-bucket/Qwen/Qwen3-32B/")
    assert mount["subPath"].endswith("Qwen/Qwen3-32B")


def test_target_optimizer_reaches_every_model(fsx: Built) -> None:
    docs = manifest_of(fsx.template, fsx.serving.model_manifests["mistral"])
    assert docs == [
        k8s_serving.vllm_deployment(
            OPEN_MODEL, SERVING, pool_name="l40s", region=REGION, target_optimizer=OPTIMIZER
        ),
        k8s_serving.vllm_service(OPEN_MODEL, SERVING, target_optimizer=OPTIMIZER),
    ]


def test_model_manifests_are_applied_after_the_namespace(gated: Built) -> None:
    namespace_id = logical_id(gated.serving.namespace_manifest)
    for manifest in gated.serving.model_manifests.values():
        resource = resources(gated.template, KUBERNETES_RESOURCE)[logical_id(manifest)]
        assert namespace_id in resource["DependsOn"]


def test_service_name_helper(gated: Built) -> None:
    (service,) = [
        d
        for d in manifest_of(gated.template, gated.serving.model_manifests["llama"])
        if d["kind"] == "Service"
    ]
    assert gated.serving.service_of("llama") == service["metadata"]["name"]


# --------------------------------------------------------------------------- secrets access


def test_pod_identity_association_for_the_vllm_service_account(gated: Built) -> None:
    assert gated.serving.role is not None
    gated.template.resource_count_is("AWS::EKS::PodIdentityAssociation", 1)
    gated.template.has_resource_properties(
        "AWS::EKS::PodIdentityAssociation",
        {
            "ClusterName": CLUSTER_NAME,
            "Namespace": "inference",
            "ServiceAccount": "vllm",
            "RoleArn": {"Fn::GetAtt": [logical_id(gated.serving.role), "Arn"]},
        },
    )


def test_role_is_trusted_by_eks_pod_identity(gated: Built) -> None:
    assert gated.serving.role is not None
    gated.template.resource_count_is("AWS::IAM::Role", 1)
    role = resources(gated.template, "AWS::IAM::Role")[logical_id(gated.serving.role)]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
        }
    ]
    assert "ManagedPolicyArns" not in role


def test_role_may_read_exactly_the_named_secrets(gated: Built) -> None:
    policies = resources(gated.template, "AWS::IAM::Policy")
    assert len(policies) == 1
    (policy,) = policies.values()
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Action": "secretsmanager:GetSecretValue",
            "Effect": "Allow",
            "Resource": [
                # A full ARN is passed through; a name matches any version suffix.
                SECRET_ARN,
                {
                    "Fn::Join": [
                        "",
                        [
                            "arn:aws:secretsmanager:us-east-1:",
                            {"Ref": "AWS::AccountId"},
                            ":secret:gated/hf-token-??????",
                        ],
                    ]
                },
            ],
        }
    ]


def test_without_secrets_there_is_no_role_or_association(open_models: Built) -> None:
    assert open_models.serving.role is None
    for type_ in ("AWS::IAM::Role", "AWS::IAM::Policy", "AWS::EKS::PodIdentityAssociation"):
        open_models.template.resource_count_is(type_, 0)


# --------------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("fsx_args", "message"),
    [
        (
            {"fsx_claim": FSX_CLAIM},
            "'fsx_import_path' is required with 'fsx_claim' (the claim holds the import path's objects)",
        ),
        (
            {"fsx_import_path": IMPORT_PATH},
            "'fsx_claim' is required with 'fsx_import_path' (the claim holds the import path's objects)",
        ),
        (
            {"fsx_claim": FSX_CLAIM, "fsx_import_path": "s3://other-bucket/"},
            "model 'qwen3-32b' must have its weights under 'fsx_import_path' ('s3://other-bucket/'), "
            "got 's3://model-bucket/Qwen/Qwen3-32B/'",
        ),
    ],
    ids=["claim-only", "import-path-only", "weights-elsewhere"],
)
def test_invalid_fsx_input_is_rejected_with_an_exact_message(fsx_args: dict[str, str], message: str) -> None:
    stack = new_stack("InvalidServing")
    with pytest.raises(ValueError) as excinfo:
        VllmServing(
            stack,
            "Serving",
            cluster=imported_cluster(stack),
            config=SERVING,
            models=[FSX_MODEL],
            default_pool="l40s",
            region=REGION,
            **fsx_args,  # type: ignore[arg-type]
        )
    assert str(excinfo.value) == message


PD_EFA_MODEL = ModelConfig(
    name="llama-70b",
    weights="meta-llama/Llama-3.3-70B-Instruct",
    gpus=4,
    prefill_decode={
        "prefill_replicas": 1,
        "kv_transport": "efa",
        "efa_image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/vllm-efa:v0.31.0@sha256:" + "e" * 64,
    },
)


def _namespace_labels(**kwargs: object) -> dict[str, str]:
    stack = new_stack("PodSecurity")
    serving = VllmServing(
        stack,
        "Serving",
        cluster=imported_cluster(stack),
        config=ServingConfig(),
        default_pool="l40s",
        region=REGION,
        **kwargs,  # type: ignore[arg-type]
    )
    [namespace] = manifest_of(Template.from_stack(stack), serving.namespace_manifest)
    labels: dict[str, str] = namespace["metadata"]["labels"]
    return labels


def test_namespace_level_defaults_to_what_its_own_pods_pass() -> None:
    plain = _namespace_labels(models=[OPEN_MODEL])
    assert plain["pod-security.kubernetes.io/enforce"] == "restricted"
    assert plain["pod-security.kubernetes.io/enforce-version"] == "latest"
    tcp = _namespace_labels(models=[PD_EFA_MODEL], efa_devices={"llama-70b": (0, 0)})
    assert tcp["pod-security.kubernetes.io/enforce"] == "restricted"
    efa = _namespace_labels(models=[PD_EFA_MODEL], efa_devices={"llama-70b": (16, 16)})
    assert efa["pod-security.kubernetes.io/enforce"] == "privileged"
    assert efa["pod-security.kubernetes.io/warn"] == "restricted"


def test_namespace_level_and_version_can_be_given() -> None:
    labels = _namespace_labels(
        models=[OPEN_MODEL], pod_security=PodSecurityLevel.PRIVILEGED, kubernetes_version="1.35"
    )
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/audit-version"] == "v1.35"
