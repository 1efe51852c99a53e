"""`python3 -m vllm.entrypoints.openai.api_server ...` = `vllm serve ...` (same parser)."""
import sys

from vllm.entrypoints.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["serve"] + sys.argv[1:]))
