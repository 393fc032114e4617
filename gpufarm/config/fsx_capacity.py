"""Sizes derived from the tier config (FSx capacity), shared by the validator and the constructs."""

from __future__ import annotations

import math

from gpufarm.config.model import TierConfig

FSX_MIN_GIB = 1200
FSX_STEP_GIB = 2400
"""PERSISTENT_2 SSD capacity: 1200 GiB, 2400 GiB, then increments of 2400 GiB."""


def fsx_capacity_step(gib: float) -> int:
    """The smallest valid PERSISTENT_2 capacity that holds `gib`."""
    if gib <= FSX_MIN_GIB:
        return FSX_MIN_GIB
    return FSX_STEP_GIB * math.ceil(gib / FSX_STEP_GIB)


def is_valid_fsx_capacity(gib: int) -> bool:
    """True for 1200, 2400 and multiples of 2400 GiB."""
    return gib == FSX_MIN_GIB or (gib > 0 and gib % FSX_STEP_GIB == 0)


def s3_weights_gib(cfg: TierConfig) -> float:
    """The sum of `weights_gib` over the models read from S3 (unknown sizes count as 0)."""
    return sum(m.weights_gib or 0 for m in cfg.models if m.is_s3)


def fsx_required_gib(cfg: TierConfig) -> float:
    """Capacity the models need: their weights times the configured headroom."""
    return s3_weights_gib(cfg) * cfg.model_store.fsx.headroom


def fsx_storage_capacity_gib(cfg: TierConfig) -> int:
    """The file system's capacity: as configured, else the smallest valid step holding the models."""
    explicit = cfg.model_store.fsx.storage_capacity_gib
    return explicit if explicit is not None else fsx_capacity_step(fsx_required_gib(cfg))
