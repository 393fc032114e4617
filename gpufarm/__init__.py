"""gpufarm: AWS CDK constructs and tiers for GPU LLM inference on Amazon EKS."""

__version__ = "0.1.0"
