"""The instance catalog: each fact of a few instance types, and its tables agreeing with each other."""

from __future__ import annotations

import pytest

from gpufarm.core.instances import (
    EFA_NETWORK_CARDS,
    GPU_FAMILIES,
    HOSTS,
    NVIDIA_GPU_FAMILIES,
    Host,
    InstanceSpec,
    UnknownInstanceTypeError,
    efa_network_cards,
    family_of,
    gpus_in,
    host_of,
    instance_spec,
    is_accelerated,
    quota_class,
)


@pytest.mark.parametrize(
    "spec",
    [
        InstanceSpec(
            instance_type="g6e.12xlarge",
            family="g6e",
            gpus=4,
            gpu_name="l40s",
            gpu_memory_gib=48,
            host=Host(vcpus=48, memory_gib=384),
            efa_network_cards=None,
            accelerated=True,
            quota_class="G",
        ),
        InstanceSpec(
            instance_type="g6.xlarge",
            family="g6",
            gpus=1,
            gpu_name="l4",
            gpu_memory_gib=24,
            host=Host(vcpus=4, memory_gib=16),
            efa_network_cards=None,
            accelerated=True,
            quota_class="G",
        ),
        InstanceSpec(
            instance_type="g7e.4xlarge",
            family="g7e",
            gpus=1,
            gpu_name="rtx-pro-6000",
            gpu_memory_gib=96,
            host=Host(vcpus=16, memory_gib=128),
            efa_network_cards=None,
            accelerated=True,
            quota_class="G",
        ),
        InstanceSpec(
            instance_type="p4d.24xlarge",
            family="p4d",
            gpus=8,
            gpu_name="a100",
            gpu_memory_gib=40,
            host=Host(vcpus=96, memory_gib=1152),
            efa_network_cards=4,
            accelerated=True,
            quota_class="P",
        ),
        InstanceSpec(
            instance_type="p5.48xlarge",
            family="p5",
            gpus=8,
            gpu_name="h100",
            gpu_memory_gib=80,
            host=Host(vcpus=192, memory_gib=2048),
            efa_network_cards=32,
            accelerated=True,
            quota_class="P",
        ),
        InstanceSpec(
            instance_type="p5en.48xlarge",
            family="p5en",
            gpus=8,
            gpu_name="h200",
            gpu_memory_gib=141,
            host=Host(vcpus=192, memory_gib=2048),
            efa_network_cards=16,
            accelerated=True,
            quota_class="P",
        ),
        InstanceSpec(
            instance_type="p6-b200.48xlarge",
            family="p6-b200",
            gpus=8,
            gpu_name="b200",
            gpu_memory_gib=179,
            host=Host(vcpus=192, memory_gib=2048),
            efa_network_cards=8,
            accelerated=True,
            quota_class="P",
        ),
    ],
    ids=lambda s: s.instance_type,
)
def test_instance_spec_holds_every_fact_of_the_type(spec: InstanceSpec) -> None:
    assert instance_spec(spec.instance_type) == spec


@pytest.mark.parametrize("instance_type", ["m7i.xlarge", "g6e.3xlarge", "p6e-gb200.36xlarge", "g6e"])
def test_instance_spec_of_a_type_outside_the_catalog_names_the_families(instance_type: str) -> None:
    with pytest.raises(UnknownInstanceTypeError) as caught:
        instance_spec(instance_type)
    assert str(caught.value) == (
        f"instance type {instance_type!r} is not in the GPU catalog (families g5, g6, g6e, g7e, "
        "p4d, p4de, p5, p5e, p5en, p6-b200, p6-b300, with their sizes)"
    )


def test_gpus_and_hosts_of_types_outside_the_catalog_are_none() -> None:
    assert gpus_in("m7i.xlarge") is None
    assert gpus_in("g6e.3xlarge") is None
    assert host_of("m7i.xlarge") is None
    assert efa_network_cards("g6e.48xlarge") is None


def test_p6_b300_is_in_the_catalog_the_price_table_prices() -> None:
    # The price table carried a p6-b300.48xlarge price with no catalog entry, so no pool could
    # launch it: 8 B300 GPUs, 192 vCPUs, 4,096 GiB (sources in core/instances.py).
    spec = instance_spec("p6-b300.48xlarge")
    assert (spec.gpus, spec.gpu_name, spec.host, spec.quota_class) == (
        8,
        "b300",
        Host(vcpus=192, memory_gib=4096),
        "P",
    )


def test_family_is_the_part_before_the_size() -> None:
    assert family_of("p6-b200.48xlarge") == "p6-b200"
    assert family_of("g6e.12xlarge") == "g6e"


def test_a_family_lists_its_sizes_smallest_first_and_its_most_gpus() -> None:
    p5 = GPU_FAMILIES["p5"]
    assert p5.instance_types() == ["p5.4xlarge", "p5.48xlarge"]
    assert p5.max_gpus == 8
    assert GPU_FAMILIES["g7e"].max_gpus == 8
    assert GPU_FAMILIES["g6e"].instance_types()[0] == "g6e.xlarge"


@pytest.mark.parametrize(
    ("instance_type", "accelerated"),
    [
        ("p5.48xlarge", True),
        ("g6e.xlarge", True),
        ("gr6.4xlarge", True),
        ("inf2.xlarge", True),
        ("trn1.32xlarge", True),
        ("dl1.24xlarge", True),
        ("f2.12xlarge", True),
        ("vt1.3xlarge", True),
        ("m7i.xlarge", False),
        ("m7g.xlarge", False),
        ("c7i.2xlarge", False),
        ("r7i.large", False),
    ],
)
def test_accelerated_families_are_the_gpu_and_accelerator_ones(instance_type: str, accelerated: bool) -> None:
    assert is_accelerated(instance_type) is accelerated


@pytest.mark.parametrize(
    ("instance_type", "quota"),
    [
        ("g6e.xlarge", "G"),
        ("g5.48xlarge", "G"),
        ("vt1.3xlarge", "G"),
        ("p4d.24xlarge", "P"),
        ("p6-b200.48xlarge", "P"),
        ("inf2.xlarge", None),
        ("m7i.xlarge", None),
    ],
)
def test_quota_class_is_g_for_g_and_vt_and_p_for_p(instance_type: str, quota: str | None) -> None:
    assert quota_class(instance_type) == quota


def test_known_gpu_families_are_those_reserved_node_groups_accept() -> None:
    """node_groups[].instance_type is checked against the catalog; the construct's own list must
    hold every catalog family, so the tier path never reaches its check."""
    assert set(GPU_FAMILIES) <= NVIDIA_GPU_FAMILIES


def test_every_host_and_efa_entry_is_a_gpu_type_of_the_catalog() -> None:
    assert [t for t in HOSTS if gpus_in(t) is None] == []
    assert [t for t in EFA_NETWORK_CARDS if gpus_in(t) is None] == []


def test_every_size_of_every_family_has_its_host() -> None:
    """The planner only offers types with a host, and the estimate chooses a pool's type by the
    pod's CPU and memory as well as its GPUs: every size the pools may launch has one."""
    missing = [t for f in GPU_FAMILIES.values() for t in f.instance_types() if host_of(t) is None]
    assert missing == []
