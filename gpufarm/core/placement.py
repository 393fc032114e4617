"""Where a model's pods land: the node groups and pools its placement names."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
