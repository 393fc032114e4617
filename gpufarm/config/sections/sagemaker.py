"""Settings of `cluster.provisioning: sagemaker`: the SageMaker endpoint and its inference components."""

from __future__ import annotations

from gpufarm.config.sections.values import _Model


class SageMakerConfig(_Model):
    """Settings of `cluster.provisioning: sagemaker`: the SageMaker endpoint and its inference components."""
