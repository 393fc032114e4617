"""FsxModelStore: a PERSISTENT_2 file system importing the model bucket, its network and CSI driver."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from gpufarm.config.model import FsxLustreConfig
from gpufarm.constructs import enable_compliance_checks
from gpufarm.constructs.fsx_model_store import FsxModelStore
from gpufarm.k8s.storage import FSX_CLAIM, FSX_NOMINAL_CAPACITY
from tests.conftest import cdk_context, cfn_lint_errors, nag_violations
from tests.constructs.helpers import (
    AZS,
    CLUSTER_NAME,
    REGION,
    imported_cluster,
    logical_id,
    manifest_of,
    new_stack,
    new_vpc,
    resources,
)
from tests.unit.k8s_schema import validate_core

FS = "AWS::FSx::FileSystem"
DRA = "AWS::FSx::DataRepositoryAssociation"
INGRESS = "AWS::EC2::SecurityGroupIngress"
EGRESS = "AWS::EC2::SecurityGroupEgress"
CONFIG = FsxLustreConfig(
    import_path="s3://model-bucket/weights", throughput_per_tib=500, data_compression="LZ4"
)
NAMESPACES = ["gpufarm", "batch-jobs"]


@dataclass(frozen=True)
class Built:
    stack: cdk.Stack
    vpc: ec2.Vpc
    nodes: ec2.SecurityGroup
    store: FsxModelStore
    template: Template


@pytest.fixture(scope="module")
def built() -> Built:
    stack = new_stack("FsxStore")
    vpc = new_vpc(stack)
    nodes = ec2.SecurityGroup(stack, "Nodes", vpc=vpc, description="nodes")
    store = FsxModelStore(
        stack,
        "ModelStore",
        vpc=vpc,
        cluster=imported_cluster(stack),
        config=CONFIG,
        storage_capacity_gib=2400,
        client_security_groups=[nodes],
        namespaces=NAMESPACES,
    )
    return Built(stack, vpc, nodes, store, Template.from_stack(stack))


def _resource(built: Built, construct: Any) -> dict[str, Any]:
    found: dict[str, Any] = built.template.to_json()["Resources"][logical_id(construct)]
    return found


def _group_id(construct: Any) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id(construct), "GroupId"]}


def _rules(template: Template, type_: str, group: dict[str, Any], peer_key: str) -> set[tuple[int, int, str]]:
    """(from port, to port, peer logical ID) of the standalone rules attached to `group`."""
    out = set()
    for rule in resources(template, type_).values():
        props = rule["Properties"]
        if props["GroupId"] == group:
            assert props["IpProtocol"] == "tcp"
            out.add((props["FromPort"], props["ToPort"], props[peer_key]["Fn::GetAtt"][0]))
    return out


# --------------------------------------------------------------------------- file system


def test_file_system_is_lustre_persistent_2_with_configured_throughput(built: Built) -> None:
    built.template.resource_count_is(FS, 1)
    props = _resource(built, built.store.file_system)["Properties"]
    assert props["FileSystemType"] == "LUSTRE"
    assert props["FileSystemTypeVersion"] == "2.15"
    assert props["StorageType"] == "SSD"
    assert props["StorageCapacity"] == 2400
    lustre = props["LustreConfiguration"]
    assert lustre["DeploymentType"] == "PERSISTENT_2"
    assert lustre["PerUnitStorageThroughput"] == 500
    assert lustre["DataCompressionType"] == "LZ4"
    assert lustre["MetadataConfiguration"] == {"Mode": "AUTOMATIC"}


def test_file_system_has_a_weekly_maintenance_window_and_no_backups(built: Built) -> None:
    lustre = _resource(built, built.store.file_system)["Properties"]["LustreConfiguration"]
    assert lustre["WeeklyMaintenanceStartTime"] == "7:03:00"
    assert lustre["AutomaticBackupRetentionDays"] == 0


def test_file_system_logs_data_repository_warnings_and_errors(built: Built) -> None:
    lustre = _resource(built, built.store.file_system)["Properties"]["LustreConfiguration"]
    assert lustre["LogConfiguration"] == {"Level": "WARN_ERROR"}


def test_file_system_is_encrypted_with_its_own_rotating_key(built: Built) -> None:
    props = _resource(built, built.store.file_system)["Properties"]
    assert props["KmsKeyId"] == {"Fn::GetAtt": [logical_id(built.store.key), "Arn"]}
    key = _resource(built, built.store.key)
    assert key["Properties"]["EnableKeyRotation"] is True


def test_file_system_lives_in_the_first_private_subnet(built: Built) -> None:
    props = _resource(built, built.store.file_system)["Properties"]
    first_private = built.vpc.private_subnets[0]
    assert props["SubnetIds"] == [{"Ref": logical_id(first_private)}]
    assert props["SecurityGroupIds"] == [_group_id(built.store.security_group)]


@pytest.mark.parametrize("attr", ["file_system", "key", "security_group"])
def test_stateful_resources_are_retained(built: Built, attr: str) -> None:
    resource = _resource(built, getattr(built.store, attr))
    assert resource["DeletionPolicy"] == "Retain"
    assert resource["UpdateReplacePolicy"] == "Retain"


def test_exposed_attributes_resolve_to_the_file_system(built: Built) -> None:
    fs = logical_id(built.store.file_system)
    resolve = built.stack.resolve
    assert resolve(built.store.file_system_id) == {"Ref": fs}
    assert resolve(built.store.dns_name) == {"Fn::GetAtt": [fs, "DNSName"]}
    assert resolve(built.store.mount_name) == {"Fn::GetAtt": [fs, "LustreMountName"]}
    assert list(built.store.connections.security_groups) == [built.store.security_group]


def test_file_system_logical_id_does_not_depend_on_size_or_namespaces() -> None:
    ids = []
    for capacity, namespaces in ((1200, []), (4800, ["a", "b"])):
        stack = new_stack("Stable")
        store = FsxModelStore(
            stack,
            "ModelStore",
            vpc=new_vpc(stack),
            cluster=imported_cluster(stack),
            config=CONFIG,
            storage_capacity_gib=capacity,
            namespaces=namespaces,
        )
        ids.append(logical_id(store.file_system))
    assert ids[0] == ids[1]


def test_an_explicit_subnet_is_used() -> None:
    stack = new_stack("ExplicitSubnet")
    vpc = new_vpc(stack)
    subnet = vpc.private_subnets[1]
    FsxModelStore(
        stack,
        "ModelStore",
        vpc=vpc,
        cluster=imported_cluster(stack),
        config=CONFIG,
        storage_capacity_gib=1200,
        subnet=subnet,
    )
    Template.from_stack(stack).has_resource_properties(FS, {"SubnetIds": [{"Ref": logical_id(subnet)}]})
    assert subnet is not vpc.private_subnets[0]


# --------------------------------------------------------------------------- data repository


def test_data_repository_links_the_models_directory_to_the_import_path(built: Built) -> None:
    built.template.resource_count_is(DRA, 1)
    props = _resource(built, built.store.data_repository)["Properties"]
    assert props["FileSystemId"] == {"Ref": logical_id(built.store.file_system)}
    assert props["FileSystemPath"] == "/models"
    assert props["DataRepositoryPath"] == "s3://model-bucket/weights/"
    assert props["BatchImportMetaDataOnCreate"] is True


def test_auto_import_follows_new_changed_and_deleted_objects(built: Built) -> None:
    props = _resource(built, built.store.data_repository)["Properties"]
    assert props["S3"] == {"AutoImportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}
    assert "AutoExportPolicy" not in props["S3"], "the store never writes back to the bucket"


def test_without_auto_import_the_association_has_no_s3_policy() -> None:
    stack = new_stack("NoAutoImport")
    store = FsxModelStore(
        stack,
        "ModelStore",
        vpc=new_vpc(stack),
        cluster=imported_cluster(stack),
        config=CONFIG.model_copy(update={"auto_import": False}),
        storage_capacity_gib=1200,
    )
    props = Template.from_stack(stack).to_json()["Resources"][logical_id(store.data_repository)]["Properties"]
    assert "S3" not in props
    assert props["BatchImportMetaDataOnCreate"] is True


# --------------------------------------------------------------------------- security groups

LUSTRE = {(988, 988), (1018, 1023)}


def _with_peer(peer: str) -> set[tuple[int, int, str]]:
    return {(low, high, peer) for low, high in LUSTRE}


def test_file_system_admits_lustre_only_from_clients_and_itself(built: Built) -> None:
    sg = built.store.security_group
    assert "SecurityGroupIngress" not in _resource(built, sg)["Properties"]
    ingress = _rules(built.template, INGRESS, _group_id(sg), "SourceSecurityGroupId")
    assert ingress == _with_peer(logical_id(built.nodes)) | _with_peer(logical_id(sg))


def test_file_system_sends_lustre_only_to_clients_and_itself(built: Built) -> None:
    sg = built.store.security_group
    assert "SecurityGroupEgress" not in _resource(built, sg)["Properties"]
    egress = _rules(built.template, EGRESS, _group_id(sg), "DestinationSecurityGroupId")
    assert egress == _with_peer(logical_id(built.nodes)) | _with_peer(logical_id(sg))


def test_clients_admit_lustre_callbacks_from_the_file_system(built: Built) -> None:
    ingress = _rules(built.template, INGRESS, _group_id(built.nodes), "SourceSecurityGroupId")
    assert ingress == _with_peer(logical_id(built.store.security_group))


def test_add_client_opens_lustre_to_another_security_group() -> None:
    stack = new_stack("AddClient")
    vpc = new_vpc(stack)
    store = FsxModelStore(
        stack,
        "ModelStore",
        vpc=vpc,
        cluster=imported_cluster(stack),
        config=CONFIG,
        storage_capacity_gib=1200,
    )
    later = ec2.SecurityGroup(stack, "Later", vpc=vpc, allow_all_outbound=False)
    store.add_client(later)
    template = Template.from_stack(stack)
    sg = store.security_group
    assert _rules(template, INGRESS, _group_id(sg), "SourceSecurityGroupId") == _with_peer(
        logical_id(later)
    ) | _with_peer(logical_id(sg))
    assert _rules(template, INGRESS, _group_id(later), "SourceSecurityGroupId") == _with_peer(logical_id(sg))
    # A client that restricts its own egress gets the rules to reach the servers.
    assert _rules(template, EGRESS, _group_id(later), "DestinationSecurityGroupId") == _with_peer(
        logical_id(sg)
    )


# --------------------------------------------------------------------------- CSI driver


def test_csi_driver_is_an_eks_addon_with_pod_identity(built: Built) -> None:
    built.template.resource_count_is("AWS::EKS::Addon", 1)
    props = _resource(built, built.store.addon)["Properties"]
    assert props["AddonName"] == "aws-fsx-csi-driver"
    assert props["ClusterName"] == CLUSTER_NAME
    assert props["ResolveConflicts"] == "OVERWRITE"
    assert props["PodIdentityAssociations"] == [
        {
            "RoleArn": {"Fn::GetAtt": [logical_id(built.store.driver_role), "Arn"]},
            "ServiceAccount": "fsx-csi-controller-sa",
        }
    ]


def test_driver_role_is_trusted_by_pod_identity_only(built: Built) -> None:
    role = _resource(built, built.store.driver_role)["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"] == [
        {
            "Action": ["sts:AssumeRole", "sts:TagSession"],
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
        }
    ]
    assert "ManagedPolicyArns" not in role


def test_driver_role_may_only_describe_file_systems(built: Built) -> None:
    policies = resources(built.template, "AWS::IAM::Policy")
    mine = [
        p
        for p in policies.values()
        if p["Properties"]["Roles"] == [{"Ref": logical_id(built.store.driver_role)}]
    ]
    assert len(mine) == 1
    assert mine[0]["Properties"]["PolicyDocument"]["Statement"] == [
        {"Action": "fsx:DescribeFileSystems", "Effect": "Allow", "Resource": "*"}
    ]


# --------------------------------------------------------------------------- volumes


def _stringified(node: Any) -> Any:
    """A manifest with each CloudFormation token replaced by a string, for schema validation."""
    if isinstance(node, dict) and set(node) <= {"Ref", "Fn::GetAtt"}:
        return json.dumps(node)
    if isinstance(node, dict):
        return {k: _stringified(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_stringified(v) for v in node]
    return node


def test_one_volume_manifest_per_namespace(built: Built) -> None:
    assert sorted(built.store.volume_manifests) == sorted(NAMESPACES)
    for namespace, manifest in built.store.volume_manifests.items():
        pv, pvc = manifest_of(built.template, manifest)
        assert pv["kind"] == "PersistentVolume"
        assert pv["metadata"]["name"] == f"{namespace}-{FSX_CLAIM}"
        assert pvc["kind"] == "PersistentVolumeClaim"
        assert pvc["metadata"]["namespace"] == namespace


def test_volume_points_at_this_file_system(built: Built) -> None:
    fs = logical_id(built.store.file_system)
    pv, _ = manifest_of(built.template, built.store.volume_manifests["gpufarm"])
    assert pv["spec"]["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": {"Ref": fs},
        "volumeAttributes": {
            "dnsname": {"Fn::GetAtt": [fs, "DNSName"]},
            "mountname": {"Fn::GetAtt": [fs, "LustreMountName"]},
        },
    }
    # Nominal, not the 2400 GiB of the file system: a static claim cannot be resized later.
    assert pv["spec"]["capacity"] == {"storage": FSX_NOMINAL_CAPACITY}


def test_volume_manifests_match_the_kubernetes_schema(built: Built) -> None:
    for manifest in built.store.volume_manifests.values():
        for doc in manifest_of(built.template, manifest):
            validate_core(_stringified(doc))


def test_volumes_wait_for_the_driver_and_the_import(built: Built) -> None:
    for manifest in built.store.volume_manifests.values():
        depends = _resource(built, manifest)["DependsOn"]
        assert logical_id(built.store.addon) in depends
        assert logical_id(built.store.data_repository) in depends


# --------------------------------------------------------------------------- invalid input


def _build(**overrides: Any) -> FsxModelStore:
    stack = new_stack("Invalid")
    kwargs: dict[str, Any] = {
        "vpc": new_vpc(stack),
        "cluster": imported_cluster(stack),
        "config": CONFIG,
        "storage_capacity_gib": 1200,
    }
    kwargs.update(overrides)
    return FsxModelStore(stack, "ModelStore", **kwargs)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            {"config": FsxLustreConfig()},
            "'config.import_path' must be an S3 URI such as 's3://bucket/models/', got None",
        ),
        (
            {"config": FsxLustreConfig(import_path="model-bucket/weights/")},
            "'config.import_path' must be an S3 URI such as 's3://bucket/models/', "
            "got 'model-bucket/weights/'",
        ),
        (
            {"storage_capacity_gib": 1000},
            "'storage_capacity_gib' must be 1200, 2400 or a multiple of 2400 (GiB, PERSISTENT_2), got 1000",
        ),
        (
            {"storage_capacity_gib": 3600},
            "'storage_capacity_gib' must be 1200, 2400 or a multiple of 2400 (GiB, PERSISTENT_2), got 3600",
        ),
        (
            {
                "config": CONFIG.model_copy(update={"storage_capacity_gib": 4800}),
                "storage_capacity_gib": 2400,
            },
            "'storage_capacity_gib' must match config.storage_capacity_gib (4800) when the config sets it, "
            "got 2400",
        ),
        (
            {"config": CONFIG.model_copy(update={"throughput_per_tib": 200})},
            "'config.throughput_per_tib' must be one of 125, 250, 500, 1000 (MB/s per TiB), got 200",
        ),
        (
            {"weekly_maintenance_start_time": "8:03:00"},
            "'weekly_maintenance_start_time' must be 'd:HH:MM' in UTC with d from 1 (Monday) to 7, "
            "such as '7:03:00', got '8:03:00'",
        ),
        (
            {"namespaces": ["gpufarm", "Bad_Name"]},
            "'namespaces' must hold Kubernetes namespace names, got 'Bad_Name'",
        ),
        (
            {"namespaces": ["gpufarm", "gpufarm"]},
            "'namespaces' must not repeat a namespace, got ['gpufarm', 'gpufarm']",
        ),
    ],
)
def test_invalid_input_is_rejected_with_an_exact_message(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as excinfo:
        _build(**overrides)
    assert str(excinfo.value) == message


def test_a_vpc_without_private_subnets_needs_an_explicit_subnet() -> None:
    stack = new_stack("PublicOnly")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-1", availability_zones=AZS, public_subnet_ids=["subnet-a", "subnet-b"]
    )
    with pytest.raises(ValueError) as excinfo:
        FsxModelStore(
            stack,
            "ModelStore",
            vpc=vpc,
            cluster=imported_cluster(stack),
            config=CONFIG,
            storage_capacity_gib=1200,
        )
    assert str(excinfo.value) == (
        "'vpc' must have a private or isolated subnet for the file system (or pass 'subnet'), "
        "got a VPC with none"
    )


# --------------------------------------------------------------------------- compliance gates


@pytest.fixture(scope="module")
def compliant_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stack holding only the store (existing VPC, nodes and cluster), synthesized with cdk-nag."""
    outdir = tmp_path_factory.mktemp("fsx-nag")
    app = cdk.App(context=cdk_context(), outdir=str(outdir))
    enable_compliance_checks(app)
    stack = cdk.Stack(app, "FsxNag", env=cdk.Environment(region=REGION))
    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id="vpc-0123456789abcdef0",
        availability_zones=AZS,
        private_subnet_ids=["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
        private_subnet_route_table_ids=["rtb-0123456789abcdef0", "rtb-0123456789abcdef1"],
    )
    nodes = ec2.SecurityGroup.from_security_group_id(stack, "Nodes", "sg-0123456789abcdef0")
    FsxModelStore(
        stack,
        "ModelStore",
        vpc=vpc,
        cluster=imported_cluster(stack),
        config=CONFIG,
        storage_capacity_gib=2400,
        client_security_groups=[nodes],
        namespaces=NAMESPACES,
    )
    app.synth()  # raises when cdk-nag reports an unacknowledged finding
    return outdir / "FsxNag.template.json"


def test_store_passes_cdk_nag(compliant_template: Path) -> None:
    # The fixture's synth raises on an unacknowledged finding; the report must be empty too.
    assert nag_violations(compliant_template.parent, annotations=False) == {}


def test_store_template_has_no_cfn_lint_errors(compliant_template: Path) -> None:
    assert cfn_lint_errors(compliant_template) == []
