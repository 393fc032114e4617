"""The upstream-reference checkers (tests/unit/upstream_ref.py): what gpufarm's pure functions emit
passes against the releases it pins, and each kind of mistake is reported with the nearest known
name, or with the data file that is missing when a pin moves past `../shared/upstream-ref/`."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from gpufarm.config import TierConfig, load_preset
from gpufarm.config.model import PrefillDecodeConfig
from gpufarm.constructs.observability import PROMQL_QUERIES
from gpufarm.k8s import kv_cache_routing, prefill_decode, scaled_object, trigger_authentication, vllm_args
from gpufarm.k8s.gateway import litellm_config
from gpufarm.k8s.lws import multinode_args

from .upstream_ref import (
    DCGM_METRIC,
    REF_DIR,
    VLLM_METRIC,
    dcgm_metric_issues,
    flag_issues,
    helm_value_issues,
    image_issues,
    image_tag,
    keda_issues,
    label_issues,
    label_keys,
    label_release_issues,
    litellm_config_issues,
    load,
    picker_config_issues,
    ref_dir,
    vllm_arg_issues,
    vllm_metric_issues,
)

VLLM = "0.31.0"
LITELLM = "1.102.1"
KEDA = "2.18.1"
AMP = "https://aps-workspaces.us-east-1.amazonaws.com/workspaces/ws-01234567-89ab-cdef-0123-456789abcdef"


@pytest.fixture(autouse=True)
def _reference_data() -> None:
    ref_dir()  # skips visibly when ../shared/upstream-ref is absent


def _presets() -> list[TierConfig]:
    return [load_preset(name) for name in ("poc", "production", "enterprise")]


def _vllm_version() -> str:
    versions = {tier.serving.vllm_image for tier in _presets()}
    assert len(versions) == 1, versions
    return image_tag(versions.pop())[1].removeprefix("v")


# --------------------------------------------------------------------------- pins have data


def test_vllm_and_litellm_pins_have_reference_data() -> None:
    assert _vllm_version() == VLLM
    assert load(f"vllm@{VLLM}.json")["version"] == VLLM
    gateway_images = {tier.fallback.image for tier in _presets()}
    assert {image_tag(i)[1] for i in gateway_images} == {f"v{LITELLM}"}


def test_a_pin_past_the_data_names_the_missing_file() -> None:
    assert vllm_arg_issues(["m", "--port", "8000"], "0.32.0") == [
        f"vllm 0.32.0: no upstream reference data for this pin: {REF_DIR}/vllm@0.32.0.json is missing"
    ]
    assert helm_value_issues("keda", "2.19.0", {"operator": {}}) == [
        f"keda 2.19.0: no upstream reference data for this pin: {REF_DIR}/charts/keda@2.19.0.json is missing"
    ]
    assert litellm_config_issues({}, "1.103.0") == [
        f"litellm 1.103.0: no upstream reference data for this pin: {REF_DIR}/litellm@1.103.0.json is missing"
    ]
    assert dcgm_metric_issues(["DCGM_FI_DEV_GPU_UTIL"], "4.7.0") == [
        f"dcgm-exporter 4.7.0: no upstream reference data for this pin: "
        f"{REF_DIR}/dcgm-exporter@4.7.0-metrics.json is missing"
    ]


# --------------------------------------------------------------------------- Helm values


def test_helm_values_keys_are_checked_against_the_chart() -> None:
    values = {
        "operator": {"replicaCount": 2, "replicaCont": 1},
        "resources": {"operator": {"limits": {"memory": "1Gi"}}},
        "serviceAcount": {"create": True},
    }
    assert helm_value_issues("keda", KEDA, values) == [
        f"keda {KEDA}: values key 'operator.replicaCont' is not in the chart's values.yaml and no template "
        "reads it (nearest known: 'operator.replicaCount')",
        f"keda {KEDA}: values key 'serviceAcount' is not in the chart's values.yaml and no template "
        "reads it (nearest known: 'serviceAccount')",
    ]


def test_keys_below_a_wholesale_ref_are_free_form() -> None:
    # nodeSelector and resources are rendered with toYaml: any key below them reaches the pod.
    values = {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "resources": {"operator": {"anything": {"x": 1}}},
    }
    assert helm_value_issues("keda", KEDA, values) == []


def test_a_key_only_templates_read_is_known() -> None:
    data = load(f"charts/keda@{KEDA}.json")
    only_in_templates = sorted(
        r for r in data["template_refs"] if not _in_tree(data["values"], r.split(".")) and "." in r
    )
    assert only_in_templates, "the chart reads keys its values.yaml does not list"
    path = only_in_templates[0].split(".")
    value: dict[str, Any] = {}
    node = value
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = "x"
    assert helm_value_issues("keda", KEDA, value) == []


def _in_tree(tree: Any, path: list[str]) -> bool:
    for key in path:
        if not isinstance(tree, dict) or key not in tree:
            return False
        tree = tree[key]
    return True


# --------------------------------------------------------------------------- vLLM


def test_every_preset_model_flag_is_a_vllm_flag() -> None:
    checked = 0
    for tier in _presets():
        for model in tier.models:
            args = (
                multinode_args(model, tier.serving)
                if model.pipeline_parallel > 1
                else vllm_args(model, tier.serving)
            )
            assert vllm_arg_issues(args, VLLM) == [], model.name
            checked += 1
    assert checked >= 6


def test_prefill_decode_engine_flags_are_vllm_flags() -> None:
    args = ["m", *prefill_decode.engine_args(PrefillDecodeConfig())]
    assert "--kv-transfer-config" in args
    assert vllm_arg_issues(args, VLLM) == []


def test_removed_and_misspelled_vllm_flags_are_reported() -> None:
    args = ["m", "--swap-space", "4", "--disable-log-requests", "--max-model-lenght=4096", "--port", "8000"]
    assert vllm_arg_issues(args, VLLM) == [
        f"vllm {VLLM}: unknown flag '--swap-space' (no known name is close)",
        f"vllm {VLLM}: unknown flag '--disable-log-requests' (nearest known: '--enable-log-requests')",
        f"vllm {VLLM}: unknown flag '--max-model-lenght' (nearest known: '--max-model-len')",
    ]


def test_vllm_choices_and_kv_transfer_config_are_checked() -> None:
    kv = json.dumps({"kv_connector": "NixlConector", "kv_role": "kv_both", "kv_rol": "x"})
    args = ["m", "--dtype", "bf16", "--kv-transfer-config", kv]
    issues = vllm_arg_issues(args, VLLM)
    assert issues[0].startswith(f"vllm {VLLM}: --dtype 'bf16' is not one of [")
    assert issues[1:] == [
        f"vllm {VLLM}: unknown KVTransferConfig field 'kv_rol' (nearest known: 'kv_role')",
        f"vllm {VLLM}: unknown kv_connector 'NixlConector' (nearest known: 'NixlConnector')",
    ]


# --------------------------------------------------------------------------- LiteLLM


@pytest.mark.parametrize("tier", _presets(), ids=lambda t: t.name)
def test_gateway_config_keys_are_litellm_keys(tier: TierConfig) -> None:
    config = litellm_config(tier, guardrail=("arn:aws:bedrock:us-east-1:123456789012:guardrail/x", "1"))
    assert config["model_list"]
    assert litellm_config_issues(yaml.safe_load(yaml.safe_dump(config)), LITELLM) == []


def test_unknown_litellm_keys_are_reported() -> None:
    config = copy.deepcopy(litellm_config(load_preset("production")))
    config["router_settings"]["num_retry"] = 2
    config["model_list"][0]["litellm_params"]["api_bse"] = "http://x"
    config["model_list"][0].setdefault("model_info", {})["base_modle"] = "x"
    config["litelm_settings"] = {}
    assert litellm_config_issues(config, LITELLM) == [
        f"litellm {LITELLM}: unknown top-level key 'litelm_settings' (nearest known: 'litellm_settings')",
        f"litellm {LITELLM}: unknown router_settings key 'num_retry' (nearest known: 'num_retries')",
        f"litellm {LITELLM}: unknown model_list[0].litellm_params key 'api_bse' (nearest known: 'api_base')",
        f"litellm {LITELLM}: unknown model_list[0].model_info key 'base_modle' (nearest known: 'base_model')",
    ]


def test_litellm_cli_options_are_checked() -> None:
    known = load(f"litellm@{LITELLM}.json")["cli_flags"]
    assert flag_issues(["--config", "/c.yaml", "--num_workers", "1"], known, "litellm") == []
    assert flag_issues(["--num-workers", "1"], known, "litellm") == [
        "litellm: unknown flag '--num-workers' (nearest known: '--num_workers')"
    ]


# --------------------------------------------------------------------------- endpoint pickers


def test_kv_router_plugins_are_gaie_plugins() -> None:
    config = json.loads(kv_cache_routing.plugins_config())
    assert picker_config_issues(config, "epp-gaie@v1.5.0.json") == []
    assert (
        flag_issues(kv_cache_routing.epp_args("m", 8000), load("epp-gaie@v1.5.0.json")["flags"], "epp") == []
    )


def test_prefill_decode_plugins_are_llm_d_plugins() -> None:
    config = json.loads(prefill_decode.plugins_config(PrefillDecodeConfig()))
    issues = picker_config_issues(config, "epp-llm-d@v0.9.0.json")
    # disagg-headers-handler is deprecated in v0.9.0; the change replacing it is under way.
    deprecated = ["epp-llm-d@v0.9.0.json: plugin type 'disagg-headers-handler' is deprecated"]
    assert issues == (
        deprecated if any(p["type"] == "disagg-headers-handler" for p in config["plugins"]) else []
    )
    args = prefill_decode.epp_args("m", 8000, "/etc/epp/plugins.yaml")
    assert flag_issues(args, load("epp-llm-d@v0.9.0.json")["flags"], "epp") == []


def test_unknown_plugins_and_parameters_are_reported() -> None:
    config = json.loads(kv_cache_routing.plugins_config())
    config["plugins"][0]["type"] = "queue-scorrer"
    config["plugins"].append({"type": "max-score-picker", "parameters": {"maxNumEndpoints": 1}})
    config["schedulingProfiles"][0]["plugins"].append({"pluginRef": "nope"})
    assert picker_config_issues(config, "epp-gaie@v1.5.0.json") == [
        "epp-gaie@v1.5.0.json: unknown plugin type 'queue-scorrer' (nearest known: 'queue-scorer')",
        "epp-gaie@v1.5.0.json: plugin 'max-score-picker' has no parameter 'maxNumEndpoints' "
        "(nearest known: 'maxNumOfEndpoints')",
        "epp-gaie@v1.5.0.json: profile 'default' refers to undeclared plugin 'queue-scorer'",
        "epp-gaie@v1.5.0.json: profile 'default' refers to undeclared plugin 'nope'",
    ]


def test_go_flags_with_inline_values_are_checked() -> None:
    known = load("epp-gaie@v1.5.0.json")["flags"]
    assert flag_issues(["--tracing=false", "--zap-encoder", "json"], known, "epp") == []
    assert flag_issues(["--traceing=false"], known, "epp") == [
        "epp: unknown flag '--traceing' (nearest known: 'tracing')"
    ]


# --------------------------------------------------------------------------- KEDA


def _scaled_object() -> dict[str, Any]:
    tier = load_preset("production")
    model = next(m for m in tier.models if m.autoscaling is not None)
    return scaled_object(model, namespace="gpufarm", query_endpoint=AMP, region="us-east-1")


def test_keda_objects_use_known_metadata() -> None:
    so = _scaled_object()
    assert {t["type"] for t in so["spec"]["triggers"]} == {"prometheus"}
    assert keda_issues(so, KEDA) == []
    assert keda_issues(trigger_authentication("gpufarm"), KEDA) == []


def test_unknown_keda_metadata_is_reported() -> None:
    so = _scaled_object()
    so["spec"]["triggers"][0]["metadata"]["serverAdress"] = "x"
    auth = trigger_authentication("gpufarm")
    auth["spec"]["podIdentity"]["provider"] = "aws-ek"
    name = so["metadata"]["name"]
    assert keda_issues(so, KEDA) == [
        f"keda {KEDA}: ScaledObject/{name} unknown prometheus metadata 'serverAdress' "
        "(nearest known: 'serverAddress')"
    ]
    assert keda_issues(auth, KEDA) == [
        f"keda {KEDA}: TriggerAuthentication/gpufarm-amp podIdentity provider 'aws-ek' "
        "(nearest known: 'aws-eks')"
    ]


# --------------------------------------------------------------------------- series


def test_dashboard_series_are_exported_by_the_pinned_releases() -> None:
    text = " ".join(query for _, query in PROMQL_QUERIES)
    dcgm = DCGM_METRIC.findall(text)
    vllm = VLLM_METRIC.findall(text)
    assert dcgm and vllm
    assert dcgm_metric_issues(dcgm, "4.6.0") == []
    assert vllm_metric_issues(vllm, VLLM) == []


def test_unknown_and_disabled_series_are_reported() -> None:
    disabled = load("dcgm-exporter@4.6.0-metrics.json")["commented_counters"][0]
    assert dcgm_metric_issues(["DCGM_FI_DEV_GPU_UTILIZATION", disabled], "4.6.0") == [
        f"dcgm-exporter 4.6.0: {disabled} is commented out in default-counters.csv (not exported)",
        "dcgm-exporter 4.6.0: unknown metric 'DCGM_FI_DEV_GPU_UTILIZATION' "
        "(nearest known: 'DCGM_FI_DEV_GPU_UTIL')",
    ]
    assert vllm_metric_issues(
        ["vllm:e2e_request_latency_seconds_bucket", "vllm:num_request_waiting"], VLLM
    ) == [
        f"vllm {VLLM}: unknown metric 'vllm:num_request_waiting' (nearest known: 'vllm:num_requests_waiting')"
    ]


# --------------------------------------------------------------------------- labels and images


def test_vendor_labels_are_checked() -> None:
    manifest = {
        "metadata": {"labels": {"gpufarm.io/model": "x", "app.kubernetes.io/name": "vllm", "app": "x"}},
        "spec": {
            "nodeSelector": {"karpenter.sh/capacity-typ": "spot"},
            "affinity": {
                "matchExpressions": [{"key": "eks.amazonaws.com/instance-gpu-nam", "operator": "Exists"}]
            },
            "topologyKey": "example.com/zone",
        },
    }
    assert sorted(label_keys(manifest)) == [
        "app",
        "app.kubernetes.io/name",
        "eks.amazonaws.com/instance-gpu-nam",
        "example.com/zone",
        "gpufarm.io/model",
        "karpenter.sh/capacity-typ",
    ]
    assert label_issues(label_keys(manifest)) == [
        "label 'eks.amazonaws.com/instance-gpu-nam' is not defined by eks.amazonaws.com "
        "(nearest known: 'eks.amazonaws.com/instance-gpu-name')",
        "label 'example.com/zone' has a domain that is neither gpufarm's nor a known vendor's",
        "label 'karpenter.sh/capacity-typ' is not defined by karpenter.sh "
        "(nearest known: 'karpenter.sh/capacity-type')",
    ]


def test_label_data_must_come_from_the_pinned_release() -> None:
    keys = ["karpenter.sh/capacity-type", "leaderworkerset.sigs.k8s.io/worker-index"]
    assert label_release_issues(keys, {"karpenter": "1.14.0", "lws": "0.10.0"}) == []
    assert label_release_issues(keys, {"karpenter": "1.15.0", "lws": "0.10.0"}) == [
        "labels.json holds karpenter.sh labels of karpenter 1.14, the stack pins karpenter 1.15.0: "
        "no label data for the pinned release"
    ]


def test_image_tags_must_be_confirmed_published() -> None:
    assert image_issues(["vllm/vllm-openai:v0.31.0", "registry.k8s.io/lws/lws:v0.10.0", "busybox:1"]) == []
    assert image_issues(["vllm/vllm-openai:v0.31.1"]) == [
        "image vllm/vllm-openai:v0.31.1: tag 'v0.31.1' of vllm/vllm-openai is not confirmed published "
        "(nearest known: 'v0.31.0')"
    ]
    assert image_tag("docker.io/envoyproxy/envoy:distroless-v1.33.2") == (
        "docker.io/envoyproxy/envoy",
        "distroless-v1.33.2",
    )
    assert image_tag("localhost:5000/x@sha256:" + "0" * 64) == ("localhost:5000/x", "")
