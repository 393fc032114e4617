"""On-premises GPU nodes joined to the EKS cluster (EKS Hybrid Nodes)."""

from __future__ import annotations

from gpufarm.config.sections.values import _Model


class HybridNodesConfig(_Model):
    """On-premises GPU nodes joined to the EKS cluster (EKS Hybrid Nodes)."""
