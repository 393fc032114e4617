"""The instance offering check: the tier's GPU instance types are offered in its zones."""

from __future__ import annotations

from collections.abc import Mapping

from gpufarm.aws.preflight.calls import InstanceInfo
from gpufarm.aws.preflight.results import Check, CheckResult, Status
from gpufarm.aws.preflight.vcpu_quotas import instance_for
from gpufarm.config import NodePoolConfig, TierConfig
from gpufarm.core.placement import placement_of
from gpufarm.core.pools import pool_instance_types

# --------------------------------------------------------------------------- check: offerings


def check_offerings(
    tier: TierConfig, *, info: Mapping[str, InstanceInfo], offered: Mapping[str, set[str]]
) -> list[CheckResult]:
    """Node group types in their AZ; each pool's models in the tier's AZs.

    A node group whose type its AZ does not offer fails. A model that no AZ can place fails; one
    that only some AZs can place is a warning (its nodes run in the others). A pool's explicit
    instance type offered in no AZ is a warning (the pool launches the others).
    """
    zones = list(tier.environment.availability_zones)
    rows = []
    for group in tier.node_groups:
        subject = f"node group {group.name}"
        if group.availability_zone in offered.get(group.instance_type, set()):
            rows.append(
                CheckResult(
                    check=Check.OFFERING,
                    subject=subject,
                    status=Status.PASS,
                    message=f"{group.instance_type} is offered in {group.availability_zone}",
                )
            )
        else:
            where = sorted(offered.get(group.instance_type, set()))
            rows.append(
                CheckResult(
                    check=Check.OFFERING,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"{group.instance_type} is not offered in {group.availability_zone}"
                    + (f" (offered in {', '.join(where)})" if where else " nor in any other AZ of the tier"),
                    fix=f"move node_groups '{group.name}' to an AZ that offers {group.instance_type}"
                    + (f" ({', '.join(where)})" if where else "")
                    + ", or choose another instance type",
                )
            )
    for pool in tier.node_pools:
        rows.extend(_pool_offerings(tier, pool, zones, info, offered))
    return rows


def _pool_types(pool: NodePoolConfig) -> str:
    """The pool's instance types as configured: its types, else its families ('g6e.*')."""
    return ", ".join(pool.instance_types) or ", ".join(f"{f}.*" for f in pool.instance_families)


def _pool_offerings(
    tier: TierConfig,
    pool: NodePoolConfig,
    zones: list[str],
    info: Mapping[str, InstanceInfo],
    offered: Mapping[str, set[str]],
) -> list[CheckResult]:
    subject = f"pool {pool.name}"
    candidates = pool_instance_types(pool)
    models = [
        m
        for m in tier.model_parts()
        if any(isinstance(t, NodePoolConfig) and t.name == pool.name for t in placement_of(tier, m))
    ]
    problems: list[CheckResult] = []
    for model in models:
        missing = []
        for zone in zones:
            here = [t for t in candidates if zone in offered.get(t, set())]
            if instance_for(model, here, info) is None:
                missing.append(zone)
        if len(missing) == len(zones):
            problems.append(
                CheckResult(
                    check=Check.OFFERING,
                    subject=subject,
                    status=Status.FAIL,
                    message=f"no AZ of the tier ({', '.join(zones)}) offers an instance type of the pool "
                    f"({_pool_types(pool)}) that fits model '{model.name}' ({model.gpus} GPU(s), "
                    f"{model.cpu:g} CPU, {model.memory_gib} GiB)",
                    fix=f"add instance types or families to node_pools '{pool.name}' that the region "
                    "offers, or choose other availability zones",
                )
            )
        elif missing:
            problems.append(
                CheckResult(
                    check=Check.OFFERING,
                    subject=subject,
                    status=Status.WARN,
                    message=f"model '{model.name}' cannot be placed in {', '.join(missing)}: no instance "
                    "type of the pool that fits it is offered there; its nodes run in the other AZs",
                    fix="choose availability zones that offer the pool's instance types, or add "
                    "instance types offered there",
                )
            )
    unoffered = [t for t in pool.instance_types if not offered.get(t, set()) & set(zones)]
    if unoffered:
        problems.append(
            CheckResult(
                check=Check.OFFERING,
                subject=subject,
                status=Status.WARN,
                message=f"{', '.join(unoffered)} offered in none of {', '.join(zones)}; the pool "
                "launches its other instance types",
                fix=f"remove {', '.join(unoffered)} from node_pools '{pool.name}'.instance_types",
            )
        )
    if problems:
        return problems
    usable = sorted({t for t in candidates if offered.get(t, set()) & set(zones)})
    return [
        CheckResult(
            check=Check.OFFERING,
            subject=subject,
            status=Status.PASS,
            message=f"every model fits an instance type offered in each AZ ({', '.join(zones)})"
            if models
            else f"{len(usable)} instance type(s) of the pool offered in the tier's AZs",
        )
    ]
