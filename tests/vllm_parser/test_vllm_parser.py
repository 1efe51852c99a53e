"""Every argv the planner generates must be accepted by the real vLLM 0.27.1 parser.

Slow group: builds (once, cached) the CPU venv with tests/vllm_parser/setup-venv.sh. The plans and the checks are
release_compare.py's (tests/system/test_image_release.py asks each engine image of the test world the same).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import release_compare as R  # noqa: E402


def test_real_parser_accepts_generated_argv(venv_python, tmp_path):
    plans = R.generated_plans()
    keys = tmp_path / "keys.yaml"
    keys.write_text(R.KEYS_YAML)
    got = R.run_script([venv_python], R.PARSE_ARGV, R.argv_cases(plans, str(keys)), tmp_path)
    R.check_parsed({r["id"]: r for r in got}, plans)
