"""A pool's instance type is chosen on the pod's GPUs, CPU and memory together, as Karpenter and
Auto Mode choose for a pending pod. Expected types are worked out from the catalog's host figures
(g6e: xlarge 4 vCPU / 32 GiB, 2xlarge 8 / 64, 4xlarge 16 / 128, 12xlarge 48 / 384 with 4 GPUs)
and the table's prices, not from the estimate's own output."""

from __future__ import annotations

import pytest

from gpufarm.config import load_preset
from gpufarm.core.instances import Host
from gpufarm.estimate import (
    DAEMONSET_CPU,
    DAEMONSET_MEMORY_GIB,
    SIDECAR_CPU,
    SIDECAR_MEMORY_GIB,
    EstimateError,
    allocatable,
    choose_instance_type,
    gpu_capacity,
    kube_reserved_cpu,
    monthly_cost,
    pods_per_node,
)
from gpufarm.pricing import load_prices

from .factories import make_tier, model_override, pool_override

PRICES = load_prices()
H = 730


@pytest.mark.parametrize(
    ("vcpus", "allocatable_millicores"),
    # Karpenter's published allocatable CPU (aws/karpenter-provider-aws, docs/reference/instance-types.md:
    # a1.xlarge 3920m, a1.2xlarge 7910m, a1.4xlarge 15890m, i7ie.12xlarge 47810m, i7ie.48xlarge 191450m).
    [(4, 3920), (8, 7910), (16, 15890), (48, 47810), (192, 191450)],
)
def test_the_kubelets_cpu_reserve_is_karpenters(vcpus: int, allocatable_millicores: int) -> None:
    assert round((vcpus - kube_reserved_cpu(vcpus)) * 1000) == allocatable_millicores


def test_allocatable_is_the_host_less_every_reserve() -> None:
    # g6e.2xlarge: 8 vCPUs less 90m (kubelet) less the DaemonSets; 64 GiB less 7.5% for the VM,
    # 11 MiB x 110 pods + 255 MiB kube-reserved, 100 MiB eviction threshold, and the DaemonSets.
    cpu, memory = allocatable(Host(vcpus=8, memory_gib=64))
    assert (cpu, memory) == (
        pytest.approx(8 - 0.09 - DAEMONSET_CPU),
        pytest.approx(64 * 0.925 - (11 * 110 + 255 + 100) / 1024 - DAEMONSET_MEMORY_GIB),
    )


def test_the_poc_model_lands_on_a_g6e_2xlarge() -> None:
    # 6 CPU and 48 GiB: a g6e.xlarge has 4 vCPUs and 32 GiB, so the pod cannot run there; the
    # g6e.2xlarge (7.41 CPU and 56.7 GiB allocatable) holds it and is the cheapest that does.
    pool = load_preset("poc").node_pools[0]
    assert choose_instance_type(pool, 1, PRICES, cpu=6, memory_gib=48) == "g6e.2xlarge"


def test_a_model_that_fits_the_smallest_size_gets_it() -> None:
    # 2 CPU and 16 GiB fit a g6e.xlarge (3.42 CPU and 27.1 GiB allocatable), the cheapest L40S.
    pool = load_preset("poc").node_pools[0]
    assert choose_instance_type(pool, 1, PRICES, cpu=2, memory_gib=16) == "g6e.xlarge"


def test_memory_alone_can_move_a_pod_up_a_size() -> None:
    # 6 CPU and 100 GiB: the g6e.2xlarge has 56.7 GiB allocatable, the g6e.4xlarge 115.2. A
    # g6e.12xlarge would hold 3 such pods (352.7 GiB) on its 4 GPUs: 10.49264 / 3 = 3.50 per usable
    # GPU, dearer than the g6e.4xlarge at 3.00424.
    pool = load_preset("poc").node_pools[0]
    assert choose_instance_type(pool, 1, PRICES, cpu=6, memory_gib=100) == "g6e.4xlarge"


def test_without_cpu_or_memory_the_choice_is_on_gpus_alone() -> None:
    pool = load_preset("poc").node_pools[0]
    assert choose_instance_type(pool, 1, PRICES) == "g6e.xlarge"


def test_the_poc_preset_is_priced_on_the_g6e_2xlarge() -> None:
    estimate = monthly_cost(load_preset("poc"))
    gpu = [line for line in estimate.lines if line.category == "gpu"]
    assert [(line.item, line.quantity, line.unit_price) for line in gpu] == [
        ("GPU pool l40s: g6e.2xlarge", 1, pytest.approx(2.24208 * H))
    ]


def test_a_smaller_poc_model_is_priced_on_the_g6e_xlarge() -> None:
    tier = make_tier(model_override(cpu=2, memory_gib=16))
    items = [line.item for line in monthly_cost(tier).lines if line.category == "gpu"]
    assert items == ["GPU pool l40s: g6e.xlarge"]


def test_cpu_fills_a_multi_gpu_instance_before_its_gpus() -> None:
    # Pods of 1 GPU and 20 CPU on a pool of g6e.12xlarge only (48 vCPUs, 47.31 CPU allocatable):
    # 2 pods per instance (20.5 CPU each with the sidecars), so 4 replicas need 2 instances, not the
    # 1 their 4 GPUs alone would fill; the GPUs provisioned are the instances' 8.
    tier = make_tier(
        pool_override(instance_types=["g6e.12xlarge"], gpu_limit=8),
        model_override(cpu=20, memory_gib=48, replicas=4),
    )
    assert pods_per_node("g6e.12xlarge", 1, 20, 48) == 2
    line = next(x for x in monthly_cost(tier).lines if x.category == "gpu")
    assert (line.item, line.quantity) == ("GPU pool l40s: g6e.12xlarge", 2)
    assert gpu_capacity(tier) == {"reserved": 0, "on-demand": 8, "spot": 0}


def test_a_pod_no_size_can_hold_is_refused_with_the_reserve_named() -> None:
    # 4 CPU fit the validator's bound (the g6e.xlarge's 4 vCPUs) but not the node's 3.42 allocatable.
    tier = make_tier(pool_override(instance_types=["g6e.xlarge"]), model_override(cpu=4, memory_gib=16))
    with pytest.raises(EstimateError) as info:
        monthly_cost(tier)
    assert str(info.value) == (
        "pool 'l40s': none of its instance types (g6e.xlarge) holds a pod of 1 GPU(s), 4 CPU and 16 GiB "
        f"once the node keeps its reserve (the kubelet's, {DAEMONSET_CPU:g} CPU and {DAEMONSET_MEMORY_GIB:g} "
        f"GiB for DaemonSets, {SIDECAR_CPU:g} CPU and {SIDECAR_MEMORY_GIB:g} GiB for gpufarm's sidecars): "
        "allow a larger size"
    )
