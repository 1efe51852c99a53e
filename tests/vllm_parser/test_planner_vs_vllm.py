"""The planner's KV numbers against vLLM 0.27.1's own sizing code, live (kv_reference.py in the venv).

The cases and the checks are release_compare.py's (tests/system/test_image_release.py asks each engine image of
the test world the same questions).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import release_compare as K  # noqa: E402


@pytest.fixture(scope="module")
def answers(venv_python, tmp_path_factory):
    """kv_reference.py's answers to both case lists, from one import of vLLM."""
    return K.run_reference([venv_python], K.kv_cases() + K.backend_cases(), tmp_path_factory.mktemp("kv"))


def test_planner_matches_vllm_sizing(answers):
    K.check_kv(answers)


def test_backend_priorities_match_vllm(answers):
    """The planner's order (FlashInfer first only on 10.x) is vLLM's _get_backend_priorities."""
    K.check_backends(answers)
