"""A gateway instance of `cluster.provisioning: ec2`: the LiteLLM proxy as a systemd unit.

The instance runs Amazon Linux 2023 and Docker from its package repository (the AL2023 user guide
installs it with `dnf install docker`). The proxy runs the same pinned image and the same
generated config as the EKS tiers' gateway pods (`gpufarm.k8s.gateway.litellm_config` and
`proxy_args`): only the way it is started differs. Readiness for the load balancer is the proxy's
own `/health/readiness`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpufarm.hosts.shell import IMDS_HELPER, command_line, env_file, heredoc, imds_helper

CONFIG_DIR = "/etc/gpufarm/gateway"
CONFIG_FILE = f"{CONFIG_DIR}/config.yaml"
ENV_FILE = f"{CONFIG_DIR}/gateway.env"
RUN_SCRIPT = "/usr/local/sbin/gpufarm-gateway-run"
UNIT = "gpufarm-gateway.service"
CONTAINER = "gpufarm-gateway"
STOP_MARGIN_SECONDS = 10
"""Seconds `docker stop` adds to the proxy's own graceful shutdown before it kills the container."""


@dataclass(frozen=True, kw_only=True)
class GatewayHost:
    """Everything a gateway instance needs; values may hold CloudFormation tokens."""

    image: str
    config_yaml: str
    """The LiteLLM config file (`gpufarm.k8s.gateway.config_yaml`)."""
    config_path: str
    """Where the proxy reads it in the container (the EKS tiers' path, so `proxy_args` holds)."""
    args: tuple[str, ...]
    """The proxy's arguments (`gpufarm.k8s.gateway.proxy_args`)."""
    port: int
    environment: Mapping[str, str] = field(default_factory=dict)
    """Plain values: the offline switches, region, the routes' base URLs, the guardrail's identifiers."""
    master_key_secret: str | None = None
    master_key_env: str = "LITELLM_MASTER_KEY"
    region: str
    registry: str | None
    run_as_user: int
    graceful_seconds: int
    log_group: str


def _run_script(host: GatewayHost) -> str:
    options = [
        "docker",
        "run",
        "--rm",
        "--name",
        CONTAINER,
        "--network",
        "host",
        "--read-only",
        "--tmpfs",
        "/tmp",
        "--user",
        f"{host.run_as_user}:{host.run_as_user}",
        "--env-file",
        ENV_FILE,
        "--volume",
        f"{CONFIG_FILE}:{host.config_path}:ro",
        "--log-driver",
        "awslogs",
        "--log-opt",
        f"awslogs-region={host.region}",
        "--log-opt",
        f"awslogs-group={host.log_group}",
    ]
    lines = ["#!/bin/bash", "set -euo pipefail"]
    if host.registry is not None:
        lines.append(
            f"aws ecr get-login-password --region {host.region} | "
            f"docker login --username AWS --password-stdin {host.registry}"
        )
    if host.master_key_secret:
        # Read at start into the proxy's environment, never written to disk.
        lines += [
            f'{host.master_key_env}="$(aws secretsmanager get-secret-value --region {host.region} '
            f'--secret-id {command_line([host.master_key_secret])} --query SecretString --output text)"',
            f"export {host.master_key_env}",
        ]
        options += ["--env", host.master_key_env]
    stream = f'"awslogs-stream=gateway/$({IMDS_HELPER} instance-id)"'
    image = ["--entrypoint", "litellm", host.image, *host.args]
    lines.append(f"exec {command_line(options)} --log-opt {stream} {command_line(image)}")
    return "\n".join(lines) + "\n"


def unit(host: GatewayHost) -> str:
    """The gateway's systemd unit."""
    return "\n".join(
        [
            "[Unit]",
            "Description=gpufarm: LiteLLM gateway (the models first, Amazon Bedrock when they cannot answer)",
            "After=docker.service network-online.target",
            "Requires=docker.service",
            "[Service]",
            f"ExecStartPre=-/usr/bin/docker rm -f {CONTAINER}",
            f"ExecStart={RUN_SCRIPT}",
            f"ExecStop=/usr/bin/docker stop -t {host.graceful_seconds + STOP_MARGIN_SECONDS} {CONTAINER}",
            "Restart=always",
            "RestartSec=5",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    )


def user_data(host: GatewayHost) -> str:
    """The gateway instance's user data: Docker, the config, the unit, started."""
    lines = ["#!/bin/bash", "set -euo pipefail", *imds_helper()]
    lines += heredoc(CONFIG_FILE, host.config_yaml, mode="0644")
    lines += heredoc(ENV_FILE, env_file(host.environment), mode="0600")
    lines += heredoc(RUN_SCRIPT, _run_script(host), mode="0755")
    lines += heredoc(f"/etc/systemd/system/{UNIT}", unit(host))
    lines += [
        "command -v docker >/dev/null || dnf install -y docker",
        "systemctl enable --now docker.service",
        "systemctl daemon-reload",
        f"systemctl enable --now {UNIT}",
        "",
    ]
    return "\n".join(lines)
