"""The needle profile (issue 42 item 2): a random fact at several depths of the planned context, recalled or not,
reported as a promise - MET only with the engine's own evidence (every request answered and counted), else not
witnessed. Run end to end against fake engines: one that reads its whole prompt, one that loses what lies deep in it
(as a lossy KV cache would), one that answers without counting the prompt, one that fails a request."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck as L
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_profiles as LP
from ansible_collections.airgap.vllm.plugins.module_utils.service import _loadcheck_promises as LR

SETTINGS = {"num_prompts": 3, "context_len": 2000, "output_len": 16, "concurrency": 1, "chars_per_token": 3, "seed": 42}


def fake_engine(body, reach=1.0, count=True, fail_at=None):
    """A completions endpoint that copies: it finds 'The magic number of NAME is N.' in the part of the prompt it
    'sees' (the last `reach` of it) and answers N for the name asked about; prompt tokens counted as chars / 4."""
    prompt = body["prompt"]
    if fail_at is not None and ("of %s?" % fail_at) in prompt:
        return {"error": "HTTPError: HTTP Error 400: Bad Request"}
    asked = re.search(r"what is the magic number of (\w+)\?", prompt).group(1)
    seen = prompt[int(len(prompt) * (1.0 - reach)) :]
    found = re.search(r"The magic number of %s is (\d+)\." % asked, seen)
    answer = {"choices": [{"text": " %s." % found.group(1) if found else " unknown."}]}
    if count:
        answer["usage"] = {"prompt_tokens": len(prompt) // 4, "completion_tokens": 3}
    return answer


def run(settings=None, ctx=2064, **engine):
    s = dict(SETTINGS, **(settings or {}))
    facts, bodies = LP.needle_requests("m", s)
    answers = [fake_engine(b, **engine) for b in bodies]
    figures = LP.needle_outcome(facts, answers, 1.5)
    return facts, bodies, figures, LR.needle_row(figures, ctx)


def test_the_facts_are_random_by_seed_and_spread_through_the_context():
    facts = LP.needle_facts(42, 3)
    assert facts == LP.needle_facts(42, 3) and facts != LP.needle_facts(43, 3)
    assert [f["depth"] for f in facts] == [0.167, 0.5, 0.833]
    assert len({f["name"] for f in facts}) == 3 and all(re.match(r"^\d{6}$", f["number"]) for f in facts)
    assert len({f["name"] for f in LP.needle_facts(1, 20)}) == 20  # more depths than names: still one name each


@pytest.mark.parametrize("depth", [0.05, 0.5, 0.95])
def test_the_prompt_is_the_planned_length_with_the_fact_at_its_depth(depth):
    fact = {"name": "Ada", "number": "123456", "depth": depth}
    prompt = LP.needle_prompt(fact, 2000, 3)
    assert 2000 * 3 - 80 <= len(prompt) <= 2000 * 3 + 80
    at = prompt.index("The magic number of Ada is 123456.")
    assert abs(at / float(len(prompt)) - depth) < 0.03
    assert prompt.count("123456") == 1 and prompt.endswith("the magic number of Ada is")


def test_an_engine_that_reads_its_whole_context_meets_the_promise():
    facts, bodies, figures, row = run()
    assert [b["temperature"] for b in bodies] == [0, 0, 0] and all(not b.get("stream") for b in bodies)
    assert figures["recalled"] == 3 and figures["failed"] == 0
    assert figures["min_prompt_tokens"] == min(len(b["prompt"]) // 4 for b in bodies)
    assert row["status"] == "MET"
    assert row["measured"].startswith("3 of 3 at depths 17 %, 50 %, 83 % of ")
    assert "the engine's count; planned context 2064" in row["measured"]


def test_an_engine_that_loses_the_deep_part_misses_it_and_says_where():
    _facts, _bodies, figures, row = run(reach=0.6)  # sees the last 60 %: the fact at 17 % is lost
    assert [d["recalled"] for d in figures["depths"]] == [False, True, True]
    assert row["status"] == "MISSED"
    assert row["measured"].startswith("2 of 3") and "--kv-cache-dtype auto" in row["advice"]
    line = LR.profile_line("needle", {"figures": figures, "wall_s": 2.0})
    assert "recalled at 2 of 3 depths (17 %: lost, 50 %: recalled, 83 %: recalled)" in line


def test_without_the_engines_prompt_count_it_is_not_witnessed():
    _facts, _bodies, figures, row = run(count=False)
    assert figures["recalled"] == 3
    assert row["status"] == "not witnessed" and row["measured"] == "0 of 3 answered with the engine's prompt count"


def test_a_failed_request_is_not_witnessed_and_named():
    facts = LP.needle_facts(42, 3)
    _f, _b, figures, row = run(fail_at=facts[1]["name"])
    assert figures["failed"] == 1 and figures["recalled"] == 2
    assert row["status"] == "not witnessed" and "HTTP Error 400" in row["advice"]


def test_the_promises_table_has_the_row_only_when_the_profile_ran():
    _facts, _bodies, figures, _row = run()
    rows = LR.promises({"max_model_len": 2064, "concurrency": 1}, {}, {"needle": {"figures": figures}})
    assert [r["status"] for r in rows if r["key"] == "needle_recall"] == ["MET"]
    rows = LR.promises({"max_model_len": 2064, "concurrency": 1}, {}, {})
    assert [r for r in rows if r["key"] == "needle_recall"] == []


def test_settings_follow_the_planned_context():
    s = LP.profile_settings("needle", {"seed": 7}, 4, max_model_len=32768)
    assert s == {
        "num_prompts": 3,
        "context_len": 32768 - 16 - LP.NEEDLE_MARGIN,
        "output_len": 16,
        "concurrency": 1,
        "chars_per_token": 3,
        "seed": 7,
    }
    with pytest.raises(L.LoadCheckError, match="needle needs the engine's --max-model-len"):
        LP.profile_settings("needle", {}, 1)
    with pytest.raises(L.LoadCheckError, match="exceed --max-model-len"):
        LP.profile_settings("needle", {"context_len": 4096}, 1, max_model_len=4096)
    assert "needle" in LP.PROFILES and "needle" not in LP.DEFAULT_PROFILES
    path, bodies = LP.api_requests("needle", "m", dict(SETTINGS), None)
    assert path == "/v1/completions" and len(bodies) == 3
