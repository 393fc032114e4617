"""The Prometheus series of each serving engine, as gpufarm queries them (pure Python).

One answer to "which metric tells this engine's queue depth" (or KV-cache use, time to first
token, errors ...): :func:`engine_metrics` gives an :class:`EngineMetrics` per
:class:`~gpufarm.config.model.Engine`, loaded from `gpufarm/data/engine_metrics.yaml`, where each
name is cited from the engine's pinned release. KEDA triggers, alert rules, dashboards and the
managed scraper's jobs take their names from here for the model's engine; where an engine has no
series for a role (`None`), the feature that needs it is refused at config time
(:func:`missing_for_scaling`) or left out for that engine with a note (alerts, panels).

Every series is labelled by the managed scraper with `namespace`, `pod` and `model` (the pod's
`gpufarm.io/model` label), whatever the engine labels itself: vLLM and SGLang add `model_name`
(the served name), TensorRT-LLM 1.2.1 sets it to "undefined" (vllm-project/aibrix issue 2008),
so queries that span engines group by `model`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from gpufarm.config.model import Engine, TierConfig

DATA_FILE = "engine_metrics.yaml"


class Role(StrEnum):
    """What a series tells; each engine names its own series for it (or none)."""

    WAITING = "waiting"
    RUNNING = "running"
    KV_CACHE_USAGE = "kv_cache_usage"
    TTFT = "ttft"
    TPOT = "tpot"
    PROMPT_TOKENS = "prompt_tokens"
    GENERATION_TOKENS = "generation_tokens"
    PREFIX_CACHE_HITS = "prefix_cache_hits"
    PREFIX_CACHE_QUERIES = "prefix_cache_queries"
    PREFIX_CACHE_HIT_RATE = "prefix_cache_hit_rate"


ROLE_TEXT: dict[Role, str] = {
    Role.WAITING: "waiting-requests (queue depth)",
    Role.RUNNING: "running-requests",
    Role.KV_CACHE_USAGE: "KV-cache usage",
    Role.TTFT: "time-to-first-token histogram",
    Role.TPOT: "time-per-output-token histogram",
    Role.PROMPT_TOKENS: "prompt-token counter",
    Role.GENERATION_TOKENS: "generation-token counter",
    Role.PREFIX_CACHE_HITS: "prefix-cache hit counter",
    Role.PREFIX_CACHE_QUERIES: "prefix-cache query counter",
    Role.PREFIX_CACHE_HIT_RATE: "prefix-cache hit rate",
}
"""How a refusal names a missing series."""


@dataclass(frozen=True, kw_only=True)
class EngineMetrics:
    """One engine's series: scrape path and port, names by role, the error ratio's two selectors.

    `finished` selects the finished requests (the fallback rate's denominator); `failed` over
    `error_requests` is the error ratio (None: the engine labels no errors). `requires_flags` are
    the server flags without which the engine exposes nothing. `name_pattern` is the regex of the
    series the scraper keeps. `unconfirmed` says why the names were not read from the release.
    """

    engine: str
    version: str
    source: str
    path: str
    default_port: int
    health_path: str
    requires_flags: tuple[str, ...]
    name_pattern: str
    roles: dict[Role, str | None]
    finished: str
    failed: str | None
    error_requests: str | None
    metrics: frozenset[str]
    unconfirmed: str | None = None

    def name(self, role: Role) -> str | None:
        """The engine's series for `role`, or None when the release exposes none."""
        return self.roles[role]

    def has(self, role: Role) -> bool:
        """Whether the engine exposes a series for `role`."""
        return self.roles[role] is not None

    @property
    def has_error_ratio(self) -> bool:
        """Whether the engine's series tell failed requests from the others."""
        return self.failed is not None and self.error_requests is not None

    @property
    def has_prefix_cache(self) -> bool:
        """Whether a prefix-cache hit rate can be computed (counters, or the engine's own gauge)."""
        counters = self.has(Role.PREFIX_CACHE_HITS) and self.has(Role.PREFIX_CACHE_QUERIES)
        return counters or self.has(Role.PREFIX_CACHE_HIT_RATE)

    @property
    def label(self) -> str:
        """The engine and its pinned release, as messages name it: 'sglang 0.5.23'."""
        return f"{self.engine} {self.version}"


@functools.cache
def _load() -> dict[str, EngineMetrics]:
    # Imported here: the config's validator imports this module (a cycle at import time).
    from gpufarm.config.model import Engine

    text = resources.files("gpufarm.data").joinpath(DATA_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = yaml.safe_load(text)
    table = {}
    for engine in Engine:
        entry = data[engine.value]
        table[engine.value] = EngineMetrics(
            engine=engine.value,
            version=str(entry["version"]),
            source=" ".join(str(entry["source"]).split()),
            path=str(entry["path"]),
            default_port=int(entry["default_port"]),
            health_path=str(entry["health_path"]),
            requires_flags=tuple(entry["requires_flags"]),
            name_pattern=str(entry["name_pattern"]),
            roles={role: entry["roles"][role.value] for role in Role},
            finished=str(entry["finished"]),
            failed=entry["failed"],
            error_requests=entry["error_requests"],
            metrics=frozenset(entry["metrics"]),
            unconfirmed=" ".join(str(entry["unconfirmed"]).split()) if entry.get("unconfirmed") else None,
        )
    return table


def engine_metrics(engine: Engine | str) -> EngineMetrics:
    """The series of `engine` (an :class:`Engine` or its value)."""
    table = _load()
    if str(engine) not in table:
        raise ValueError(f"'engine' must be one of {', '.join(table)}, got {engine!r}")
    return table[str(engine)]


def all_engine_metrics() -> list[EngineMetrics]:
    """Every engine's series, in :class:`Engine` order."""
    return list(_load().values())


def metric_name(engine: Engine | str, role: Role) -> str:
    """The engine's series for `role`; ValueError naming the engine and role when it has none."""
    metrics = engine_metrics(engine)
    name = metrics.name(role)
    if name is None:
        raise ValueError(f"{metrics.label} exports no {ROLE_TEXT[role]} metric")
    return name


SCALING_NEEDS: dict[str, tuple[Role, ...]] = {
    "queue_target": (Role.WAITING,),
    "kv_cache_target": (Role.KV_CACHE_USAGE,),
    "min_replicas": (Role.RUNNING, Role.WAITING),
}
"""Autoscaling settings and the series their KEDA triggers read. `min_replicas` 0 adds the
in-flight trigger (running plus waiting requests) that keeps a replica up while it serves."""


def missing_for_scaling(
    engine: Engine | str, *, queue_target: bool, kv_cache_target: bool, to_zero: bool, capped: bool
) -> list[tuple[str, Role]]:
    """(setting, role) for each configured scaling feature whose series the engine lacks.

    `capped` (the ALB Target Optimizer caps the model) also needs the in-flight trigger; its
    setting is reported as `min_replicas` only when scaling to zero asks for it first.
    """
    metrics = engine_metrics(engine)
    wanted: list[tuple[str, Role]] = []
    if queue_target:
        wanted.append(("queue_target", Role.WAITING))
    if kv_cache_target:
        wanted.append(("kv_cache_target", Role.KV_CACHE_USAGE))
    if to_zero or capped:
        setting = "min_replicas" if to_zero else "max_concurrency"
        wanted += [(setting, Role.RUNNING), (setting, Role.WAITING)]
    return [(setting, role) for setting, role in wanted if not metrics.has(role)]


def models_by_engine(tier: TierConfig) -> dict[Engine, list[str]]:
    """The names of the tier's models by engine, each list in config order (engines without a
    model are left out)."""
    table: dict[Engine, list[str]] = {}
    for model in tier.models:
        table.setdefault(model.engine, []).append(model.name)
    return table
