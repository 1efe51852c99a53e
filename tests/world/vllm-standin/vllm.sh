#!/usr/bin/python3
import sys

from vllm.entrypoints.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
