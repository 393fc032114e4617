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
