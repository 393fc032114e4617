"""Checks of the models: weights, placement, shares, vLLM flags, autoscaling, routers and prefill/decode."""

from __future__ import annotations

from collections.abc import Iterator

from gpufarm.config.checks.capacity import _capacity_demand, _fits_one_instance
from gpufarm.config.checks.common import _quoted, _repeats, _unique_ids
from gpufarm.config.engine_flags import flag_list
from gpufarm.config.errors import ConfigIssue
from gpufarm.config.model import (
    HF_REPO_ID,
    MAX_SHARES,
    S3_URI,
    TENSOR_PARALLEL_SIZES,
    CapacityType,
    KvTransport,
    LoadBalancerKind,
    ModelConfig,
    NodeGroupConfig,
    NodePoolConfig,
    Provisioning,
    TierConfig,
)
from gpufarm.config.vllm_flags import flag_args, long_form
from gpufarm.core.autoscaling import ScalingProblem, prefill_scaling_problems, scaling_problems
from gpufarm.core.demand import scales_to_zero
from gpufarm.core.engines import VLLM, engine_of
from gpufarm.core.names import leader_service_name, router_name, workload_name
from gpufarm.core.placement import placement_of
from gpufarm.core.prefill_decode import (
    DECODE_ENGINE_PORT,
    NIXL_SIDE_CHANNEL_PORT,
    PREFILL_DECODE_RESERVED_VLLM_FLAGS,
)

RESERVED_VLLM_FLAGS = (
    "--model",
    "--port",
    "--host",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--max-model-len",
    "--gpu-memory-utilization",
    "--served-model-name",
    "--dtype",
    "--download-dir",
    "--revision",
    "--quantization",
    "--max-num-seqs",
)
"""Flags gpufarm derives from the model config (`gpufarm.k8s.serving.vllm_args`, and
`--pipeline-parallel-size` from `pipeline_parallel`); setting them in `extra_args` would
contradict it. Matched in every spelling vLLM reads: `_` for `-`, `--flag=value`, and the short
aliases of :data:`gpufarm.config.vllm_flags.SHORT_FLAGS` (`-tp`, `-pp`, `-q`)."""


MULTI_NODE_RESERVED_VLLM_FLAGS = ("--distributed-executor-backend",)
"""Flags gpufarm sets on a multi-node model (`pipeline_parallel` > 1): Ray runs its replicas."""


def _models(cfg: TierConfig) -> Iterator[ConfigIssue]:
    yield from _repeats("models", [m.name for m in cfg.models], "name must be unique")
    yield from _repeats("models", [m.api_model_name for m in cfg.models], "served_model_name must be unique")
    yield from _unique_ids("models", [m.name for m in cfg.models])
    owner: dict[int, int] = {}
    for i, model in enumerate(cfg.models):
        first = owner.setdefault(model.rule_priority, i)
        if first != i and cfg.models[first].name != model.name:  # same name: reported above
            yield ConfigIssue(
                path=f"models[{i}].route_priority",
                message=f"must differ from that of models[{first}] ({cfg.models[first].name!r}); "
                f"both are {model.rule_priority}: set route_priority on one of them",
            )
    for i, model in enumerate(cfg.models):
        where = f"models[{i}]"
        if model.is_s3:
            if not S3_URI.match(model.weights):
                yield ConfigIssue(
                    path=f"{where}.weights",
                    message=f"must be an S3 URI such as 's3://bucket/prefix/', got {model.weights!r}",
                )
            for field in ("revision", "hf_token_secret"):
                if getattr(model, field) is not None:
                    yield ConfigIssue(
                        path=f"{where}.{field}",
                        message=f"applies only to Hugging Face weights, not {model.weights!r}",
                    )
        else:
            if not HF_REPO_ID.match(model.weights):
                yield ConfigIssue(
                    path=f"{where}.weights",
                    message="must be a Hugging Face repo id ('org/name') or an S3 URI "
                    f"('s3://bucket/prefix/'), got {model.weights!r}",
                )
        if model.gpus not in TENSOR_PARALLEL_SIZES:
            yield ConfigIssue(
                path=f"{where}.gpus",
                message=f"must be one of {', '.join(map(str, TENSOR_PARALLEL_SIZES))} "
                f"(the tensor-parallel size), got {model.gpus}",
            )
        if model.shares:
            yield from _model_shares(cfg, where, model)
        else:
            yield from _model_placement(cfg, where, model)
        yield from _model_autoscaling(cfg, where, model)
        if engine_of(model) is not VLLM:
            yield from _engine(where, model)
            yield from _unknown_flags(cfg, where, model)
            continue
        yield from _reserved_flags(
            where, model, RESERVED_VLLM_FLAGS, "(gpufarm derives it from the model config)"
        )
        if model.pipeline_parallel > 1:
            yield from _reserved_flags(
                where,
                model,
                MULTI_NODE_RESERVED_VLLM_FLAGS,
                "on a multi-node model (gpufarm runs its replicas with Ray)",
            )
        yield from _unknown_flags(cfg, where, model)
    yield from _share_names(cfg)
    yield from _capacity_demand(cfg)


def _reserved_flags(
    where: str, model: ModelConfig, flags: tuple[str, ...], why: str
) -> Iterator[ConfigIssue]:
    """An issue per `extra_args` entry that sets one of `flags` (as vLLM reads it: `--flag`,
    `--flag=value`, `--flag_name`; see :func:`gpufarm.config.vllm_flags.flag_args`)."""
    for found in flag_args(model.extra_args):
        flag = long_form(found.flag)
        if flag in flags:
            yield ConfigIssue(
                path=f"{where}.extra_args[{found.index}]",
                message=f"must not set {flag} {why}, got {found.arg!r}",
            )


def _engine(where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    """What a model on a non-vLLM engine asks that the engine cannot do (:mod:`gpufarm.core.engines`),
    and the flags of its `extra_args` that gpufarm sets itself."""
    engine = engine_of(model)
    for limitation in engine.limitations:
        if limitation.applies(model):
            given = getattr(model, limitation.setting)
            shown = "a section" if hasattr(given, "model_fields") else repr(given)
            yield ConfigIssue(
                path=f"{where}.{limitation.setting}",
                message=f"is not served by engine {model.engine.value!r} for model {model.name!r}: "
                f"{limitation.reason}; use engine 'vllm' or remove it, got {shown}",
            )
    owned = set(engine.owned_flags)
    for found in flag_list(model.engine).flag_args(model.extra_args):
        if found.flag in owned:
            yield ConfigIssue(
                path=f"{where}.extra_args[{found.index}]",
                message=f"must not set {found.flag} on engine {model.engine.value!r} (gpufarm derives "
                f"it from the model config), got {found.arg!r}",
            )


def _unknown_flags(cfg: TierConfig, where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    """An issue per `extra_args` flag that the model engine's server in the pinned release lacks.

    Only while the engine's image (`serving.vllm_image`, `sglang_image`, `trtllm_image`) runs that
    release (gpufarm/data/<engine>_serve_flags.yaml): with another one the list does not apply.
    """
    flags = flag_list(model.engine)
    if not flags.applies_to(cfg.serving.engine_image(model.engine)):
        return
    engine = engine_of(model)
    for found in flags.flag_args(model.extra_args):
        if flags.is_known(found.flag):
            continue
        near = flags.nearest(found.flag)
        hint = f" (nearest known flag: {near!r})" if near else ""
        yield ConfigIssue(
            path=f"{where}.extra_args[{found.index}]",
            message=f"must be a flag of {engine.title} {flags.version}'s `{engine.cli}`: model "
            f"{model.name!r} sets {found.flag!r}, which that release does not have{hint}, "
            f"got {found.arg!r}",
        )


def _model_placement(cfg: TierConfig, where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    if model.capacity_class is not None and model.node_pool is not None:
        yield ConfigIssue(
            path=f"{where}.capacity_class",
            message=f"must be empty when node_pool is set (one placement per model), got "
            f"{model.capacity_class!r} and node_pool {model.node_pool!r}",
        )
        return
    if model.capacity_class is not None and cfg.cluster.provisioning is not Provisioning.KARPENTER:
        yield ConfigIssue(
            path=f"{where}.capacity_class",
            message="needs karpenter provisioning (classes label Karpenter pools and reserved node "
            f"groups; Auto Mode pools are chosen by node_pool), got {model.capacity_class!r}",
        )
        return
    targets = placement_of(cfg, model)
    if not targets and model.capacity_class == cfg.hybrid_nodes.capacity_class:
        return  # the on-premises class, which needs no cloud pool: gpufarm.config.checks.hybrid
    if not targets:
        if model.capacity_class is not None:
            yield ConfigIssue(
                path=f"{where}.capacity_class",
                message=f"must name a capacity class ({_quoted(list(cfg.capacity_classes()))}), "
                f"got {model.capacity_class!r}",
            )
        else:
            names = [g.name for g in cfg.node_groups] + [p.name for p in cfg.node_pools]
            yield ConfigIssue(
                path=f"{where}.node_pool",
                message=f"must name a node pool or node group ({_quoted(names)}), got {model.node_pool!r}",
            )
        return
    field = "capacity_class" if model.capacity_class is not None else "node_pool"
    if model.gpus in TENSOR_PARALLEL_SIZES:
        yield from _fits_one_instance(targets, f"{where}.gpus", model.gpus)
    spot = [t for t in targets if isinstance(t, NodePoolConfig) and CapacityType.SPOT in t.capacity_types]
    if model.critical and not model.allow_spot and spot:
        if model.capacity_class is not None:
            chosen = model.capacity_class
            what = f"class {chosen!r} for a critical model: its pool {spot[0].name!r}"
        else:
            chosen, what = spot[0].name, f"pool {spot[0].name!r} for a critical model: the pool"
        yield ConfigIssue(
            path=f"{where}.{field}",
            message=f"must not be {what} allows spot, whose nodes are reclaimed with two minutes' "
            f"notice (set critical: false, or allow_spot: true to accept it), got {chosen!r}",
        )
    if model.pipeline_parallel > 1:
        # ec2 and sagemaker provisioning refuse multi-node models with their own reason
        # (checks/ec2.py, checks/sagemaker.py): only Auto Mode gets this one.
        if cfg.cluster.provisioning is Provisioning.AUTO_MODE:
            yield ConfigIssue(
                path=f"{where}.pipeline_parallel",
                message="needs karpenter provisioning (multi-node replicas run as LeaderWorkerSets, "
                f"which gpufarm installs on standard compute), got {model.pipeline_parallel} with "
                f"{cfg.cluster.provisioning.value!r}",
            )
        if model.autoscaling is not None:
            yield ConfigIssue(
                path=f"{where}.autoscaling",
                message="must be empty for a multi-node model (pipeline_parallel > 1): its replicas "
                "are LeaderWorkerSet groups with fixed `replicas`, got an autoscaling section",
            )


def _model_shares(cfg: TierConfig, where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    """A model split into shares: what the model may not set, then each share as a placement."""
    count = len(model.shares)
    if not 2 <= count <= MAX_SHARES:
        yield ConfigIssue(
            path=f"{where}.shares",
            message=f"must list 2-{MAX_SHARES} shares (one placement needs no share: set node_pool or "
            f"capacity_class; a forward action names at most {MAX_SHARES} target groups), got {count}",
        )
    for field in ("node_pool", "capacity_class"):
        if getattr(model, field) is not None:
            yield ConfigIssue(
                path=f"{where}.{field}",
                message="must be empty when shares are set (each share names its own node_pool or "
                f"capacity_class), got {getattr(model, field)!r}",
            )
    if model.autoscaling is not None:
        yield ConfigIssue(
            path=f"{where}.autoscaling",
            message="must be empty when shares are set (each share runs its own fixed `replicas`; "
            "KEDA scales one Deployment per model), got an autoscaling section",
        )
    if model.pipeline_parallel > 1:
        yield ConfigIssue(
            path=f"{where}.pipeline_parallel",
            message="must be 1 when shares are set (a multi-node model runs as one LeaderWorkerSet, "
            f"which is not split), got {model.pipeline_parallel}",
        )
    if model.kv_cache_routing:
        yield ConfigIssue(
            path=f"{where}.kv_cache_routing",
            message="must be false when shares are set (the router chooses among the pods of one "
            "Service; shares are split by the load balancer's weights), got true",
        )
    if model.prefill_decode is not None:
        yield ConfigIssue(
            path=f"{where}.prefill_decode",
            message="must be empty when shares are set (prefill and decode pods sit behind one "
            "router, not behind the load balancer's weighted target groups), got a prefill_decode "
            "section",
        )
    named: list[str] = []
    for j, share in enumerate(model.shares):
        at = f"{where}.shares[{j}]"
        if share.node_pool is not None and share.capacity_class is not None:
            yield ConfigIssue(
                path=f"{at}.capacity_class",
                message=f"must be empty when node_pool is set (one placement per share), got "
                f"{share.capacity_class!r} and node_pool {share.node_pool!r}",
            )
            continue
        if share.node_pool is None and share.capacity_class is None:
            yield ConfigIssue(
                path=at,
                message="must set node_pool or capacity_class (where the share's replicas run), got neither",
            )
            continue
        named.append(share.share_name)
        if share.gpus is not None and share.gpus not in TENSOR_PARALLEL_SIZES:
            yield ConfigIssue(
                path=f"{at}.gpus",
                message=f"must be one of {', '.join(map(str, TENSOR_PARALLEL_SIZES))} "
                f"(the tensor-parallel size), got {share.gpus}",
            )
        if share.replicas == 0 and share.weight > 0:
            yield ConfigIssue(
                path=f"{at}.weight",
                message="must be 0 when replicas is 0 (the load balancer would send the share's part "
                f"of the requests to a target group without pods), got {share.weight}",
            )
        service = workload_name(model.name, share.share_name)
        if len(service) > SERVICE_NAME_MAX:
            yield ConfigIssue(
                path=f"{at}.name",
                message=f"must keep the share's Service name {service!r} within {SERVICE_NAME_MAX} "
                f"characters (a Kubernetes Service name), got {share.share_name!r} "
                f"({len(service)} characters)",
            )
        yield from _model_placement(cfg, at, model.as_share(share))
    yield from _repeats(
        f"{where}.shares",
        named,
        "names must be unique within the model (a share's name defaults to its node_pool or capacity_class)",
    )
    if count and not any(share.weight for share in model.shares):
        yield ConfigIssue(
            path=f"{where}.shares",
            message="must give at least one share a weight above 0 (else the load balancer forwards "
            "the model's requests nowhere), got all 0",
        )


SERVICE_NAME_MAX = 63
"""Longest Kubernetes Service name (a DNS label)."""


def _share_names(cfg: TierConfig) -> Iterator[ConfigIssue]:
    """Shares' Services must not take another workload's name, nor its construct IDs.

    Construct IDs drop hyphens ('vllm-a-b' of share 'b' of model 'a' and of model 'a-b' both
    become 'AB'), so names are also compared without them.
    """
    names: dict[str, str] = {}
    keys: dict[str, str] = {}
    for model in cfg.models:
        owner = f"model {model.name!r}"
        keys[model.name.replace("-", "")] = owner
        if model.shares:
            continue
        names[workload_name(model.name)] = owner
        if model.pipeline_parallel > 1:
            names[leader_service_name(model.name)] = owner
        if model.kv_cache_routing:
            names[router_name(model.name)] = owner
            names[f"{router_name(model.name)}-envoy"] = owner
    for i, model in enumerate(cfg.models):
        seen: set[str] = set()
        for j, share in enumerate(model.shares):
            name = share.share_name
            if not name or name in seen:  # no placement, or a repeat: reported with the shares
                continue
            seen.add(name)
            service = workload_name(model.name, name)
            key = f"{model.name}{name}".replace("-", "")
            owner = f"share {name!r} of model {model.name!r}"
            if service in names:
                yield ConfigIssue(
                    path=f"models[{i}].shares[{j}].name",
                    message=f"must not repeat the Service name {service!r} of {names[service]}, got {name!r}",
                )
            elif key in keys:
                yield ConfigIssue(
                    path=f"models[{i}].shares[{j}].name",
                    message=f"must give the share resource names apart from {keys[key]}'s (without "
                    f"hyphens both are {key!r}, which construct IDs use), got {name!r}",
                )
            names.setdefault(service, owner)
            keys.setdefault(key, owner)


def _model_autoscaling(cfg: TierConfig, where: str, model: ModelConfig) -> Iterator[ConfigIssue]:
    if model.autoscaling is not None:
        problems = scaling_problems(model.autoscaling, critical=model.critical)
        yield from _scaling(cfg, f"{where}.autoscaling", problems)
        if scales_to_zero(model) and not cfg.fallback.enabled:
            yield ConfigIssue(
                path=f"{where}.autoscaling.min_replicas",
                message="must be at least 1 while fallback.enabled is false (a model parked at zero "
                "wakes on the requests the gateway counts), got 0",
            )


def _scaling(cfg: TierConfig, path: str, problems: list[ScalingProblem]) -> Iterator[ConfigIssue]:
    """The problems of one KEDA scaling section at `path` (a model's, or its prefill pods'), then
    the rule it shares with the rest of the tier: KEDA reads Amazon Managed Prometheus."""
    for problem in problems:
        yield ConfigIssue(path=problem.path(path), message=problem.message)
    # ec2 provisioning scales Auto Scaling groups on the CloudWatch agent's metric instead (checks/ec2.py).
    if not cfg.observability.prometheus.enabled and cfg.cluster.provisioning is not Provisioning.EC2:
        yield ConfigIssue(
            path=path,
            message="needs observability.prometheus.enabled: true (KEDA reads vLLM metrics from "
            "Amazon Managed Prometheus), got false",
        )


def _kv_cache_routing(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for i, model in enumerate(cfg.models):
        if not model.kv_cache_routing:
            continue
        if cfg.ingress.target_optimizer.enabled:
            yield ConfigIssue(
                path=f"models[{i}].kv_cache_routing",
                message="must be false while ingress.target_optimizer.enabled is true (both choose "
                "the pod a request goes to), got true",
            )
        if cfg.ingress.kind is not LoadBalancerKind.ALB:
            yield ConfigIssue(
                path=f"models[{i}].kv_cache_routing",
                message=f"needs ingress.kind 'alb' (the router's health check is HTTP on its own "
                f"port), got {cfg.ingress.kind.value!r}",
            )


def _prefill_decode(cfg: TierConfig) -> Iterator[ConfigIssue]:
    for i, model in enumerate(cfg.models):
        pd = model.prefill_decode
        if pd is None:
            continue
        where = f"models[{i}].prefill_decode"
        if model.kv_cache_routing:
            yield ConfigIssue(
                path=f"models[{i}].kv_cache_routing",
                message="must be false when prefill_decode is set (the prefill/decode router also "
                "scores prefix-cache hits), got true",
            )
        if model.pipeline_parallel > 1:
            yield ConfigIssue(
                path=where,
                message="must be empty for a multi-node model (pipeline_parallel > 1): prefill and "
                f"decode pods are single-node Deployments, got pipeline_parallel {model.pipeline_parallel}",
            )
        if cfg.ingress.target_optimizer.enabled:
            yield ConfigIssue(
                path=where,
                message="must be empty while ingress.target_optimizer.enabled is true (both choose "
                "the pod a request goes to), got a prefill_decode section",
            )
        if cfg.ingress.kind is not LoadBalancerKind.ALB:
            yield ConfigIssue(
                path=where,
                message=f"needs ingress.kind 'alb' (the router's health check is HTTP on its own "
                f"port), got {cfg.ingress.kind.value!r}",
            )
        if pd.prefill_gpus is not None:
            if pd.prefill_gpus not in TENSOR_PARALLEL_SIZES:
                yield ConfigIssue(
                    path=f"{where}.prefill_gpus",
                    message=f"must be one of {', '.join(map(str, TENSOR_PARALLEL_SIZES))} (vLLM "
                    f"tensor-parallel sizes), got {pd.prefill_gpus}",
                )
            else:
                yield from _fits_one_instance(
                    placement_of(cfg, model), f"{where}.prefill_gpus", pd.prefill_gpus
                )
        if pd.kv_transport is KvTransport.EFA:
            if pd.efa_image is None:
                yield ConfigIssue(
                    path=f"{where}.efa_image",
                    message="is required with kv_transport 'efa' (the stock vLLM image has no EFA "
                    "libraries for NIXL's libfabric backend), got none",
                )
            plain = [
                t.name for t in placement_of(cfg, model) if not (isinstance(t, NodeGroupConfig) and t.efa)
            ]
            if plain:
                yield ConfigIssue(
                    path=f"{where}.kv_transport",
                    message="'efa' needs every node the model may land on to have EFA (node groups "
                    f"with efa: true), got 'efa' with {_quoted(plain)}",
                )
        elif pd.efa_image is not None:
            yield ConfigIssue(
                path=f"{where}.efa_image",
                message=f"must be empty with kv_transport 'tcp' (the stock vllm_image carries NIXL), "
                f"got {pd.efa_image!r}",
            )
        if pd.prefill_autoscaling is not None:
            scaling_path = f"{where}.prefill_autoscaling"
            if "prefill_replicas" in pd.model_fields_set:
                yield ConfigIssue(
                    path=f"{where}.prefill_replicas",
                    message="must be unset when prefill_autoscaling is set (KEDA sizes the prefill "
                    f"pods between its min and max), got {pd.prefill_replicas}",
                )
            yield from _scaling(cfg, scaling_path, prefill_scaling_problems(pd.prefill_autoscaling))
        yield from _reserved_flags(
            f"models[{i}]",
            model,
            PREFILL_DECODE_RESERVED_VLLM_FLAGS,
            "on a prefill/decode model (gpufarm derives it from prefill_decode)",
        )

    if any(m.prefill_decode is not None for m in cfg.models):
        taken = {DECODE_ENGINE_PORT: "the decode pods' vLLM", NIXL_SIDE_CHANNEL_PORT: "NIXL's side channel"}
        if cfg.serving.port in taken:
            yield ConfigIssue(
                path="serving.port",
                message=f"must differ from {cfg.serving.port} while a model serves prefill/decode "
                f"({taken[cfg.serving.port]} listens there), got {cfg.serving.port}",
            )
