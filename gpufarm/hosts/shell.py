"""Pieces every instance script shares: files written by a heredoc, IMDSv2 reads, lifecycle actions."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence

IMDS_HELPER = "/usr/local/sbin/gpufarm-imds"
"""Prints one instance metadata item (`gpufarm-imds instance-id`), through IMDSv2."""

# IMDSv2: a session token from PUT /latest/api/token, then GET with the token header (Amazon EC2
# user guide, "Use the Instance Metadata Service to access instance metadata",
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html).
# The launch templates require tokens (MetadataOptions.HttpTokens: required).
_IMDS_SCRIPT = """#!/bin/bash
set -euo pipefail
token=$(curl -sf -X PUT http://169.254.169.254/latest/api/token \\
  -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
curl -sf -H "X-aws-ec2-metadata-token: ${token}" "http://169.254.169.254/latest/meta-data/$1"
"""


def heredoc(path: str, content: str, *, mode: str = "0644") -> list[str]:
    """Shell lines that write `content` to `path` verbatim (a quoted heredoc: no expansion) with `mode`.

    The delimiter is chosen so that no line of `content` equals it.
    """
    delimiter = "GPUFARM_EOF"
    while delimiter in content.splitlines():
        delimiter += "_"
    body = content if content.endswith("\n") else content + "\n"
    return [
        f"mkdir -p {shlex.quote(path.rsplit('/', 1)[0] or '/')}",
        f"cat > {shlex.quote(path)} <<'{delimiter}'",
        *body.rstrip("\n").split("\n"),
        delimiter,
        f"chmod {mode} {shlex.quote(path)}",
    ]


def imds_helper() -> list[str]:
    """Shell lines that install :data:`IMDS_HELPER`."""
    return heredoc(IMDS_HELPER, _IMDS_SCRIPT, mode="0755")


def env_file(values: Mapping[str, str]) -> str:
    """A systemd/docker environment file: one `NAME=value` a line, sorted, values unquoted.

    Docker's `--env-file` takes each line literally (no quotes, no expansion), so values must not
    hold a newline.
    """
    for name, value in values.items():
        if "\n" in value:
            raise ValueError(f"environment value of {name!r} must be one line, got {value!r}")
    return "".join(f"{name}={values[name]}\n" for name in sorted(values))


def command_line(words: Sequence[str]) -> str:
    """`words` as one shell command line, each quoted as needed."""
    return " ".join(shlex.quote(w) for w in words)


def complete_lifecycle_action(*, hook: str, group: str, region: str, result: str = "CONTINUE") -> str:
    """The AWS CLI call that ends this instance's wait at lifecycle hook `hook` of `group`.

    Ignores failure: when no action is pending (a service restarted later), there is nothing to end.
    """
    return (
        f"aws autoscaling complete-lifecycle-action --region {shlex.quote(region)} "
        f"--lifecycle-hook-name {shlex.quote(hook)} --auto-scaling-group-name {shlex.quote(group)} "
        f'--lifecycle-action-result {result} --instance-id "$({IMDS_HELPER} instance-id)" || true'
    )
