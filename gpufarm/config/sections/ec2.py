"""Settings of `cluster.provisioning: ec2`: GPU Auto Scaling groups and the gateway's CPU group."""

from __future__ import annotations

from gpufarm.config.sections.values import _Model


class Ec2Config(_Model):
    """Settings of `cluster.provisioning: ec2`: GPU Auto Scaling groups and the gateway's CPU group."""
