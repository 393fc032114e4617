"""The domain core: answers about a tier that every consumer reads, stated once (no CDK import)."""
