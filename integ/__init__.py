"""Integration tests of the gpufarm tiers (docs/operations.md, "Integration tests")."""
