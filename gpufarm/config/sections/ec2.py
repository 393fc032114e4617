"""Settings of `cluster.provisioning: ec2`: GPU Auto Scaling groups and the gateway's CPU group.

Each `node_pools[]` entry becomes one Auto Scaling group of GPU instances serving the one model
placed on it (docs/decisions/0065-ec2-provisioning.md): the pool already says which instance
families, capacity types and reservations the group may use, and the model says how many
instances (its `replicas`, or its `autoscaling` bounds). What only an Auto Scaling group has
(warm pool, instance refresh, the request-count target) is set here.
"""

from __future__ import annotations

from pydantic import Field

from gpufarm.config.sections.values import LogRetentionDays, _Model


class Ec2WarmPoolConfig(_Model):
    """Stopped GPU instances whose volume already holds the engine image and the weights."""

    enabled: bool = Field(
        False,
        description="Keep a warm pool of stopped instances (on-demand and reserved pools only: the "
        "Auto Scaling API refuses a warm pool on a group that may launch spot instances).",
    )
    min_size: int = Field(1, ge=0, le=100, description="Stopped instances the warm pool keeps at least.")
    reuse_on_scale_in: bool = Field(
        True, description="Return instances to the warm pool on scale-in instead of terminating them."
    )


class Ec2RefreshConfig(_Model):
    """How a new launch template version (AMI, engine image, model settings) rolls over a group."""

    checkpoint_percentages: list[int] = Field(
        [50, 100],
        min_length=1,
        max_length=10,
        description="Percent of instances replaced at each checkpoint, rising, the last 100.",
    )
    checkpoint_delay_seconds: int = Field(
        600, ge=0, le=172800, description="Wait at each checkpoint before the refresh goes on, seconds."
    )
    min_healthy_percentage: int = Field(
        100,
        ge=0,
        le=100,
        description="Capacity kept in service during a refresh, percent (100: launch before terminate).",
    )


class Ec2GatewayConfig(_Model):
    """The CPU Auto Scaling group that runs the LiteLLM gateway."""

    instance_type: str = Field(
        "m7i.xlarge", description="CPU instance type of the gateway instances (x86_64, priced in the table)."
    )
    min_instances: int = Field(2, ge=1, le=20, description="Fewest gateway instances (two zones at least).")
    max_instances: int = Field(4, ge=1, le=20, description="Most gateway instances.")
    cpu_target_percent: int = Field(
        60, ge=10, le=90, description="Average CPU utilization the gateway group is scaled to hold."
    )
    volume_gib: int = Field(30, ge=20, le=1000, description="Root volume of a gateway instance, GiB.")


class Ec2Config(_Model):
    """Settings of `cluster.provisioning: ec2`: GPU Auto Scaling groups and the gateway's CPU group."""

    warm_pool: Ec2WarmPoolConfig = Field(
        default_factory=Ec2WarmPoolConfig, description="Warm pool of every GPU group that may have one."
    )
    refresh: Ec2RefreshConfig = Field(
        default_factory=Ec2RefreshConfig, description="Instance refresh of the GPU groups."
    )
    gateway: Ec2GatewayConfig = Field(
        default_factory=Ec2GatewayConfig, description="The gateway's CPU Auto Scaling group."
    )
    requests_per_target: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="Target of the `ALBRequestCountPerTarget` policy of autoscaled models: requests per "
        "instance per minute (empty: the queue policy alone scales them).",
    )
    log_retention_days: LogRetentionDays = Field(
        30, description="Days the log group of the engines' and the gateway's containers keeps events."
    )
    on_demand_base_instances: int | None = Field(
        None,
        ge=0,
        le=100,
        description="On-demand instances a group with spot keeps before it adds spot (default: the "
        "group's minimum size).",
    )
