"""What runs on ec2 instances (gpufarm/hosts): user data, systemd units, the CloudWatch agent's configs."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace

import pytest
import yaml

from gpufarm.hosts import engine, gateway, metrics
from gpufarm.hosts.shell import env_file, heredoc

HOST = engine.EngineHost(
    model="qwen3-8b",
    image="vllm/vllm-openai:v0.31.0@sha256:" + "0" * 64,
    command=("vllm", "serve"),
    args=("/models/qwen3-8b", "--port", "8000"),
    port=8000,
    readiness_path="/health",
    weights_uri="s3://models/Qwen/Qwen3-8B/",
    environment={"HOME": "/home/gpufarm"},
    region="us-east-1",
    registry=None,
    group_name="gpufarm-t-l40s",
    launch_hook="ready-hook",
    termination_hook="drain-hook",
    target_group_arn="arn:aws:elasticloadbalancing:us-east-1:111122223333:targetgroup/tg/0123",
    drain_seconds=300,
    startup_timeout_seconds=1800,
    log_group="logs",
    cloudwatch_config="{}",
    prometheus_config="global: {}\n",
)


def _file(user_data: str, path: str) -> str:
    """The content a heredoc in `user_data` writes to `path`."""
    match = re.search(rf"cat > {re.escape(path)} <<'(\w+)'\n(.*?)\n\1\n", user_data, re.S)
    assert match, f"no heredoc writes {path}"
    return match.group(2)


def test_a_heredoc_writes_its_content_verbatim_whatever_it_holds(tmp_path: pytest.TempPathFactory) -> None:
    content = 'GPUFARM_EOF\n$HOME `id` "quoted"\n'
    target = f"{tmp_path}/out"
    script = "\n".join(heredoc(target, content, mode="0600"))
    subprocess.run(["bash", "-c", script], check=True)
    with open(target, encoding="utf-8") as written:
        assert written.read() == content


def test_an_environment_file_refuses_a_value_on_two_lines() -> None:
    with pytest.raises(ValueError) as caught:
        env_file({"A": "x\ny"})
    assert str(caught.value) == "environment value of 'A' must be one line, got 'x\\ny'"
    assert env_file({"B": "2", "A": "1"}) == "A=1\nB=2\n"


def test_the_user_data_is_valid_bash() -> None:
    for text in (engine.user_data(HOST), gateway.user_data(_gateway_host())):
        subprocess.run(["bash", "-n"], input=text, text=True, check=True)


def test_prepare_pulls_only_a_missing_image_and_syncs_the_weights_once() -> None:
    script = _file(engine.user_data(HOST), engine.PREPARE_SCRIPT)
    assert f"docker image inspect {HOST.image} >/dev/null 2>&1 || docker pull {HOST.image}" in script
    marker = f"{engine.MODELS_DIR}/qwen3-8b/.gpufarm-synced"
    sync = (
        f"aws s3 sync --region us-east-1 --only-show-errors {HOST.weights_uri} {engine.MODELS_DIR}/qwen3-8b"
    )
    assert script.index(f"if [ ! -f {marker} ]") < script.index(sync) < script.index(f"touch {marker}")
    # Hugging Face weights: nothing to sync, the engine downloads into its HOME on the volume.
    assert "aws s3 sync" not in _file(
        engine.user_data(replace(HOST, weights_uri=None)), engine.PREPARE_SCRIPT
    )


def test_an_ecr_image_is_pulled_after_signing_in_to_its_registry() -> None:
    registry = "111122223333.dkr.ecr.us-east-1.amazonaws.com"
    script = _file(engine.user_data(replace(HOST, registry=registry)), engine.PREPARE_SCRIPT)
    assert script.index(f"docker login --username AWS --password-stdin {registry}") < script.index(
        "docker pull"
    )


def test_the_engine_runs_only_in_service_after_prepare_and_on_the_hosts_network() -> None:
    text = engine.user_data(HOST)
    unit = _file(text, f"/etc/systemd/system/{engine.ENGINE_UNIT}")
    assert f"ExecCondition={engine.IN_SERVICE_SCRIPT}" in unit
    assert f"Requires={engine.PREPARE_UNIT}" in unit and "Restart=always" in unit
    condition = _file(text, engine.IN_SERVICE_SCRIPT)
    assert "autoscaling/target-lifecycle-state" in condition and "Warmed:*) exit 1" in condition
    run = _file(text, engine.RUN_SCRIPT)
    assert "--gpus all --network host" in run
    assert f"--volume {engine.MODELS_DIR}/qwen3-8b:/models/qwen3-8b:ro" in run
    assert run.rstrip().endswith(f"--entrypoint vllm {HOST.image} serve /models/qwen3-8b --port 8000")


def test_ready_ends_the_launch_hook_at_once_for_the_warm_pool_and_after_the_engine_answers_otherwise() -> (
    None
):
    script = _file(engine.user_data(HOST), engine.READY_SCRIPT)
    complete = "--lifecycle-hook-name ready-hook --auto-scaling-group-name gpufarm-t-l40s"
    warmed, in_service = script.split("esac", 1)
    assert complete in warmed
    assert in_service.index("until curl -sf -o /dev/null http://127.0.0.1:8000/health") < in_service.index(
        complete
    )
    assert "deadline=$((SECONDS + 1800))" in in_service


def test_drain_deregisters_then_waits_the_delay_then_stops_then_ends_the_hook() -> None:
    script = _file(engine.user_data(HOST), engine.DRAIN_SCRIPT)
    steps = [
        f"--target-group-arn {HOST.target_group_arn} ",
        "sleep 300",
        f"systemctl stop {engine.AGENT_UNIT} {engine.ENGINE_UNIT}",
        "--lifecycle-hook-name drain-hook",
    ]
    assert [script.index(s) for s in steps] == sorted(script.index(s) for s in steps)
    assert "Terminated|Warmed:*)" in script


def test_the_target_optimizer_agent_runs_in_front_of_the_engine_with_its_cap() -> None:
    agent = engine.TargetControlAgent(
        image="agent@sha256:" + "1" * 64, data_port=8080, control_port=3000, max_concurrency=16
    )
    units = engine.units(replace(HOST, target_control=agent))
    unit = units[engine.AGENT_UNIT]
    for variable in (
        "TARGET_CONTROL_DATA_ADDRESS=0.0.0.0:8080",
        "TARGET_CONTROL_CONTROL_ADDRESS=0.0.0.0:3000",
        "TARGET_CONTROL_DESTINATION=127.0.0.1:8000",
        "TARGET_CONTROL_MAX_CONCURRENCY=16",
    ):
        assert variable in unit
    assert engine.AGENT_UNIT not in engine.units(HOST)


def test_the_hugging_face_token_is_read_at_start_and_never_written() -> None:
    text = engine.user_data(replace(HOST, hf_token_secret="hf-token"))
    run = _file(text, engine.RUN_SCRIPT)
    assert "aws secretsmanager get-secret-value --region us-east-1 --secret-id hf-token" in run
    assert "--env HF_TOKEN" in run
    assert "HF_TOKEN" not in _file(text, engine.ENV_FILE)


def test_the_agent_publishes_only_the_queue_series_by_group() -> None:
    config = json.loads(
        metrics.agent_config(
            queue_metric="vllm:num_requests_waiting", log_group="g", prometheus_config_path="/p.yaml"
        )
    )
    prometheus = config["logs"]["metrics_collected"]["prometheus"]
    assert prometheus["prometheus_config_path"] == "/p.yaml"
    assert prometheus["metric_namespace"] == metrics.METRICS_NAMESPACE
    (declaration,) = prometheus["emf_processor"]["metric_declaration"]
    assert declaration["dimensions"] == [[metrics.GROUP_DIMENSION]]
    (selector,) = declaration["metric_selectors"]
    assert re.fullmatch(selector, "vllm:num_requests_waiting")
    assert not re.fullmatch(selector, "vllm:num_requests_waiting_total")
    scrape = yaml.safe_load(metrics.scrape_config(port=8000, metrics_path="/metrics", group_name="grp"))
    (job,) = scrape["scrape_configs"]
    assert job["job_name"] == metrics.SCRAPE_JOB and re.fullmatch(
        declaration["label_matcher"], job["job_name"]
    )
    assert job["static_configs"] == [
        {"targets": ["127.0.0.1:8000"], "labels": {metrics.GROUP_DIMENSION: "grp"}}
    ]


def _gateway_host(**changes: object) -> gateway.GatewayHost:
    host = gateway.GatewayHost(
        image="ghcr.io/berriai/litellm@sha256:" + "2" * 64,
        config_yaml='"model_list": []\n',
        config_path="/etc/litellm/config.yaml",
        args=("--config", "/etc/litellm/config.yaml", "--port", "4000"),
        port=4000,
        environment={"AWS_REGION": "us-east-1"},
        region="us-east-1",
        registry=None,
        run_as_user=65532,
        graceful_seconds=240,
        log_group="logs",
    )
    return replace(host, **changes)  # type: ignore[arg-type]


def test_the_gateway_runs_unprivileged_on_a_read_only_root_with_the_generated_config() -> None:
    text = gateway.user_data(_gateway_host())
    run = _file(text, gateway.RUN_SCRIPT)
    assert "--read-only --tmpfs /tmp --user 65532:65532" in run
    assert f"--volume {gateway.CONFIG_FILE}:/etc/litellm/config.yaml:ro" in run
    assert _file(text, gateway.CONFIG_FILE) == '"model_list": []'
    unit = _file(text, f"/etc/systemd/system/{gateway.UNIT}")
    # docker stop waits past the proxy's own graceful shutdown.
    assert f"docker stop -t {240 + gateway.STOP_MARGIN_SECONDS}" in unit


def test_the_gateways_master_key_is_read_at_start_into_its_environment_only() -> None:
    text = gateway.user_data(_gateway_host(master_key_secret="gw-key"))
    run = _file(text, gateway.RUN_SCRIPT)
    assert "--secret-id gw-key" in run and "--env LITELLM_MASTER_KEY" in run
    assert "LITELLM_MASTER_KEY" not in _file(text, gateway.ENV_FILE)
