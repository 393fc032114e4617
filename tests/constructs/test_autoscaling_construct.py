"""KedaAutoscaling: the KEDA chart, its operator's Pod Identity role for AMP, and the ScaledObjects."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
import pytest
from aws_cdk import aws_aps as aps
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from constructs import Construct

from gpufarm.config.model import AutoscalingConfig, ModelAutoscalingConfig, ModelConfig, PrefillDecodeConfig
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.autoscaling import KedaAutoscaling
from gpufarm.k8s.autoscaling import keda_values, scaled_object, trigger_authentication
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
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
from tests.helm import chart_available, chart_defaults, helm_merge

HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
WORKSPACE_ID = "ws-0123abcd-4567-89ef-0123-456789abcdef"
WORKSPACE_ARN = f"arn:aws:aps:us-east-1:123456789012:workspace/{WORKSPACE_ID}"
ENDPOINT = f"https://aps-workspaces.us-east-1.amazonaws.com/workspaces/{WORKSPACE_ID}"
SERVING_NS = "inference"
CONFIG = AutoscalingConfig(keda_chart_version="2.18.1", namespace="autoscaler")
KEDA_CHART = f"keda@{CONFIG.keda_chart_version}"

CRITICAL = ModelConfig(
    name="llama",
    weights="meta-llama/Llama-3.3-70B-Instruct",
    autoscaling=ModelAutoscalingConfig(min_replicas=2, max_replicas=6, kv_cache_target=0.8),
)
PARKABLE = ModelConfig(
    name="qwen-batch",
    weights="Qwen/Qwen3-32B",
    critical=False,
    autoscaling=ModelAutoscalingConfig(min_replicas=0, max_replicas=4, queue_target=10),
)
FIXED = ModelConfig(name="mistral", weights="mistralai/Mistral-7B-Instruct-v0.3", replicas=2)
MODELS = [CRITICAL, FIXED, PARKABLE]


@dataclass(frozen=True)
class Built:
    stack: cdk.Stack
    keda: KedaAutoscaling
    deployments: dict[str, eks.KubernetesManifest]
    template: Template


def _deployment(stack: cdk.Stack, cluster: eks.ICluster, name: str) -> eks.KubernetesManifest:
    """A stand-in for a model's Deployment manifest, to depend on."""
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": SERVING_NS}}
    return eks.KubernetesManifest(stack, f"Deploy-{name}", cluster=cluster, manifest=[doc], overwrite=True)


@pytest.fixture(scope="module")
def built() -> Built:
    """Three models (one fixed, one critical autoscaled, one that scales to zero) on an existing cluster."""
    stack = new_stack("Keda")
    cluster = imported_cluster(stack)
    deployments = {m.name: _deployment(stack, cluster, m.name) for m in (CRITICAL, PARKABLE)}
    keda = KedaAutoscaling(
        stack,
        "Autoscaling",
        cluster=cluster,
        config=CONFIG,
        workspace_arn=WORKSPACE_ARN,
        query_endpoint=ENDPOINT,
        region=REGION,
        models=MODELS,
        serving_namespace=SERVING_NS,
        after=cast(dict[str, Construct], deployments),
    )
    return Built(stack, keda, deployments, Template.from_stack(stack))


def _id(construct: Construct) -> str:
    """Logical ID of a construct whose CloudFormation resource sits one or two levels down."""
    child: Any = construct
    while child is not None and not isinstance(child, cdk.CfnElement):
        child = child.node.default_child
    assert child is not None, f"{construct.node.path} has no CloudFormation resource"
    return cdk.Stack.of(construct).get_logical_id(child)


def _resource(built: Built, construct: Construct) -> dict[str, Any]:
    found: dict[str, Any] = built.template.to_json()["Resources"][_id(construct)]
    return found


# --------------------------------------------------------------------------- IAM and Pod Identity


def test_operator_role_may_only_query_the_one_workspace(built: Built) -> None:
    [policy] = resources(built.template, "AWS::IAM::Policy").values()
    assert policy["Properties"]["Roles"] == [{"Ref": logical_id(built.keda.role)}]
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {"Action": "aps:QueryMetrics", "Effect": "Allow", "Resource": WORKSPACE_ARN}
    ]


def test_operator_role_trusts_eks_pod_identity(built: Built) -> None:
    role = _resource(built, built.keda.role)
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
        }
    ]
    assert "ManagedPolicyArns" not in role["Properties"]


def test_association_gives_the_role_to_the_keda_operator_service_account(built: Built) -> None:
    built.template.resource_count_is("AWS::EKS::PodIdentityAssociation", 1)
    built.template.has_resource_properties(
        "AWS::EKS::PodIdentityAssociation",
        {
            "ClusterName": CLUSTER_NAME,
            "Namespace": "autoscaler",
            "ServiceAccount": "keda-operator",
            "RoleArn": {"Fn::GetAtt": [logical_id(built.keda.role), "Arn"]},
        },
    )


def test_role_is_scoped_to_a_workspace_created_in_the_same_stack() -> None:
    stack = new_stack("KedaWorkspace")
    workspace = aps.CfnWorkspace(stack, "Workspace")
    KedaAutoscaling(
        stack,
        "Autoscaling",
        cluster=imported_cluster(stack),
        config=CONFIG,
        workspace_arn=workspace.attr_arn,
        query_endpoint=f"https://aps-workspaces.{REGION}.amazonaws.com/workspaces/{workspace.attr_workspace_id}",
        region=REGION,
        models=[CRITICAL],
        serving_namespace=SERVING_NS,
    )
    [policy] = resources(Template.from_stack(stack), "AWS::IAM::Policy").values()
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {
            "Action": "aps:QueryMetrics",
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [stack.get_logical_id(workspace), "Arn"]},
        }
    ]


# --------------------------------------------------------------------------- the chart


def test_chart_is_keda_from_its_repository_pinned_to_the_config_version(built: Built) -> None:
    props = _resource(built, built.keda.chart)["Properties"]
    assert (props["Chart"], props["Repository"], props["Version"]) == (
        "keda",
        "https://kedacore.github.io/charts",
        "2.18.1",
    )
    assert (props["Release"], props["Namespace"], props["CreateNamespace"]) == ("keda", "autoscaler", True)


def test_chart_waits_for_ready_pods_with_a_timeout(built: Built) -> None:
    props = _resource(built, built.keda.chart)["Properties"]
    assert (props["Wait"], props["Timeout"]) == (True, "600s")


def test_chart_values(built: Built) -> None:
    assert json.loads(_resource(built, built.keda.chart)["Properties"]["Values"]) == keda_values()


@pytest.mark.skipif(not chart_available(KEDA_CHART), reason="../shared/upstream-ref is not beside the repo")
def test_deployed_values_delete_the_charts_cpu_limits(built: Built) -> None:
    # What the kubectl handler hands Helm, merged over the chart's defaults as Helm does.
    values = json.loads(_resource(built, built.keda.chart)["Properties"]["Values"])
    rendered = helm_merge(chart_defaults(KEDA_CHART), values)["resources"]
    assert {pod: set(r["limits"]) for pod, r in rendered.items()} == {
        "operator": {"memory"},
        "metricServer": {"memory"},
        "webhooks": {"memory"},
    }


def test_node_selector_reaches_the_chart_values() -> None:
    stack = new_stack("KedaPinned")
    keda = KedaAutoscaling(
        stack,
        "Autoscaling",
        cluster=imported_cluster(stack),
        config=CONFIG,
        workspace_arn=WORKSPACE_ARN,
        query_endpoint=ENDPOINT,
        region=REGION,
        models=[CRITICAL],
        serving_namespace=SERVING_NS,
        node_selector={"eks.amazonaws.com/nodegroup": "system"},
    )
    charts = resources(Template.from_stack(stack), HELM_CHART)
    values = json.loads(charts[_id(keda.chart)]["Properties"]["Values"])
    assert values["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "system"}


def test_chart_is_installed_after_the_operator_identity_exists(built: Built) -> None:
    depends_on = set(_resource(built, built.keda.chart)["DependsOn"])
    [policy_id] = resources(built.template, "AWS::IAM::Policy")
    assert {logical_id(built.keda.pod_identity), logical_id(built.keda.role), policy_id} <= depends_on


# --------------------------------------------------------------------------- the ScaledObjects


def test_manifest_holds_the_trigger_authentication_and_one_scaled_object_per_autoscaled_model(
    built: Built,
) -> None:
    docs = manifest_of(built.template, built.keda.manifest)
    assert kinds(docs) == ["TriggerAuthentication", "ScaledObject", "ScaledObject"]
    expected = {
        m.name: scaled_object(m, namespace=SERVING_NS, query_endpoint=ENDPOINT, region=REGION)
        for m in (CRITICAL, PARKABLE)
    }
    assert docs == [trigger_authentication(SERVING_NS), *expected.values()]
    assert built.keda.scaled_objects == expected


def test_a_model_with_fixed_replicas_gets_no_scaled_object(built: Built) -> None:
    names = [d["metadata"]["name"] for d in manifest_of(built.template, built.keda.manifest)]
    assert "vllm-mistral" not in names
    assert "mistral" not in built.keda.scaled_objects


def test_only_the_model_without_replicas_floor_scales_to_zero(built: Built) -> None:
    mins = {name: so["spec"]["minReplicaCount"] for name, so in built.keda.scaled_objects.items()}
    assert mins == {"llama": 2, "qwen-batch": 0}


def test_one_manifest_for_keda_objects(built: Built) -> None:
    # Two stand-in Deployments plus the KEDA manifest.
    built.template.resource_count_is(KUBERNETES_RESOURCE, 3)
    built.template.resource_count_is(HELM_CHART, 1)


def test_scaled_objects_are_applied_after_the_chart_and_each_deployment(built: Built) -> None:
    depends_on = set(_resource(built, built.keda.manifest)["DependsOn"])
    assert _id(built.keda.chart) in depends_on
    for deployment in built.deployments.values():
        assert logical_id(deployment) in depends_on


# --------------------------------------------------------------------------- invalid input


def _build(**overrides: Any) -> KedaAutoscaling:
    stack = new_stack("Invalid")
    props: dict[str, Any] = {
        "cluster": imported_cluster(stack),
        "config": CONFIG,
        "workspace_arn": WORKSPACE_ARN,
        "query_endpoint": ENDPOINT,
        "region": REGION,
        "models": [CRITICAL],
        "serving_namespace": SERVING_NS,
    }
    after = overrides.pop("after_names", None)
    if after is not None:
        props["after"] = {name: Construct(stack, f"After{i}") for i, name in enumerate(after)}
    props.update(overrides)
    return KedaAutoscaling(stack, "Autoscaling", **props)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"models": [FIXED]},
            "'models' must include a model with 'autoscaling' (KEDA would have nothing to scale), "
            "got none among ['mistral']",
        ),
        (
            {"models": []},
            "'models' must include a model with 'autoscaling' (KEDA would have nothing to scale), "
            "got none among []",
        ),
        (
            {"models": [CRITICAL, CRITICAL]},
            "'models' must have unique names, got 'llama' 2 times",
        ),
        (
            {
                "models": [
                    ModelConfig(
                        name="vital", weights="org/model", autoscaling=ModelAutoscalingConfig(min_replicas=0)
                    )
                ]
            },
            "model 'vital': 'autoscaling.min_replicas' must be at least 1 for a critical model "
            "(scale to zero needs critical: false), got 0",
        ),
        (
            {
                "models": [
                    ModelConfig(
                        name="inverted",
                        weights="org/model",
                        autoscaling=ModelAutoscalingConfig(min_replicas=3, max_replicas=2),
                    )
                ]
            },
            "model 'inverted': 'autoscaling.min_replicas' must be at most max_replicas (2), got 3",
        ),
        (
            {
                "models": [
                    ModelConfig(
                        name="blind",
                        weights="org/model",
                        autoscaling=ModelAutoscalingConfig(queue_target=None),
                    )
                ]
            },
            "model 'blind': 'autoscaling' must set queue_target and/or kv_cache_target "
            "(the metrics it scales on), got neither",
        ),
        (
            {"models": [CRITICAL, FIXED], "after_names": ["llama", "mistral"]},
            "'after' must name autoscaled models (llama), got ['mistral']",
        ),
        (
            {"workspace_arn": "arn:aws:aps:us-east-1:123456789012:rulegroupsnamespace/ws-1/rules"},
            "'workspace_arn' must be an Amazon Managed Prometheus workspace ARN "
            "(arn:aws:aps:<region>:<account>:workspace/<id>), "
            "got 'arn:aws:aps:us-east-1:123456789012:rulegroupsnamespace/ws-1/rules'",
        ),
        (
            {"query_endpoint": f"{ENDPOINT}/api/v1/"},
            "'query_endpoint' must be https://aps-workspaces.<region>.amazonaws.com/workspaces/"
            f"<workspace id> (without '/api/v1/'), got '{ENDPOINT}/api/v1/'",
        ),
        (
            {"query_endpoint": f"https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/{WORKSPACE_ID}"},
            "'query_endpoint' must be in region 'us-east-1' (the 'region' given), "
            f"got 'https://aps-workspaces.eu-west-1.amazonaws.com/workspaces/{WORKSPACE_ID}'",
        ),
        (
            {"query_endpoint": "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-other"},
            f"'query_endpoint' must name the workspace of 'workspace_arn' ({WORKSPACE_ID}), got ws-other",
        ),
    ],
    ids=[
        "no-autoscaled-model",
        "no-model",
        "duplicate-model",
        "critical-to-zero",
        "min-above-max",
        "no-target",
        "after-unknown-model",
        "not-a-workspace-arn",
        "prometheus-endpoint-attribute",
        "endpoint-other-region",
        "endpoint-other-workspace",
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        _build(**overrides)
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- compliance gates


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stack holding only KEDA (existing cluster and workspace), synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("keda-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "KedaNag", env=cdk.Environment(region=REGION))
    KedaAutoscaling(
        stack,
        "Autoscaling",
        cluster=imported_cluster(stack),
        config=CONFIG,
        workspace_arn=WORKSPACE_ARN,
        query_endpoint=ENDPOINT,
        region=REGION,
        models=MODELS,
        serving_namespace=SERVING_NS,
    )
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return outdir / "KedaNag.template.json"


def test_keda_passes_cdk_nag(compliant_template: Path) -> None:
    # The fixture's synth raises on an unacknowledged finding; the report must be empty too.
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_keda_template_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    assert cfn_lint_errors(compliant_template) == []


def test_prefill_pods_get_their_own_scaled_object_even_when_decode_pods_are_fixed() -> None:
    split = ModelConfig(
        name="llama-pd",
        weights="meta-llama/Llama-3.3-70B-Instruct",
        gpus=4,
        replicas=2,  # decode pods fixed
        prefill_decode=PrefillDecodeConfig(
            prefill_autoscaling=ModelAutoscalingConfig(min_replicas=1, max_replicas=3, queue_target=2)
        ),
    )
    stack = new_stack("KedaPrefill")
    keda = KedaAutoscaling(
        stack,
        "Autoscaling",
        cluster=imported_cluster(stack),
        config=CONFIG,
        workspace_arn=WORKSPACE_ARN,
        query_endpoint=ENDPOINT,
        region=REGION,
        models=[split, FIXED],
        serving_namespace=SERVING_NS,
    )
    assert sorted(keda.scaled_objects) == ["llama-pd/prefill"]
    scaled = keda.scaled_objects["llama-pd/prefill"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == "vllm-llama-pd-prefill"
    assert 'role="prefill"' in scaled["spec"]["triggers"][0]["metadata"]["query"]
