"""Delete the log groups AWS creates outside CloudFormation for an integration test's stacks.

Usage: `python integ/cleanup.py STACK...` (the integ-runner runs it after destroying the stacks).
Deletes `/aws/eks/<stack>/cluster` (EKS control-plane logs: the cluster is named after the tier
stack) and every `/aws/lambda/<stack>-*` group (the groups Lambda creates for functions whose
group the template does not declare). Needs AWS credentials; the region comes from the
environment (the integ-runner sets it).
"""

from __future__ import annotations

import sys

import boto3


def log_groups(stacks: list[str]) -> list[str]:
    """The names of the existing log groups left behind by `stacks`."""
    client = boto3.client("logs")
    names: list[str] = []
    for stack in stacks:
        for prefix in (f"/aws/eks/{stack}/cluster", f"/aws/lambda/{stack}-"):
            for page in client.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=prefix):
                names += [group["logGroupName"] for group in page["logGroups"]]
    return names


def main(argv: list[str]) -> int:
    """Delete the groups and print each name; exit status 2 without a stack name."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    client = boto3.client("logs")
    for name in log_groups(argv):
        client.delete_log_group(logGroupName=name)
        print(f"deleted log group {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
