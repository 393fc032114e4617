"""Where a model's pods land: the node groups and pools its placement names, the node labels that
select them, and the EFA devices its pods take there."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufarm.core.efa import node_group_efa_devices
from gpufarm.core.hybrid import runs_on_prem
from gpufarm.core.instances import gpus_in
from gpufarm.core.labels import CAPACITY_CLASS_LABEL, NODEPOOL_LABEL, POOL_LABEL, nodepool_name

if TYPE_CHECKING:
    # Annotations only: gpufarm.config.validate imports this module, and importing the config
    # model at run time would start gpufarm.config (and so the validator) before it is defined.
    from gpufarm.config.model import ModelConfig, NodeGroupConfig, NodePoolConfig, TierConfig


def placement_of(cfg: TierConfig, model: ModelConfig) -> list[NodePoolConfig | NodeGroupConfig]:
    """The node groups and pools a model's pods may land on (empty when it names none that exist).

    A model with shares lands on those of every share (each once, in the order of the shares).
    """
    if model.shares:
        seen: dict[str, NodePoolConfig | NodeGroupConfig] = {}
        for _, part in model.parts():
            for target in placement_of(cfg, part):
                seen.setdefault(target.name, target)
        return list(seen.values())
    if model.capacity_class is not None:
        return cfg.capacity_classes().get(model.capacity_class, [])
    wanted = model.node_pool or cfg.node_pools[0].name
    targets: list[NodePoolConfig | NodeGroupConfig] = [*cfg.node_groups, *cfg.node_pools]
    return [t for t in targets if t.name == wanted]


def efa_node_groups(cfg: TierConfig, model: ModelConfig) -> list[NodeGroupConfig]:
    """The node groups with EFA among where a model's pods may land (Karpenter pools never count:
    the validator keeps EFA traffic to node groups)."""
    # At call time, not import time: see the TYPE_CHECKING note above.
    from gpufarm.config.model import NodeGroupConfig

    return [t for t in placement_of(cfg, model) if isinstance(t, NodeGroupConfig) and t.efa]


def prefill_decode_efa_devices(cfg: TierConfig, model: ModelConfig) -> tuple[int, int]:
    """EFA interfaces a prefill/decode model's (decode, prefill) pods request; (0, 0) over TCP.

    A pod gets the node's interfaces in proportion to its GPUs (a p5.48xlarge has 32 for 8 GPUs:
    a 4-GPU pod takes 16), at least one. The validator has checked that every node the model may
    land on is an EFA node group; where several may, the fewest interfaces and GPUs count.
    """
    from gpufarm.config.model import KvTransport

    pd = model.prefill_decode
    if pd is None or pd.kv_transport is not KvTransport.EFA:
        return 0, 0
    groups = efa_node_groups(cfg, model)
    if not groups:
        return 0, 0
    interfaces = min(node_group_efa_devices(g.instance_type) for g in groups)
    node_gpus = min(gpus_in(g.instance_type) or 1 for g in groups)

    def share(gpus: int) -> int:
        return max(1, interfaces * gpus // node_gpus)

    return share(model.gpus), share(pd.prefill_gpus_for(model.gpus))


def node_selector(cfg: TierConfig, model: ModelConfig) -> dict[str, str] | None:
    """Where a model's (or share's) pods run: its capacity class, its node group, else its pool's
    NodePool. None for a single-node model on a pool: the Deployment selects its pool's NodePool
    itself (`gpufarm.k8s.serving`)."""
    if runs_on_prem(cfg, model):
        return None  # node affinity instead: gpufarm.core.hybrid.node_affinity
    if model.capacity_class is not None:
        return {CAPACITY_CLASS_LABEL: model.capacity_class}
    if model.node_pool in {g.name for g in cfg.node_groups}:
        return {POOL_LABEL: model.node_pool}
    if model.pipeline_parallel > 1:
        return {NODEPOOL_LABEL: nodepool_name(model.node_pool or cfg.node_pools[0].name)}
    return None


def node_selectors(cfg: TierConfig) -> dict[str, dict[str, str]]:
    """The node selector of every model that has one, keyed by model, or `<model>/<share>` for
    each share of a model split into shares."""
    return {
        model.name if share is None else f"{model.name}/{share}": selector
        for model in cfg.models
        for share, part in model.parts()
        if (selector := node_selector(cfg, part)) is not None
    }
