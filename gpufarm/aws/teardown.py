"""What `gpufarm destroy` does around `cdk destroy`: the hand steps of docs/operations.md, as code.

Before `cdk destroy` (docs/operations.md, "Destroying the enterprise tier"):

- turn the stack's termination protection off (CloudFormation UpdateTerminationProtection);
- turn deletion protection off on the stack's load balancers (ELBv2 ModifyLoadBalancerAttributes,
  `deletion_protection.enabled` = `false`, the attribute the constructs set; a protected load
  balancer must have it turned off before it can be deleted: ALB user guide, "Deletion
  protection", docs.aws.amazon.com/elasticloadbalancing/latest/application/application-load-balancers.html).

When `cdk destroy` stops (the stack is DELETE_FAILED) because retained resources keep the VPC
(docs/operations.md, "Destroying the production tier": the retained FSx file system's network
interfaces and its security group):

- delete the stack's retained FSx file systems and wait until they are gone (FSx DeleteFileSystem;
  for Lustre no final backup is taken by default, and the weights are in S3). This runs after the
  first `cdk destroy` on purpose: FSx asks that a Lustre file system be unmounted from every
  client before it is deleted (FSx API reference, DeleteFileSystem), and that destroy has removed
  the pods and nodes that mounted it;
- delete the stack's retained security groups (EC2 DeleteSecurityGroup);
- then `gpufarm destroy` runs `cdk destroy` once more.

Kubernetes objects that own AWS resources need no step: gpufarm creates load balancers and target
groups in the template, never through an Ingress or a Service of type LoadBalancer (ADR 0001), and
CloudFormation deletes the NodePools, whose nodes Karpenter or Auto Mode then terminate. Buckets
are not emptied: the only bucket gpufarm creates holds the load balancer's access logs, an audit
record that is always retained (ADR 0009); it is listed with the other retained resources.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpufarm.aws.stack import StackInfo, StackResource, describe_stack, stack_resources

RETAINING_POLICIES = frozenset({"Retain", "RetainExceptOnCreate"})
"""DeletionPolicy values that keep a resource when its stack is deleted (CloudFormation template
reference, DeletionPolicy attribute; `RetainExceptOnCreate` keeps it except when the creating
operation rolls back). `Snapshot` deletes the resource after a snapshot."""

LOAD_BALANCER = "AWS::ElasticLoadBalancingV2::LoadBalancer"
FILE_SYSTEM = "AWS::FSx::FileSystem"
SECURITY_GROUP = "AWS::EC2::SecurityGroup"

FILE_SYSTEM_WAIT_SECONDS = 1800
"""How long to wait for FSx to finish deleting a file system (it takes minutes)."""


@dataclass(frozen=True, kw_only=True)
class RetainedResource:
    """A resource the template keeps when the stack is deleted."""

    logical_id: str
    type: str
    policy: str
    physical_id: str = ""
    """Its name or ID in the account, when the stack has created it."""


def retained_resources(
    template: dict[str, Any], deployed: list[StackResource] | None = None
) -> list[RetainedResource]:
    """Resources of `template` whose DeletionPolicy keeps them, with their physical IDs from `deployed`."""
    physical = {r.logical_id: r.physical_id for r in deployed or []}
    out = []
    for logical_id, resource in sorted(template.get("Resources", {}).items()):
        policy = str(resource.get("DeletionPolicy", "Delete"))
        if policy in RETAINING_POLICIES:
            out.append(
                RetainedResource(
                    logical_id=logical_id,
                    type=str(resource.get("Type", "")),
                    policy=policy,
                    physical_id=physical.get(logical_id, ""),
                )
            )
    return out


@dataclass(kw_only=True)
class TeardownPlan:
    """What `gpufarm destroy` will do to the deployed stack besides `cdk destroy`."""

    stack: StackInfo
    protected_load_balancers: list[str] = field(default_factory=list)
    retained: list[RetainedResource] = field(default_factory=list)

    @property
    def file_systems(self) -> list[RetainedResource]:
        """Retained FSx file systems (deleted if the first `cdk destroy` stops)."""
        return [r for r in self.retained if r.type == FILE_SYSTEM and r.physical_id]

    @property
    def security_groups(self) -> list[RetainedResource]:
        """Retained security groups (deleted if the first `cdk destroy` stops)."""
        return [r for r in self.retained if r.type == SECURITY_GROUP and r.physical_id]

    def steps(self) -> list[str]:
        """The changes, in order, for the confirmation prompt."""
        out = []
        if self.stack.termination_protection:
            out.append(f"turn off termination protection on stack {self.stack.name}")
        out += [
            f"turn off deletion protection on load balancer {arn}" for arn in self.protected_load_balancers
        ]
        out.append(f"cdk destroy {self.stack.name}")
        if self.file_systems or self.security_groups:
            kept = [f"FSx file system {r.physical_id}" for r in self.file_systems] + [
                f"security group {r.physical_id}" for r in self.security_groups
            ]
            out.append(
                "if the deletion stops at the VPC: delete " + ", ".join(kept) + ", then cdk destroy again"
            )
        return out


def plan_teardown(session: Any, region: str, stack_name: str, template: dict[str, Any]) -> TeardownPlan:
    """Read the deployed stack and decide the steps; raises StackNotFoundError when it does not exist."""
    cfn = session.client("cloudformation", region_name=region)
    stack = describe_stack(cfn, stack_name)
    deployed = stack_resources(cfn, stack_name)
    elbv2 = session.client("elbv2", region_name=region)
    protected = []
    for resource in deployed:
        if resource.type != LOAD_BALANCER or not resource.physical_id.startswith("arn:"):
            continue
        attributes = elbv2.describe_load_balancer_attributes(LoadBalancerArn=resource.physical_id)[
            "Attributes"
        ]
        if any(a["Key"] == "deletion_protection.enabled" and a["Value"] == "true" for a in attributes):
            protected.append(resource.physical_id)
    return TeardownPlan(
        stack=stack, protected_load_balancers=protected, retained=retained_resources(template, deployed)
    )


Say = Callable[[str], None]


def unprotect(cfn: Any, elbv2: Any, plan: TeardownPlan, say: Say) -> None:
    """Turn off termination protection and load balancer deletion protection (the steps before
    destroy), with a CloudFormation and an ELBv2 client of the stack's region."""
    if plan.stack.termination_protection:
        cfn.update_termination_protection(EnableTerminationProtection=False, StackName=plan.stack.name)
        say(f"termination protection off: {plan.stack.name}")
    for arn in plan.protected_load_balancers:
        elbv2.modify_load_balancer_attributes(
            LoadBalancerArn=arn, Attributes=[{"Key": "deletion_protection.enabled", "Value": "false"}]
        )
        say(f"deletion protection off: {arn}")


def release_retained(
    session: Any,
    region: str,
    plan: TeardownPlan,
    say: Say,
    *,
    wait_seconds: float = FILE_SYSTEM_WAIT_SECONDS,
    poll_seconds: float = 15.0,
) -> None:
    """Delete the retained file systems (waiting until FSx no longer finds them), then the retained
    security groups, so a second `cdk destroy` can delete the VPC. Already-gone ones are skipped."""
    from botocore.exceptions import ClientError

    fsx = session.client("fsx", region_name=region)
    for fs in plan.file_systems:
        try:
            fsx.delete_file_system(FileSystemId=fs.physical_id)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "FileSystemNotFound":
                raise
        say(f"deleting FSx file system {fs.physical_id} ({fs.logical_id})")
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                # While FSx deletes it, the file system is listed with Lifecycle DELETING; once gone,
                # DescribeFileSystems answers FileSystemNotFound (FSx API reference,
                # DescribeFileSystems, Errors) or, as moto does, an empty list.
                if not fsx.describe_file_systems(FileSystemIds=[fs.physical_id]).get("FileSystems"):
                    break
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "FileSystemNotFound":
                    break
                raise
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"FSx file system {fs.physical_id} still exists after {wait_seconds:.0f} s"
                )
            time.sleep(poll_seconds)
        say(f"deleted FSx file system {fs.physical_id}")
    ec2 = session.client("ec2", region_name=region)
    for group in plan.security_groups:
        try:
            ec2.delete_security_group(GroupId=group.physical_id)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "InvalidGroup.NotFound":
                raise
        say(f"deleted security group {group.physical_id} ({group.logical_id})")


def stack_status(session: Any, region: str, stack_name: str) -> str | None:
    """The stack's status now; None when it no longer exists."""
    from gpufarm.aws.stack import StackNotFoundError

    try:
        return describe_stack(session.client("cloudformation", region_name=region), stack_name).status
    except StackNotFoundError:
        return None


def destroy_until_gone(
    plan: TeardownPlan,
    *,
    run_destroy: Callable[[], int],
    status_now: Callable[[], str | None],
    release: Callable[[], None],
    say: Say,
) -> int:
    """Run `cdk destroy` (`run_destroy`, its exit status); when it fails with the stack left
    DELETE_FAILED and the plan holds retained file systems or security groups, `release` them and
    run it once more. Returns the last exit status."""
    status = run_destroy()
    if status == 0 or not (plan.file_systems or plan.security_groups):
        return status
    if status_now() != "DELETE_FAILED":
        return status
    say("the deletion stopped; clearing the retained resources that hold the VPC")
    release()
    return run_destroy()


LIVE_INSTANCE_STATES = ("pending", "running", "stopping", "stopped")


def leftover_instances(ec2: Any, cluster_name: str) -> list[str]:
    """IDs of instances still tagged as the cluster's (`kubernetes.io/cluster/<name>` = `owned`, the
    tag docs/operations.md searches for when Karpenter was gone before it could clean up), in a
    state that is still billed or can be started again."""
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[
            {"Name": f"tag:kubernetes.io/cluster/{cluster_name}", "Values": ["owned"]},
            {"Name": "instance-state-name", "Values": list(LIVE_INSTANCE_STATES)},
        ]
    )
    return sorted(
        str(instance["InstanceId"])
        for page in pages
        for reservation in page.get("Reservations", [])
        for instance in reservation.get("Instances", [])
    )
