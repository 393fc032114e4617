"""The cluster orders its children: charts and manifests added through it wait for the system nodes.

`InferenceCluster.add_helm_chart` / `add_manifest` (and `helm_chart_on` / `manifest_on` for
constructs that take any `eks.ICluster`) create the chart or manifest under the scope given and
make it depend on `system_ready`: the system node group and every core add-on.
"""

from __future__ import annotations

from dataclasses import dataclass

import aws_cdk as cdk
import pytest
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from constructs import IConstruct

from gpufarm.config import ClusterConfig, KarpenterConfig, NodePoolConfig
from gpufarm.config.model import Provisioning
from gpufarm.constructs import InferenceCluster, Karpenter, KarpenterGpuNodePool, NvidiaDevicePlugin
from gpufarm.constructs.cluster import after_system_nodes, helm_chart_on, manifest_on
from tests.constructs.helpers import imported_cluster, new_stack, new_vpc

CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "demo", "namespace": "default"}}
CHART = {"chart": "demo", "repository": "https://charts.example.com", "version": "1.0.0", "namespace": "demo"}


def logical_id(construct: IConstruct) -> str:
    """Logical ID of a construct's CloudFormation resource, through wrappers such as HelmChart's."""
    while not isinstance(construct, cdk.CfnElement):
        child = construct.node.default_child
        assert child is not None, f"{construct.node.path} has no default child"
        construct = child
    return cdk.Stack.of(construct).get_logical_id(construct)


def depends_on(template: Template, construct: IConstruct) -> set[str]:
    resource = template.to_json()["Resources"][logical_id(construct)]
    return set(resource.get("DependsOn", []))


@dataclass(frozen=True)
class Built:
    cluster: InferenceCluster
    system: set[str]
    """Logical IDs of the system node group and every core add-on."""
    chart: eks.HelmChart
    scoped_chart: eks.HelmChart
    manifest: eks.KubernetesManifest
    karpenter: Karpenter
    plugin: NvidiaDevicePlugin
    on_chart: eks.HelmChart
    on_manifest: eks.KubernetesManifest
    pool: KarpenterGpuNodePool
    template: Template


@pytest.fixture(scope="module")
def built() -> Built:
    stack = new_stack("Ordering")
    vpc = new_vpc(stack)
    cluster = InferenceCluster(
        stack,
        "Cluster",
        vpc=vpc,
        config=ClusterConfig(provisioning=Provisioning.KARPENTER),
        cluster_name="ordering",
    )
    chart = cluster.add_helm_chart("Demo", **CHART)
    scoped_chart = cluster.add_helm_chart("ScopedDemo", scope=stack, **CHART)
    manifest = cluster.add_manifest("DemoManifest", CONFIG_MAP, scope=stack, overwrite=True)
    karpenter = Karpenter(
        stack,
        "Karpenter",
        cluster=cluster.icluster,
        config=KarpenterConfig(),
        subnets=vpc.private_subnets,
        security_groups=[cluster.cluster_security_group],
    )
    pool = karpenter.add_gpu_node_pool("Pool", pool=NodePoolConfig(name="l40s"))
    plugin = NvidiaDevicePlugin(stack, "DevicePlugin", cluster=cluster.icluster, chart_version="0.18.0")
    on_chart = helm_chart_on(cluster.icluster, stack, "OnChart", **CHART)
    on_manifest = manifest_on(cluster.icluster, stack, "OnManifest", CONFIG_MAP)
    assert cluster.system_nodegroup is not None
    system = {logical_id(cluster.system_nodegroup), *(logical_id(a) for a in cluster.addons.values())}
    return Built(
        cluster,
        system,
        chart,
        scoped_chart,
        manifest,
        karpenter,
        plugin,
        on_chart,
        on_manifest,
        pool,
        Template.from_stack(stack),
    )


def test_the_cluster_is_found_from_its_eks_cluster(built: Built) -> None:
    assert InferenceCluster.of(built.cluster.icluster) is built.cluster


def test_an_imported_cluster_has_no_inference_cluster() -> None:
    stack = new_stack("Imported")
    assert InferenceCluster.of(imported_cluster(stack)) is None


def test_charts_and_manifests_added_to_the_cluster_wait_for_the_system_nodes(built: Built) -> None:
    assert len(built.system) == 1 + len(built.cluster.addons)
    for construct in (built.chart, built.scoped_chart, built.manifest, built.on_chart, built.on_manifest):
        assert built.system <= depends_on(built.template, construct), construct.node.path


def test_a_chart_lives_under_the_scope_given_else_under_the_cluster(built: Built) -> None:
    assert built.chart.node.scope is built.cluster
    assert built.scoped_chart.node.path == "Ordering/ScopedDemo"
    assert built.on_chart.node.path == "Ordering/OnChart"
    assert built.manifest.node.path == "Ordering/DemoManifest"


def test_options_reach_the_chart_and_the_manifest(built: Built) -> None:
    chart = built.template.to_json()["Resources"][logical_id(built.scoped_chart)]["Properties"]
    assert {k: chart[k] for k in ("Chart", "Repository", "Version", "Namespace")} == {
        "Chart": "demo",
        "Repository": "https://charts.example.com",
        "Version": "1.0.0",
        "Namespace": "demo",
    }
    manifest = built.template.to_json()["Resources"][logical_id(built.manifest)]["Properties"]
    assert manifest["Overwrite"] is True
    assert '"kind":"ConfigMap"' in manifest["Manifest"]


def test_controllers_on_an_inference_cluster_wait_for_its_system_nodes(built: Built) -> None:
    assert built.system <= depends_on(built.template, built.karpenter.chart)
    assert built.system <= depends_on(built.template, built.plugin.chart)
    # Charts without pods are not held back: the CRD chart needs only the API server.
    assert not built.system & depends_on(built.template, built.karpenter.crd_chart)


def test_gpu_pools_wait_for_karpenter_not_for_the_system_nodes_directly(built: Built) -> None:
    pool_depends_on = depends_on(built.template, built.pool.resource)
    assert logical_id(built.karpenter.chart) in pool_depends_on
    assert not built.system & pool_depends_on


def test_on_another_cluster_nothing_is_added() -> None:
    stack = new_stack("Elsewhere")
    cluster = imported_cluster(stack)
    chart = helm_chart_on(cluster, stack, "Chart", **CHART)
    manifest = manifest_on(cluster, stack, "Manifest", CONFIG_MAP)
    after_system_nodes(cluster, chart)
    template = Template.from_stack(stack)
    assert depends_on(template, chart) == set()
    assert depends_on(template, manifest) == set()


def test_auto_mode_brings_its_own_capacity_so_nothing_waits() -> None:
    stack = new_stack("AutoMode")
    cluster = InferenceCluster(stack, "Cluster", vpc=new_vpc(stack), config=ClusterConfig())
    chart = cluster.add_helm_chart("Demo", scope=stack, **CHART)
    plain = eks.HelmChart(stack, "Plain", cluster=cluster.icluster, **CHART)
    template = Template.from_stack(stack)
    # Only what aws_eks_v2 adds to every chart (the kubectl-ready barrier): no node group, no add-on.
    assert depends_on(template, chart) == depends_on(template, plain)
    assert template.find_resources("AWS::EKS::Nodegroup") == {}
