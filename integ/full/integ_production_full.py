"""Integration test of the production preset in full (make integ FULL=1; integ/harness.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integ.harness import main

main("production", full=True)
