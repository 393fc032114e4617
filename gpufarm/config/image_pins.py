"""Which table images a tier runs, and which of them it runs without a digest.

The image table (`gpufarm/data/images.yaml`, :mod:`gpufarm.images`) holds no digest for an image
whose digest no public record confirmed. A tier that runs such an image must supply the digest
(`images.digests.<name>`); the Target Optimizer agent, published only as `:latest`, must be
mirrored and pinned (`ingress.target_optimizer.agent_image`). :func:`unpinned_images` lists what
a tier still lacks; :mod:`gpufarm.config.placeholders` reports each entry as it reports a
documentation value: `gpufarm synth` and `cdk synth` warn, `gpufarm preflight` fails a row,
and the template refuses to deploy.

A chart's values pin the image of the chart release the table names; a tier that asks for
another chart version is refused (:func:`chart_version_issues`), so a chart and the image digest
it runs move together.

Which images a tier runs follows the stack (:mod:`gpufarm.stacks.tier`): the AWS Load Balancer
Controller, Karpenter and the NVIDIA device plugin outside EKS Auto Mode, the EFA device plugin
when a node group sets `efa`, the LWS controller when a model spans nodes, KEDA when Prometheus
is on and a model autoscales, the DCGM exporter when Prometheus and the exporter are on. A test
checks this against the images in every synthesized tier.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpufarm import images as image_table
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import Engine, Provisioning, TierConfig

CHART_VERSION_FIELDS: dict[str, str] = {
    "karpenter-controller": "karpenter.chart_version",
    "nvidia-device-plugin": "karpenter.nvidia_device_plugin_chart_version",
    "keda-operator": "autoscaling.keda_chart_version",
    "dcgm-exporter": "observability.prometheus.dcgm_exporter_chart_version",
}
"""Table image -> the tier field that sets the version of the chart that runs it."""

AGENT_PATH = "ingress.target_optimizer.agent_image"


@dataclass(frozen=True, kw_only=True)
class UnpinnedImage:
    """An image a tier runs without a digest: the field that supplies it, the image, and why."""

    path: str
    value: str
    why: str


def _autoscaled(cfg: TierConfig) -> bool:
    return any(
        m.autoscaling is not None
        or (m.prefill_decode is not None and m.prefill_decode.prefill_autoscaling is not None)
        for m in cfg.models
    )


def used_images(cfg: TierConfig) -> list[str]:
    """The table images (by name) that the tier's charts run, in table order."""
    # Karpenter's standard compute runs these charts; Auto Mode has them built in, and ec2
    # provisioning runs no cluster at all.
    standard = cfg.cluster.provisioning is Provisioning.KARPENTER
    prometheus = cfg.observability.prometheus
    keda = prometheus.enabled and _autoscaled(cfg)
    uses = {
        "karpenter-controller": standard,
        "nvidia-device-plugin": standard,
        "aws-load-balancer-controller": standard,
        "efa-device-plugin": any(g.efa for g in cfg.node_groups),
        "lws-controller": any(m.pipeline_parallel > 1 for m in cfg.models),
        "keda-operator": keda,
        "keda-metrics-apiserver": keda,
        "keda-admission-webhooks": keda,
        "dcgm-exporter": prometheus.enabled and prometheus.dcgm_exporter,
    }
    return [name for name in image_table.table() if uses.get(name, False)]


def unpinned_images(cfg: TierConfig) -> list[UnpinnedImage]:
    """Every image the tier runs with no digest from the table or the tier file; empty when none."""
    found = []
    optimizer = cfg.ingress.target_optimizer
    if optimizer.runs_unpinned_agent:
        found.append(
            UnpinnedImage(
                path=AGENT_PATH,
                value=optimizer.agent_image,
                why="AWS publishes the target control agent only as ':latest'; mirror it into "
                "your ECR and set its digest",
            )
        )
    engines = {m.engine for m in cfg.models}
    for engine, field in ((Engine.SGLANG, "sglang_image"), (Engine.TRTLLM, "trtllm_image")):
        image = getattr(cfg.serving, field)
        if engine in engines and "@" not in image:
            found.append(
                UnpinnedImage(
                    path=f"serving.{field}",
                    value=image,
                    why="no public record of this tag's digest was found (gpufarm/data/images.yaml); "
                    "read it from the registry and set the image as repository:tag@digest",
                )
            )
    for name in used_images(cfg):
        row = image_table.image(name)
        if row.digest is None and name not in cfg.images.digests:
            found.append(
                UnpinnedImage(
                    path=f"images.digests.{name}",
                    value=row.reference(),
                    why="gpufarm/data/images.yaml holds no confirmed digest for it; read the "
                    "digest of this tag from the registry and set it",
                )
            )
    return found


def chart_version_issues(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """A chart version the tier runs that is not the release whose image the table pins."""
    versions = {
        "karpenter-controller": cfg.karpenter.chart_version,
        "nvidia-device-plugin": cfg.karpenter.nvidia_device_plugin_chart_version,
        "keda-operator": cfg.autoscaling.keda_chart_version,
        "dcgm-exporter": cfg.observability.prometheus.dcgm_exporter_chart_version,
    }
    used = set(used_images(cfg))
    for name, path in CHART_VERSION_FIELDS.items():
        row = image_table.image(name)
        if name in used and versions[name] != row.chart_version:
            yield ConfigIssue(
                path=path,
                message=f"must be {row.chart_version!r}, the {row.chart_name} chart whose image "
                f"gpufarm pins by digest ({row.name} in gpufarm/data/images.yaml; move the chart "
                f"and the image's tag and digest together), got {versions[name]!r}",
            )
