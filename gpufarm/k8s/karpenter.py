"""Karpenter manifests and Helm values: EC2NodeClass + NodePool per GPU pool, controller, device plugin."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from gpufarm import images
from gpufarm.config.model import AmiFamily, ImagePull, NodePoolConfig
from gpufarm.core.efa import EfaInterface as EfaInterface  # re-exported
from gpufarm.core.efa import efa_interfaces as efa_interfaces  # re-exported
from gpufarm.core.registries import eks_registry
from gpufarm.k8s.labels import (
    CAPACITY_CLASS_LABEL,
    EFA_LABEL,
    GPU_PRESENT_LABEL,
    GPU_TAINT_KEY,
    POOL_LABEL,
    common_labels,
    nodepool_name,
)
from gpufarm.k8s.nodepool import gpu_nodepool

KARPENTER_LABEL_DOMAIN = "karpenter.k8s.aws"
"""Prefix of the instance labels Karpenter puts on the nodes it launches."""

DISCOVERY_TAG = "karpenter.sh/discovery"
"""Tag on the subnets and security groups that EC2NodeClasses select."""

PURPOSE_LABEL = "gpufarm.io/purpose"
"""Node label carrying the pool's purpose (`serving` or `batch`)."""

AMI_FAMILY_LABEL = "gpufarm.io/ami-family"
"""Node label carrying the pool's OS (`al2023` or `bottlerocket`)."""

SERVICE_ACCOUNT = "karpenter"
"""Service account of the Karpenter controller (the Pod Identity association names it)."""

NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
"""Label EKS puts on every node of a managed node group."""

GPU_MANUFACTURER_LABEL = f"{KARPENTER_LABEL_DOMAIN}/instance-gpu-manufacturer"
"""Label Karpenter puts on GPU nodes: the GPU vendor (`nvidia`)."""

ROOT_VOLUME_IOPS = 3000
"""gp3 IOPS of the GPU nodes' kubelet volume (the gp3 baseline, included in the volume price)."""

ROOT_VOLUME_THROUGHPUT_MIBPS = 500
"""gp3 throughput of the kubelet volume, MiB/s: multi-GB inference images unpack 4x faster than
at the 125 MiB/s baseline, for a few dollars a month per node."""

BOTTLEROCKET_OS_VOLUME_GIB = 4
"""Bottlerocket's OS volume (`/dev/xvda`), the size Karpenter gives it by default."""

EFA_DEVICE_PLUGIN_IMAGE = images.image("efa-device-plugin").repository
"""The EFA device plugin's repository within an EKS image registry (the chart's default image)."""


def pool_efa_interfaces(pool: NodePoolConfig) -> list[EfaInterface] | None:
    """The EFA layout of an `efa` pool whose instance types all share one known layout, else None.

    An EC2NodeClass's `networkInterfaces` apply to every instance type the pool launches, so a
    static layout is only written when the pool is narrowed (`instance_types`) to types with the
    same number of network cards. Otherwise Karpenter gives every interface the EFA type on
    nodes it launches for pods requesting `vpc.amazonaws.com/efa`.
    """
    if not pool.efa or not pool.instance_types:
        return None
    layouts = {tuple(efa_interfaces(t) or ()) for t in pool.instance_types}
    if len(layouts) != 1:
        return None
    (layout,) = layouts
    return list(layout) or None


def ami_alias(pool: NodePoolConfig) -> str:
    """The EC2NodeClass AMI alias of a pool: `al2023@<version>` or `bottlerocket@v<version>`.

    Bottlerocket versions are written with a leading `v` in aliases (`bottlerocket@v1.50.0`);
    Karpenter also accepts them without it, so either spelling in the config works.
    """
    version = pool.ami_version
    if pool.ami_family is AmiFamily.BOTTLEROCKET and version != "latest" and not version.startswith("v"):
        version = f"v{version}"
    return f"{pool.ami_family.value}@{version}"


def _ebs(size_gib: int, *, iops: int, throughput: int) -> dict[str, Any]:
    return {
        "volumeSize": f"{size_gib}Gi",
        "volumeType": "gp3",
        "iops": iops,
        "throughput": throughput,
        "encrypted": True,
        "deleteOnTermination": True,
    }


def block_device_mappings(pool: NodePoolConfig) -> list[dict[str, Any]]:
    """EBS volumes of a pool's nodes: one encrypted gp3 volume of `root_volume_gib` for the kubelet.

    AL2023 keeps images and pod storage on its root volume, `/dev/xvda`. Bottlerocket boots
    from a small OS volume (`/dev/xvda`) and keeps them on its data volume, `/dev/xvdb`, so
    that is the one sized from the config (and both are listed, since a NodeClass that lists
    volumes replaces Karpenter's defaults).
    """
    data = _ebs(pool.root_volume_gib, iops=ROOT_VOLUME_IOPS, throughput=ROOT_VOLUME_THROUGHPUT_MIBPS)
    if pool.ami_family is AmiFamily.BOTTLEROCKET:
        return [
            {"deviceName": "/dev/xvda", "ebs": _ebs(BOTTLEROCKET_OS_VOLUME_GIB, iops=3000, throughput=125)},
            {"deviceName": "/dev/xvdb", "rootVolume": True, "ebs": data},
        ]
    return [{"deviceName": "/dev/xvda", "rootVolume": True, "ebs": data}]


SOCI_PARALLEL_PULL_SETTINGS = """[settings.container-runtime]
snapshotter = "soci"

[settings.container-runtime-plugins.soci-snapshotter]
pull-mode = "parallel-pull-unpack"
"""
"""Bottlerocket settings (TOML, which Karpenter merges with its own into the node's user data)
that make containerd pull through the SOCI snapshotter in parallel pull-and-unpack mode: the
example of the Bottlerocket 1.44 settings reference,
https://bottlerocket.dev/en/os/1.44.x/api/settings/container-runtime-plugins. The per-mode
concurrency settings keep their defaults."""


def ec2_nodeclass(
    pool: NodePoolConfig,
    *,
    node_role_name: str,
    discovery_value: str,
    security_group_ids: Sequence[str] = (),
) -> dict[str, Any]:
    """A `karpenter.k8s.aws/v1` EC2NodeClass for one GPU pool (named like its NodePool).

    Nodes use the pool's AMI alias, the IAM role `node_role_name` (Karpenter makes the
    instance profile), the subnets and security groups tagged `karpenter.sh/discovery:
    <discovery_value>` plus any `security_group_ids` (security groups CloudFormation cannot
    tag, such as the one EKS creates for the cluster), an encrypted gp3 kubelet volume of
    `root_volume_gib`, and IMDSv2 only with a hop limit of 1 so pods cannot reach the node
    role's credentials (they get their own through Pod Identity).

    A pool with `reservation_ids` selects those capacity reservations by ID (its NodePool then
    launches them with capacity type `reserved`); an `efa` pool narrowed to instance types with
    one known layout gets its EFA interfaces (:func:`pool_efa_interfaces`). Its nodes also need
    the EFA security group: pass it in `security_group_ids`. A Bottlerocket pool with
    `image_pull: soci-parallel-pull` carries :data:`SOCI_PARALLEL_PULL_SETTINGS` as user data.
    """
    selector = {"tags": {DISCOVERY_TAG: discovery_value}}
    nodeclass: dict[str, Any] = {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {
            "name": nodepool_name(pool.name),
            "labels": {**common_labels("gpu-nodeclass"), POOL_LABEL: pool.name},
        },
        "spec": {
            "amiSelectorTerms": [{"alias": ami_alias(pool)}],
            "role": node_role_name,
            "subnetSelectorTerms": [selector],
            "securityGroupSelectorTerms": [selector, *({"id": sg} for sg in security_group_ids)],
            "blockDeviceMappings": block_device_mappings(pool),
            "metadataOptions": {
                "httpEndpoint": "enabled",
                "httpProtocolIPv6": "disabled",
                "httpPutResponseHopLimit": 1,
                "httpTokens": "required",
            },
            "tags": {POOL_LABEL: pool.name, PURPOSE_LABEL: pool.purpose.value},
        },
    }
    # Added only when configured, so pools without reservations or EFA render as before.
    if pool.image_pull is ImagePull.SOCI_PARALLEL_PULL:
        nodeclass["spec"]["userData"] = SOCI_PARALLEL_PULL_SETTINGS
    if pool.reservation_ids:
        nodeclass["spec"]["capacityReservationSelectorTerms"] = [{"id": r} for r in pool.reservation_ids]
    if interfaces := pool_efa_interfaces(pool):
        nodeclass["spec"]["networkInterfaces"] = [
            {
                "networkCardIndex": i.network_card_index,
                "deviceIndex": i.device_index,
                "interfaceType": i.interface_type,
            }
            for i in interfaces
        ]
    return nodeclass


def karpenter_gpu_nodepool(pool: NodePoolConfig) -> dict[str, Any]:
    """A `karpenter.sh/v1` NodePool for one GPU pool, on the EC2NodeClass of the same name.

    Like the Auto Mode pool (taint `nvidia.com/gpu:NoSchedule`, GPU limit, `WhenEmpty`
    consolidation after `consolidate_after`, one disruption budget, `expireAfter`), with
    Karpenter's instance labels, the pool's weight (serving 50 before batch 10 by default, so
    the on-demand base fills before burst capacity) and nodes labelled with pool, purpose and OS,
    plus `gpufarm.io/capacity-class` (the pool's class: its `capacity_class`, else its name;
    models of a class select on it) and `gpufarm.io/efa: "true"` when it sets `efa` (where the
    EFA device plugin runs).
    """
    labels = {
        POOL_LABEL: pool.name,
        PURPOSE_LABEL: pool.purpose.value,
        AMI_FAMILY_LABEL: pool.ami_family.value,
    }
    labels[CAPACITY_CLASS_LABEL] = pool.capacity_class_name
    if pool.efa:
        labels[EFA_LABEL] = "true"
    return gpu_nodepool(
        pool,
        node_class_ref={
            "group": KARPENTER_LABEL_DOMAIN,
            "kind": "EC2NodeClass",
            "name": nodepool_name(pool.name),
        },
        label_domain=KARPENTER_LABEL_DOMAIN,
        node_labels=labels,
        weight=pool.nodepool_weight,
    )


NODE_REPAIR_GATE: Final = "nodeRepair"
"""The Karpenter chart's node repair feature gate, `settings.featureGates.nodeRepair`: false in
the 1.14.0 chart's values.yaml and read by its templates (upstream-ref
charts/karpenter@1.14.0.json, `template_refs`); the controller's `NodeRepair` feature gate
(https://karpenter.sh/docs/concepts/disruption/#node-auto-repair)."""


def karpenter_values(
    *,
    cluster_name: str,
    interruption_queue: str,
    replicas: int = 2,
    node_repair: bool = True,
) -> dict[str, Any]:
    """Helm values of the Karpenter chart.

    The controller runs `replicas` pods (one leads) on managed node group nodes only: never on
    nodes Karpenter launched (it would be evicting itself), spread one per node, tolerating
    `CriticalAddonsOnly` so a tainted system node group can hold it. Its service account is
    `karpenter`, the one the Pod Identity association names. `interruption_queue` is the SQS
    queue *name*. Requests equal limits (1 CPU, 1 GiB), as Karpenter recommends. The controller
    image is the table's (`karpenter-controller` in gpufarm/data/images.yaml) in the chart's own
    `controller.image.digest` key (aws/karpenter-provider-aws@692ccdd charts/karpenter values.yaml).

    `node_repair` (default on) sets the chart's `settings.featureGates.nodeRepair`
    (:data:`NODE_REPAIR_GATE`), off by default in the chart: Karpenter then replaces a node
    whose GPU the EKS node monitoring agent reports broken (`AcceleratedHardwareReady=False`
    for 10 minutes) or that stays `Ready=False/Unknown` for 30 minutes
    (https://karpenter.sh/docs/concepts/disruption/#node-auto-repair). Only the gate is set;
    Helm merges the chart's other feature gates in.
    """
    controller = images.image("karpenter-controller")
    return {
        "replicas": replicas,
        "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
        "settings": {
            "clusterName": cluster_name,
            "interruptionQueue": interruption_queue,
            **({"featureGates": {NODE_REPAIR_GATE: True}} if node_repair else {}),
        },
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"},
                                {"key": NODEGROUP_LABEL, "operator": "Exists"},
                            ]
                        }
                    ]
                }
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname"}]
            },
        },
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
        "controller": {
            "image": {
                "repository": controller.repository,
                "tag": controller.tag,
                "digest": controller.digest,
            },
            "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"cpu": "1", "memory": "1Gi"},
            },
        },
    }


def nvidia_device_plugin_values(digests: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Helm values of NVIDIA's device plugin chart: a DaemonSet on NVIDIA GPU nodes only.

    It runs where Karpenter labelled the node `karpenter.k8s.aws/instance-gpu-manufacturer:
    nvidia` and the OS is not Bottlerocket (whose NVIDIA AMIs ship their own device plugin),
    or where an operator labelled a node `nvidia.com/gpu.present: "true"` (GPU managed node
    groups). It tolerates the `nvidia.com/gpu` taint of GPU pools, and GPU feature discovery
    stays off (Karpenter's labels already describe the GPUs).

    The image is the table's `nvidia-device-plugin`, its digest from `digests` (the tier's
    `images.digests`) in the `tag` value: the chart builds `repository:tag`
    (`nvidia-device-plugin.fullimage` in the chart's templates/_helpers.tpl).
    """
    plugin = images.image("nvidia-device-plugin")
    return {
        "image": {"repository": plugin.repository, "tag": images.helm_tag(plugin.name, digests)},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": GPU_MANUFACTURER_LABEL, "operator": "In", "values": ["nvidia"]},
                                {
                                    "key": AMI_FAMILY_LABEL,
                                    "operator": "NotIn",
                                    "values": [AmiFamily.BOTTLEROCKET.value],
                                },
                            ]
                        },
                        {
                            "matchExpressions": [
                                {"key": GPU_PRESENT_LABEL, "operator": "In", "values": ["true"]}
                            ]
                        },
                    ]
                }
            }
        },
        "tolerations": [
            {"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
        ],
        "priorityClassName": "system-node-critical",
        "gfd": {"enabled": False},
    }


def efa_device_plugin_values(region: str, digests: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Helm values of the `aws-efa-k8s-device-plugin` chart: a DaemonSet on EFA nodes only.

    The chart builds its required node affinity from `supportedInstanceLabels` (by default a
    list of instance types, which lags new EFA types); here it keys on the `gpufarm.io/efa:
    "true"` label that reserved node groups and `efa` Karpenter pools put on their nodes, so the
    plugin runs exactly where EFA interfaces were attached. It tolerates the `nvidia.com/gpu`
    taint of GPU nodes (the chart adds `CriticalAddonsOnly` itself).

    The image comes from the EKS registry of `region`. The chart's default repository is
    us-west-2's (`602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-efa-k8s-device-plugin`,
    aws/eks-charts stable/aws-efa-k8s-device-plugin/values.yaml), which a node elsewhere reaches
    only across the internet; EKS replicates its images to every region it supports (see
    :mod:`gpufarm.core.registries`). The tag is the table's `efa-device-plugin` (the chart's
    own), with the digest from `digests` (the tier's `images.digests`): the chart builds
    `repository:tag`. Raises ValueError for a region without a known EKS registry.
    """
    return {
        "image": {
            "repository": f"{eks_registry(region)}/{EFA_DEVICE_PLUGIN_IMAGE}",
            "tag": images.helm_tag("efa-device-plugin", digests),
        },
        "supportedInstanceLabels": {"keys": [EFA_LABEL], "values": ["true"]},
        "tolerations": [{"key": GPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
    }
