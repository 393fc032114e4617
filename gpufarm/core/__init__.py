"""The domain core: pure answers about a tier shared by validation, manifests, constructs and reports."""
