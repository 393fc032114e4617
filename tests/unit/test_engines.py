"""The engine registry: each engine's arguments, flags, endpoints, manifests and config refusals."""

from __future__ import annotations

import ast
import io
import re
import zipfile
from typing import Any

import pytest
import yaml

from gpufarm import images as image_table
from gpufarm.config import ConfigError
from gpufarm.config.engine_flags import flag_list
from gpufarm.config.image_pins import unpinned_images
from gpufarm.config.model import Engine, ModelConfig, ServingConfig
from gpufarm.config.sections.serving import TGI_REFUSED
from gpufarm.core.endpoints import model_endpoints
from gpufarm.core.engine_metrics import engine_metrics
from gpufarm.core.engines import ENGINES, SGLANG, TRTLLM, TRTLLM_CONFIG_FILE, VLLM, engine_of
from gpufarm.k8s import serving as k8s_serving
from scripts.engine_serve_flags import render, sglang_flags, trtllm_flags
from tests.conftest import REPO

from .factories import make_tier, model_override


def issues_of(*parts: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        make_tier(*parts)
    return [str(issue) for issue in caught.value.issues]


def model(**fields: Any) -> ModelConfig:
    return ModelConfig.model_validate(
        {"name": "m", "weights": "Qwen/Qwen3-8B", "gpus": 2, "max_model_len": 4096, **fields}
    )


# ------------------------------------------------------------------ arguments and flag lists


def test_vllm_arguments_are_unchanged_by_the_registry() -> None:
    args = k8s_serving.engine_args(model(quantization="fp8", max_num_seqs=32), ServingConfig())
    assert args == [
        "Qwen/Qwen3-8B",
        "--served-model-name",
        "m",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--tensor-parallel-size",
        "2",
        "--max-model-len",
        "4096",
        "--gpu-memory-utilization",
        "0.9",
        "--dtype",
        "auto",
        "--quantization",
        "fp8",
        "--max-num-seqs",
        "32",
    ]


def test_sglang_maps_each_setting_to_its_own_flag_and_turns_metrics_on() -> None:
    args = k8s_serving.engine_args(
        model(
            engine="sglang", revision="abc", max_num_seqs=32, extra_args=["--chunked-prefill-size", "4096"]
        ),
        ServingConfig(),
    )
    assert args == [
        "--model-path",
        "Qwen/Qwen3-8B",
        "--served-model-name",
        "m",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--tp-size",
        "2",
        "--context-length",
        "4096",
        "--mem-fraction-static",
        "0.9",
        "--dtype",
        "auto",
        "--revision",
        "abc",
        "--max-running-requests",
        "32",
        "--enable-metrics",
        "--chunked-prefill-size",
        "4096",
    ]


def test_trtllm_reads_s3_weights_by_path_and_its_metrics_config_file() -> None:
    args = k8s_serving.engine_args(
        model(engine="trtllm", weights="s3://bucket/qwen/", max_num_seqs=16), ServingConfig()
    )
    assert args == [
        "/models/m",
        "--host",
        "0.0.0.0",
        "--port",
        "8000",
        "--tp_size",
        "2",
        "--max_seq_len",
        "4096",
        "--kv_cache_free_gpu_memory_fraction",
        "0.9",
        "--max_batch_size",
        "16",
        "--backend",
        "pytorch",
        "--extra_llm_api_options",
        TRTLLM_CONFIG_FILE,
    ]


@pytest.mark.parametrize("engine", list(Engine), ids=str)
def test_every_flag_gpufarm_emits_is_in_the_engines_release(engine: Engine) -> None:
    spec = ENGINES[engine]
    flags = flag_list(engine)
    emitted = [a for a in spec.owned_flags]
    assert emitted, engine
    unknown = [f for f in emitted if not flags.is_known(f)]
    assert unknown == []


@pytest.mark.parametrize("engine", list(Engine), ids=str)
def test_the_flag_list_describes_the_pinned_image(engine: Engine) -> None:
    image = ServingConfig().engine_image(engine)
    assert flag_list(engine).applies_to(image)
    assert image.startswith(image_table.image(ENGINES[engine].image_key).repository)


def test_sglang_and_trtllm_read_flags_exactly() -> None:
    # argparse and click do not treat '_' as '-': each engine's own spelling is the flag.
    assert flag_list(Engine.SGLANG).is_known("--tp-size")
    assert not flag_list(Engine.SGLANG).is_known("--tp_size")
    assert flag_list(Engine.TRTLLM).is_known("--tp_size")
    assert not flag_list(Engine.TRTLLM).is_known("--tp-size")
    found = flag_list(Engine.SGLANG).flag_args(["--tp-size=2", "-1", "--x", "v"])
    assert [(f.index, f.flag) for f in found] == [(0, "--tp-size"), (2, "--x")]


# ------------------------------------------------------------------ the flag-list script


def _wheel(files: dict[str, str]) -> zipfile.ZipFile:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)
    return zipfile.ZipFile(buffer)


def test_the_script_reads_sglang_flags_from_the_namespace_fields_and_add_cli_args() -> None:
    wheel = _wheel(
        {
            "sglang/srt/server_args.py": (
                "from sglang.srt.arg_groups.fields.serving import Serving\n"
                "_INPUT_NAMESPACES = [Serving]\n"
                "class ServerArgs:\n"
                "    @staticmethod\n"
                "    def add_cli_args(parser):\n"
                "        parser.add_argument('--config', type=str)\n"
            ),
            "sglang/srt/arg_groups/fields/serving.py": (
                "class Serving:\n"
                "    host: A[str, 'The host.'] = '127.0.0.1'\n"
                "    tp_size: A[int, Arg(help='TP', cli_name='--tp-size',"
                " aliases=['--tensor-parallel-size'])]\n"
                "    hidden: A[int, Arg(no_cli=True)] = 0\n"
                "    plain: int = 0\n"
            ),
        }
    )
    assert sglang_flags(wheel) == ["--host", "--tp-size", "--tensor-parallel-size", "--config"]


def test_the_script_reads_the_click_options_of_trtllm_serve_only() -> None:
    source = (
        "@click.command('serve')\n"
        "@click.argument('model')\n"
        "@click.option('--tensor_parallel_size', '--tp_size', type=int)\n"
        "@click.option('--config', '--extra_llm_api_options', 'extra_llm_api_options')\n"
        "def serve(model, tensor_parallel_size, extra_llm_api_options): ...\n"
        "@click.command('disaggregated')\n"
        "@click.option('-c', '--config_file')\n"
        "def disaggregated(config_file): ...\n"
    )
    ast.parse(source)
    assert trtllm_flags(source.encode()) == [
        "--tensor_parallel_size",
        "--tp_size",
        "--config",
        "--extra_llm_api_options",
        "--help",
    ]


# ------------------------------------------------------------------ endpoints and manifests


@pytest.mark.parametrize(
    ("engine", "health", "ready", "metrics"),
    [
        ("vllm", "/health", "/health", "/metrics"),
        ("sglang", "/health", "/ready", "/metrics"),
        ("trtllm", "/health", "/health", "/prometheus/metrics"),
    ],
)
def test_each_engine_has_its_paths(engine: str, health: str, ready: str, metrics: str) -> None:
    spec = ENGINES[Engine(engine)]
    assert (spec.health_path, spec.readiness_path, spec.metrics_path) == (health, ready, metrics)


def test_the_load_balancer_health_check_asks_the_engines_readiness_path() -> None:
    (endpoint,) = model_endpoints(model(engine="sglang"), ServingConfig())
    assert endpoint.health_check_path == "/ready"
    (endpoint,) = model_endpoints(model(), ServingConfig())
    assert endpoint.health_check_path == "/health"


def _container(m: ModelConfig) -> dict[str, Any]:
    deployment = k8s_serving.vllm_deployment(m, ServingConfig(), pool_name="gpu", region="us-east-1")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container  # type: ignore[no-any-return]


def test_an_sglang_container_runs_sglang_serve_with_its_probes_and_caches() -> None:
    container = _container(model(engine="sglang"))
    assert container["name"] == "sglang"
    assert container["image"] == ServingConfig().sglang_image
    assert container["command"] == ["sglang", "serve"]
    assert container["startupProbe"]["httpGet"]["path"] == "/ready"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    env = {e["name"]: e["value"] for e in container["env"]}
    # Every cache SGLang writes lands under HOME, an emptyDir on the read-only root.
    home = env["HOME"]
    assert {"home", "tmp"} <= {m["name"] for m in container["volumeMounts"]}
    for name in (
        "SGLANG_CACHE_DIR",
        "TRITON_CACHE_DIR",
        "TORCHINDUCTOR_CACHE_DIR",
        "FLASHINFER_WORKSPACE_BASE",
    ):
        assert env[name].startswith(home + "/"), name
    assert "VLLM_NO_USAGE_STATS" not in env
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_a_trtllm_container_writes_its_metrics_config_to_tmp_then_execs_the_server() -> None:
    container = _container(model(engine="trtllm"))
    assert container["name"] == "trtllm"
    shell, flag, script, argv0 = container["command"]
    assert (shell, flag, argv0) == ("/bin/sh", "-c", "trtllm-serve")
    assert script.startswith("printf 'return_perf_metrics: true\\n' > /tmp/")
    assert script.endswith('exec trtllm-serve "$@"')
    assert container["args"][-2:] == ["--extra_llm_api_options", TRTLLM_CONFIG_FILE]
    assert "/tmp" in {m["mountPath"] for m in container["volumeMounts"]}


def test_a_tag_only_engine_image_is_acknowledged_for_the_scan_and_reported_unpinned() -> None:
    deployment = k8s_serving.vllm_deployment(
        model(engine="sglang"), ServingConfig(), pool_name="gpu", region="us-east-1"
    )
    annotations = deployment["metadata"].get("annotations", {})
    assert any("CKV_K8S_43" in key or "CKV_K8S_43" in str(value) for key, value in annotations.items())
    tier = make_tier(model_override(engine="sglang"))
    assert [u.path for u in unpinned_images(tier)] == ["serving.sglang_image"]


def test_trtllm_answers_to_the_name_of_its_weights() -> None:
    # trtllm-serve has no option to name the model: it reports the model argument, or a local
    # path's directory name. gpufarm routes by path, so the name only shows in its responses.
    assert TRTLLM.reported_name(model(engine="trtllm"), "Qwen/Qwen3-8B") == "Qwen/Qwen3-8B"
    assert TRTLLM.reported_name(model(engine="trtllm"), "/models/m") == "m"
    assert SGLANG.reported_name(model(engine="sglang", served_model_name="x"), "/models/m") == "x"


def test_the_vllm_deployment_keeps_its_container_name() -> None:
    assert _container(model())["name"] == "vllm"
    assert engine_of(model()) is VLLM


# ------------------------------------------------------------------ config refusals


INVALID: list[Any] = [
    pytest.param(
        {"serving": {"sglang_image": "lmsysorg/sglang:v0.5.22"}},
        [
            "serving.sglang_image: must be a container image pinned by digest, such as "
            "'repo/name:v1.2.3@sha256:<64 hex digits>' (read it with `crane digest repo/name:v1.2.3`), "
            "got 'lmsysorg/sglang:v0.5.22'"
        ],
        id="sglang-image-other-tag-without-digest",
    ),
    pytest.param(
        model_override(engine="tgi"),
        [f"models[0].engine: {TGI_REFUSED}"],
        id="tgi-is-in-maintenance-mode",
    ),
    pytest.param(
        model_override(engine="sglang", kv_cache_routing=True),
        [
            "models[0].kv_cache_routing: is not served by engine 'sglang' for model 'qwen3-8b': the "
            "KV-cache-aware endpoint picker scores pods on vLLM's metrics (vllm:kv_cache_usage_perc, "
            "vllm:num_requests_waiting), which this engine does not publish; use engine 'vllm' or "
            "remove it, got True"
        ],
        id="sglang-kv-cache-routing",
    ),
    pytest.param(
        model_override(engine="trtllm", served_model_name="Qwen/Qwen3-8B", quantization="fp8"),
        [
            "models[0].quantization: is not served by engine 'trtllm' for model 'qwen3-8b': "
            "trtllm-serve has no quantization option: it serves the quantization the checkpoint was "
            "made with (a TensorRT Model Optimizer checkpoint); use engine 'vllm' or remove it, "
            "got 'fp8'"
        ],
        id="trtllm-quantization",
    ),
    pytest.param(
        model_override(engine="trtllm", served_model_name="Qwen/Qwen3-8B", dtype="bfloat16"),
        [
            "models[0].dtype: is not served by engine 'trtllm' for model 'qwen3-8b': trtllm-serve "
            "has no dtype option: it serves the checkpoint's precision; use engine 'vllm' or remove "
            "it, got 'bfloat16'"
        ],
        id="trtllm-dtype",
    ),
    pytest.param(
        model_override(engine="sglang", extra_args=["--tp-size", "2"]),
        [
            "models[0].extra_args[0]: must not set --tp-size on engine 'sglang' (gpufarm derives it "
            "from the model config), got '--tp-size'"
        ],
        id="sglang-reserved-flag",
    ),
    pytest.param(
        model_override(engine="sglang", extra_args=["--enable-metric"]),
        [
            "models[0].extra_args[0]: must be a flag of SGLang 0.5.23's `sglang serve`: model "
            "'qwen3-8b' sets '--enable-metric', which that release does not have (nearest known "
            "flag: '--enable-metrics'), got '--enable-metric'"
        ],
        id="sglang-unknown-flag",
    ),
    pytest.param(
        model_override(engine="sglang", extra_args=["--chunked_prefill_size=4096"]),
        [
            "models[0].extra_args[0]: must be a flag of SGLang 0.5.23's `sglang serve`: model "
            "'qwen3-8b' sets '--chunked_prefill_size', which that release does not have (nearest "
            "known flag: '--chunked-prefill-size'), got '--chunked_prefill_size=4096'"
        ],
        id="sglang-underscore-spelling",
    ),
    pytest.param(
        model_override(
            engine="trtllm", served_model_name="Qwen/Qwen3-8B", extra_args=["--max-num-tokens", "8192"]
        ),
        [
            "models[0].extra_args[0]: must be a flag of TensorRT-LLM 1.2.1's `trtllm-serve`: model "
            "'qwen3-8b' sets '--max-num-tokens', which that release does not have (nearest known "
            "flag: '--max_num_tokens'), got '--max-num-tokens'"
        ],
        id="trtllm-dash-spelling",
    ),
    pytest.param(
        model_override(engine="trtllm", served_model_name="Qwen/Qwen3-8B", extra_args=["--config", "x.yaml"]),
        [
            "models[0].extra_args[0]: must not set --config on engine 'trtllm' (gpufarm derives it "
            "from the model config), got '--config'"
        ],
        id="trtllm-config-file-is-gpufarms",
    ),
]


def test_the_shipped_sglang_list_names_its_wheel_and_source() -> None:
    text = (REPO / "gpufarm" / "data" / "sglang_serve_flags.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert data["version"] == "0.5.23"
    assert data["wheel"].startswith("sglang-0.5.23-")
    assert data["source"] == "sglang/srt/server_args.py"
    assert re.fullmatch(r"[0-9a-f]{64}", data["sha256"])
    # The script's own rendering of the same flags is the shipped file, byte for byte.
    assert render("sglang", "0.5.23", data["wheel"], data["source"], data["sha256"], data["flags"]) == text


def test_a_pinned_engine_image_is_accepted_and_not_reported() -> None:
    pinned = "lmsysorg/sglang:v0.5.23@sha256:" + "a" * 64
    tier = make_tier(model_override(engine="sglang"), {"serving": {"sglang_image": pinned}})
    assert unpinned_images(tier) == []
    deployment = k8s_serving.vllm_deployment(
        tier.models[0], tier.serving, pool_name="gpu", region="us-east-1"
    )
    assert "CKV_K8S_43" not in str(deployment["metadata"].get("annotations", {}))


@pytest.mark.parametrize(("override", "expected"), INVALID)
def test_invalid_engine_input_message(override: dict[str, Any], expected: list[str]) -> None:
    assert issues_of(override) == expected


def test_an_sglang_model_with_known_extra_args_is_valid() -> None:
    tier = make_tier(model_override(engine="sglang", extra_args=["--chunked-prefill-size", "4096"]))
    assert tier.models[0].engine is Engine.SGLANG
    assert SGLANG.limitation("kv_cache_routing") is not None
    assert TRTLLM.limitation("shares") is None


@pytest.mark.parametrize("engine", list(Engine), ids=str)
def test_the_registry_and_the_metrics_table_agree_on_paths_and_flags(engine: Engine) -> None:
    # The scraper reads gpufarm/data/engine_metrics.yaml; the container is built from the registry:
    # the path scraped must be the one the server serves, with the flags it needs to serve it.
    spec, metrics = ENGINES[engine], engine_metrics(engine)
    assert metrics.path == spec.metrics_path
    assert metrics.health_path == spec.health_path
    assert set(metrics.requires_flags) <= set(spec.always)
    assert metrics.version == flag_list(engine).version
