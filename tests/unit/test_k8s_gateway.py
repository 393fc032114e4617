"""The fallback gateway: the LiteLLM config generated from a tier, and the manifests that run it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
import yaml

from gpufarm.config import TierConfig, load_preset, merge
from gpufarm.k8s import demand
from gpufarm.k8s import gateway as gw
from gpufarm.k8s.labels import GPU_RESOURCE, POOL_LABEL, common_labels

from .factories import (
    make_enterprise,
    make_production,
    make_tier,
    model_override,
    overrides,
    poc_document,
    production_model,
    split,
)
from .k8s_schema import validate_core

REGION = "us-east-1"
NS = "gpufarm"
SECRET = "gpufarm/production/gateway-master-key"
GUARDRAIL = ("arn:aws:bedrock:us-east-1:123456789012:guardrail/abcd1234efgh", "3")

# Every fallback setting away from its default, to prove each one reaches the config.
TUNED = {
    "fallback": {
        "num_retries": 2,
        "request_timeout_seconds": 150,
        "stream_timeout_seconds": 45,
        "allowed_fails": 5,
        "cooldown_seconds": 120,
        "replicas": 4,
        "cpu": 2,
        "memory_gib": 3,
        "port": 4100,
    }
}


@pytest.fixture(scope="module")
def poc() -> TierConfig:
    return load_preset("poc")


@pytest.fixture(scope="module")
def production() -> TierConfig:
    return load_preset("production")


@pytest.fixture(scope="module")
def tuned() -> TierConfig:
    return make_tier(TUNED)


def entry(config: dict[str, Any], model_name: str) -> dict[str, Any]:
    [found] = [e for e in config["model_list"] if e["model_name"] == model_name]
    return found


def manifests(tier: TierConfig, **kwargs: Any) -> list[dict[str, Any]]:
    config = gw.litellm_config(tier, guardrail=kwargs.pop("config_guardrail", None))
    kwargs.setdefault("master_key_secret_arn", tier.fallback.master_key_secret)
    return gw.gateway_manifests(tier, config=config, namespace=NS, region=REGION, **kwargs)


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind]
    return found


def deployment(tier: TierConfig, **kwargs: Any) -> dict[str, Any]:
    return of_kind(manifests(tier, **kwargs), "Deployment")


def pod(tier: TierConfig, **kwargs: Any) -> dict[str, Any]:
    spec: dict[str, Any] = deployment(tier, **kwargs)["spec"]["template"]["spec"]
    return spec


def proxy(tier: TierConfig, **kwargs: Any) -> dict[str, Any]:
    [container] = pod(tier, **kwargs)["containers"]
    return container


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"]}


# --------------------------------------------------------------------------- model list, per preset


def test_poc_model_list_is_the_vllm_service_then_its_bedrock_model(poc: TierConfig) -> None:
    assert gw.litellm_config(poc)["model_list"] == [
        {
            "model_name": "qwen3-8b",
            "litellm_params": {
                "model": "hosted_vllm/qwen3-8b",
                "api_base": "http://vllm-qwen3-8b.gpufarm.svc.cluster.local:8000/v1",
                "timeout": 240,
                "stream_timeout": 60,
            },
            "model_info": {
                "id": "vllm-qwen3-8b",
                "allowed_fails_policy": dict.fromkeys(gw.ALLOWED_FAILS_POLICY_FIELDS, 3),
            },
        },
        {
            "model_name": "qwen3-8b@bedrock",
            "litellm_params": {
                "model": "bedrock/converse/us.meta.llama3-1-8b-instruct-v1:0",
                "aws_region_name": "us-east-1",
                "timeout": 240,
                "stream_timeout": 60,
            },
            "model_info": {"id": "bedrock-qwen3-8b"},
        },
    ]


def test_production_models_are_called_by_their_served_names(production: TierConfig) -> None:
    names = [e["model_name"] for e in gw.litellm_config(production)["model_list"]]
    assert names == [
        "meta-llama/Llama-3.3-70B-Instruct",
        "meta-llama/Llama-3.3-70B-Instruct@bedrock",
        "Qwen/Qwen3-32B",
    ]


def test_production_vllm_entries_reach_each_model_service(production: TierConfig) -> None:
    config = gw.litellm_config(production)
    llama = entry(config, "meta-llama/Llama-3.3-70B-Instruct")["litellm_params"]
    qwen = entry(config, "Qwen/Qwen3-32B")["litellm_params"]
    assert (llama["model"], llama["api_base"]) == (
        "hosted_vllm/meta-llama/Llama-3.3-70B-Instruct",
        "http://vllm-llama-3-3-70b.gpufarm.svc.cluster.local:8000/v1",
    )
    assert (qwen["model"], qwen["api_base"]) == (
        "hosted_vllm/Qwen/Qwen3-32B",
        "http://vllm-qwen3-32b-batch.gpufarm.svc.cluster.local:8000/v1",
    )


def test_production_bedrock_entry_is_the_us_profile_through_converse(production: TierConfig) -> None:
    params = entry(gw.litellm_config(production), "meta-llama/Llama-3.3-70B-Instruct@bedrock")[
        "litellm_params"
    ]
    assert params == {
        "model": "bedrock/converse/us.meta.llama3-3-70b-instruct-v1:0",
        "aws_region_name": "us-east-1",
        "timeout": 400,
        "stream_timeout": 60,
    }


def test_deployment_ids_name_the_backend_and_the_model(production: TierConfig) -> None:
    ids = [e["model_info"]["id"] for e in gw.litellm_config(production)["model_list"]]
    assert ids == ["vllm-llama-3-3-70b", "bedrock-llama-3-3-70b", "vllm-qwen3-32b-batch"]


# --------------------------------------------------------------------------- fallback chains


def test_poc_falls_back_from_its_model_to_bedrock(poc: TierConfig) -> None:
    assert gw.litellm_config(poc)["router_settings"]["fallbacks"] == [{"qwen3-8b": ["qwen3-8b@bedrock"]}]


def test_production_model_that_opts_out_has_no_bedrock_entry_nor_fallback(production: TierConfig) -> None:
    config = gw.litellm_config(production)
    assert config["router_settings"]["fallbacks"] == [
        {"meta-llama/Llama-3.3-70B-Instruct": ["meta-llama/Llama-3.3-70B-Instruct@bedrock"]}
    ]
    assert "Qwen/Qwen3-32B@bedrock" not in [e["model_name"] for e in config["model_list"]]


def test_a_tier_without_bedrock_targets_still_fronts_vllm() -> None:
    tier = make_tier(model_override(bedrock="none"), {"fallback": {"enabled": True}})
    config = gw.litellm_config(tier)
    assert [e["model_name"] for e in config["model_list"]] == ["qwen3-8b"]
    assert config["router_settings"]["fallbacks"] == []


# --------------------------------------------------------------------------- retries, timeouts, cooldown


def test_router_retries_timeouts_and_cooldown_come_from_the_config(tuned: TierConfig) -> None:
    assert gw.litellm_config(tuned)["router_settings"] == {
        "fallbacks": [{"qwen3-8b": ["qwen3-8b@bedrock"]}],
        "num_retries": 2,
        "timeout": 150,
        "stream_timeout": 45,
        "cooldown_time": 120,
    }


def test_every_deployment_carries_the_configured_timeouts(tuned: TierConfig) -> None:
    for item in gw.litellm_config(tuned)["model_list"]:
        assert (item["litellm_params"]["timeout"], item["litellm_params"]["stream_timeout"]) == (150, 45)


def test_default_request_timeout_is_the_configured_one(tuned: TierConfig) -> None:
    assert gw.litellm_config(tuned)["litellm_settings"] == {"request_timeout": 150, "drop_params": True}


def test_vllm_deployments_cool_down_after_the_allowed_fails_of_each_kind(tuned: TierConfig) -> None:
    vllm = entry(gw.litellm_config(tuned), "qwen3-8b")["model_info"]
    assert vllm["allowed_fails_policy"] == {
        "TimeoutErrorAllowedFails": 5,
        "InternalServerErrorAllowedFails": 5,
        "ServiceUnavailableErrorAllowedFails": 5,
        "BadGatewayErrorAllowedFails": 5,
        "RateLimitErrorAllowedFails": 5,
    }


def test_bedrock_deployments_are_never_cooled_down_by_a_policy(tuned: TierConfig) -> None:
    config = gw.litellm_config(tuned)
    assert entry(config, "qwen3-8b@bedrock")["model_info"] == {"id": "bedrock-qwen3-8b"}
    assert "allowed_fails" not in config["router_settings"]
    assert "allowed_fails_policy" not in config["router_settings"]


# --------------------------------------------------------------------------- bedrock options


def test_max_tokens_and_region_of_the_target_reach_the_bedrock_entry() -> None:
    tier = make_tier(
        {"environment": {"region": "us-west-2", "availability_zones": ["us-west-2a", "us-west-2b"]}},
        model_override(
            bedrock={"model_id": "meta.llama3-1-8b-instruct-v1:0", "region": "us-east-2", "max_tokens": 2048}
        ),
    )
    params = entry(gw.litellm_config(tier), "qwen3-8b@bedrock")["litellm_params"]
    assert (params["aws_region_name"], params["max_tokens"], params["model"]) == (
        "us-east-2",
        2048,
        "bedrock/converse/meta.llama3-1-8b-instruct-v1:0",
    )


def test_guardrail_is_applied_on_bedrock_entries_only(poc: TierConfig) -> None:
    config = gw.litellm_config(poc, guardrail=GUARDRAIL)
    assert entry(config, "qwen3-8b@bedrock")["litellm_params"]["guardrailConfig"] == {
        "guardrailIdentifier": GUARDRAIL[0],
        "guardrailVersion": "3",
    }
    assert "guardrailConfig" not in entry(config, "qwen3-8b")["litellm_params"]


def test_no_guardrail_config_without_a_guardrail(poc: TierConfig) -> None:
    assert "guardrailConfig" not in entry(gw.litellm_config(poc), "qwen3-8b@bedrock")["litellm_params"]


def test_guardrail_env_refs_point_the_proxy_at_the_pod_environment() -> None:
    assert gw.guardrail_env_refs() == (
        "os.environ/GPUFARM_GUARDRAIL_IDENTIFIER",
        "os.environ/GPUFARM_GUARDRAIL_VERSION",
    )


# --------------------------------------------------------------------------- master key


def test_master_key_is_read_from_the_environment_only_when_a_secret_is_configured(
    poc: TierConfig, production: TierConfig
) -> None:
    assert gw.litellm_config(poc)["general_settings"] == {}
    assert gw.litellm_config(production)["general_settings"] == {
        "master_key": "os.environ/LITELLM_MASTER_KEY"
    }


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (
            {
                "models": [
                    {"name": "a", "weights": "Qwen/Qwen3-8B", "served_model_name": "qwen", "bedrock": "none"},
                    {"name": "b", "weights": "Qwen/Qwen3-8B", "served_model_name": "qwen", "bedrock": "none"},
                ]
            },
            "models must have distinct client-facing names (served_model_name, else name), "
            "none ending in '@bedrock', got 'qwen' more than once",
        ),
        (
            {
                "models": [
                    {
                        "name": "a",
                        "weights": "Qwen/Qwen3-8B",
                        "bedrock": {"model_id": "meta.llama3-1-8b-instruct-v1:0"},
                    },
                    {
                        "name": "b",
                        "weights": "Qwen/Qwen3-8B",
                        "served_model_name": "a@bedrock",
                        "bedrock": "none",
                    },
                ]
            },
            "models must have distinct client-facing names (served_model_name, else name), "
            "none ending in '@bedrock', got 'a@bedrock' more than once",
        ),
    ],
    ids=["same-served-name", "collides-with-a-bedrock-name"],
)
def test_clashing_client_names_are_rejected_with_an_exact_message(
    document: dict[str, Any], message: str
) -> None:
    # Field-level validation only: the tier validator already rejects repeated served names.
    tier = TierConfig.model_validate(merge(poc_document(), document))
    with pytest.raises(ValueError) as excinfo:
        gw.litellm_config(tier)
    assert str(excinfo.value) == message


# --------------------------------------------------------------------------- text and hash


def test_config_is_deterministic(production: TierConfig) -> None:
    assert gw.litellm_config(production) == gw.litellm_config(load_preset("production"))
    assert gw.config_yaml(gw.litellm_config(production)) == gw.config_yaml(gw.litellm_config(production))


def test_config_yaml_reads_back_as_the_same_config(production: TierConfig) -> None:
    config = gw.litellm_config(production, guardrail=GUARDRAIL)
    assert yaml.safe_load(gw.config_yaml(config)) == config


def test_config_yaml_keeps_string_values_strings() -> None:
    # Unquoted, '3', 'True' and '1e3' would read back as a number, a boolean and a float.
    config = {"a": "3", "b": "True", "c": "1e3", "d": "os.environ/X"}
    assert yaml.safe_load(gw.config_yaml(config)) == config


def test_config_hash_is_a_sha256_of_the_content() -> None:
    digest = gw.config_hash({"b": [1, 2], "a": "x"})
    assert len(digest) == 64
    assert digest == gw.config_hash({"a": "x", "b": [1, 2]})


def test_config_hash_changes_with_any_value(poc: TierConfig, tuned: TierConfig) -> None:
    assert gw.config_hash(gw.litellm_config(poc)) != gw.config_hash(gw.litellm_config(tuned))
    assert gw.config_hash(gw.litellm_config(poc)) != gw.config_hash(
        gw.litellm_config(poc, guardrail=GUARDRAIL)
    )


# --------------------------------------------------------------------------- manifests


@pytest.mark.parametrize("preset", ["poc", "production"])
def test_every_manifest_is_a_valid_kubernetes_object(preset: str) -> None:
    tier = load_preset(preset)
    for doc in manifests(tier, guardrail=GUARDRAIL):
        validate_core(doc)


def test_manifests_in_apply_order(poc: TierConfig) -> None:
    docs = manifests(poc)
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ServiceAccount", "gateway"),
        ("ConfigMap", "gateway-config"),
        ("Deployment", "gateway"),
        ("PodDisruptionBudget", "gateway"),
        ("Service", "gateway"),
    ]
    assert {d["metadata"]["namespace"] for d in docs} == {NS}


def test_every_object_carries_the_gateway_labels(poc: TierConfig) -> None:
    for doc in manifests(poc):
        assert common_labels("gateway").items() <= doc["metadata"]["labels"].items()


def test_config_map_holds_the_config_as_yaml(poc: TierConfig, production: TierConfig) -> None:
    assert list(of_kind(manifests(poc), "ConfigMap")["data"]) == ["config.yaml"]
    config = gw.litellm_config(production)
    data = of_kind(manifests(production), "ConfigMap")["data"]
    # production parks a model at zero: the demand counter's callback module sits beside the config.
    assert list(data) == ["config.yaml", demand.CALLBACK_FILE]
    assert yaml.safe_load(data["config.yaml"]) == config
    assert data[demand.CALLBACK_FILE] == demand.CALLBACK_SOURCE


def test_replicas_come_from_the_config(poc: TierConfig, production: TierConfig, tuned: TierConfig) -> None:
    # poc and `tuned` (Auto Mode) run fixed replicas; production's HPA starts from its replicas.
    assert [deployment(t)["spec"]["replicas"] for t in (poc, tuned)] == [2, 4]
    assert of_kind(manifests(production), "HorizontalPodAutoscaler")["spec"]["minReplicas"] == 3


def test_rolling_update_never_drops_below_the_replica_count(poc: TierConfig) -> None:
    assert deployment(poc)["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }


def test_rollout_waits_for_target_health_only_where_no_readiness_gate_does(
    poc: TierConfig, production: TierConfig
) -> None:
    # poc binds through Auto Mode (no readiness gates); production through the LBC (gates).
    assert deployment(poc)["spec"]["minReadySeconds"] == 30 + 2 * poc.ingress.health_check_interval_seconds
    assert "minReadySeconds" not in deployment(production)["spec"]


def test_disruption_budget_keeps_all_but_one_pod(production: TierConfig, poc: TierConfig) -> None:
    pdb = of_kind(manifests(production), "PodDisruptionBudget")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": gw.SELECTOR}}
    assert of_kind(manifests(poc), "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_selectors_match_the_pod_labels(poc: TierConfig) -> None:
    docs = manifests(poc)
    labels = of_kind(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    for selector in (
        of_kind(docs, "Deployment")["spec"]["selector"]["matchLabels"],
        of_kind(docs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        of_kind(docs, "Service")["spec"]["selector"],
    ):
        assert selector.items() <= labels.items()


def test_probes_use_the_proxy_health_endpoints_on_its_port(tuned: TierConfig) -> None:
    container = proxy(tuned)
    assert container["ports"] == [{"name": "http", "containerPort": 4100, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health/readiness", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health/liveliness", "port": "http"}
    assert container["startupProbe"]["httpGet"] == {"path": "/health/liveliness", "port": "http"}


def test_startup_allows_three_minutes_before_liveness(poc: TierConfig) -> None:
    probe = proxy(poc)["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] == 180


def test_resources_come_from_the_config(tuned: TierConfig) -> None:
    assert proxy(tuned)["resources"] == {
        "requests": {"cpu": "2", "memory": "3Gi"},
        "limits": {"memory": "3Gi"},
    }


def test_hash_annotation_is_the_config_hash(poc: TierConfig, production: TierConfig) -> None:
    annotations = deployment(poc)["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {gw.CONFIG_HASH_ANNOTATION: gw.config_hash(gw.litellm_config(poc))}
    # With the demand counter, the callback module's hash too: a new module rolls the pods.
    annotations = deployment(production)["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        gw.CONFIG_HASH_ANNOTATION: gw.config_hash(gw.litellm_config(production)),
        demand.CALLBACK_HASH_ANNOTATION: hashlib.sha256(demand.CALLBACK_SOURCE.encode()).hexdigest(),
    }


def test_hash_annotation_changes_when_the_config_changes(poc: TierConfig) -> None:
    retried = make_tier({"fallback": {"num_retries": 0}})
    before = deployment(poc)["spec"]["template"]["metadata"]["annotations"]
    after = deployment(retried)["spec"]["template"]["metadata"]["annotations"]
    assert before[gw.CONFIG_HASH_ANNOTATION] != after[gw.CONFIG_HASH_ANNOTATION]


def test_hash_annotation_stays_when_only_the_deployment_changes(poc: TierConfig) -> None:
    # Replicas and resources are not in the proxy config: changing them must not re-hash it.
    resized = make_tier({"fallback": {"replicas": 5, "cpu": 2}})
    before = deployment(poc)["spec"]["template"]["metadata"]["annotations"]
    after = deployment(resized)["spec"]["template"]["metadata"]["annotations"]
    assert before == after


def test_pods_never_run_on_gpu_nodes(production: TierConfig) -> None:
    spec = pod(production)
    assert "tolerations" not in spec
    assert "nodeSelector" not in spec
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": POOL_LABEL, "operator": "DoesNotExist"}]}]
    }
    for container in spec["containers"] + spec.get("initContainers", []):
        assert GPU_RESOURCE not in container["resources"].get("requests", {})
        assert GPU_RESOURCE not in container["resources"].get("limits", {})


def test_pods_spread_over_zones_and_hosts(poc: TierConfig) -> None:
    spread = {(c["topologyKey"], c["whenUnsatisfiable"]) for c in pod(poc)["topologySpreadConstraints"]}
    assert spread == {
        ("topology.kubernetes.io/zone", "ScheduleAnyway"),
        ("kubernetes.io/hostname", "DoNotSchedule"),
    }


def test_containers_run_unprivileged_on_a_read_only_root(production: TierConfig) -> None:
    spec = pod(production)
    assert spec["securityContext"]["runAsNonRoot"] is True
    for container in spec["containers"] + spec["initContainers"]:
        security = container["securityContext"]
        assert (security["runAsNonRoot"], security["readOnlyRootFilesystem"]) == (True, True)
        assert (security["allowPrivilegeEscalation"], security["capabilities"]) == (False, {"drop": ["ALL"]})
        assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]


def test_proxy_reads_the_config_map(poc: TierConfig) -> None:
    spec = pod(poc)
    assert {"name": "config", "configMap": {"name": "gateway-config"}} in spec["volumes"]
    assert {"name": "config", "mountPath": "/etc/litellm", "readOnly": True} in proxy(poc)["volumeMounts"]
    args = proxy(poc)["args"]
    assert args[args.index("--config") + 1] == "/etc/litellm/config.yaml"


def test_proxy_listens_on_the_port_and_outlives_the_load_balancer_keepalive(tuned: TierConfig) -> None:
    args = proxy(tuned)["args"]
    assert args[args.index("--port") + 1] == "4100"
    assert int(args[args.index("--keepalive_timeout") + 1]) > tuned.ingress.idle_timeout_seconds
    assert args[args.index("--telemetry") + 1] == "False"


def test_pods_drain_their_longest_request_before_they_are_killed(production: TierConfig) -> None:
    spec = pod(production)
    assert spec["terminationGracePeriodSeconds"] >= production.fallback.request_timeout_seconds
    assert env(proxy(production))["GRACEFUL_SHUTDOWN_TIMEOUT"] == "400"


def test_proxy_never_downloads_at_start(poc: TierConfig) -> None:
    values = env(proxy(poc))
    assert values["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert all(values[name] == value for name, value in gw.OFFLINE_ENV.items())


def test_proxy_logs_the_backend_of_each_request_as_json(poc: TierConfig) -> None:
    values = env(proxy(poc))
    assert (values["LITELLM_LOG"], values["JSON_LOGS"]) == ("INFO", "True")


def test_pods_use_the_gateway_service_account(poc: TierConfig) -> None:
    assert pod(poc)["serviceAccountName"] == "gateway"
    assert of_kind(manifests(poc), "ServiceAccount")["metadata"]["name"] == "gateway"


def test_service_is_cluster_ip_on_the_gateway_port(tuned: TierConfig) -> None:
    service = of_kind(manifests(tuned), "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 4100, "targetPort": "http", "protocol": "TCP"}
    ]


# --------------------------------------------------------------------------- master key, guardrail


def test_without_a_master_key_the_proxy_starts_directly(poc: TierConfig) -> None:
    spec = pod(poc)
    assert "initContainers" not in spec
    assert proxy(poc)["command"] == ["litellm"]
    assert "master-key" not in [v["name"] for v in spec["volumes"]]


def test_master_key_is_read_by_an_init_container_into_memory(production: TierConfig) -> None:
    spec = pod(production)
    [init] = spec["initContainers"]
    assert init["image"] == production.serving.aws_cli_image
    assert {"name": "SECRET_ID", "value": SECRET} in init["env"]
    assert "aws secretsmanager get-secret-value" in init["args"][0]
    assert {"name": "master-key", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}} in spec["volumes"]


def test_proxy_exports_the_master_key_from_the_file_then_execs(production: TierConfig) -> None:
    container = proxy(production)
    assert container["command"][:2] == ["/bin/sh", "-c"]
    script = container["command"][2]
    assert f'LITELLM_MASTER_KEY="$(cat {gw.MASTER_KEY_PATH})"' in script
    assert script.endswith('exec litellm "$@"')
    assert container["args"] == gw.proxy_args(production)
    assert {"name": "master-key", "mountPath": gw.MASTER_KEY_DIR, "readOnly": True} in container[
        "volumeMounts"
    ]


def test_master_key_is_never_in_the_manifests(production: TierConfig) -> None:
    docs = manifests(production)
    assert "Secret" not in [d["kind"] for d in docs]
    assert "LITELLM_MASTER_KEY" not in env(proxy(production))


def test_guardrail_values_reach_the_pod_environment(poc: TierConfig) -> None:
    values = env(proxy(poc, guardrail=GUARDRAIL))
    assert (values["GPUFARM_GUARDRAIL_IDENTIFIER"], values["GPUFARM_GUARDRAIL_VERSION"]) == GUARDRAIL
    assert "GPUFARM_GUARDRAIL_IDENTIFIER" not in env(proxy(poc))


def test_manifests_are_deterministic(production: TierConfig) -> None:
    assert manifests(production, guardrail=GUARDRAIL) == manifests(
        load_preset("production"), guardrail=GUARDRAIL
    )


def test_production_overrides_reach_the_manifests() -> None:
    tier = make_production(overrides({"fallback": {"replicas": 5}}))
    assert of_kind(manifests(tier), "HorizontalPodAutoscaler")["spec"]["minReplicas"] == 5
    pinned = make_production(overrides({"fallback": {"replicas": 5, "max_replicas": 5}}))
    assert deployment(pinned)["spec"]["replicas"] == 5


def test_the_metrics_callback_is_wired_only_when_prometheus_scrapes_the_gateway(
    poc: TierConfig, production: TierConfig
) -> None:
    poc_container = deployment(poc)["spec"]["template"]["spec"]["containers"][0]
    assert [p["name"] for p in poc_container["ports"]] == ["http"]
    assert "--prometheus_metrics_port" not in poc_container["args"]
    assert demand.MODELS_ENV not in {e["name"] for e in poc_container["env"]}
    assert "callbacks" not in gw.litellm_config(poc)["litellm_settings"]

    container = deployment(production)["spec"]["template"]["spec"]["containers"][0]
    assert container["ports"][1] == {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}
    assert container["args"][-2:] == ["--prometheus_metrics_port", "9090"]
    env = {e["name"]: e["value"] for e in container["env"]}
    # Only the model that scales to zero is counted, by the name clients send.
    assert env[demand.MODELS_ENV] == '["Qwen/Qwen3-32B"]'
    assert env["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/prometheus-multiproc"
    assert gw.litellm_config(production)["litellm_settings"]["callbacks"] == ["gpufarm_demand.handler"]
    # Every model's deployments, by the ids the config gives them, name the model and the backend.
    assert json.loads(env[demand.DEPLOYMENTS_ENV]) == {
        "bedrock-llama-3-3-70b": ["meta-llama/Llama-3.3-70B-Instruct", "bedrock"],
        "vllm-llama-3-3-70b": ["meta-llama/Llama-3.3-70B-Instruct", "vllm"],
        "vllm-qwen3-32b-batch": ["Qwen/Qwen3-32B", "vllm"],
    }
    ids = {d["model_info"]["id"] for d in gw.litellm_config(production)["model_list"]}
    assert ids == set(json.loads(env[demand.DEPLOYMENTS_ENV]))


def test_the_metrics_callback_runs_without_a_parked_model_while_prometheus_is_on() -> None:
    always_up = make_production(production_model(1, autoscaling={"min_replicas": 1}))
    container = deployment(always_up)["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][-2:] == ["--prometheus_metrics_port", "9090"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env[demand.MODELS_ENV] == "[]"  # nothing to wake; the answers are still counted
    assert set(json.loads(env[demand.DEPLOYMENTS_ENV])) == {
        "bedrock-llama-3-3-70b",
        "vllm-llama-3-3-70b",
        "vllm-qwen3-32b-batch",
    }
    assert gw.litellm_config(always_up)["litellm_settings"]["callbacks"] == ["gpufarm_demand.handler"]


def test_a_split_model_maps_each_shares_deployment_and_the_routes_one() -> None:
    tier = make_enterprise(split())
    served = gw.served_deployments(tier)
    name = tier.models[1].api_model_name
    by_share = {d["model_info"]["id"] for d in gw.litellm_config(tier)["model_list"]}
    routed = {d["model_info"]["id"] for d in gw.litellm_config(tier, load_balanced=True)["model_list"]}
    assert by_share | routed <= set(served)
    split_model = tier.models[1].name
    assert {k for k, (model, _) in served.items() if model == name} >= {
        f"vllm-{split_model}-h100",
        f"vllm-{split_model}-l40s",
        f"vllm-{split_model}",
    }
    assert served[f"vllm-{split_model}-l40s"] == (name, "vllm")


def test_the_callback_module_is_python_the_proxy_can_import() -> None:
    # Its behaviour is checked in the real proxy (tests/e2e/test_wake_from_zero.py).
    compile(demand.CALLBACK_SOURCE, demand.CALLBACK_FILE, "exec")
