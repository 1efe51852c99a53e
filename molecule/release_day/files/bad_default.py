"""The deliberately bad release of molecule release_day, run while its image is built FROM vLLM 0.30.0: one changed
default the plan relies on. The planner leaves --max-num-batched-tokens to the release's default when its own value is
that default (it sizes the activation peak from it); this release's OpenAI server on the CPU takes 16 tokens a step
instead of 2048, so the same plan prefills a long prompt in 128 steps instead of one. Everything else is 0.30.0 as
released: it starts, confirms the plan and answers; only the gate's tok/s against the previous release can tell."""

import importlib.util
import os
import sys

OLD = "UsageContext.OPENAI_API_SERVER: 2048 * world_size,"
NEW = "UsageContext.OPENAI_API_SERVER: 16 * world_size,  # airgap test world: the bad release's changed default"

spec = importlib.util.find_spec("vllm")  # locates the package without importing it
path = os.path.join(spec.submodule_search_locations[0], "engine", "arg_utils.py")
with open(path) as f:
    text = f.read()
if text.count(OLD) != 1:
    sys.exit(
        "bad_default.py: %s holds %d copies of %r, not 1: the bad release cannot be made" % (path, text.count(OLD), OLD)
    )
with open(path, "w") as f:
    f.write(text.replace(OLD, NEW))
print("bad release: %s: %s -> %s" % (path, OLD, NEW))
