"""The GPU capacity: Karpenter or Auto Mode node pools and reserved node groups."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from gpufarm.config.sections.values import AmiVersion, DnsLabel, Duration, NodeBudget, ReservationId, _Model


class CapacityType(StrEnum):
    """EC2 purchase option for GPU nodes (the values of `karpenter.sh/capacity-type`)."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    RESERVED = "reserved"


class AmiFamily(StrEnum):
    """Operating system of Karpenter GPU nodes (both ship the NVIDIA driver)."""

    AL2023 = "al2023"
    BOTTLEROCKET = "bottlerocket"


class ImagePull(StrEnum):
    """How a Karpenter pool's nodes pull container images (docs/decisions/0062-images-through-ecr.md)."""

    DEFAULT = "default"
    """containerd's own pull: layers one after another."""
    SOCI_PARALLEL_PULL = "soci-parallel-pull"
    """Bottlerocket's SOCI snapshotter in parallel pull-and-unpack mode (Bottlerocket 1.44 and later)."""


class PoolPurpose(StrEnum):
    """What a GPU pool is for: latency-critical serving, or batch/background work that may use spot."""

    SERVING = "serving"
    BATCH = "batch"


class ReservationKind(StrEnum):
    """Where a reserved node group's capacity comes from."""

    CREATE = "create"
    ODCR = "odcr"
    CAPACITY_BLOCK = "capacity-block"


class NodeGroupAmiType(StrEnum):
    """EKS-optimized GPU AMIs for managed node groups."""

    AL2023_NVIDIA = "AL2023_x86_64_NVIDIA"
    BOTTLEROCKET_NVIDIA = "BOTTLEROCKET_x86_64_NVIDIA"


class NodePoolConfig(_Model):
    """A pool of GPU nodes that models are scheduled on."""

    name: DnsLabel = Field(description="Pool name; the NodePool is named `gpu-<name>`.")
    instance_families: list[str] = Field(
        ["g6e"], min_length=1, description="GPU instance families the pool may launch."
    )
    instance_types: list[str] = Field(
        [], description="Narrow the pool to these instance types (empty: any size of the families)."
    )
    capacity_types: list[CapacityType] = Field(
        [CapacityType.ON_DEMAND], min_length=1, description="EC2 purchase options allowed."
    )
    gpu_limit: int = Field(8, ge=1, le=4096, description="Most GPUs the pool may run at once.")
    consolidate_after: Duration = Field(
        "30m", description="How long a node must be empty before it is removed."
    )
    expire_after: Duration = Field(
        "336h", description="Node lifetime before replacement (Auto Mode allows at most 504h)."
    )
    disruption_budget_nodes: NodeBudget = Field(
        "1", description="Nodes (count or percent) that may be disrupted at once."
    )
    purpose: PoolPurpose = Field(
        PoolPurpose.SERVING, description="'serving' (on-demand only) or 'batch' (may also use spot)."
    )
    weight: int | None = Field(
        None,
        ge=1,
        le=100,
        description="Karpenter NodePool weight; higher fills first (default: 50 serving, 10 batch).",
    )
    ami_family: AmiFamily = Field(
        AmiFamily.AL2023, description="Node OS for Karpenter pools (ignored in Auto Mode)."
    )
    ami_version: AmiVersion = Field(
        "latest",
        description="AMI alias version: 'latest', 'v20251120' (AL2023) or '1.50.0' (Bottlerocket).",
    )
    root_volume_gib: int = Field(
        300, ge=100, le=16000, description="Root volume of Karpenter GPU nodes, GiB (images, weights)."
    )
    image_pull: ImagePull = Field(
        ImagePull.DEFAULT,
        description="'soci-parallel-pull': Bottlerocket's SOCI snapshotter downloads and unpacks "
        "image layers in parallel (Bottlerocket 1.44+ pools only); 'default': containerd's pull.",
    )
    capacity_class: DnsLabel | None = Field(
        None,
        description="Class shared with other pools and node groups that models can target "
        "(default: the pool's name).",
    )
    reservation_ids: list[ReservationId] = Field(
        [],
        description="Capacity reservations (ODCR or Capacity Block) the pool may use with the "
        "'reserved' capacity type (karpenter provisioning).",
    )
    efa: bool = Field(False, description="Give nodes EFA interfaces (instance types that support EFA).")

    @property
    def capacity_class_name(self) -> str:
        """The class models select: `capacity_class`, else the pool's name."""
        return self.capacity_class or self.name

    @property
    def nodepool_weight(self) -> int:
        """The NodePool weight: explicit, else 50 for serving pools and 10 for batch pools."""
        if self.weight is not None:
            return self.weight
        return 50 if self.purpose is PoolPurpose.SERVING else 10


class ReservedCapacityConfig(_Model):
    """The EC2 capacity behind a reserved node group."""

    kind: ReservationKind = Field(
        ReservationKind.CREATE,
        description="'create' an On-Demand Capacity Reservation, use existing 'odcr' IDs, or a "
        "'capacity-block'.",
    )
    reservation_ids: list[ReservationId] = Field(
        [], description="Existing reservations ('odcr': one or more; 'capacity-block': exactly one)."
    )
    instance_count: int | None = Field(
        None, ge=1, le=1000, description="Instances to reserve ('create'; default: the group's nodes)."
    )


class NodeGroupConfig(_Model):
    """An EKS managed node group of GPU instances on reserved capacity: the always-on base."""

    name: DnsLabel = Field(description="Node group name; nodes are labelled with it.")
    instance_type: str = Field(description="GPU instance type of the reservation ('p5.48xlarge').")
    availability_zone: str = Field(description="AZ of the reservation; the group's only subnet is there.")
    nodes: int = Field(1, ge=1, le=1000, description="Nodes in the group (fixed: reserved capacity).")
    ami_type: NodeGroupAmiType = Field(NodeGroupAmiType.AL2023_NVIDIA, description="GPU AMI of the nodes.")
    disk_gib: int = Field(500, ge=100, le=16000, description="Root volume per node, GiB.")
    capacity: ReservedCapacityConfig = Field(
        default_factory=ReservedCapacityConfig, description="Where the reserved capacity comes from."
    )
    efa: bool = Field(False, description="Give nodes EFA interfaces and the EFA security group.")
    capacity_class: DnsLabel | None = Field(
        None, description="Class shared with Karpenter pools that burst above this base (default: name)."
    )

    @property
    def capacity_class_name(self) -> str:
        """The class models select: `capacity_class`, else the group's name."""
        return self.capacity_class or self.name
