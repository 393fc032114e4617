"""KvCacheRouting: one router manifest per model, its order, its Service, no IAM, nag and cfn-lint."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template

from gpufarm.config import ModelConfig, ServingConfig
from gpufarm.config.model import CompliancePack
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.compliance import require_compliance_pack
from gpufarm.constructs.kv_cache_routing import KvCacheRouting
from gpufarm.k8s import kv_cache_routing as k8s_kv_cache_routing
from tests.conftest import cdk_context, cfn_lint_errors
from tests.constructs.helpers import (
    KUBERNETES_RESOURCE,
    REGION,
    imported_cluster,
    logical_id,
    manifest_of,
    new_stack,
    resources,
)

SERVING = ServingConfig(namespace="inference", port=8000)
SINGLE = ModelConfig(name="qwen-32b", weights="Qwen/Qwen3-32B", gpus=4)
MULTI = ModelConfig(
    name="llama-405b", weights="meta-llama/Llama-3.1-405B-Instruct-FP8", gpus=8, pipeline_parallel=2
)
SYSTEM = {"gpufarm.io/pool": "system"}


@dataclass(frozen=True)
class Built:
    routing: KvCacheRouting
    namespace: eks.KubernetesManifest
    template: Template


def _namespace(stack: cdk.Stack, cluster: eks.ICluster) -> eks.KubernetesManifest:
    """A stand-in for the construct that creates the serving namespace."""
    doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVING.namespace}}
    return eks.KubernetesManifest(stack, "Namespace", cluster=cluster, manifest=[doc], overwrite=True)


@pytest.fixture(scope="module")
def built() -> Built:
    """A single-node and a multi-node model, routers on system nodes, after the namespace."""
    stack = new_stack("Routing")
    cluster = imported_cluster(stack)
    namespace = _namespace(stack, cluster)
    routing = KvCacheRouting(
        stack,
        "Routing",
        cluster=cluster,
        serving=SERVING,
        models=[SINGLE, MULTI],
        after=namespace,
        node_selector=SYSTEM,
        epp_cpu="1",
        epp_memory="2Gi",
    )
    return Built(routing, namespace, Template.from_stack(stack))


def test_one_manifest_per_model(built: Built) -> None:
    assert len(resources(built.template, KUBERNETES_RESOURCE)) == 3  # two routers and the namespace


def test_manifest_holds_the_router_of_its_model(built: Built) -> None:
    expected = k8s_kv_cache_routing.router_manifests(
        model_name=SINGLE.name,
        namespace=SERVING.namespace,
        target_port=SERVING.port,
        node_selector=SYSTEM,
        epp_cpu="1",
        epp_memory="2Gi",
    )
    assert manifest_of(built.template, built.routing.manifests[SINGLE.name]) == expected


def test_multi_node_model_is_routed_to_its_leaders_only(built: Built) -> None:
    docs = manifest_of(built.template, built.routing.manifests[MULTI.name])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    epp = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "epp")
    assert epp["args"] == k8s_kv_cache_routing.epp_args(MULTI.name, SERVING.port, leaders_only=True)


def test_single_node_model_is_routed_to_all_its_pods(built: Built) -> None:
    docs = manifest_of(built.template, built.routing.manifests[SINGLE.name])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    epp = next(c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "epp")
    assert epp["args"] == k8s_kv_cache_routing.epp_args(SINGLE.name, SERVING.port)


def test_manifests_are_applied_after_the_namespace(built: Built) -> None:
    found = resources(built.template, KUBERNETES_RESOURCE)
    for manifest in built.routing.manifests.values():
        assert logical_id(built.namespace) in found[logical_id(manifest)]["DependsOn"]


def test_manifests_overwrite_existing_objects(built: Built) -> None:
    found = resources(built.template, KUBERNETES_RESOURCE)
    assert all(found[logical_id(m)]["Properties"]["Overwrite"] for m in built.routing.manifests.values())


def test_service_of_names_the_router_service(built: Built) -> None:
    docs = manifest_of(built.template, built.routing.manifests[SINGLE.name])
    service = next(d for d in docs if d["kind"] == "Service")
    assert built.routing.service_of(SINGLE.name) == service["metadata"]["name"] == "vllm-qwen-32b-router"


def test_port_is_the_router_services_http_port(built: Built) -> None:
    docs = manifest_of(built.template, built.routing.manifests[SINGLE.name])
    service = next(d for d in docs if d["kind"] == "Service")
    http = next(p for p in service["spec"]["ports"] if p["name"] == "http")
    assert built.routing.port == http["port"] == 8081


def test_no_iam_resources(built: Built) -> None:
    for type_ in ("AWS::IAM::Role", "AWS::IAM::ManagedPolicy", "AWS::EKS::PodIdentityAssociation"):
        built.template.resource_count_is(type_, 0)


def test_service_of_an_unrouted_model_is_refused(built: Built) -> None:
    with pytest.raises(ValueError) as raised:
        built.routing.service_of("mistral")
    assert (
        str(raised.value)
        == "'model_name' must be one of the routed models (qwen-32b, llama-405b), got 'mistral'"
    )


def test_a_small_stack_passes_both_nag_packs_and_cfn_lint(tmp_path: Path) -> None:
    app = cdk.App(context=cdk_context(), outdir=str(tmp_path))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "RoutingNag", env=cdk.Environment(region=REGION))
    require_compliance_pack(stack, CompliancePack.NIST_800_53_R5)
    cluster = imported_cluster(stack)
    KvCacheRouting(stack, "Routing", cluster=cluster, serving=SERVING, models=[SINGLE, MULTI])
    app.synth()  # raises on any unacknowledged finding
    assert cfn_lint_errors(tmp_path / "RoutingNag.template.json") == []


@pytest.mark.parametrize(
    ("models", "message"),
    [
        ([], "'models' must hold at least one model with KV-cache-aware or prefill/decode routing, got none"),
        ([SINGLE, SINGLE], "'models' must have unique names, got 'qwen-32b' 2 times"),
    ],
)
def test_invalid_input_is_refused(models: list[ModelConfig], message: str) -> None:
    stack = new_stack()
    with pytest.raises(ValueError) as raised:
        KvCacheRouting(stack, "Routing", cluster=imported_cluster(stack), serving=SERVING, models=models)
    assert str(raised.value) == message
