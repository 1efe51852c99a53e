"""molecule release_day's own tools: the client's outcome of a request, its counts by phase, the changed tasks of a
site.yml run (molecule/release_day/files/)."""

import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = os.path.join(HERE, "..", "..", "..", "molecule", "release_day", "files")


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(FILES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


counts_mod = load("phase_counts")
client = load("stream_client")
changed = load("changed_tasks")

PHASES = [{"phase": "rollout", "start": 10.0, "end": 20.0}, {"phase": "rollback", "start": 25.0, "end": 30.0}]


def req(start, outcome, seconds=1.0):
    return {"start": start, "end": start + seconds, "outcome": outcome}


def test_each_request_counts_in_the_phase_its_start_fell_in():
    rows = counts_mod.counts(
        [req(10.0, "ok", 0.1), req(19.9, "ok", 0.3), req(12, "cut"), req(26, "failed"), req(22, "ok"), req(5, "ok")],
        PHASES,
    )
    by = dict((r["phase"], r) for r in rows)
    assert [r["phase"] for r in rows] == ["rollout", "rollback", "between"]
    assert by["rollout"] == {
        "phase": "rollout",
        "sent": 3,
        "succeeded": 2,
        "failed": 0,
        "cut": 1,
        "p50_ms": 100.0,
        "p99_ms": 300.0,
    }
    assert (by["rollback"]["sent"], by["rollback"]["failed"], by["rollback"]["p50_ms"]) == (1, 1, None)
    assert by["between"]["sent"] == 2
    assert "rollout" in counts_mod.table(rows) and "between" in counts_mod.table(rows)


def test_no_between_row_when_every_request_fell_in_a_phase_and_an_unknown_outcome_is_a_failure():
    rows = counts_mod.counts([req(11, "ok"), req(12, "weird")], PHASES)
    assert [r["phase"] for r in rows] == ["rollout", "rollback"]
    assert rows[0]["failed"] == 1 and rows[1]["sent"] == 0


def test_percentile_is_nearest_rank():
    assert counts_mod.percentile([], 50) is None
    assert counts_mod.percentile([5, 1, 3], 50) == 3
    assert counts_mod.percentile(list(range(1, 101)), 99) == 99


def test_a_request_is_ok_only_whole_cut_when_its_stream_broke_and_failed_otherwise():
    assert client.outcome({"status": 200, "done": True, "events": 3, "error": ""}) == "ok"
    assert client.outcome({"status": 200, "done": False, "events": 3, "error": ""}) == "cut"
    assert client.outcome({"status": 200, "done": True, "events": 3, "error": "engine error"}) == "cut"
    assert client.outcome({"status": 200, "done": True, "events": 0, "error": ""}) == "failed"
    assert client.outcome({"status": 503, "done": False, "events": 0, "error": "no server"}) == "failed"
    assert client.outcome({"status": 0, "done": False, "events": 0, "error": "ConnectionRefusedError"}) == "failed"


def test_the_main_prints_json(tmp_path, capsys):
    (tmp_path / "r.jsonl").write_text(json.dumps(req(11, "ok")) + "\n")
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(p) for p in PHASES) + "\n")
    assert counts_mod.main([str(tmp_path / "r.jsonl"), str(tmp_path / "p.jsonl")]) == 0
    assert json.loads(capsys.readouterr().out)["phases"][0]["succeeded"] == 1


OUTPUT = """PLAY [Roll out] ****
TASK [airgap.vllm.vllm_front : Make /health answer 503 (the balancers take this member out)] ****
changed: [day-1]
ok: [day-2]
TASK [airgap.vllm.vllm_service : Read] ****
ok: [day-1] => {"changed": false}
changed: [day-2] => (item=x)
changed: [day-2] => (item=y)
RUNNING HANDLER [airgap.vllm.vllm_front : Reload] ****
changed: [day-door]
"""


def test_changed_tasks_by_host():
    assert changed.changed_tasks(OUTPUT) == {
        "day-1": ["airgap.vllm.vllm_front : Make /health answer 503 (the balancers take this member out)"],
        "day-2": ["airgap.vllm.vllm_service : Read"],
        "day-door": ["airgap.vllm.vllm_front : Reload"],
    }
