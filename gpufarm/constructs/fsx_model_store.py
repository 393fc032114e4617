"""Model weights on FSx for Lustre: a PERSISTENT_2 file system that imports the model bucket.

The file system mirrors an S3 prefix through a data repository association (metadata at
creation, objects loaded lazily on first read, then served from SSD to every node). The FSx CSI
driver runs as an EKS add-on; each serving namespace gets a static PersistentVolume and claim.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from gpufarm.config.model import FSX_THROUGHPUT_PER_TIB, S3_URI, FsxLustreConfig
from gpufarm.config.names import is_dns_1123_label
from gpufarm.config.sizing import is_valid_fsx_capacity
from gpufarm.constructs._util import (
    acknowledge,
    construct_id,
    limit_grants_to_aws_services,
    pod_identity_role,
    private_subnets,
)
from gpufarm.core.s3 import split_s3_uri
from gpufarm.k8s.storage import FSX_DATA_PATH, fsx_weights_volume

FSX_ADDON = "aws-fsx-csi-driver"
FSX_CONTROLLER_SERVICE_ACCOUNT = "fsx-csi-controller-sa"
LUSTRE_PORT = 988
LUSTRE_PORT_RANGE = (1018, 1023)
LUSTRE_VERSION = "2.15"
"""Lustre version of the file system: the AL2023 and Bottlerocket kernels ship a 2.15 client."""

AUTO_IMPORT_EVENTS = ("NEW", "CHANGED", "DELETED")
DEFAULT_MAINTENANCE_WINDOW = "7:03:00"
"""Sunday 03:00 UTC: FSx patches the file servers weekly; I/O pauses briefly during the window."""

_MAINTENANCE_WINDOW = re.compile(r"^[1-7]:([01]\d|2[0-3]):[0-5]\d$")


def lustre_ports() -> list[ec2.Port]:
    """The TCP ports Lustre clients and servers use to reach each other: 988 and 1018-1023."""
    low, high = LUSTRE_PORT_RANGE
    return [ec2.Port.tcp(LUSTRE_PORT), ec2.Port.tcp_range(low, high)]


class FsxModelStore(Construct):
    """An FSx for Lustre PERSISTENT_2 file system holding model weights imported from S3.

    Creates the file system (KMS-encrypted with its own rotating key, in one private subnet),
    a data repository association linking :data:`gpufarm.k8s.storage.FSX_DATA_PATH` to
    `config.import_path`, a security group admitting Lustre traffic (TCP 988 and 1018-1023) only
    from the client security groups and from the file servers themselves, the FSx CSI driver as
    an EKS add-on with a Pod Identity role, and a static PersistentVolume and claim
    (:data:`gpufarm.k8s.storage.FSX_CLAIM`) in each of `namespaces`.

    The namespaces must exist before the claims are applied: pass the construct that creates
    them as `after` (or make each of `volume_manifests` depend on it). Pods that mount the
    claims wait for them through :meth:`add_consumers`.

    :param vpc: the VPC of the file system and its clients.
    :param cluster: the EKS cluster that mounts the file system.
    :param config: import path, throughput per TiB, compression and auto-import.
    :param storage_capacity_gib: SSD capacity: 1200, 2400 or a multiple of 2400 GiB (see
        :func:`gpufarm.config.sizing.fsx_storage_capacity_gib`).
    :param subnet: where the file servers live. Default: the VPC's first private subnet.
    :param client_security_groups: security groups of the nodes that mount the file system
        (for EKS, the cluster or node security group). Default: none; add them later with
        :meth:`add_client`.
    :param namespaces: namespaces that get the claim. Default: none.
    :param after: the construct that creates `namespaces`; the claims are applied after it.
        Default: none.
    :param removal_policy: applies to the file system, its key and its security group.
        Default: RETAIN (a file system is data; replacing it re-imports every model).
    :param weekly_maintenance_start_time: `d:HH:MM` in UTC, day 1 = Monday.
        Default: `7:03:00` (Sunday 03:00).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc: ec2.IVpc,
        cluster: eks.ICluster,
        config: FsxLustreConfig,
        storage_capacity_gib: int,
        subnet: ec2.ISubnet | None = None,
        client_security_groups: Sequence[ec2.ISecurityGroup] = (),
        namespaces: Sequence[str] = (),
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.RETAIN,
        weekly_maintenance_start_time: str = DEFAULT_MAINTENANCE_WINDOW,
        after: Construct | None = None,
    ) -> None:
        super().__init__(scope, id)
        import_path = _validate(
            config=config,
            storage_capacity_gib=storage_capacity_gib,
            namespaces=namespaces,
            weekly_maintenance_start_time=weekly_maintenance_start_time,
        )
        if subnet is None:
            candidates = private_subnets(vpc)
            if not candidates:
                raise ValueError(
                    "'vpc' must have a private or isolated subnet for the file system "
                    "(or pass 'subnet'), got a VPC with none"
                )
            subnet = candidates[0]
        self.config = config
        self.import_path = import_path
        self.storage_capacity_gib = storage_capacity_gib

        self.key = kms.Key(
            self,
            "Key",
            description="FSx for Lustre model store: encryption at rest",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        limit_grants_to_aws_services(self.key)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="FSx for Lustre model store: Lustre traffic from its clients and between its servers",
            allow_all_outbound=False,
        )
        self.security_group.apply_removal_policy(removal_policy)
        self.connections = ec2.Connections(
            security_groups=[self.security_group], default_port=ec2.Port.tcp(LUSTRE_PORT)
        )
        for port in lustre_ports():
            # The file servers talk to each other over the same ports as to clients.
            self.connections.allow_internally(port, "Lustre between the file servers")
        for group in client_security_groups:
            self.add_client(group)

        self.file_system = fsx.CfnFileSystem(
            self,
            "Resource",
            file_system_type="LUSTRE",
            file_system_type_version=LUSTRE_VERSION,
            storage_capacity=storage_capacity_gib,
            storage_type="SSD",
            subnet_ids=[subnet.subnet_id],
            security_group_ids=[self.security_group.security_group_id],
            kms_key_id=self.key.key_arn,
            lustre_configuration=fsx.CfnFileSystem.LustreConfigurationProperty(
                deployment_type="PERSISTENT_2",
                per_unit_storage_throughput=config.throughput_per_tib,
                data_compression_type=config.data_compression,
                metadata_configuration=fsx.CfnFileSystem.MetadataConfigurationProperty(mode="AUTOMATIC"),
                weekly_maintenance_start_time=weekly_maintenance_start_time,
                # S3 holds the weights; a backup of the file system would be a second copy.
                automatic_backup_retention_days=0,
                log_configuration=fsx.CfnFileSystem.LogConfigurationProperty(level="WARN_ERROR"),
            ),
        )
        self.file_system.apply_removal_policy(removal_policy)
        self.file_system_id = self.file_system.ref
        self.dns_name = self.file_system.attr_dns_name
        self.mount_name = self.file_system.attr_lustre_mount_name

        s3_config = None
        if config.auto_import:
            s3_config = fsx.CfnDataRepositoryAssociation.S3Property(
                auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                    events=list(AUTO_IMPORT_EVENTS)
                )
            )
        self.data_repository = fsx.CfnDataRepositoryAssociation(
            self,
            "DataRepository",
            file_system_id=self.file_system_id,
            file_system_path=FSX_DATA_PATH,
            data_repository_path=import_path,
            batch_import_meta_data_on_create=True,
            s3=s3_config,
        )

        self.driver_role = pod_identity_role(
            self, "CsiDriverRole", description="FSx CSI driver controller: describe the model store"
        )
        self.driver_role.add_to_policy(
            iam.PolicyStatement(actions=["fsx:DescribeFileSystems"], resources=["*"])
        )
        acknowledge(
            self.driver_role,
            "AwsSolutions-IAM5[Resource::*]",
            "fsx:DescribeFileSystems supports no resource-level permissions, so its resource must be "
            "'*'; it reads file system metadata only. With static volumes it is the one call the FSx "
            "CSI controller makes (to check that a volume's file system exists); it gets no create, "
            "update or delete permissions.",
        )
        acknowledge(
            self.driver_role,
            "NIST.800.53.R5-IAMNoInlinePolicy",
            "The FSx CSI controller's Pod Identity role has a single permission, "
            "fsx:DescribeFileSystems, held inline so that it belongs to this role alone: it cannot "
            "be attached to another principal and is deleted with the role.",
        )
        self.addon = eks.CfnAddon(
            self,
            "CsiDriver",
            cluster_name=cluster.cluster_name,
            addon_name=FSX_ADDON,
            resolve_conflicts="OVERWRITE",
            pod_identity_associations=[
                eks.CfnAddon.PodIdentityAssociationProperty(
                    role_arn=self.driver_role.role_arn, service_account=FSX_CONTROLLER_SERVICE_ACCOUNT
                )
            ],
        )

        self.volume_manifests: dict[str, eks.KubernetesManifest] = {}
        for namespace in namespaces:
            manifest = eks.KubernetesManifest(
                self,
                f"Volume{construct_id(namespace)}",
                cluster=cluster,
                manifest=fsx_weights_volume(
                    namespace=namespace,
                    file_system_id=self.file_system_id,
                    dns_name=self.dns_name,
                    mount_name=self.mount_name,
                ),
                overwrite=True,
            )
            # The driver must be there to mount, and the model folders must exist (metadata
            # import done) before pods use them as subPaths.
            manifest.node.add_dependency(self.addon, self.data_repository)
            if after is not None:
                manifest.node.add_dependency(after)
            self.volume_manifests[namespace] = manifest

    def add_consumers(self, *manifests: Construct) -> None:
        """Apply `manifests` (workloads that mount the claim) after every volume manifest."""
        for manifest in manifests:
            manifest.node.add_dependency(*self.volume_manifests.values())

    def add_client(self, peer: ec2.IConnectable) -> None:
        """Let `peer` (nodes that mount the file system) exchange Lustre traffic with the servers.

        Opens TCP 988 and 1018-1023 both ways, as FSx for Lustre requires: clients connect to the
        servers, and servers call back to clients.
        """
        for port in lustre_ports():
            self.connections.allow_from(peer, port, "Lustre from clients")
            self.connections.allow_to(peer, port, "Lustre to clients")


def _validate(
    *,
    config: FsxLustreConfig,
    storage_capacity_gib: int,
    namespaces: Sequence[str],
    weekly_maintenance_start_time: str,
) -> str:
    """Check the inputs; return the import path normalized to `s3://bucket/prefix/`."""
    if config.import_path is None or not S3_URI.match(config.import_path):
        raise ValueError(
            "'config.import_path' must be an S3 URI such as 's3://bucket/models/', "
            f"got {config.import_path!r}"
        )
    if not is_valid_fsx_capacity(storage_capacity_gib):
        raise ValueError(
            "'storage_capacity_gib' must be 1200, 2400 or a multiple of 2400 (GiB, PERSISTENT_2), "
            f"got {storage_capacity_gib}"
        )
    if config.storage_capacity_gib is not None and config.storage_capacity_gib != storage_capacity_gib:
        raise ValueError(
            f"'storage_capacity_gib' must match config.storage_capacity_gib "
            f"({config.storage_capacity_gib}) when the config sets it, got {storage_capacity_gib}"
        )
    if config.throughput_per_tib not in FSX_THROUGHPUT_PER_TIB:
        raise ValueError(
            f"'config.throughput_per_tib' must be one of {', '.join(map(str, FSX_THROUGHPUT_PER_TIB))} "
            f"(MB/s per TiB), got {config.throughput_per_tib}"
        )
    if not _MAINTENANCE_WINDOW.match(weekly_maintenance_start_time):
        raise ValueError(
            "'weekly_maintenance_start_time' must be 'd:HH:MM' in UTC with d from 1 (Monday) to 7, "
            f"such as '7:03:00', got {weekly_maintenance_start_time!r}"
        )
    for namespace in namespaces:
        if not is_dns_1123_label(namespace):
            raise ValueError(f"'namespaces' must hold Kubernetes namespace names, got {namespace!r}")
    if len(set(namespaces)) != len(namespaces):
        raise ValueError(f"'namespaces' must not repeat a namespace, got {list(namespaces)}")
    bucket, prefix = split_s3_uri(config.import_path)
    return f"s3://{bucket}/{prefix}"
