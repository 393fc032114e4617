"""One stack per tier, composed only from :mod:`gpufarm.constructs`."""

from gpufarm.config.model import TIER_METADATA_KEY
from gpufarm.stacks.direct import DirectTierStack
from gpufarm.stacks.tier import GpuFarmStack, tier_metadata

__all__ = ["TIER_METADATA_KEY", "DirectTierStack", "GpuFarmStack", "tier_metadata"]
