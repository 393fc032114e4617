"""One region the tier runs in, beside the tier's own (`environment.region`)."""

from __future__ import annotations

from gpufarm.config.sections.values import _Model


class RegionConfig(_Model):
    """One region the tier runs in, beside the tier's own (`environment.region`)."""
