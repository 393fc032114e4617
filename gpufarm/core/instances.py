"""The instance catalog: what gpufarm knows about each EC2 instance type it may place models on.

One table per fact, read by every consumer (config validation, the sizing planner, the Karpenter
and node-group EFA layouts, the cluster's system nodes, preflight and the cost estimate):

- GPUs per instance, GPU name and GPU memory: :data:`GPU_FAMILIES`;
- vCPUs and memory: :data:`HOSTS`;
- EFA network cards: :data:`EFA_NETWORK_CARDS`;
- accelerated family: :func:`is_accelerated`;
- EC2 vCPU quota class: :func:`quota_class`;
- the x86_64 NVIDIA families EKS's NVIDIA AMIs serve: :data:`NVIDIA_GPU_FAMILIES`.

:func:`instance_spec` gathers them for one GPU instance type. This module imports nothing from
gpufarm, so every layer may read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal


@dataclass(frozen=True, kw_only=True)
class GpuFamily:
    """An EC2 GPU instance family: the GPU it carries and GPUs per instance size."""

    family: str
    gpu_name: str
    gpu_memory_gib: int
    sizes: dict[str, int]  # instance size -> number of GPUs

    @property
    def max_gpus(self) -> int:
        """The most GPUs one instance of this family carries."""
        return max(self.sizes.values())

    def instance_types(self) -> list[str]:
        """Every instance type of the family, smallest first."""
        return [f"{self.family}.{size}" for size in self.sizes]


# g5, g6 and g6e share one size ladder: 1 GPU up to 16xlarge, 4 at 12/24xlarge, 8 at 48xlarge.
_G_SERIES_SIZES = {
    "xlarge": 1,
    "2xlarge": 1,
    "4xlarge": 1,
    "8xlarge": 1,
    "16xlarge": 1,
    "12xlarge": 4,
    "24xlarge": 4,
    "48xlarge": 8,
}

_FAMILIES = [
    GpuFamily(
        family="g5",
        gpu_name="a10g",
        gpu_memory_gib=24,
        sizes=_G_SERIES_SIZES,
    ),
    GpuFamily(
        family="g6",
        gpu_name="l4",
        gpu_memory_gib=24,
        sizes=_G_SERIES_SIZES,
    ),
    GpuFamily(
        family="g6e",
        gpu_name="l40s",
        gpu_memory_gib=48,
        sizes=_G_SERIES_SIZES,
    ),
    GpuFamily(
        family="g7e",
        gpu_name="rtx-pro-6000",
        gpu_memory_gib=96,
        sizes={"2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "12xlarge": 2, "24xlarge": 4, "48xlarge": 8},
    ),
    GpuFamily(family="p4d", gpu_name="a100", gpu_memory_gib=40, sizes={"24xlarge": 8}),
    GpuFamily(family="p4de", gpu_name="a100", gpu_memory_gib=80, sizes={"24xlarge": 8}),
    GpuFamily(family="p5", gpu_name="h100", gpu_memory_gib=80, sizes={"4xlarge": 1, "48xlarge": 8}),
    GpuFamily(family="p5e", gpu_name="h200", gpu_memory_gib=141, sizes={"48xlarge": 8}),
    GpuFamily(family="p5en", gpu_name="h200", gpu_memory_gib=141, sizes={"48xlarge": 8}),
    GpuFamily(family="p6-b200", gpu_name="b200", gpu_memory_gib=179, sizes={"48xlarge": 8}),
    # B300: 288 GB of HBM3e per GPU, which nvidia-smi on a p6-b300.48xlarge reports as 268 GiB
    # ("8x NVIDIA B300 SXM6 AC (268GB HBM3e each, 2.15TB total)", a public benchmark's note of
    # the instance it ran on); 8 GPUs per instance: instances.vantage.sh data in
    # tsaol/aws-gpu (data of 2025-12-21, "gpuCount": 8).
    GpuFamily(family="p6-b300", gpu_name="b300", gpu_memory_gib=268, sizes={"48xlarge": 8}),
]

GPU_FAMILIES: Final[dict[str, GpuFamily]] = {f.family: f for f in _FAMILIES}
"""Known GPU instance families, by family name."""


@dataclass(frozen=True, kw_only=True)
class Host:
    """vCPUs and memory (GiB) of one instance type."""

    vcpus: int
    memory_gib: int


HOSTS: Final[dict[str, Host]] = {
    # Sources: aws/sagemaker-hyperpod-cli `INSTANCE_RESOURCES` (the `ml.` instances match the EC2
    # ones) for g5, g6, g6e, p4d, p4de, p5, p5e and p5en, and its G7e addition (pull request 390)
    # for g7e.2xlarge. meta-pytorch/torchx@3297a6e2 torchx/specs/named_resources_aws.py ("taken
    # from https://aws.amazon.com/ec2/instance-types/"; memory written as N * GiB scaled by a 0.96
    # "mem tax", so N is the instance's GiB) gives the same figures for the g5, g6e and p types.
    # p6-b200.48xlarge from openshift/openshift-docs modules/rosa-sdpolicy-am-aws-compute-types.adoc
    # ("p6-b200.48xlarge (192 vCPU, 2,048 GiB)"); hyperpod-cli lists 2024 GiB for it, so its
    # memory is not confirmed to the GiB. g7e.4xlarge and g7e.8xlarge: hyperpod-cli pull request 390
    # (`"ml.g7e.4xlarge": {"cpu": 16, ... "memory": 128}`, `"ml.g7e.8xlarge": {"cpu": 32, ...
    # "memory": 256}`); g7e.12xlarge, g7e.24xlarge and g7e.48xlarge: instances.vantage.sh data in
    # tsaol/aws-gpu data/g7e_instances.js (2026-01-21: 48 vCPU 512 GB, 96 vCPU 1024 GB, 192 vCPU
    # 2048 GB). p6-b300.48xlarge: the same data (tsaol/aws-gpu, 2025-12-21: 192 vCPU, 4096 GB),
    # one source only.
    "g5.xlarge": Host(vcpus=4, memory_gib=16),
    "g5.2xlarge": Host(vcpus=8, memory_gib=32),
    "g5.4xlarge": Host(vcpus=16, memory_gib=64),
    "g5.8xlarge": Host(vcpus=32, memory_gib=128),
    "g5.16xlarge": Host(vcpus=64, memory_gib=256),
    "g5.12xlarge": Host(vcpus=48, memory_gib=192),
    "g5.24xlarge": Host(vcpus=96, memory_gib=384),
    "g5.48xlarge": Host(vcpus=192, memory_gib=768),
    "g6.xlarge": Host(vcpus=4, memory_gib=16),
    "g6.2xlarge": Host(vcpus=8, memory_gib=32),
    "g6.4xlarge": Host(vcpus=16, memory_gib=64),
    "g6.8xlarge": Host(vcpus=32, memory_gib=128),
    "g6.16xlarge": Host(vcpus=64, memory_gib=256),
    "g6.12xlarge": Host(vcpus=48, memory_gib=192),
    "g6.24xlarge": Host(vcpus=96, memory_gib=384),
    "g6.48xlarge": Host(vcpus=192, memory_gib=768),
    "g6e.xlarge": Host(vcpus=4, memory_gib=32),
    "g6e.2xlarge": Host(vcpus=8, memory_gib=64),
    "g6e.4xlarge": Host(vcpus=16, memory_gib=128),
    "g6e.8xlarge": Host(vcpus=32, memory_gib=256),
    "g6e.16xlarge": Host(vcpus=64, memory_gib=512),
    "g6e.12xlarge": Host(vcpus=48, memory_gib=384),
    "g6e.24xlarge": Host(vcpus=96, memory_gib=768),
    "g6e.48xlarge": Host(vcpus=192, memory_gib=1536),
    "g7e.2xlarge": Host(vcpus=8, memory_gib=64),
    "g7e.4xlarge": Host(vcpus=16, memory_gib=128),
    "g7e.8xlarge": Host(vcpus=32, memory_gib=256),
    "g7e.12xlarge": Host(vcpus=48, memory_gib=512),
    "g7e.24xlarge": Host(vcpus=96, memory_gib=1024),
    "g7e.48xlarge": Host(vcpus=192, memory_gib=2048),
    "p4d.24xlarge": Host(vcpus=96, memory_gib=1152),
    "p4de.24xlarge": Host(vcpus=96, memory_gib=1152),
    "p5.4xlarge": Host(vcpus=16, memory_gib=256),
    "p5.48xlarge": Host(vcpus=192, memory_gib=2048),
    "p5e.48xlarge": Host(vcpus=192, memory_gib=2048),
    "p5en.48xlarge": Host(vcpus=192, memory_gib=2048),
    "p6-b200.48xlarge": Host(vcpus=192, memory_gib=2048),
    "p6-b300.48xlarge": Host(vcpus=192, memory_gib=4096),
}
"""vCPUs and memory of a GPU instance type, where a published source gives them."""

EFA_NETWORK_CARDS: Final[dict[str, int]] = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
}
"""Network cards of multi-card EFA GPU instance types (one EFA per card), as EC2 reports them
(DescribeInstanceTypes `NetworkInfo.NetworkCards`). p5 and p5e: 32 (AWS's example request of "32
EFA devices and one ENA device", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html,
and meta-pytorch/torchx pull request 1098, `EFA_DEVICE: 32` for p5e.48xlarge); p5en: 16
(meta-pytorch/torchx pull request 995, `EFA_DEVICE: 16`). p4d/p4de (4) and p6-b200 (8) carry no
second source here."""

NVIDIA_GPU_FAMILIES: Final = frozenset(
    {
        "g4dn",
        "g5",
        "g6",
        "g6e",
        "gr6",
        "g7e",
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "p6-b200",
        "p6-b300",
    }
)
"""x86_64 instance families with NVIDIA GPUs (Turing generation and later) that reserved node
groups run on the `*_x86_64_NVIDIA` AMI types; Volta (p3) and Arm families (g5g) are not here."""

_ACCELERATED_FAMILY = re.compile(r"^(p|g|gr|inf|trn|dl|f|vt)\d")
"""Families with GPUs or other accelerators (p5, g6e, gr6, inf2, trn1, dl1, f2, vt1)."""

QuotaClass = Literal["G", "P"]
"""The EC2 vCPU quota bucket of a GPU instance: 'G' (the G and VT families) or 'P'."""


def family_of(instance_type: str) -> str:
    """The family part of an instance type: 'g6e.12xlarge' -> 'g6e'."""
    return instance_type.split(".", 1)[0]


def gpus_in(instance_type: str) -> int | None:
    """GPUs in one instance of the type, or None when the type is not in the catalog."""
    family, _, size = instance_type.partition(".")
    known = GPU_FAMILIES.get(family)
    return known.sizes.get(size) if known else None


def host_of(instance_type: str) -> Host | None:
    """vCPUs and memory of one instance of the type, or None when the catalog does not know them."""
    return HOSTS.get(instance_type)


def efa_network_cards(instance_type: str) -> int | None:
    """Network cards (one EFA each) of a multi-card EFA instance type, or None when not in the table."""
    return EFA_NETWORK_CARDS.get(instance_type)


def is_accelerated(instance_type: str) -> bool:
    """Whether the type's family carries GPUs or other accelerators (p, g, gr, inf, trn, dl, f, vt)."""
    return _ACCELERATED_FAMILY.match(instance_type) is not None


def quota_class(instance_type: str) -> QuotaClass | None:
    """'G' for G and VT families, 'P' for P families, None for any other instance type."""
    family = family_of(instance_type)
    if family.startswith(("g", "vt")):
        return "G"
    if family.startswith("p"):
        return "P"
    return None


@dataclass(frozen=True, kw_only=True)
class InstanceSpec:
    """Everything the catalog knows about one GPU instance type."""

    instance_type: str
    family: str
    gpus: int
    gpu_name: str
    gpu_memory_gib: int
    host: Host | None
    """vCPUs and memory, None where no source gives them."""
    efa_network_cards: int | None
    """Network cards of a multi-card EFA type, else None."""
    accelerated: bool
    quota_class: QuotaClass | None


class UnknownInstanceTypeError(ValueError):
    """An instance type outside the GPU catalog."""


def instance_spec(instance_type: str) -> InstanceSpec:
    """The catalog's facts about one GPU instance type; UnknownInstanceTypeError for any other."""
    gpus = gpus_in(instance_type)
    if gpus is None:
        raise UnknownInstanceTypeError(
            f"instance type {instance_type!r} is not in the GPU catalog (families "
            f"{', '.join(sorted(GPU_FAMILIES))}, with their sizes)"
        )
    family = GPU_FAMILIES[family_of(instance_type)]
    return InstanceSpec(
        instance_type=instance_type,
        family=family.family,
        gpus=gpus,
        gpu_name=family.gpu_name,
        gpu_memory_gib=family.gpu_memory_gib,
        host=host_of(instance_type),
        efa_network_cards=efa_network_cards(instance_type),
        accelerated=is_accelerated(instance_type),
        quota_class=quota_class(instance_type),
    )
