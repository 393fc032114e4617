"""The time-to-ready table `gpufarm plan` and `gpufarm cost` print, and its JSON."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gpufarm.cli._output import bad_input, errors, table
from gpufarm.config import ModelConfig, TierConfig, load_preset
from gpufarm.config.model import Engine
from gpufarm.core.cold_start import (
    ColdStartTableError,
    TimeToReady,
    cold_start_warnings,
    load_cold_start_table,
    tier_times_to_ready,
    time_to_ready,
    wake_gap_seconds,
)

GIB = 2**30
NOTE = (
    "~ rests on an estimate (gpufarm/data/cold_start.yaml says why). A parked model's first "
    "caller waits the wake gap: the scrape and KEDA poll that see the request, then the time to "
    "ready. Formula and data: docs/cli.md, Time to ready."
)


def _seconds(value: float | None) -> str:
    return "n/a" if value is None else f"{math.ceil(value):,}"


def print_times(title: str, tier: TierConfig, times: Sequence[TimeToReady]) -> None:
    """One row per term of each model, its formula, then its total (and wake gap when it parks)."""
    rows: list[tuple[str, str, str, str]] = []
    models = {m.name: m for m in tier.models}
    for ready in times:
        for i, term in enumerate(ready.terms):
            mark = "~" if term.estimated else ""
            rows.append(
                (ready.model if i == 0 else "", term.name, mark + _seconds(term.seconds), term.formula)
            )
        rows.append(("", "time to ready", _seconds(ready.seconds), "sum of the four"))
        model = models.get(ready.model)
        gap = wake_gap_seconds(tier, model, ready) if model is not None else None
        if gap is not None:
            rows.append(("", "wake gap", _seconds(gap), "scrape + KEDA poll + time to ready"))
    table(title, ("Model", "Term", "Seconds", "From"), rows, caption=NOTE)


def tier_times(stack: str, tier: TierConfig) -> list[TimeToReady]:
    """Each model's time to ready; exit 2 naming the stack when the table lacks a figure."""
    try:
        return tier_times_to_ready(tier)
    except ColdStartTableError as exc:
        bad_input(f"{stack}: {exc}")


def warn(tier: TierConfig) -> list[str]:
    """Print the time-to-ready warnings of a tier to standard error, and return them."""
    found = cold_start_warnings(tier)
    for line in found:
        errors.print(f"warning: {line}", markup=False)
    return found


def planned_time_to_ready(
    *,
    preset: str,
    name: str,
    weights: str | None,
    gpus: int,
    weights_bytes: float,
    written: TierConfig | None,
    engine: Engine = Engine.VLLM,
) -> tuple[TierConfig, TimeToReady]:
    """The planned model's time to ready: in the written tier file, else on the chosen preset.

    Without `--write`, the model joins the preset's first pool, reading its weights from
    `weights` (a Hugging Face id downloads from the Hub) or, when none is given, from the
    preset's model store. `weights_bytes`, the plan's weight memory, sizes the load wherever the
    tier does not give `weights_gib`. `engine` (default vLLM) is the planned one (`plan --engine`).
    """
    if written is not None:
        model = next(m for m in written.models if m.name == name)
        if model.weights_gib is None:  # the file leaves it to the Hub; the plan knows the size
            model = model.model_copy(update={"weights_gib": weights_bytes / GIB})
        return written, time_to_ready(written, model, load_cold_start_table())
    tier = load_preset(preset)
    source = weights or "s3://planned-model/weights/"
    model = ModelConfig(
        name=name,
        weights=source,
        gpus=gpus,
        weights_gib=weights_bytes / GIB,
        node_pool=tier.node_pools[0].name,
        engine=engine,
    )
    try:
        return tier, time_to_ready(tier, model, load_cold_start_table())
    except ColdStartTableError as exc:
        bad_input(str(exc))


def times_json(tier: TierConfig, times: Sequence[TimeToReady]) -> list[dict[str, Any]]:
    """The `time_to_ready` entries of `--json`: each model's terms, total and wake gap."""
    models = {m.name: m for m in tier.models}
    out = []
    for ready in times:
        model = models.get(ready.model)
        gap = wake_gap_seconds(tier, model, ready) if model is not None else None
        out.append({**ready.to_json(), "wake_gap_seconds": None if gap is None else math.ceil(gap)})
    return out
