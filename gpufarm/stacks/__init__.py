"""One stack per tier, composed only from :mod:`gpufarm.constructs`."""

from gpufarm.stacks.tier import GpuFarmStack

__all__ = ["GpuFarmStack"]
