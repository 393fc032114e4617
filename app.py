#!/usr/bin/env python3
"""CDK entry point: `cdk synth -c tier=poc`, `-c tier_file=my.yaml`, or no context for every tier."""

import sys

from gpufarm.app import main

if __name__ == "__main__":
    sys.exit(main())
