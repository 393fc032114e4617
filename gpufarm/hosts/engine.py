"""A GPU instance of `cluster.provisioning: ec2`: the model's engine as a systemd unit.

The instance runs the AWS Deep Learning Base OSS NVIDIA Driver GPU AMI (Amazon Linux 2023),
which ships the NVIDIA driver, the NVIDIA Container Toolkit and the SSM agent (its release notes,
https://docs.aws.amazon.com/dlami/latest/devguide/appendix-ami-release-notes.html, list
`nvidia_driver`, `nvidia_container_toolkit_version`, `containerd_version`, `ssm_agent_version`).
The user data adds systemd units and scripts, nothing downloaded from the internet: the engine's
image comes from the tier's registry (through the ECR pull through cache when it is on), the
weights from the model's `s3://` prefix, and the CloudWatch agent from the Amazon Linux 2023
package repository when the AMI lacks it.

On every boot, in this order:

1. `gpufarm-prepare` pulls the engine image (and the Target Optimizer agent's) unless the volume
   already holds it, and syncs the weights from S3 unless the volume already holds them
   (a marker file written after a complete sync).
2. `gpufarm-engine` (and `gpufarm-agent`) start, unless the instance is on its way into the
   warm pool: Auto Scaling sets the instance metadata item `autoscaling/target-lifecycle-state`
   to `Warmed:Stopped` (or another `Warmed:` state) for an instance launched into the warm pool,
   and to `InService` for one entering service
   (https://docs.aws.amazon.com/autoscaling/ec2/userguide/retrieving-target-lifecycle-state-through-imds.html).
3. `gpufarm-ready` ends the launch lifecycle hook's wait: at once for a warm-pool launch (the
   volume is ready; Auto Scaling then stops the instance), after the engine's readiness path
   answers 200 otherwise. An instance with a launch hook waits at `Warmed:Pending:Wait` when it
   is launched into the warm pool and again at `Pending:Wait` when it leaves it
   (https://docs.aws.amazon.com/autoscaling/ec2/userguide/warm-pool-instance-lifecycle.html).
   cloud-init runs user data on the first boot only, which is why the work lives in units
   enabled at boot rather than in the user data itself (same page, "Important").
4. `gpufarm-drain` watches for termination (`Terminated`, or `Warmed:` on a scale-in that
   returns the instance to the warm pool): it deregisters the instance from its target group,
   waits the deregistration delay so in-flight requests finish, stops the engine and ends the
   termination hook's wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpufarm.hosts.shell import (
    IMDS_HELPER,
    command_line,
    complete_lifecycle_action,
    env_file,
    heredoc,
    imds_helper,
)

STATE_DIR = "/opt/gpufarm"
"""Where the instance keeps what survives a stop: weights, caches, markers (the root EBS volume)."""
MODELS_DIR = f"{STATE_DIR}/models"
CACHE_DIR = f"{STATE_DIR}/cache"
"""The engine's HOME: Hugging Face downloads and compile caches persist across a warm-pool stop."""
ENV_FILE = "/etc/gpufarm/engine.env"
RUN_SCRIPT = "/usr/local/sbin/gpufarm-engine-run"
PREPARE_SCRIPT = "/usr/local/sbin/gpufarm-prepare"
READY_SCRIPT = "/usr/local/sbin/gpufarm-ready"
DRAIN_SCRIPT = "/usr/local/sbin/gpufarm-drain"
IN_SERVICE_SCRIPT = "/usr/local/sbin/gpufarm-in-service"
ENGINE_UNIT = "gpufarm-engine.service"
AGENT_UNIT = "gpufarm-agent.service"
PREPARE_UNIT = "gpufarm-prepare.service"
READY_UNIT = "gpufarm-ready.service"
DRAIN_UNIT = "gpufarm-drain.service"
ENGINE_CONTAINER = "gpufarm-engine"
AGENT_CONTAINER = "gpufarm-agent"
CONTAINER_HOME = "/home/gpufarm"
CONTAINER_MODELS_DIR = "/models"
"""Where the container sees the synced weights: the path `gpufarm.k8s.serving.model_source` names."""
ENGINE_STOP_SECONDS = 30
"""What `docker stop` gives the engine after SIGTERM before it kills it."""
DRAIN_POLL_SECONDS = 5
"""How often `gpufarm-drain` reads the target lifecycle state."""
CLOUDWATCH_AGENT_CTL = "/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl"
CLOUDWATCH_CONFIG = "/opt/aws/amazon-cloudwatch-agent/etc/gpufarm.json"
PROMETHEUS_CONFIG = "/opt/aws/amazon-cloudwatch-agent/etc/gpufarm-prometheus.yaml"


@dataclass(frozen=True, kw_only=True)
class TargetControlAgent:
    """The ALB Target Optimizer's agent in front of the engine on the same instance."""

    image: str
    data_port: int
    control_port: int
    max_concurrency: int


@dataclass(frozen=True, kw_only=True)
class EngineHost:
    """Everything a GPU instance needs to serve one model; values may hold CloudFormation tokens."""

    model: str
    """The model's name (its directory, its log stream prefix)."""
    image: str
    """The engine image, as pulled (the image cache's reference when the cache is on)."""
    command: tuple[str, ...]
    """The engine's container command (`EngineSpec.command`)."""
    args: tuple[str, ...]
    """Its arguments (`gpufarm.k8s.serving.engine_args`)."""
    port: int
    readiness_path: str
    weights_uri: str | None
    """`s3://bucket/prefix/` synced to the volume before the engine starts; None for Hugging Face
    weights, which the engine downloads into its HOME on the volume."""
    environment: Mapping[str, str] = field(default_factory=dict)
    region: str
    registry: str | None
    """An ECR registry host to sign in to before pulling (`<account>.dkr.ecr.<region>.amazonaws.com`);
    None when the images are public."""
    hf_token_secret: str | None = None
    target_control: TargetControlAgent | None = None
    group_name: str
    launch_hook: str
    termination_hook: str
    target_group_arn: str
    drain_seconds: int
    """The target group's deregistration delay: how long in-flight requests get to finish."""
    startup_timeout_seconds: int
    log_group: str
    cloudwatch_config: str
    """The CloudWatch agent's JSON config (:func:`gpufarm.hosts.metrics.agent_config`)."""
    prometheus_config: str
    """The CloudWatch agent's Prometheus scrape config (:func:`gpufarm.hosts.metrics.scrape_config`)."""


def _prepare_script(host: EngineHost) -> str:
    lines = ["#!/bin/bash", "set -euo pipefail", f"mkdir -p {MODELS_DIR} {CACHE_DIR}"]
    images = [host.image] + ([host.target_control.image] if host.target_control else [])
    if host.registry is not None:
        # ECR's token is valid 12 hours: sign in on every boot, before any pull.
        lines.append(
            f"aws ecr get-login-password --region {host.region} | "
            f"docker login --username AWS --password-stdin {host.registry}"
        )
    for image in images:
        quoted = command_line([image])
        lines.append(f"docker image inspect {quoted} >/dev/null 2>&1 || docker pull {quoted}")
    if host.weights_uri is not None:
        target = f"{MODELS_DIR}/{host.model}"
        marker = f"{target}/.gpufarm-synced"
        lines += [
            f"if [ ! -f {marker} ]; then",
            f"  aws s3 sync --region {host.region} --only-show-errors "
            f"{command_line([host.weights_uri])} {target}",
            f"  touch {marker}",
            "fi",
        ]
    return "\n".join(lines) + "\n"


def _in_service_script() -> str:
    # Exit 1 while the instance is headed for (or sits in) the warm pool: the engine stays down.
    return "\n".join(
        [
            "#!/bin/bash",
            f'state="$({IMDS_HELPER} autoscaling/target-lifecycle-state || true)"',
            'case "$state" in Warmed:*) exit 1 ;; esac',
            "exit 0",
            "",
        ]
    )


def _run_script(host: EngineHost) -> str:
    entrypoint, *rest = host.command
    options = [
        "docker",
        "run",
        "--rm",
        "--name",
        ENGINE_CONTAINER,
        "--gpus",
        "all",
        # The engine listens on the instance's own port: the load balancer (or the agent) reaches it there.
        "--network",
        "host",
        "--ipc",
        "host",
        "--env-file",
        ENV_FILE,
        "--volume",
        f"{CACHE_DIR}:{CONTAINER_HOME}",
        "--log-driver",
        "awslogs",
        "--log-opt",
        f"awslogs-region={host.region}",
        "--log-opt",
        f"awslogs-group={host.log_group}",
    ]
    if host.weights_uri is not None:
        options += ["--volume", f"{MODELS_DIR}/{host.model}:{CONTAINER_MODELS_DIR}/{host.model}:ro"]
    lines = ["#!/bin/bash", "set -euo pipefail"]
    if host.hf_token_secret:
        # Read at start into the engine's environment, never written to disk.
        lines += [
            'HF_TOKEN="$(aws secretsmanager get-secret-value --region '
            f"{host.region} --secret-id {command_line([host.hf_token_secret])} "
            '--query SecretString --output text)"',
            "export HF_TOKEN",
        ]
        options += ["--env", "HF_TOKEN"]
    image = ["--entrypoint", entrypoint, host.image, *rest, *host.args]
    stream = f'"awslogs-stream={host.model}/$({IMDS_HELPER} instance-id)"'
    lines.append(f"exec {command_line(options)} --log-opt {stream} {command_line(image)}")
    return "\n".join(lines) + "\n"


def _ready_script(host: EngineHost) -> str:
    complete = complete_lifecycle_action(hook=host.launch_hook, group=host.group_name, region=host.region)
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uo pipefail",
            f'state="$({IMDS_HELPER} autoscaling/target-lifecycle-state || true)"',
            'case "$state" in',
            "  Warmed:*)",
            "    # Launched into the warm pool: image and weights are on the volume; Auto Scaling stops it.",
            f"    {complete}",
            "    exit 0 ;;",
            "esac",
            f"deadline=$((SECONDS + {host.startup_timeout_seconds}))",
            f"until curl -sf -o /dev/null http://127.0.0.1:{host.port}{host.readiness_path}; do",
            '  if [ "$SECONDS" -ge "$deadline" ]; then',
            "    echo 'engine not ready in time: the launch hook times out and the instance is replaced' >&2",
            "    exit 1",
            "  fi",
            "  sleep 5",
            "done",
            complete,
            "",
        ]
    )


def _drain_script(host: EngineHost) -> str:
    complete = complete_lifecycle_action(
        hook=host.termination_hook, group=host.group_name, region=host.region
    )
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uo pipefail",
            "while true; do",
            f'  state="$({IMDS_HELPER} autoscaling/target-lifecycle-state || true)"',
            '  case "$state" in',
            "    Terminated|Warmed:*)",
            '      if [ "$state" != "Terminated" ] && ! systemctl is-active --quiet '
            + ENGINE_UNIT
            + "; then",
            f"        sleep {DRAIN_POLL_SECONDS}; continue",
            "      fi",
            f"      aws elbv2 deregister-targets --region {host.region} "
            f"--target-group-arn {command_line([host.target_group_arn])} "
            f'--targets "Id=$({IMDS_HELPER} instance-id)" || true',
            f"      sleep {host.drain_seconds}",
            f"      systemctl stop {AGENT_UNIT} {ENGINE_UNIT}",
            f"      {complete}",
            "      exit 0 ;;",
            "  esac",
            f"  sleep {DRAIN_POLL_SECONDS}",
            "done",
            "",
        ]
    )


def _unit(
    description: str,
    service: Mapping[str, str],
    *,
    after: list[str],
    requires: Sequence[str] = (),
) -> str:
    lines = ["[Unit]", f"Description={description}", f"After={' '.join(after)}"]
    if requires:
        lines.append(f"Requires={' '.join(requires)}")
    lines.append("[Service]")
    lines += [f"{key}={value}" for key, value in service.items()]
    lines += ["[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"


def units(host: EngineHost) -> dict[str, str]:
    """The systemd units of a GPU instance, by file name."""
    docker = ["docker.service", "network-online.target"]
    built = {
        PREPARE_UNIT: _unit(
            "gpufarm: engine image and weights onto the volume",
            {
                "Type": "oneshot",
                "RemainAfterExit": "yes",
                "TimeoutStartSec": "infinity",
                "ExecStart": PREPARE_SCRIPT,
            },
            after=docker,
        ),
        ENGINE_UNIT: _unit(
            f"gpufarm: {host.model} engine",
            {
                "ExecCondition": IN_SERVICE_SCRIPT,
                "ExecStartPre": f"-/usr/bin/docker rm -f {ENGINE_CONTAINER}",
                "ExecStart": RUN_SCRIPT,
                "ExecStop": f"/usr/bin/docker stop -t {ENGINE_STOP_SECONDS} {ENGINE_CONTAINER}",
                "Restart": "always",
                "RestartSec": "10",
                "TimeoutStartSec": "infinity",
            },
            after=[*docker, PREPARE_UNIT],
            requires=[PREPARE_UNIT],
        ),
        READY_UNIT: _unit(
            "gpufarm: end the launch lifecycle hook once the engine is ready",
            {
                "Type": "oneshot",
                "RemainAfterExit": "yes",
                "TimeoutStartSec": "infinity",
                "ExecStart": READY_SCRIPT,
            },
            after=[PREPARE_UNIT],
            requires=[PREPARE_UNIT],
        ),
        DRAIN_UNIT: _unit(
            "gpufarm: deregister and drain before the instance stops or terminates",
            {"ExecStart": DRAIN_SCRIPT, "Restart": "always", "RestartSec": "5"},
            after=["network-online.target"],
        ),
    }
    agent = host.target_control
    if agent is not None:
        env = [
            f"TARGET_CONTROL_DATA_ADDRESS=0.0.0.0:{agent.data_port}",
            f"TARGET_CONTROL_CONTROL_ADDRESS=0.0.0.0:{agent.control_port}",
            f"TARGET_CONTROL_DESTINATION_ADDRESS=127.0.0.1:{host.port}",
            f"TARGET_CONTROL_DESTINATION=127.0.0.1:{host.port}",
            f"TARGET_CONTROL_MAX_CONCURRENCY={agent.max_concurrency}",
        ]
        run = ["docker", "run", "--rm", "--name", AGENT_CONTAINER, "--network", "host"]
        for item in env:
            run += ["--env", item]
        run.append(agent.image)
        built[AGENT_UNIT] = _unit(
            "gpufarm: ALB Target Optimizer agent in front of the engine",
            {
                "ExecCondition": IN_SERVICE_SCRIPT,
                "ExecStartPre": f"-/usr/bin/docker rm -f {AGENT_CONTAINER}",
                "ExecStart": "/usr/bin/" + command_line(run),
                "ExecStop": f"/usr/bin/docker stop {AGENT_CONTAINER}",
                "Restart": "always",
                "RestartSec": "5",
            },
            after=[*docker, PREPARE_UNIT],
            requires=[PREPARE_UNIT],
        )
    return built


def user_data(host: EngineHost) -> str:
    """The GPU instance's user data (a bash script, first boot only): files, units, agent, start."""
    lines = ["#!/bin/bash", "set -euo pipefail", *imds_helper()]
    lines += heredoc(ENV_FILE, env_file(host.environment), mode="0600")
    lines += heredoc(PREPARE_SCRIPT, _prepare_script(host), mode="0755")
    lines += heredoc(IN_SERVICE_SCRIPT, _in_service_script(), mode="0755")
    lines += heredoc(RUN_SCRIPT, _run_script(host), mode="0755")
    lines += heredoc(READY_SCRIPT, _ready_script(host), mode="0755")
    lines += heredoc(DRAIN_SCRIPT, _drain_script(host), mode="0755")
    built = units(host)
    for name, text in built.items():
        lines += heredoc(f"/etc/systemd/system/{name}", text)
    lines += heredoc(CLOUDWATCH_CONFIG, host.cloudwatch_config)
    lines += heredoc(PROMETHEUS_CONFIG, host.prometheus_config)
    lines += [
        # The CloudWatch agent scrapes the engine's metrics and publishes the queue depth the
        # group scales on; from the Amazon Linux 2023 repository when the AMI does not carry it.
        f"[ -x {CLOUDWATCH_AGENT_CTL} ] || dnf install -y amazon-cloudwatch-agent",
        f"{CLOUDWATCH_AGENT_CTL} -a fetch-config -m ec2 -s -c file:{CLOUDWATCH_CONFIG}",
        "systemctl daemon-reload",
        f"systemctl enable {' '.join(built)}",
        f"systemctl start --no-block {' '.join(built)}",
        "",
    ]
    return "\n".join(lines)
