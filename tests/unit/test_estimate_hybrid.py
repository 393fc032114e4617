"""`gpufarm cost` for hybrid nodes: the vCPU-hour fee, no instance for on-premises GPUs, burst priced."""

from __future__ import annotations

from pathlib import Path

from gpufarm.estimate import monthly_cost
from gpufarm.pricing import load_prices

from .cost_lines import items, line
from .test_config_hybrid import HYBRID, ON_PREM_70B, hybrid, make_enterprise, with_burst

HOURS = 730


def test_fee_counts_every_hosts_vcpus_all_month_and_is_unpriced_without_a_rate() -> None:
    # The shipped table holds no confirmed hybrid nodes rate: 2 hosts x 96 vCPUs x 730 h counted,
    # at $0, with a note telling how to price them.
    estimate = monthly_cost(make_enterprise(HYBRID))
    fee = line(estimate, "EKS Hybrid Nodes")
    assert (fee.item, fee.quantity, fee.unit, fee.monthly_usd) == (
        "EKS Hybrid Nodes: 16 on-premises GPUs",
        2 * 96 * HOURS,
        "vCPU-hour",
        0.0,
    )
    assert "unpriced" in fee.note
    assert any("140,160 vCPU-hours a month are not priced" in n for n in estimate.notes)


def test_a_prices_file_prices_the_fee(tmp_path: Path) -> None:
    rate = 0.02  # an operator's rate, read off the EKS pricing page
    (tmp_path / "p.yaml").write_text(f"eks:\n  hybrid_nodes_per_vcpu_hour: {rate}\n")
    estimate = monthly_cost(make_enterprise(HYBRID), prices=load_prices(tmp_path / "p.yaml"))
    fee = line(estimate, "EKS Hybrid Nodes")
    assert fee.monthly_usd == 2 * 96 * HOURS * rate
    assert fee.note.endswith("the on-premises GPUs themselves are not billed by AWS")


def test_no_fee_line_without_hybrid_nodes() -> None:
    assert not [i for i in items(monthly_cost(make_enterprise())) if i.startswith("EKS Hybrid Nodes")]


def test_on_premises_gpus_buy_no_instance_and_burst_is_priced_at_peak() -> None:
    # The on-premises model's 16 peak GPUs fit the two hosts: the burst pool launches nothing.
    full = monthly_cost(make_enterprise(HYBRID, with_burst(), ON_PREM_70B))
    assert not [i for i in items(full) if "onprem-burst" in i]
    # One host of 8 GPUs: 8 GPUs burst at peak, one p5.48xlarge, none at base.
    one_host = monthly_cost(
        make_enterprise(
            hybrid(gpus=[{**HYBRID["hybrid_nodes"]["gpus"][0], "nodes": 1}]), with_burst(), ON_PREM_70B
        )
    )
    burst = line(one_host, "GPU pool onprem-burst")
    assert (burst.quantity, burst.peak_quantity) == (0, 1)
