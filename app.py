#!/usr/bin/env python3
"""CDK entry point: `cdk synth -c tier=poc`, `-c tier_file=my.yaml`, or no context for every tier."""

import sys

from gpufarm.debug import EXIT_BAD_INPUT
from gpufarm.node import NodeNotFoundError, prepare_node

if __name__ == "__main__":
    # Choose the Node jsii runs before aws_cdk is imported (gpufarm.app imports it), so that no
    # Node is one line and exit status 2, not a traceback (docs/decisions/0055-...).
    try:
        _, node_warning = prepare_node()
    except NodeNotFoundError as exc:
        print(exc, file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)
    if node_warning:
        print(node_warning, file=sys.stderr)

    from gpufarm.app import main

    sys.exit(main())
