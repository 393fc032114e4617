"""Delete what AWS creates outside CloudFormation for an integration test, and check for leftovers.

Usage: `python integ/cleanup.py TIER_STACK [STACK...]` (integ/run.py runs it after destroying
the stacks). Deletes `/aws/eks/<tier stack>/cluster` (EKS control-plane logs: the cluster is
named after the tier stack) and every `/aws/lambda/<stack>-*` group (the groups Lambda creates
for functions whose group the template does not declare). Then lists instances still tagged
`kubernetes.io/cluster/<cluster>: owned`, the tag Karpenter's controller policy makes it put on
every instance it launches (Karpenter 1.14 policy in ../shared/upstream-ref/iam.json); any such
instance makes the exit status 1. Needs AWS credentials; the region comes from the environment.
"""

from __future__ import annotations

import sys
from typing import Any

import boto3


def log_groups(client: Any, stacks: list[str]) -> list[str]:
    """The names of the existing log groups left behind by `stacks` (the first is the tier's)."""
    names: list[str] = []
    prefixes = [f"/aws/eks/{stacks[0]}/cluster", *(f"/aws/lambda/{stack}-" for stack in stacks)]
    for prefix in prefixes:
        for page in client.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=prefix):
            names += [group["logGroupName"] for group in page["logGroups"]]
    # `/aws/lambda/<tier stack>-` also matches the probe's and the assertions' groups.
    return list(dict.fromkeys(names))


def cluster_instances(client: Any, cluster: str) -> list[str]:
    """IDs of instances not yet terminated that carry the cluster's ownership tag."""
    ids: list[str] = []
    filters = [
        {"Name": f"tag:kubernetes.io/cluster/{cluster}", "Values": ["owned"]},
        {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]},
    ]
    for page in client.get_paginator("describe_instances").paginate(Filters=filters):
        ids += [i["InstanceId"] for r in page["Reservations"] for i in r["Instances"]]
    return ids


def main(argv: list[str]) -> int:
    """Delete the log groups, report instances left running; exit status 2 without a stack name."""
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    logs = boto3.client("logs")
    for name in log_groups(logs, argv):
        logs.delete_log_group(logGroupName=name)
        print(f"deleted log group {name}")
    left = cluster_instances(boto3.client("ec2"), argv[0])
    if left:
        print(
            f"instances of cluster {argv[0]} still exist: {', '.join(left)}; terminate them "
            "(aws ec2 terminate-instances --instance-ids ...)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
