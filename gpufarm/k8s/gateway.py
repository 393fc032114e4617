"""The fallback gateway: LiteLLM proxy config, and the manifests that run it in the cluster.

Clients call the gateway with a model's client-facing name (`served_model_name`, else `name`).
The gateway sends the request to that model's vLLM Service first; when vLLM cannot answer it
retries within a bounded budget and then sends the request to the Amazon Bedrock model mapped
to it in config. Which backend served a response is in the response header
``x-litellm-model-id`` (:data:`BACKEND_HEADER`): ``vllm-<model name>`` (``vllm-<model>-<share>``
for a model split into shares) or ``bedrock-<model name>``.

Everything here is a pure function of the tier config: same input, same dicts, same text.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

import yaml

from gpufarm.config.bedrock import call_region
from gpufarm.config.model import FallbackConfig, ModelConfig, Provisioning, TierConfig
from gpufarm.core import sagemaker as sm
from gpufarm.core.endpoints import Endpoint, model_endpoints, route_prefix
from gpufarm.core.gateway_sizing import GatewaySizing, gateway_sizing
from gpufarm.core.names import BEDROCK_SUFFIX
from gpufarm.k8s import demand
from gpufarm.k8s.binding import rollout_min_ready_seconds
from gpufarm.k8s.labels import POOL_LABEL, common_labels, workload_name
from gpufarm.k8s.scan import scan_acknowledge
from gpufarm.k8s.security import container_security, pod_security
from gpufarm.k8s.serving import http_probe

NAME = "gateway"
"""Name of the gateway's Deployment, Service, PodDisruptionBudget and ServiceAccount."""
SERVICE_ACCOUNT = NAME
"""Service account of the gateway pods (bound to an IAM role through EKS Pod Identity)."""
CONFIG_MAP = "gateway-config"
CONFIG_FILE = "config.yaml"
CONFIG_DIR = "/etc/litellm"
CONFIG_PATH = f"{CONFIG_DIR}/{CONFIG_FILE}"
MASTER_KEY_DIR = "/var/run/gpufarm/gateway"
MASTER_KEY_PATH = f"{MASTER_KEY_DIR}/master-key"
MASTER_KEY_ENV = "LITELLM_MASTER_KEY"
"""Environment variable the proxy reads its master key from (set from the secret at start)."""
GUARDRAIL_IDENTIFIER_ENV = "GPUFARM_GUARDRAIL_IDENTIFIER"
GUARDRAIL_VERSION_ENV = "GPUFARM_GUARDRAIL_VERSION"
TMP_DIR = "/tmp"

BACKEND_HEADER = "x-litellm-model-id"
"""Response header naming the deployment that answered: 'vllm-<model>[-<share>]' or 'bedrock-<model>'."""
FALLBACKS_HEADER = "x-litellm-attempted-fallbacks"
"""Response header LiteLLM adds when it fell back: how many fallbacks it attempted."""
READINESS_PATH = "/health/readiness"
"""The proxy's readiness endpoint (no key needed; 503 once it drains); the load balancer checks it too."""
LIVENESS_PATH = "/health/liveliness"
"""The proxy's liveness endpoint (LiteLLM's spelling; no key needed)."""
CONFIG_HASH_ANNOTATION = "gpufarm.io/config-hash"
"""Pod-template annotation holding the config's hash: a config change rolls the pods."""
SELECTOR = {"app.kubernetes.io/name": "litellm", "app.kubernetes.io/component": NAME}
"""Labels selecting the gateway pods (stable across releases: never add to it)."""

RUN_AS_USER = 65532
"""Unprivileged UID/GID the gateway containers run as (the image needs no root: see the decision record)."""
PRESTOP_SLEEP_SECONDS = 10
"""Time the Service and load balancer get to stop sending new requests before SIGTERM."""
STARTUP_PERIOD_SECONDS = 5
STARTUP_TIMEOUT_SECONDS = 180
"""Time a gateway container gets to load the proxy before liveness checks start."""
CPU_LIMIT_REASON = (
    "the LiteLLM gateway requests fallback.cpu and sets no CPU limit by design: it sits on the path "
    "of every request and its load follows traffic bursts, and a CFS quota would throttle it "
    "mid-burst and add latency to every model; memory is limited (fallback.memory_gib)"
)
"""Why the gateway has no CPU limit (checkov CKV_K8S_11; see serving.GPU_POD_CPU_LIMIT_REASON)."""
KEEPALIVE_MARGIN_SECONDS = 5
"""The proxy keeps idle client connections this much longer than the load balancer does, so the
load balancer never reuses a connection the proxy is closing (which would be a 502)."""
ALLOWED_FAILS_POLICY_FIELDS = (
    "TimeoutErrorAllowedFails",
    "InternalServerErrorAllowedFails",
    "ServiceUnavailableErrorAllowedFails",
    "BadGatewayErrorAllowedFails",
    "RateLimitErrorAllowedFails",
)
"""Failure kinds of a vLLM backend that count towards its cooldown, each kind counted on its own.

LiteLLM exempts a model group with one deployment from cooldown unless the deployment's own
allowed-fails policy names the failure, and a vLLM group has one deployment (its Service) unless
the model is split into shares (one deployment per share, each with the same policy).
The policy sits on the vLLM deployments only: a router-wide one would also cool the Bedrock
deployments down, and Bedrock is the last resort (there is nothing to skip to).
A refused connection counts as an InternalServerError (LiteLLM 1.102.1 raises hosted_vllm's
"Cannot connect to host" with status 500), so a dead vLLM is cooled down like one answering 5xx."""

OFFLINE_ENV = {
    # Use the cost map, Anthropic beta headers, policy templates, blog feed and router presets
    # bundled in the image instead of downloading them from GitHub at start.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    # No admin UI: the gateway has no database and is configured from its ConfigMap only.
    "DISABLE_ADMIN_UI": "True",
}
"""Environment that keeps the proxy from fetching anything at start and turns its UI off."""


def client_model_name(model: ModelConfig) -> str:
    """The name clients send for a model (and the gateway's model group for its vLLM backend)."""
    return model.api_model_name


def bedrock_model_name(model: ModelConfig) -> str:
    """The gateway's model group for a model's Bedrock fallback: '<client name>@bedrock'."""
    return f"{model.api_model_name}{BEDROCK_SUFFIX}"


def vllm_deployment_id(model: ModelConfig, share: str | None = None) -> str:
    """The deployment ID of a model's vLLM backend (or one share's), as the backend header reports it."""
    return workload_name(model.name, share)


def sagemaker_deployment_id(model: ModelConfig) -> str:
    """The deployment ID of a model's SageMaker inference component, as the backend header reports it."""
    return f"sagemaker-{model.name}"


def bedrock_deployment_id(model: ModelConfig) -> str:
    """The deployment ID of a model's Bedrock fallback, as the backend header reports it."""
    return f"bedrock-{model.name}"


def served_deployments(tier: TierConfig) -> dict[str, tuple[str, str]]:
    """Every deployment id the gateway's config can hold, with its model's client name and backend.

    Both the per-share ids and the model's own vLLM id (what a load-balanced route uses), so the
    map holds whichever :func:`litellm_config` writes.
    """
    served: dict[str, tuple[str, str]] = {}
    for model in tier.models:
        name = client_model_name(model)
        served[vllm_deployment_id(model)] = (name, demand.VLLM_BACKEND)
        if tier.cluster.provisioning is Provisioning.SAGEMAKER:
            served[sagemaker_deployment_id(model)] = (name, demand.VLLM_BACKEND)
        for endpoint in model_endpoints(model, tier.serving):
            served[vllm_deployment_id(model, endpoint.share)] = (name, demand.VLLM_BACKEND)
        if model.bedrock_target is not None:
            served[bedrock_deployment_id(model)] = (name, demand.BEDROCK_BACKEND)
    return served


def vllm_api_base(endpoint: Endpoint) -> str:
    """The OpenAI-compatible base URL of a model's (or one share's) endpoint, by its cluster DNS name.

    The endpoint says which Service that is (the router's, a share's, a multi-node model's
    leaders' or the model's own; see `gpufarm/core/endpoints.py`): the gateway calls what the
    load balancer forwards to.
    """
    return endpoint.url


ROUTE_ENV_PREFIX = "GPUFARM_ROUTE_"
"""Prefix of the pod environment variables holding each model's load-balanced base URL."""


def route_env_name(model: ModelConfig) -> str:
    """The pod environment variable holding `model`'s base URL on the load balancer.

    'GPUFARM_ROUTE_<NAME>', the model's name upper-cased with '-' as '_' (names are DNS labels,
    so distinct names give distinct variables).
    """
    return ROUTE_ENV_PREFIX + model.name.upper().replace("-", "_")


def route_api_base(model: ModelConfig, load_balancer_url: str) -> str:
    """The base URL of `model`'s route on the load balancer: '<load_balancer_url>/<model>/v1'.

    The listener's rule for '/<model>/*' strips the prefix, so vLLM (or the model's router) sees
    '/v1/...' as from any client of the route.
    """
    return f"{load_balancer_url.rstrip('/')}{route_prefix(model.name)}/v1"


def route_env(tier: TierConfig, load_balancer_url: str) -> list[dict[str, str]]:
    """The pod environment that :func:`litellm_config` with `load_balanced=True` reads its
    `api_base`s from: one variable per model (:func:`route_env_name`), in config order.

    `load_balancer_url` is `http://<load balancer DNS name>:<gateway listener port>`; the DNS
    name exists only once the load balancer is deployed, so the construct passes it here (a
    CloudFormation reference) while the config, and its hash, keep only the variable names.
    """
    return [{"name": route_env_name(m), "value": route_api_base(m, load_balancer_url)} for m in tier.models]


def guardrail_env_refs() -> tuple[str, str]:
    """`(identifier, version)` that make the proxy read the guardrail from its environment.

    The guardrail's ARN and version exist only once it is deployed: the construct passes these
    references to :func:`litellm_config` (so the config, and its hash, stay the same) and the
    deploy-time values to :func:`gateway_manifests`, which sets them as pod environment.
    """
    return (f"os.environ/{GUARDRAIL_IDENTIFIER_ENV}", f"os.environ/{GUARDRAIL_VERSION_ENV}")


def _check_names(models: list[ModelConfig]) -> None:
    names = [client_model_name(m) for m in models] + [
        bedrock_model_name(m) for m in models if m.bedrock_target
    ]
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise ValueError(
            "models must have distinct client-facing names (served_model_name, else name), "
            f"none ending in {BEDROCK_SUFFIX!r}, got {repeated[0]!r} more than once"
        )


def _vllm_entries(model: ModelConfig, tier: TierConfig) -> list[dict[str, Any]]:
    """The model's vLLM deployments: one, or one per share under the same model name, weighted."""
    fb = tier.fallback
    entries = []
    for endpoint in model_endpoints(model, tier.serving):
        share = endpoint.share
        params: dict[str, Any] = {
            "model": f"hosted_vllm/{model.api_model_name}",
            "api_base": vllm_api_base(endpoint),
            "timeout": fb.request_timeout_seconds,
            "stream_timeout": fb.stream_timeout_seconds,
        }
        if endpoint.weight is not None:
            params["weight"] = endpoint.weight
        entries.append(
            {
                "model_name": client_model_name(model),
                "litellm_params": params,
                "model_info": {
                    "id": vllm_deployment_id(model, share),
                    "allowed_fails_policy": dict.fromkeys(ALLOWED_FAILS_POLICY_FIELDS, fb.allowed_fails),
                },
            }
        )
    return entries


def _load_balanced_entry(model: ModelConfig, tier: TierConfig) -> dict[str, Any]:
    """The model's one vLLM deployment when the gateway calls the model's route on the load balancer.

    The load balancer picks the replica (least outstanding requests, never one at the Target
    Optimizer's cap) and, for a model split into shares, the share by its weight; so the model is
    one deployment, whatever its shares. Its `api_base` is read from the pod environment
    (:func:`route_env`).
    """
    fb = tier.fallback
    return {
        "model_name": client_model_name(model),
        "litellm_params": {
            "model": f"hosted_vllm/{model.api_model_name}",
            "api_base": f"os.environ/{route_env_name(model)}",
            "timeout": fb.request_timeout_seconds,
            "stream_timeout": fb.stream_timeout_seconds,
        },
        "model_info": {
            "id": vllm_deployment_id(model),
            "allowed_fails_policy": dict.fromkeys(ALLOWED_FAILS_POLICY_FIELDS, fb.allowed_fails),
        },
    }


SAGEMAKER_PROVIDER = "sagemaker_chat"
"""LiteLLM's provider for a SageMaker endpoint that takes OpenAI chat requests on `/invocations`
(litellm 1.102.1 `llms/sagemaker/chat/transformation.py`, `SagemakerChatConfig`: it posts the
chat body to `runtime.sagemaker.<region>.<suffix>/endpoints/<endpoint>/invocations`, or
`/invocations-response-stream` when streaming, signed for service `sagemaker`, and sends the
`model_id` parameter as the `X-Amzn-SageMaker-Inference-Component` header). The Large Model
Inference container answers the chat schema there (djl-serving
serving/docs/lmi/user_guides/chat_input_output_schema.md)."""


def sagemaker_invocations_url(runtime_url: str, endpoint: str) -> str:
    """The InvokeEndpoint URL of `endpoint` under a runtime base URL:
    '<base>/endpoints/<endpoint>/invocations' (SageMaker Runtime API,
    `POST /endpoints/{EndpointName}/invocations`)."""
    return f"{runtime_url.rstrip('/')}/endpoints/{endpoint}/invocations"


def _sagemaker_entry(model: ModelConfig, tier: TierConfig, runtime_url: str | None) -> dict[str, Any]:
    """The model's one deployment when its GPUs are an inference component of the tier's SageMaker
    endpoint: `sagemaker_chat/<endpoint>` with the component as `model_id`, in the tier's region.

    The call goes to the regional runtime host, which the VPC's `sagemaker.runtime` interface
    endpoint (private DNS) answers inside the VPC. `runtime_url` replaces that host (LiteLLM's
    `sagemaker_base_url`, the whole invocation URL): for a runtime stand-in in tests; LiteLLM
    then sends streaming calls to the same URL.
    """
    fb = tier.fallback
    params: dict[str, Any] = {
        "model": f"{SAGEMAKER_PROVIDER}/{sm.endpoint_name(tier)}",
        "model_id": sm.inference_component_name(tier, model),
        "aws_region_name": tier.environment.region,
        "timeout": fb.request_timeout_seconds,
        "stream_timeout": fb.stream_timeout_seconds,
    }
    if runtime_url is not None:
        params["sagemaker_base_url"] = sagemaker_invocations_url(runtime_url, sm.endpoint_name(tier))
    return {
        "model_name": client_model_name(model),
        "litellm_params": params,
        "model_info": {
            "id": sagemaker_deployment_id(model),
            "allowed_fails_policy": dict.fromkeys(ALLOWED_FAILS_POLICY_FIELDS, fb.allowed_fails),
        },
    }


def _bedrock_entry(model: ModelConfig, tier: TierConfig, guardrail: tuple[str, str] | None) -> dict[str, Any]:
    target = model.bedrock_target
    assert target is not None
    fb = tier.fallback
    params: dict[str, Any] = {
        "model": f"bedrock/converse/{target.model_id}",
        "aws_region_name": call_region(target, tier.environment.region),
        "timeout": fb.request_timeout_seconds,
        "stream_timeout": fb.stream_timeout_seconds,
    }
    if target.max_tokens is not None:
        params["max_tokens"] = target.max_tokens
    if guardrail is not None:
        identifier, version = guardrail
        params["guardrailConfig"] = {"guardrailIdentifier": identifier, "guardrailVersion": version}
    return {
        "model_name": bedrock_model_name(model),
        "litellm_params": params,
        "model_info": {"id": bedrock_deployment_id(model)},
    }


def _router_settings(fb: FallbackConfig, fallbacks: list[dict[str, list[str]]]) -> dict[str, Any]:
    return {
        "fallbacks": fallbacks,
        "num_retries": fb.num_retries,
        "timeout": fb.request_timeout_seconds,
        "stream_timeout": fb.stream_timeout_seconds,
        "cooldown_time": fb.cooldown_seconds,
    }


def litellm_config(
    tier: TierConfig,
    *,
    guardrail: tuple[str, str] | None = None,
    load_balanced: bool = False,
    sagemaker_runtime_url: str | None = None,
) -> dict[str, Any]:
    """The LiteLLM proxy config for a tier: vLLM first, Bedrock when vLLM cannot answer.

    Per model: a deployment named by the model's client-facing name (`hosted_vllm/...` at the
    model's Service), and, when the model has a Bedrock target, a deployment named
    '<client name>@bedrock' (`bedrock/converse/<model or profile id>` in its call region, with
    `max_tokens` as its default and the `guardrail` `(identifier, version)` when given) plus a
    fallback from the first to the second. Each deployment's `model_info.id` is
    'vllm-<model>' or 'bedrock-<model>', which the proxy returns in the ``x-litellm-model-id``
    response header.

    A model split into shares gets one vLLM deployment per share, all under the model's
    client-facing name (one model group): each at its share's Service, with id
    'vllm-<model>-<share>' and the share's `weight` as LiteLLM's `weight`, so the proxy picks a
    share in the load balancer's ratio. A share at weight 0 is picked only while every other
    share is in cooldown. The fallback to Bedrock applies to the group, after its retries.

    `load_balanced` (what `gpufarm.core.endpoints.gateway_route` decides for the tier, passed by
    the construct) makes each model one vLLM deployment at the model's route on the tier's load
    balancer instead, its `api_base` read from the pod environment (:func:`route_env`): the load
    balancer then picks the replica by least outstanding requests, never one at the Target
    Optimizer's cap, and a share by its weight. Default: the Services.

    `tier.fallback` sets the retries, timeouts and cooldown. A vLLM deployment goes into
    cooldown (skipped: requests go straight to Bedrock) for `cooldown_seconds` after more than
    `allowed_fails` failures of one kind (timeout, 500, 502, 503, 429), each within
    `cooldown_seconds` of the one before. `general_settings.master_key`
    reads `LITELLM_MASTER_KEY` only when `master_key_secret` is set; otherwise the gateway takes
    requests without a key. Unsupported OpenAI parameters are dropped rather than failing on
    the Bedrock path (`drop_params`). Default: no guardrail. When a model scales to zero,
    `litellm_settings.callbacks` loads the demand counter that wakes it
    (:mod:`gpufarm.k8s.demand`).

    A `cluster.provisioning: sagemaker` tier routes each model to its inference component of
    the tier's SageMaker endpoint instead (:func:`_sagemaker_entry`, id 'sagemaker-<model>'),
    with the same Bedrock fallback; `sagemaker_runtime_url` (default: the regional runtime host)
    replaces the runtime's base URL.

    Raises ValueError when two models share a client-facing name.
    """
    models = list(tier.models)
    _check_names(models)
    fb = tier.fallback
    model_list: list[dict[str, Any]] = []
    fallbacks: list[dict[str, list[str]]] = []
    on_sagemaker = tier.cluster.provisioning is Provisioning.SAGEMAKER
    for model in models:
        if on_sagemaker:
            model_list.append(_sagemaker_entry(model, tier, sagemaker_runtime_url))
        elif load_balanced:
            model_list.append(_load_balanced_entry(model, tier))
        else:
            model_list.extend(_vllm_entries(model, tier))
        if model.bedrock_target is not None:
            model_list.append(_bedrock_entry(model, tier, guardrail))
            fallbacks.append({client_model_name(model): [bedrock_model_name(model)]})
    general: dict[str, Any] = {}
    if fb.master_key_secret:
        general["master_key"] = f"os.environ/{MASTER_KEY_ENV}"
    return {
        "model_list": model_list,
        "router_settings": _router_settings(fb, fallbacks),
        "litellm_settings": {
            "request_timeout": fb.request_timeout_seconds,
            "drop_params": True,
            **({"callbacks": counted} if (counted := demand.callbacks(tier)) else {}),
        },
        "general_settings": general,
    }


class _QuotedDumper(yaml.SafeDumper):
    """Double-quotes every string, so no value changes type on the way back ('1', 'True')."""


def _quoted_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')


_QuotedDumper.add_representer(str, _quoted_str)


def config_yaml(config: dict[str, Any]) -> str:
    """The config as the YAML text of the ConfigMap: keys sorted, strings quoted, no line folding."""
    return yaml.dump(config, Dumper=_QuotedDumper, sort_keys=True, default_flow_style=False, width=1_000_000)


def config_hash(config: dict[str, Any]) -> str:
    """The sha256 (hex) of the config's canonical JSON: equal configs hash equal, any change differs."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _labels() -> dict[str, str]:
    return {**common_labels(NAME), **SELECTOR}


def service_account(namespace: str) -> dict[str, Any]:
    """The gateway's service account; its AWS permissions come from a Pod Identity association.

    No Kubernetes token: the proxy never calls the Kubernetes API, and Pod Identity mounts a token
    of its own (see :func:`gpufarm.k8s.serving.service_account`).
    """
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SERVICE_ACCOUNT, "namespace": namespace, "labels": _labels()},
        "automountServiceAccountToken": False,
    }


def config_map(config: dict[str, Any], namespace: str, files: dict[str, str] | None = None) -> dict[str, Any]:
    """The ConfigMap holding the proxy config as `config.yaml`, and `files` beside it (default: none)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": namespace, "labels": _labels()},
        "data": {CONFIG_FILE: config_yaml(config), **(files or {})},
    }


def proxy_args(tier: TierConfig) -> list[str]:
    """Arguments to the `litellm` proxy command.

    `fallback.workers` uvicorn workers per pod (1 by default: pods scale out, see
    `gpufarm.core.gateway_sizing`); keep-alive a few seconds above the load balancer's idle
    timeout; usage telemetry off. With more than one worker, uvicorn's supervisor kills a
    worker that does not answer its health ping within `--timeout_worker_healthcheck` (uvicorn
    0.54's default: 5 s), and a worker busy importing LiteLLM on a loaded CPU misses it and is
    restarted again and again (seen in benchmarks/gateway.py on the shared machine): it gets
    the container's whole start-up budget instead.
    """
    fb = tier.fallback
    workers = ["--timeout_worker_healthcheck", str(STARTUP_TIMEOUT_SECONDS)] if fb.workers > 1 else []
    return [
        "--config",
        CONFIG_PATH,
        "--host",
        "0.0.0.0",
        "--port",
        str(tier.fallback.port),
        "--num_workers",
        str(tier.fallback.workers),
        "--keepalive_timeout",
        str(tier.ingress.idle_timeout_seconds + KEEPALIVE_MARGIN_SECONDS),
        "--telemetry",
        "False",
        *workers,
        *demand.proxy_args(tier),
    ]


def _container_security() -> dict[str, Any]:
    return container_security(run_as_user=RUN_AS_USER)


def _master_key_init_container(tier: TierConfig, secret: str, region: str) -> dict[str, Any]:
    """Reads the master key from Secrets Manager into a memory-backed volume, readable by the pod's user only.

    The key never appears in the template, the pod spec or a Kubernetes Secret.
    """
    return {
        "name": "master-key",
        "image": tier.serving.aws_cli_image,
        "command": ["/bin/sh", "-c"],
        "args": [
            'umask 077 && aws secretsmanager get-secret-value --secret-id "$SECRET_ID" '
            f"--query SecretString --output text > {MASTER_KEY_PATH}"
        ],
        "env": [
            {"name": "SECRET_ID", "value": secret},
            {"name": "AWS_REGION", "value": region},
            {"name": "HOME", "value": TMP_DIR},
        ],
        "resources": {
            "requests": {"cpu": "50m", "memory": "64Mi"},
            "limits": {"memory": "256Mi"},
        },
        "securityContext": _container_security(),
        "volumeMounts": [
            {"name": "master-key", "mountPath": MASTER_KEY_DIR},
            {"name": "tmp", "mountPath": TMP_DIR},
        ],
    }


def gateway_environment(tier: TierConfig, region: str, guardrail: tuple[str, str] | None) -> dict[str, str]:
    """The proxy's environment, whichever compute runs it: offline switches, region, JSON logs,
    graceful shutdown, HOME, the demand counter's settings and the guardrail `(identifier, version)`."""
    values = {
        **OFFLINE_ENV,
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        # One log line per request naming the deployment that answered, and each fallback, as JSON.
        "LITELLM_LOG": "INFO",
        "JSON_LOGS": "True",
        # On SIGTERM the proxy waits this long for in-flight requests (streams included).
        "GRACEFUL_SHUTDOWN_TIMEOUT": str(tier.fallback.request_timeout_seconds),
        "HOME": TMP_DIR,
        **demand.env(tier, served_deployments(tier)),
    }
    if guardrail is not None:
        values[GUARDRAIL_IDENTIFIER_ENV], values[GUARDRAIL_VERSION_ENV] = guardrail
    return values


def _env(tier: TierConfig, region: str, guardrail: tuple[str, str] | None) -> list[dict[str, Any]]:
    values = gateway_environment(tier, region, guardrail)
    return [{"name": k, "value": values[k]} for k in sorted(values)]


def gateway_deployment(
    tier: TierConfig,
    *,
    config: dict[str, Any],
    namespace: str,
    region: str,
    master_key_secret_arn: str | None,
    guardrail: tuple[str, str] | None = None,
    load_balancer_url: str | None = None,
) -> dict[str, Any]:
    """The gateway Deployment: `tier.fallback.replicas` LiteLLM proxies on CPU nodes (with an HPA:
    no count of its own, the HPA's from `tier.fallback.replicas` up; see :func:`gateway_autoscaler`).

    Pods carry :data:`CONFIG_HASH_ANNOTATION` (a config change rolls them), spread over zones
    (best effort) and hosts (required), never land on GPU nodes (no GPU toleration, and a
    required node affinity on nodes without the `gpufarm.io/pool` label), and replace each other
    one at a time without losing capacity (maxSurge 1, maxUnavailable 0; on Auto Mode, where no
    readiness gate waits for target health, each step also waits
    :func:`gpufarm.k8s.binding.rollout_min_ready_seconds`). Readiness is
    `/health/readiness`, liveness `/health/liveliness`; neither depends on vLLM, so the gateway
    stays in service while the GPUs are gone. Containers run as an unprivileged user on a
    read-only root file system (with a writable `/tmp`).

    `master_key_secret_arn` (a Secrets Manager name or ARN) adds an init container that reads
    the key through Pod Identity into a memory-backed volume; the proxy's shell exports it as
    `LITELLM_MASTER_KEY` before it execs the proxy. `guardrail` `(identifier, version)` sets the
    environment that :func:`guardrail_env_refs` points the config at. `load_balancer_url` adds
    the environment (:func:`route_env`) that a `load_balanced` config reads its `api_base`s from.
    Defaults: no key, no guardrail, no load-balanced routes.
    When a model scales to zero, the proxy also serves its demand counter from a separate
    metrics process on port `metrics` (9090; :mod:`gpufarm.k8s.demand`).
    """
    fb = tier.fallback
    labels = _labels()
    mounts: list[dict[str, Any]] = [
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
        {"name": "tmp", "mountPath": TMP_DIR},
    ]
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": CONFIG_MAP}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
    ]
    init_containers: list[dict[str, Any]] = []
    if master_key_secret_arn:
        command = [
            "/bin/sh",
            "-c",
            f'{MASTER_KEY_ENV}="$(cat {MASTER_KEY_PATH})" && export {MASTER_KEY_ENV} && exec litellm "$@"',
            "litellm",
        ]
        args = proxy_args(tier)
        mounts.append({"name": "master-key", "mountPath": MASTER_KEY_DIR, "readOnly": True})
        volumes.append({"name": "master-key", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}})
        init_containers.append(_master_key_init_container(tier, master_key_secret_arn, region))
    else:
        command = ["litellm"]
        args = proxy_args(tier)
    memory = f"{fb.memory_gib}Gi"
    container = {
        "name": "litellm",
        "image": fb.image,
        "command": command,
        "args": args,
        "ports": [
            {"name": "http", "containerPort": fb.port, "protocol": "TCP"},
            *demand.container_ports(tier),
        ],
        "env": _env(tier, region, guardrail)
        + (route_env(tier, load_balancer_url) if load_balancer_url is not None else []),
        "resources": {"requests": {"cpu": f"{fb.cpu:g}", "memory": memory}, "limits": {"memory": memory}},
        "startupProbe": http_probe(
            LIVENESS_PATH,
            periodSeconds=STARTUP_PERIOD_SECONDS,
            timeoutSeconds=3,
            failureThreshold=STARTUP_TIMEOUT_SECONDS // STARTUP_PERIOD_SECONDS,
        ),
        "readinessProbe": http_probe(READINESS_PATH, periodSeconds=5, timeoutSeconds=3, failureThreshold=3),
        "livenessProbe": http_probe(LIVENESS_PATH, periodSeconds=15, timeoutSeconds=5, failureThreshold=4),
        "lifecycle": {"preStop": {"sleep": {"seconds": PRESTOP_SLEEP_SECONDS}}},
        "securityContext": _container_security(),
        "volumeMounts": mounts,
    }
    spread = {"matchLabels": SELECTOR}
    pod_spec: dict[str, Any] = {
        "serviceAccountName": SERVICE_ACCOUNT,
        # The proxy never calls the Kubernetes API; Pod Identity brings its own token.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": PRESTOP_SLEEP_SECONDS + fb.request_timeout_seconds,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": POOL_LABEL, "operator": "DoesNotExist"}]}
                    ]
                }
            }
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": spread,
                "matchLabelKeys": ["pod-template-hash"],
            },
            {
                "maxSkew": 1,
                "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": spread,
                "matchLabelKeys": ["pod-template-hash"],
            },
        ],
        "securityContext": pod_security(RUN_AS_USER),
        "containers": [container],
        "volumes": volumes,
    }
    if init_containers:
        pod_spec["initContainers"] = init_containers
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": namespace, "labels": labels},
        "spec": {
            # With an HPA the Deployment names no count: re-applying the manifest would reset the
            # HPA's count to it (https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/
            # #migrating-deployments-and-statefulsets-to-horizontal-autoscaling).
            **({} if gateway_sizing(tier).autoscaled else {"replicas": fb.replicas}),
            "revisionHistoryLimit": 3,
            **({"minReadySeconds": min_ready} if (min_ready := rollout_min_ready_seconds(tier)) else {}),
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": {"matchLabels": SELECTOR},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {
                        CONFIG_HASH_ANNOTATION: config_hash(config),
                        **demand.pod_annotations(tier),
                    },
                },
                "spec": pod_spec,
            },
        },
    }
    return scan_acknowledge(deployment, "CKV_K8S_11", CPU_LIMIT_REASON)


def pod_disruption_budget(tier: TierConfig, namespace: str) -> dict[str, Any]:
    """Voluntary disruptions (node drains, consolidation) take at most one gateway pod at a time.

    `maxUnavailable: 1` holds at any pod count, so it stays right while the HPA scales the pods
    (`minAvailable: replicas - 1` would let a drain take all but one of a scaled-out gateway).
    """
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": NAME, "namespace": namespace, "labels": _labels()},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": SELECTOR}},
    }


def gateway_autoscaler(sizing: GatewaySizing, target_cpu_utilization: int, namespace: str) -> dict[str, Any]:
    """The gateway's HorizontalPodAutoscaler (autoscaling/v2): CPU use, between the sizing's bounds.

    The pods' CPU use against their request (`fallback.cpu`) is the signal: the proxy's work is
    CPU per request and per streamed chunk (benchmarks/gateway.py prints it as cpu ms/req), and
    its added latency grows as a worker's CPU fills. The resource metrics come from
    metrics-server (`gpufarm.core.gateway_sizing.resource_metrics_available`). Scaling speed is
    Kubernetes' default behaviour (up at once, down after a 300 s stabilization window:
    https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale/#default-behavior).
    """
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": NAME, "namespace": namespace, "labels": _labels()},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": NAME},
            "minReplicas": sizing.min_replicas,
            "maxReplicas": sizing.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": target_cpu_utilization},
                    },
                }
            ],
        },
    }


def gateway_service(tier: TierConfig, namespace: str) -> dict[str, Any]:
    """ClusterIP Service `gateway`, port `http` (`tier.fallback.port`).

    In-cluster clients call it; the load balancer's target group binding names it.
    """
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": NAME, "namespace": namespace, "labels": _labels()},
        "spec": {
            "type": "ClusterIP",
            "selector": SELECTOR,
            "ports": [{"name": "http", "port": tier.fallback.port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def gateway_manifests(
    tier: TierConfig,
    *,
    config: dict[str, Any],
    namespace: str,
    region: str,
    master_key_secret_arn: str | None,
    guardrail: tuple[str, str] | None = None,
    load_balancer_url: str | None = None,
) -> list[dict[str, Any]]:
    """Every gateway object in apply order: ServiceAccount, ConfigMap, Deployment, (HPA,) PDB, Service.

    `config` is the proxy config (:func:`litellm_config`); see :func:`gateway_deployment` for
    `master_key_secret_arn`, `guardrail` and `load_balancer_url`. The HorizontalPodAutoscaler is
    there when the sizing's bounds differ (:func:`gpufarm.core.gateway_sizing.gateway_sizing`).
    """
    sizing = gateway_sizing(tier)
    autoscaler = (
        [gateway_autoscaler(sizing, tier.fallback.target_cpu_utilization, namespace)]
        if sizing.autoscaled
        else []
    )
    return [
        service_account(namespace),
        config_map(config, namespace, demand.config_files(tier)),
        gateway_deployment(
            tier,
            config=config,
            namespace=namespace,
            region=region,
            master_key_secret_arn=master_key_secret_arn,
            guardrail=guardrail,
            load_balancer_url=load_balancer_url,
        ),
        *autoscaler,
        pod_disruption_budget(tier, namespace),
        gateway_service(tier, namespace),
    ]
