"""Reading an estimate's lines in the cost tests."""

from __future__ import annotations

from gpufarm.estimate import CostEstimate, CostLine


def line(estimate: CostEstimate, item: str) -> CostLine:
    """The one line whose item starts with `item`."""
    found = [x for x in estimate.lines if x.item.startswith(item)]
    assert len(found) == 1, [x.item for x in estimate.lines]
    return found[0]


def items(estimate: CostEstimate) -> list[str]:
    return [x.item for x in estimate.lines]
