"""Make the work tree importable as ansible_collections.airgap.vllm for unit tests."""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINK_BASE = os.path.join(ROOT, "build", "collections")
LINK = os.path.join(LINK_BASE, "ansible_collections", "airgap", "vllm")

if not os.path.islink(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
if LINK_BASE not in sys.path:
    sys.path.insert(0, LINK_BASE)
