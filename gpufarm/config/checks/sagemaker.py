"""Checks of `cluster.provisioning: sagemaker`: the endpoint's instances, and what a model may ask of
an inference component.

An inference component's copy runs on one instance of the endpoint, in the Large Model Inference
(LMI) container, behind the endpoint's own routing: so no multi-node model, no prefill/decode
split, no KV-cache-aware router, no engine LMI does not ship, no more GPUs or memory than one
instance has, and none of the settings only a Kubernetes tier reads.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufarm.config.checks.common import _repeats
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import Provisioning, TierConfig
from gpufarm.core import sagemaker as sm
from gpufarm.core.instances import GPU_FAMILIES, NVIDIA_GPU_FAMILIES, family_of, gpus_in, host_of

_MODE = "with cluster.provisioning 'sagemaker'"


def _instance(cfg: TierConfig) -> Iterator[ConfigIssue]:
    section = cfg.sagemaker
    instance_type = section.instance_type
    if instance_type not in sm.hosting_instance_types():
        yield ConfigIssue(
            path="sagemaker.instance_type",
            message="must be an instance type SageMaker offers for real-time endpoints (the "
            "`ml.*` list in gpufarm/data/sagemaker.yaml, from the SageMaker API's "
            f"ProductionVariantInstanceType), got {instance_type!r}",
        )
        return
    ec2_type = sm.ec2_instance_type(instance_type)
    if family_of(ec2_type) not in NVIDIA_GPU_FAMILIES or gpus_in(ec2_type) is None:
        families = ", ".join(sorted(NVIDIA_GPU_FAMILIES & set(GPU_FAMILIES)))
        yield ConfigIssue(
            path="sagemaker.instance_type",
            message="must have NVIDIA GPUs the Large Model Inference container serves on (ml. "
            f"families {families}), got {instance_type!r}",
        )
    if not section.min_instance_count <= section.initial_instance_count <= section.max_instance_count:
        yield ConfigIssue(
            path="sagemaker.initial_instance_count",
            message="must lie between min_instance_count and max_instance_count "
            f"({section.min_instance_count}-{section.max_instance_count}), got "
            f"{section.initial_instance_count}",
        )
    if sm.lmi_registry(cfg.environment.region) is None:
        yield ConfigIssue(
            path="environment.region",
            message=f"must be a region SageMaker publishes the Large Model Inference images in "
            f"{_MODE} ({', '.join(sm.lmi_regions())}), got {cfg.environment.region!r}",
        )


def _kubernetes_only(cfg: TierConfig) -> Iterator[ConfigIssue]:
    if cfg.node_groups:
        yield ConfigIssue(
            path="node_groups",
            message=f"must be empty {_MODE} (the endpoint's instances are SageMaker's, not "
            f"node groups), got {len(cfg.node_groups)}",
        )
    for i, model in enumerate(cfg.models):
        where = f"models[{i}]"
        if model.shares:
            yield ConfigIssue(
                path=f"{where}.shares",
                message=f"must be empty {_MODE} (a model is one inference component; shares "
                f"split Kubernetes replicas over node pools), got {len(model.shares)} shares",
            )
        if model.autoscaling is not None:
            yield ConfigIssue(
                path=f"{where}.autoscaling",
                message=f"must be empty {_MODE} (KEDA scales Kubernetes replicas; set the "
                "model's copies in sagemaker.scaling), got an autoscaling section",
            )
        if model.extra_args:
            yield ConfigIssue(
                path=f"{where}.extra_args",
                message=f"must be empty {_MODE} (the Large Model Inference container takes no "
                f"`vllm serve` arguments), got {model.extra_args!r}",
            )
        if model.hf_token_secret is not None:
            yield ConfigIssue(
                path=f"{where}.hf_token_secret",
                message=f"must be empty {_MODE} (an inference component's environment is plain "
                "text in the template; put gated weights in S3), got "
                f"{model.hf_token_secret!r}",
            )
        if model.listener_port is not None:
            yield ConfigIssue(
                path=f"{where}.listener_port",
                message=f"must be empty {_MODE} (the gateway calls the endpoint, no load "
                f"balancer listener reaches the model), got {model.listener_port}",
            )


def _models(cfg: TierConfig) -> Iterator[ConfigIssue]:
    instance_type = cfg.sagemaker.instance_type
    ec2_type = sm.ec2_instance_type(instance_type)
    gpus = gpus_in(ec2_type)
    host = host_of(ec2_type)
    for i, model in enumerate(cfg.models):
        where = f"models[{i}]"
        if model.pipeline_parallel > 1:
            yield ConfigIssue(
                path=f"{where}.pipeline_parallel",
                message=f"must be 1 {_MODE} (an inference component's copy runs on one "
                f"instance), got {model.pipeline_parallel}",
            )
        if model.prefill_decode is not None:
            yield ConfigIssue(
                path=f"{where}.prefill_decode",
                message=f"must be empty {_MODE} (a copy prefills and decodes its own requests), "
                "got a prefill_decode section",
            )
        if model.kv_cache_routing:
            yield ConfigIssue(
                path=f"{where}.kv_cache_routing",
                message=f"must be false {_MODE} (the endpoint routes requests itself: "
                "sagemaker.routing_strategy), got true",
            )
        if model.engine.value not in sm.LMI_ENGINES:
            yield ConfigIssue(
                path=f"{where}.engine",
                message=f"must be one of 'vllm', 'trtllm' {_MODE} (the engines of the Large Model "
                f"Inference containers), got {model.engine.value!r}",
            )
        if gpus is not None and model.gpus > gpus:
            yield ConfigIssue(
                path=f"{where}.gpus",
                message=f"must be at most {gpus}, the GPUs of one {instance_type}, {_MODE} (a copy "
                f"runs on one instance), got {model.gpus}",
            )
        if host is not None and model.memory_gib > host.memory_gib:
            yield ConfigIssue(
                path=f"{where}.memory_gib",
                message=f"must be at most {host.memory_gib}, the memory of one {instance_type}, "
                f"{_MODE}, got {model.memory_gib}",
            )
        name = sm.inference_component_name(cfg, model)
        if len(name) > sm.MAX_NAME_LENGTH:
            yield ConfigIssue(
                path=f"{where}.name",
                message=f"must leave the inference component name '<tier>-<model>' at most "
                f"{sm.MAX_NAME_LENGTH} characters (SageMaker's limit), got {name!r} "
                f"({len(name)} characters)",
            )


def _scaling(cfg: TierConfig) -> Iterator[ConfigIssue]:
    section = cfg.sagemaker
    names = [m.name for m in cfg.models]
    yield from _repeats(
        "sagemaker.scaling", [s.model for s in section.scaling], "must not name a model twice"
    )
    for i, scaling in enumerate(section.scaling):
        where = f"sagemaker.scaling[{i}]"
        model = next((m for m in cfg.models if m.name == scaling.model), None)
        if model is None:
            yield ConfigIssue(
                path=f"{where}.model",
                message=f"must name a model ({', '.join(names)}), got {scaling.model!r}",
            )
            continue
        if not scaling.min_copies <= model.replicas <= scaling.max_copies:
            yield ConfigIssue(
                path=f"{where}.max_copies",
                message=f"must give a range min_copies-max_copies holding the model's replicas "
                f"({model.replicas}), got {scaling.min_copies}-{scaling.max_copies}",
            )
        if scaling.min_copies == 0 and not cfg.fallback.enabled:
            yield ConfigIssue(
                path=f"{where}.min_copies",
                message="must be at least 1 while fallback.enabled is false (a component at zero "
                "copies fails every request until a copy starts, minutes later), got 0",
            )


def _capacity(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """The copies at deploy and at most must find their GPUs on the endpoint's instances."""
    section = cfg.sagemaker
    per_instance = gpus_in(sm.ec2_instance_type(section.instance_type))
    if per_instance is None:
        return
    components = sm.components_of(cfg)
    at_deploy = sum(c.copies * c.gpus for c in components)
    if at_deploy > section.initial_instance_count * per_instance:
        yield ConfigIssue(
            path="sagemaker.initial_instance_count",
            message=f"must hold the copies at deploy ({at_deploy} GPUs, models' replicas times "
            f"gpus) on {per_instance}-GPU {section.instance_type} instances, got "
            f"{section.initial_instance_count}",
        )
    at_most = sum(c.max_copies * c.gpus for c in components)
    if at_most > section.max_instance_count * per_instance:
        yield ConfigIssue(
            path="sagemaker.max_instance_count",
            message=f"must hold every model at its most copies ({at_most} GPUs) on "
            f"{per_instance}-GPU {section.instance_type} instances, got {section.max_instance_count}",
        )


def _sagemaker(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """Every check of a `sagemaker` tier; nothing for any other provisioning."""
    if cfg.cluster.provisioning is not Provisioning.SAGEMAKER:
        return
    instance = list(_instance(cfg))
    yield from instance
    yield from _kubernetes_only(cfg)
    if any(issue.path == "sagemaker.instance_type" for issue in instance):
        return
    yield from _models(cfg)
    yield from _scaling(cfg)
    yield from _capacity(cfg)
