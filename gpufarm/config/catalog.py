"""GPU instance facts used to validate pools and models (GPUs per instance, GPU memory)."""

from __future__ import annotations

from dataclasses import dataclass


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


HOST_SPECS: dict[str, tuple[int, int]] = {
    # (vCPUs, memory GiB) of the GPU instances whose host size a published source gives. Source:
    # meta-pytorch/torchx@3297a6e2 torchx/specs/named_resources_aws.py ("taken from
    # https://aws.amazon.com/ec2/instance-types/"; its memory is written as N * GiB with GiB
    # scaled by a 0.96 "mem tax", so N is the instance's GiB), and for p6-b200
    # openshift/openshift-docs modules/rosa-sdpolicy-am-aws-compute-types.adoc
    # ("p6-b200.48xlarge (192 vCPU, 2,048 GiB)"). g6, g7e and p5.4xlarge are not listed: no
    # source at hand, so pods on them are not checked against the host.
    "g5.xlarge": (4, 16),
    "g5.2xlarge": (8, 32),
    "g5.4xlarge": (16, 64),
    "g5.8xlarge": (32, 128),
    "g5.16xlarge": (64, 256),
    "g5.12xlarge": (48, 192),
    "g5.24xlarge": (96, 384),
    "g5.48xlarge": (192, 768),
    "g6e.xlarge": (4, 32),
    "g6e.2xlarge": (8, 64),
    "g6e.4xlarge": (16, 128),
    "g6e.8xlarge": (32, 256),
    "g6e.16xlarge": (64, 512),
    "g6e.12xlarge": (48, 384),
    "g6e.24xlarge": (96, 768),
    "g6e.48xlarge": (192, 1536),
    "p4d.24xlarge": (96, 1152),
    "p4de.24xlarge": (96, 1152),
    "p5.48xlarge": (192, 2048),
    "p5e.48xlarge": (192, 2048),
    "p5en.48xlarge": (192, 2048),
    "p6-b200.48xlarge": (192, 2048),
}
"""vCPUs and memory (GiB) of a GPU instance type, where known: the most one pod could request."""


def host_of(instance_type: str) -> tuple[int, int] | None:
    """(vCPUs, memory GiB) of one instance of the type, or None when the catalog does not know it."""
    return HOST_SPECS.get(instance_type)


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
]

GPU_FAMILIES: dict[str, GpuFamily] = {f.family: f for f in _FAMILIES}
"""Known GPU instance families, by family name."""


def family_of(instance_type: str) -> str:
    """The family part of an instance type: 'g6e.12xlarge' -> 'g6e'."""
    return instance_type.split(".", 1)[0]


def gpus_in(instance_type: str) -> int | None:
    """GPUs in one instance of the type, or None when the type is not in the catalog."""
    family, _, size = instance_type.partition(".")
    known = GPU_FAMILIES.get(family)
    return known.sizes.get(size) if known else None
