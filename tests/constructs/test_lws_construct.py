"""LeaderWorkerSetController and MultiNodeServing: the chart, one manifest per model, order, Pod Identity."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from constructs import Construct

from gpufarm.config import ModelConfig, ServingConfig
from gpufarm.config.model import CompliancePack
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.compliance import require_compliance_pack
from gpufarm.constructs.lws import LeaderWorkerSetController, MultiNodeServing
from gpufarm.k8s import lws as k8s_lws
from gpufarm.k8s.storage import fsx_sub_path, s3_weights_volume
from tests.conftest import cdk_context, cfn_lint_errors
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

HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
SERVING = ServingConfig(namespace="inference", port=8000)
IMPORT_PATH = "s3://model-bucket/"
FSX_CLAIM = "fsx-models"
H100 = {"gpufarm.io/capacity-class": "h100"}
B200 = {"gpufarm.io/capacity-class": "b200"}
FSX_MODEL = ModelConfig(
    name="llama-405b",
    weights="s3://model-bucket/meta-llama/Llama-3.1-405B-Instruct-FP8/",
    gpus=8,
    pipeline_parallel=2,
)
GATED = ModelConfig(
    name="deepseek",
    weights="deepseek-ai/DeepSeek-V3",
    hf_token_secret="gated/hf-token",
    gpus=8,
    pipeline_parallel=2,
    replicas=2,
)
MOUNTPOINT_MODEL = ModelConfig(
    name="kimi", weights="s3://other-bucket/moonshot/kimi/", gpus=8, pipeline_parallel=3
)


@dataclass(frozen=True)
class Built:
    serving: MultiNodeServing
    namespace: eks.KubernetesManifest
    template: Template


def _namespace(stack: cdk.Stack, cluster: eks.ICluster) -> eks.KubernetesManifest:
    """A stand-in for the construct that creates the serving namespace (VllmServing's)."""
    doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVING.namespace}}
    return eks.KubernetesManifest(stack, "Namespace", cluster=cluster, manifest=[doc], overwrite=True)


def _serving(
    scope: Construct,
    cluster: eks.ICluster,
    models: Sequence[ModelConfig],
    **kwargs: Any,
) -> MultiNodeServing:
    arguments: dict[str, Any] = {
        "node_selectors": {m.name: H100 for m in models},
        "region": REGION,
        **kwargs,
    }
    return MultiNodeServing(scope, "MultiNode", cluster=cluster, serving=SERVING, models=models, **arguments)


@pytest.fixture(scope="module")
def built() -> Built:
    """An FSx model with EFA over 4 interfaces and a gated Hugging Face model on B200 nodes."""
    stack = new_stack("MultiNode")
    cluster = imported_cluster(stack, provider_role=True)
    namespace = _namespace(stack, cluster)
    serving = _serving(
        stack,
        cluster,
        [FSX_MODEL, GATED],
        node_selectors={FSX_MODEL.name: H100, GATED.name: B200},
        after=namespace,
        fsx_claim=FSX_CLAIM,
        fsx_import_path=IMPORT_PATH,
        efa_models={FSX_MODEL.name},
        efa_devices={FSX_MODEL.name: 4},
        termination_grace_seconds=120,
    )
    return Built(serving, namespace, Template.from_stack(stack))


def _resource_id(construct: Construct) -> str:
    """Logical ID of a construct whose CloudFormation resource sits one or two levels down."""
    child: Any = construct
    while child is not None and not isinstance(child, cdk.CfnElement):
        child = child.node.default_child
    assert child is not None, f"{construct.node.path} has no CloudFormation resource"
    return cdk.Stack.of(construct).get_logical_id(child)


def _resource(template: Template, construct: Construct) -> dict[str, Any]:
    found: dict[str, Any] = template.to_json()["Resources"][_resource_id(construct)]
    return found


# --------------------------------------------------------------------------- the controller


def test_controller_chart_is_lws_from_its_oci_repository_pinned(built: Built) -> None:
    props = _resource(built.template, built.serving.controller.chart)["Properties"]
    assert (props["Chart"], props["Repository"], props["Version"]) == (
        "lws",
        "oci://registry.k8s.io/lws/charts/lws",
        k8s_lws.LWS_CHART_VERSION,
    )
    assert (props["Release"], props["Namespace"], props["CreateNamespace"]) == ("lws", "lws-system", True)
    assert (props["Wait"], props["Timeout"]) == (True, "600s")
    assert json.loads(props["Values"]) == k8s_lws.lws_controller_values()


def test_a_chart_version_whose_crd_gpufarm_does_not_ship_is_refused() -> None:
    stack = new_stack("LwsPinned")
    with pytest.raises(ValueError) as info:
        LeaderWorkerSetController(
            stack, "Lws", cluster=imported_cluster(stack, provider_role=True), chart_version="0.9.0"
        )
    assert str(info.value) == (
        "'chart_version' must be '0.10.0', the LWS release whose CRD gpufarm ships "
        "(gpufarm/charts/lws-crds), got '0.9.0'"
    )


def test_the_crd_is_its_own_release_installed_before_the_controller(built: Built) -> None:
    controller = built.serving.controller
    crds = _resource(built.template, controller.crds.chart)
    assert "Chart" not in crds["Properties"] and "Repository" not in crds["Properties"]
    assert crds["Properties"]["ChartAssetURL"]  # the shipped chart, uploaded as an asset
    assert (crds["Properties"]["Release"], crds["Properties"]["Namespace"]) == ("lws-crds", "lws-system")
    assert controller.crds.version == k8s_lws.LWS_CHART_VERSION
    chart = _resource(built.template, controller.chart)
    assert _resource_id(controller.crds.chart) in chart["DependsOn"]


def test_an_imported_provider_without_its_role_cannot_install_the_crd_chart() -> None:
    stack = new_stack("NoRole")
    with pytest.raises(ValueError) as info:
        LeaderWorkerSetController(stack, "Lws", cluster=imported_cluster(stack))
    assert str(info.value) == (
        "'cluster' must have a kubectl provider with its role (for an imported provider, "
        "KubectlProviderAttributes(role=...)): the provider reads the CRD chart 'lws-crds' from "
        "the CDK asset bucket with it, got a provider without a role"
    )


def test_a_shared_controller_is_not_installed_twice() -> None:
    stack = new_stack("SharedLws")
    cluster = imported_cluster(stack, provider_role=True)
    controller = LeaderWorkerSetController(stack, "Lws", cluster=cluster)
    serving = _serving(stack, cluster, [GATED], controller=controller)
    template = Template.from_stack(stack)
    template.resource_count_is(HELM_CHART, 2)  # the CRD release and the controller's, once each
    assert serving.controller is controller
    depends_on = resources(template, KUBERNETES_RESOURCE)[logical_id(serving.model_manifests["deepseek"])]
    assert _resource_id(controller.chart) in depends_on["DependsOn"]


# --------------------------------------------------------------------------- the manifests


def test_one_manifest_per_model_plus_the_service_account(built: Built) -> None:
    # Namespace stand-in, service account, two models.
    built.template.resource_count_is(KUBERNETES_RESOURCE, 4)
    assert sorted(built.serving.model_manifests) == ["deepseek", "llama-405b"]


def test_fsx_model_holds_its_leader_worker_set_and_leader_service(built: Built) -> None:
    docs = manifest_of(built.template, built.serving.model_manifests["llama-405b"])
    assert kinds(docs) == ["LeaderWorkerSet", "Service"]
    expected = k8s_lws.vllm_leader_worker_set(
        FSX_MODEL,
        SERVING,
        node_selector=H100,
        region=REGION,
        termination_grace_seconds=120,
        fsx_claim=FSX_CLAIM,
        fsx_sub_path=fsx_sub_path(IMPORT_PATH, FSX_MODEL.weights),
        efa=True,
        efa_devices=4,
    )
    assert docs == [expected, k8s_lws.vllm_multinode_service(FSX_MODEL, SERVING)]
    assert built.serving.leader_worker_sets["llama-405b"] == expected


def test_gated_model_runs_on_its_own_node_selector_without_efa(built: Built) -> None:
    docs = manifest_of(built.template, built.serving.model_manifests["deepseek"])
    expected = k8s_lws.vllm_leader_worker_set(
        GATED, SERVING, node_selector=B200, region=REGION, termination_grace_seconds=120
    )
    assert docs == [expected, k8s_lws.vllm_multinode_service(GATED, SERVING)]


def test_s3_model_outside_fsx_gets_its_mountpoint_volume() -> None:
    stack = new_stack("MountpointMultiNode")
    serving = _serving(stack, imported_cluster(stack, provider_role=True), [MOUNTPOINT_MODEL])
    docs = manifest_of(Template.from_stack(stack), serving.model_manifests["kimi"])
    volume = s3_weights_volume(
        model_name="kimi", namespace="inference", s3_uri=MOUNTPOINT_MODEL.weights, region=REGION
    )
    assert kinds(docs) == ["PersistentVolume", "PersistentVolumeClaim", "LeaderWorkerSet", "Service"]
    assert docs[:2] == volume


def test_model_manifests_wait_for_the_chart_the_namespace_and_the_identity(built: Built) -> None:
    serving = built.serving
    assert serving.service_account_manifest is not None and serving.pod_identity is not None
    wanted = {
        _resource_id(serving.controller.chart),
        logical_id(built.namespace),
        logical_id(serving.service_account_manifest),
        logical_id(serving.pod_identity),
    }
    for manifest in serving.model_manifests.values():
        resource = resources(built.template, KUBERNETES_RESOURCE)[logical_id(manifest)]
        assert wanted <= set(resource["DependsOn"])


def test_service_of_names_the_leader_service(built: Built) -> None:
    [_, service] = manifest_of(built.template, built.serving.model_manifests["deepseek"])
    assert built.serving.service_of("deepseek") == service["metadata"]["name"] == "vllm-deepseek-leader"


def test_service_of_refuses_a_model_it_does_not_serve(built: Built) -> None:
    with pytest.raises(ValueError) as excinfo:
        built.serving.service_of("mistral")
    assert str(excinfo.value) == (
        "'model_name' must be one of the multi-node models (llama-405b, deepseek), got 'mistral'"
    )


# --------------------------------------------------------------------------- Pod Identity


def test_service_account_is_rendered_after_the_namespace(built: Built) -> None:
    manifest = built.serving.service_account_manifest
    assert manifest is not None
    assert manifest_of(built.template, manifest) == [k8s_lws.multinode_service_account("inference")]
    resource = resources(built.template, KUBERNETES_RESOURCE)[logical_id(manifest)]
    assert logical_id(built.namespace) in resource["DependsOn"]


def test_pod_identity_association_for_the_multinode_service_account(built: Built) -> None:
    assert built.serving.role is not None
    built.template.resource_count_is("AWS::EKS::PodIdentityAssociation", 1)
    built.template.has_resource_properties(
        "AWS::EKS::PodIdentityAssociation",
        {
            "ClusterName": CLUSTER_NAME,
            "Namespace": "inference",
            "ServiceAccount": "vllm-multinode",
            "RoleArn": {"Fn::GetAtt": [logical_id(built.serving.role), "Arn"]},
        },
    )


def test_role_may_read_exactly_the_token_secrets_through_a_managed_policy(built: Built) -> None:
    assert built.serving.role is not None
    built.template.resource_count_is("AWS::IAM::Policy", 0)
    [policy] = resources(built.template, "AWS::IAM::ManagedPolicy").values()
    assert policy["Properties"]["Roles"] == [{"Ref": logical_id(built.serving.role)}]
    secret = ":secret:gated/hf-token-??????"
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Action": "secretsmanager:GetSecretValue",
            "Effect": "Allow",
            "Resource": {
                "Fn::Join": ["", ["arn:aws:secretsmanager:us-east-1:", {"Ref": "AWS::AccountId"}, secret]]
            },
        }
    ]


def test_without_tokens_there_is_no_role_association_or_service_account() -> None:
    stack = new_stack("OpenMultiNode")
    serving = _serving(stack, imported_cluster(stack, provider_role=True), [FSX_MODEL])
    template = Template.from_stack(stack)
    assert serving.role is None and serving.service_account_manifest is None
    for type_ in ("AWS::IAM::Role", "AWS::IAM::ManagedPolicy", "AWS::EKS::PodIdentityAssociation"):
        template.resource_count_is(type_, 0)


# --------------------------------------------------------------------------- compliance


def test_a_small_stack_passes_both_nag_packs_and_cfn_lint(tmp_path: Path) -> None:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "MultiNodeNag", env=cdk.Environment(region=REGION))
    require_compliance_pack(stack, CompliancePack.NIST_800_53_R5)
    cluster = imported_cluster(stack, provider_role=True)
    _serving(stack, cluster, [FSX_MODEL, GATED], after=_namespace(stack, cluster))
    app.synth()  # raises on any unacknowledged finding
    assert cfn_lint_errors(tmp_path / "MultiNodeNag.template.json") == []


# --------------------------------------------------------------------------- invalid input


@pytest.mark.parametrize(
    ("models", "kwargs", "message"),
    [
        ([], {}, "'models' must hold at least one multi-node model, got none"),
        ([GATED, GATED], {}, "'models' must have unique names, got 'deepseek' 2 times"),
        (
            [GATED, FSX_MODEL],
            {"node_selectors": {"deepseek": H100}},
            "'node_selectors' must give node labels for every model, missing ['llama-405b']",
        ),
        (
            [GATED],
            {"node_selectors": {"deepseek": H100, "mistral": H100}},
            "'node_selectors' must name only the given models (deepseek), got ['mistral']",
        ),
        (
            [GATED],
            {"efa_models": {"mistral"}},
            "'efa_models' must name only the given models (deepseek), got ['mistral']",
        ),
        (
            [GATED],
            {"efa_devices": {"deepseek": 4}},
            "'efa_devices' must name only models in 'efa_models', got ['deepseek']",
        ),
        (
            [GATED.model_copy(update={"pipeline_parallel": 1})],
            {},
            "model 'deepseek' must have pipeline_parallel of at least 2 to run as a LeaderWorkerSet "
            "(a single-node model is a Deployment), got 1",
        ),
        (
            [FSX_MODEL],
            {"fsx_claim": FSX_CLAIM},
            "'fsx_import_path' is required with 'fsx_claim' (the claim holds the import path's objects)",
        ),
        (
            [FSX_MODEL],
            {"fsx_claim": FSX_CLAIM, "fsx_import_path": "s3://other-bucket/"},
            "model 'llama-405b' must have its weights under 'fsx_import_path' ('s3://other-bucket/'), "
            "got 's3://model-bucket/meta-llama/Llama-3.1-405B-Instruct-FP8/'",
        ),
    ],
    ids=[
        "no-models",
        "duplicate",
        "selector-missing",
        "selector-unknown",
        "efa-unknown",
        "efa-devices-without-efa",
        "single-node",
        "claim-without-import-path",
        "weights-outside-import-path",
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(
    models: list[ModelConfig], kwargs: dict[str, Any], message: str
) -> None:
    stack = new_stack("InvalidMultiNode")
    with pytest.raises(ValueError) as excinfo:
        _serving(stack, imported_cluster(stack, provider_role=True), models, **kwargs)
    assert str(excinfo.value) == message
