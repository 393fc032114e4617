"""Integration test of the enterprise tier, scaled down (integ/harness.py)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from integ.harness import main

main("enterprise")
