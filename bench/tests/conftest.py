"""Make the bench modules (bench/*.py) importable in their unit tests."""

import os
import sys

BENCH = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)
