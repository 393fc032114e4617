"""A model's expected time to ready, term by term, from the dated table `gpufarm/data/cold_start.yaml`.

    time to ready = node launch + image pull + weight load + engine warm-up

- **node launch**: the table's seconds for how the model's first placement gets a node
  (`auto-mode`, `karpenter`; `node-group`, the reserved base whose nodes always run, is 0);
- **image pull**: the engine's image size over the pull path's throughput (`upstream-nat`, or
  `ecr-pull-through-cache` when `images.pull_through_cache` is on), times the share of the image
  fetched before the container starts (`fetched_share`: 1 for a full pull; lazy loading or a
  pre-pulled snapshot fetch less), less the published saving of the pull mode of the Karpenter
  pool the model first lands on (`pull_mode_saving[image_pull]`: SOCI parallel pull);
- **weight load**: `weights_gib` over the store's throughput: the table's per-instance figure
  for `runai-streamer` and `s3-mountpoint` (`hugging-face` for weights from the Hub), and for
  `fsx-lustre` the file system's own, `throughput_per_tib` x its capacity;
- **engine warm-up**: the table's seconds for the model's engine.

Every figure carries its source; those no source showed are the table's `estimates`, and a term
built on one says so. Pure Python: nothing here calls AWS or imports the CDK.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from gpufarm.config.model import ModelConfig, TierConfig

MB = 1_000_000
MIB = 1024**2
GIB = 1024**3
TIB_GIB = 1024
"""GiB in a TiB: FSx states capacity in GiB and throughput per TiB."""


class PullPath(StrEnum):
    """Where a node pulls the engine's image from."""

    UPSTREAM_NAT = "upstream-nat"
    ECR_PULL_THROUGH_CACHE = "ecr-pull-through-cache"


class ColdStartTableError(ValueError):
    """The cold-start table cannot be read or lacks a figure a tier needs."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(min_length=1, description="Where the figures come from.")
    as_of: dt.date = Field(description="Date the figures were read.")
    estimates: dict[str, str] = Field({}, description="Figures no source showed, with the reason.")


class NodeLaunch(_Section):
    """Seconds until a new GPU node is Ready, by how it is provisioned."""

    seconds: dict[str, float] = Field(description="By `auto-mode`, `karpenter`, `node-group`.")


class ImagePull(_Section):
    """Engine image sizes and pull rates."""

    image_gib: dict[str, float] = Field(description="Compressed image size by engine, GiB.")
    throughput_mib_s: dict[str, float] = Field(description="Pull rate by pull path, MiB/s.")
    pull_mode_saving: dict[str, float] = Field(
        description="Share of the pull time a pool's `image_pull` mode saves (0 for `default`)."
    )


class WeightLoad(_Section):
    """Per-instance read rates of the stores whose rate is not the tier's own setting."""

    throughput_gib_s: dict[str, float] = Field(description="By store kind (and `hugging-face`), GiB/s.")


class WarmUp(_Section):
    """Seconds from weights in GPU memory to the first healthy answer, by engine."""

    seconds: dict[str, float] = Field(description="By engine.")


class ColdStartTable(BaseModel):
    """The whole table: one section per term."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    as_of: dt.date
    node_launch: NodeLaunch
    image_pull: ImagePull
    weight_load: WeightLoad
    warm_up: WarmUp

    def estimated(self, section: str, key: str) -> str | None:
        """The reason `section.key` is an estimate, or None when a source shows it."""
        part: _Section = getattr(self, section)
        return part.estimates.get(key)

    def estimates(self) -> dict[str, str]:
        """Every estimate as `section.key` -> reason."""
        out: dict[str, str] = {}
        for name in ("node_launch", "image_pull", "weight_load", "warm_up"):
            part: _Section = getattr(self, name)
            out.update({f"{name}.{k}": v for k, v in part.estimates.items()})
        return out


DEFAULT_TABLE = "cold_start.yaml"


@cache
def _packaged() -> ColdStartTable:
    text = resources.files("gpufarm.data").joinpath(DEFAULT_TABLE).read_text(encoding="utf-8")
    return _parse(text, DEFAULT_TABLE)


def _parse(text: str, where: str) -> ColdStartTable:
    try:
        return ColdStartTable.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:
        raise ColdStartTableError(f"{where}: not a cold-start table: {exc}") from None


def load_cold_start_table(path: Path | None = None) -> ColdStartTable:
    """The packaged table (`gpufarm/data/cold_start.yaml`), or the one at `path`."""
    if path is None:
        return _packaged()
    return _parse(path.read_text(encoding="utf-8"), str(path))


@dataclass(frozen=True)
class Term:
    """One term of a time to ready: seconds (None when a figure is missing), formula, estimated or not."""

    name: str
    seconds: float | None
    formula: str
    estimated: bool

    @property
    def known(self) -> bool:
        """True when the term has a value."""
        return self.seconds is not None


@dataclass(frozen=True)
class TimeToReady:
    """A model's expected time from nothing running to its first ready replica."""

    model: str
    node_launch: Term
    image_pull: Term
    weight_load: Term
    warm_up: Term

    @property
    def terms(self) -> tuple[Term, Term, Term, Term]:
        """The four terms in the order they happen."""
        return (self.node_launch, self.image_pull, self.weight_load, self.warm_up)

    @property
    def seconds(self) -> float | None:
        """The sum of the terms; None when one is unknown."""
        values = [t.seconds for t in self.terms]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)

    @property
    def startup_seconds(self) -> float | None:
        """What the startup probe waits through: weight load and warm-up (the pull precedes the container)."""
        load, warm = self.weight_load.seconds, self.warm_up.seconds
        return None if load is None or warm is None else load + warm

    @property
    def estimated(self) -> bool:
        """True when any term rests on an estimate."""
        return any(t.estimated for t in self.terms)

    def to_json(self) -> dict[str, object]:
        """The time to ready as a JSON-ready mapping (seconds rounded to whole seconds)."""
        return {
            "model": self.model,
            "seconds": _round(self.seconds),
            "estimated": self.estimated,
            "terms": {
                t.name: {"seconds": _round(t.seconds), "formula": t.formula, "estimated": t.estimated}
                for t in self.terms
            },
        }


def _round(value: float | None) -> int | None:
    return None if value is None else math.ceil(value)


def pull_path(tier: TierConfig) -> PullPath:
    """The path images take to the nodes: the regional ECR pull-through cache when it is on (and
    not in its rules-only first deploy, where the pods still pull from upstream)."""
    cached = tier.images.pull_through_cache and not tier.images.cache_rules_only
    return PullPath.ECR_PULL_THROUGH_CACHE if cached else PullPath.UPSTREAM_NAT


def _figure(table: ColdStartTable, section: str, values: dict[str, float], key: str) -> float:
    if key not in values:
        raise ColdStartTableError(f"the cold-start table has no {section} figure for {key!r}")
    return values[key]


def node_launch(tier: TierConfig, model: ModelConfig, table: ColdStartTable) -> Term:
    """Seconds until a node for the model is Ready: 0 on a reserved node group, else a new node's launch."""
    from gpufarm.config.model import NodeGroupConfig
    from gpufarm.core.placement import placement_of

    targets = placement_of(tier, model)
    if targets and isinstance(targets[0], NodeGroupConfig):
        key = "node-group"
    else:
        key = tier.cluster.provisioning.value
    seconds = _figure(table, "node_launch", table.node_launch.seconds, key)
    return Term("node launch", seconds, f"{key}", table.estimated("node_launch", key) is not None)


def image_pull(
    tier: TierConfig, model: ModelConfig, table: ColdStartTable, *, fetched_share: float = 1.0
) -> Term:
    """Seconds to pull the engine's image: size x `fetched_share` / the pull path's rate.

    `fetched_share` is the part of the image a node fetches before the container starts: 1 for a
    full pull (default); a lazily loaded image fetches part of it first, a pre-pulled one none.
    """
    if not 0 <= fetched_share <= 1:
        raise ValueError(f"'fetched_share' must be between 0 and 1, got {fetched_share}")
    engine = model.engine.value
    path = pull_path(tier).value
    mode = pull_mode(tier, model)
    gib = _figure(table, "image_pull", table.image_pull.image_gib, engine)
    rate = _figure(table, "image_pull", table.image_pull.throughput_mib_s, path)
    saving = _figure(table, "image_pull", table.image_pull.pull_mode_saving, mode)
    seconds = gib * fetched_share * GIB / MIB / rate * (1 - saving)
    share = "" if fetched_share == 1 else f" x {fetched_share:g} fetched"
    faster = "" if saving == 0 else f" x {1 - saving:g} {mode}"
    formula = f"{gib:g} GiB {engine} image{share} / {rate:g} MiB/s ({path}){faster}"
    estimated = any(table.estimated("image_pull", k) is not None for k in (engine, path, mode))
    return Term("image pull", seconds, formula, estimated)


def pull_mode(tier: TierConfig, model: ModelConfig) -> str:
    """The `image_pull` of the Karpenter pool the model's first placement is on (`default`
    elsewhere: node groups and Auto Mode pull with containerd's own pull)."""
    from gpufarm.config.model import ImagePull, NodePoolConfig, Provisioning
    from gpufarm.core.placement import placement_of

    targets = placement_of(tier, model)
    if (
        targets
        and isinstance(targets[0], NodePoolConfig)
        and tier.cluster.provisioning is Provisioning.KARPENTER
    ):
        return targets[0].image_pull.value
    return ImagePull.DEFAULT.value


def store_throughput_gib_s(
    tier: TierConfig, model: ModelConfig, table: ColdStartTable
) -> tuple[float, str, bool]:
    """(GiB/s, what it is, estimated) of where the model's weights are read from."""
    from gpufarm.config.fsx_capacity import fsx_storage_capacity_gib
    from gpufarm.config.model import ModelStoreKind

    store = tier.model_store
    if not model.is_s3:
        key = "hugging-face"
    elif store.kind is ModelStoreKind.FSX_LUSTRE:
        capacity = fsx_storage_capacity_gib(tier)
        per_tib = store.fsx.throughput_per_tib
        rate = per_tib * MB * (capacity / TIB_GIB) / GIB
        return rate, f"FSx {per_tib} MB/s/TiB x {capacity} GiB", False
    else:
        key = store.kind.value
    rate = _figure(table, "weight_load", table.weight_load.throughput_gib_s, key)
    return rate, f"{rate:g} GiB/s ({key})", table.estimated("weight_load", key) is not None


def weight_load(tier: TierConfig, model: ModelConfig, table: ColdStartTable) -> Term:
    """Seconds to read the weights: `weights_gib` / the store's throughput (unknown without `weights_gib`)."""
    rate, what, estimated = store_throughput_gib_s(tier, model, table)
    if model.weights_gib is None:
        return Term("weight load", None, f"weights_gib not set / {what}", estimated)
    return Term("weight load", model.weights_gib / rate, f"{model.weights_gib:.4g} GiB / {what}", estimated)


def warm_up(model: ModelConfig, table: ColdStartTable) -> Term:
    """The engine's seconds from weights loaded to its first healthy answer."""
    engine = model.engine.value
    seconds = _figure(table, "warm_up", table.warm_up.seconds, engine)
    return Term("engine warm-up", seconds, engine, table.estimated("warm_up", engine) is not None)


def time_to_ready(
    tier: TierConfig,
    model: ModelConfig,
    table: ColdStartTable | None = None,
    *,
    fetched_share: float = 1.0,
) -> TimeToReady:
    """The model's expected time to ready in `tier` (default table: the packaged one).

    `fetched_share` scales the image pull (:func:`image_pull`). Raises
    :class:`ColdStartTableError` when the table lacks a figure the model needs.
    """
    table = table or load_cold_start_table()
    if _from_warm_pool(tier, model):
        # The warm pool's stopped instances already hold the image on their volume.
        fetched_share = 0.0
    return TimeToReady(
        model=model.name,
        node_launch=node_launch(tier, model, table),
        image_pull=image_pull(tier, model, table, fetched_share=fetched_share),
        weight_load=weight_load(tier, model, table),
        warm_up=warm_up(model, table),
    )


def _from_warm_pool(tier: TierConfig, model: ModelConfig) -> bool:
    """Whether the model's next instance comes from an ec2 group's warm pool (never with spot)."""
    from gpufarm.config.model import Provisioning
    from gpufarm.core.fleets import fleets

    if tier.cluster.provisioning is not Provisioning.EC2 or not tier.ec2.warm_pool.enabled:
        return False
    return any(f.model.name == model.name and not f.spot for f in fleets(tier))


def tier_times_to_ready(
    tier: TierConfig, table: ColdStartTable | None = None, *, fetched_share: float = 1.0
) -> list[TimeToReady]:
    """Every model's time to ready, in config order (`fetched_share`: see :func:`image_pull`)."""
    table = table or load_cold_start_table()
    return [time_to_ready(tier, m, table, fetched_share=fetched_share) for m in tier.models]


def wake_gap_seconds(tier: TierConfig, model: ModelConfig, ready: TimeToReady) -> float | None:
    """How long a parked model's first caller waits for it (docs/decisions/0049-wake-scale-from-zero.md).

    The request reaches Prometheus at the next scrape, KEDA at its next poll, then the model
    takes its time to ready: `scrape_interval_seconds + polling_interval_seconds + time to ready`
    at most. None when the time to ready is unknown or the model never parks.
    """
    from gpufarm.core.demand import scales_to_zero

    if not scales_to_zero(model) or ready.seconds is None:
        return None
    assert model.autoscaling is not None
    signal = (
        tier.observability.prometheus.scrape_interval_seconds + model.autoscaling.polling_interval_seconds
    )
    return signal + ready.seconds


def cold_start_warnings(tier: TierConfig, table: ColdStartTable | None = None) -> list[str]:
    """What the time to ready says about the tier's settings, one line each (empty: nothing to say).

    - a parked model whose `autoscaling.cooldown_seconds` is shorter than its time to ready: each
      wake then costs more GPU time (the node bills while it launches, pulls and loads) than the
      idle time parking saved; with the gap between requests unknown, waiting as long as one wake
      costs is the choice that never pays more than twice the best one (the ski-rental rule,
      docs/decisions/0063-weights-at-wire-speed-and-cold-start.md);
    - a model whose `startup_timeout_seconds` is shorter than its weight load and warm-up: the
      startup probe (:func:`gpufarm.core.gpu_health.startup_failure_threshold`) would restart
      the engine before it first serves, again and again.

    Warnings, not refusals: the terms rest partly on estimates.
    """
    table = table or load_cold_start_table()
    out: list[str] = []
    for i, model in enumerate(tier.models):
        ready = time_to_ready(tier, model, table)
        total, startup = ready.seconds, ready.startup_seconds
        scaling = model.autoscaling
        parks = scaling is not None and scaling.min_replicas == 0
        if parks and scaling is not None and total is not None and scaling.cooldown_seconds < total:
            out.append(
                f"models[{i}].autoscaling.cooldown_seconds: {scaling.cooldown_seconds} s is shorter "
                f"than {model.name!r}'s expected time to ready ({math.ceil(total)} s), so each wake "
                "costs more GPU time than parking saved; raise it to at least that unless the "
                "model idles far longer between uses"
            )
        if startup is not None and model.startup_timeout_seconds < startup:
            out.append(
                f"models[{i}].startup_timeout_seconds: {model.startup_timeout_seconds} s is shorter than "
                f"{model.name!r}'s expected weight load and warm-up ({math.ceil(startup)} s), so the "
                "startup probe restarts the engine before it serves; raise it above that"
            )
    return out
