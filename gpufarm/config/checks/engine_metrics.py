"""Checks that each model's engine exports the Prometheus series its configured features read.

KEDA's triggers read the engine's own series (:mod:`gpufarm.core.engine_metrics`): a queue target
needs a waiting-requests gauge, a KV-cache target a KV-cache-usage gauge, and scaling to zero (or
the Target Optimizer's cap) the running and waiting gauges of the in-flight trigger. An engine
without one is refused here, naming the model, the engine, the setting and the missing series.
Alerts and dashboards are not refused: a rule or panel whose series an engine lacks is left out
for that engine (docs/decisions/0061-metrics-for-every-engine.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import ModelAutoscalingConfig, TierConfig
from gpufarm.core.engine_metrics import ROLE_TEXT, engine_metrics, missing_for_scaling


def _engine_metrics(cfg: TierConfig) -> Iterator[ConfigIssue]:
    capped = cfg.ingress.target_optimizer.enabled
    for i, model in enumerate(cfg.models):
        sections: list[tuple[str, ModelAutoscalingConfig, bool]] = []
        if model.autoscaling is not None:
            sections.append((f"models[{i}].autoscaling", model.autoscaling, capped))
        pd = model.prefill_decode
        if pd is not None and pd.prefill_autoscaling is not None:
            sections.append(
                (f"models[{i}].prefill_decode.prefill_autoscaling", pd.prefill_autoscaling, False)
            )
        metrics = engine_metrics(model.engine)
        for path, scaling, capped_here in sections:
            missing = missing_for_scaling(
                model.engine,
                queue_target=scaling.queue_target is not None,
                kv_cache_target=scaling.kv_cache_target is not None,
                to_zero=scaling.min_replicas == 0,
                capped=capped_here,
            )
            settings = dict.fromkeys(setting for setting, _ in missing)
            for setting in settings:
                roles = " or ".join(ROLE_TEXT[role] for name, role in missing if name == setting)
                if setting == "max_concurrency":
                    where = path
                    given = "autoscaling with ingress.target_optimizer.enabled true"
                else:
                    where = f"{path}.{setting}"
                    given = f"{setting} {getattr(scaling, setting)!r}"
                feature, remedy = _FEATURES[setting]
                yield ConfigIssue(
                    path=where,
                    message=f"{given} needs {feature}, but model {model.name!r} runs engine "
                    f"{metrics.label}, which exports no {roles} metric ({remedy}, or choose another "
                    "engine)",
                )


_FEATURES = {
    "queue_target": ("a queue-depth KEDA trigger", "remove queue_target"),
    "kv_cache_target": ("a KV-cache KEDA trigger", "remove kv_cache_target"),
    "min_replicas": (
        "the in-flight KEDA trigger (it keeps a replica while one serves)",
        "set min_replicas to 1",
    ),
    "max_concurrency": ("the Target Optimizer's in-flight KEDA trigger", "turn ingress.target_optimizer off"),
}
"""Per scaling setting: the KEDA trigger that reads the missing series, and the way out."""
