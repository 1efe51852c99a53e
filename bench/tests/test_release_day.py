"""Bench release-day: its records are read with molecule release_day's own counting code, the baseline is the load
checks' phases, and the recorded excerpt CI mode reads is whole."""

import importlib.util
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("release_day", os.path.join(HERE, "..", "release_day.py"))
release_day = importlib.util.module_from_spec(spec)
spec.loader.exec_module(release_day)


def write_records(d, requests, phases, summary=None):
    with open(os.path.join(d, "requests.jsonl"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in requests)
    with open(os.path.join(d, "phases.jsonl"), "w") as f:
        f.writelines(json.dumps(p) + "\n" for p in phases)
    if summary is not None:
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(summary, f)


PHASES = [
    {"phase": "baseline day-1", "start": 0.0, "end": 10.0},
    {"phase": "rollout 0.30.0", "start": 10.0, "end": 20.0},
]


def req(start, seconds, outcome="ok"):
    return {"start": start, "end": start + seconds, "outcome": outcome}


def test_records_are_counted_by_phase_with_the_scenarios_own_code(tmp_path):
    write_records(
        str(tmp_path), [req(1, 0.5), req(2, 0.7), req(11, 2.0), req(12, 1.0, "cut")], PHASES, {"steps": {"x": 1}}
    )
    rows, summary = release_day.load(str(tmp_path))
    by = dict((r["phase"], r) for r in rows)
    assert by["baseline day-1"]["sent"] == 2 and by["baseline day-1"]["p50_ms"] == 500.0
    assert (by["rollout 0.30.0"]["succeeded"], by["rollout 0.30.0"]["cut"]) == (1, 1)
    assert summary == {"steps": {"x": 1}}


def test_the_baseline_is_the_load_checks_phases_else_the_whole_run():
    rows = [
        {"phase": "baseline day-1", "p50_ms": 400.0},
        {"phase": "baseline day-2", "p50_ms": 600.0},
        {"phase": "rollout 0.30.0", "p50_ms": 2000.0},
    ]
    assert release_day.baseline_p50(rows) == 600.0
    assert release_day.baseline_p50([{"phase": "stage", "p50_ms": 300.0}, {"phase": "x", "p50_ms": None}]) == 300.0
    assert release_day.baseline_p50([]) is None


def test_report_counts_failures_and_cuts_over_every_phase(tmp_path, capsys):
    write_records(str(tmp_path), [req(1, 0.5), req(11, 2.0, "failed"), req(12, 1.0, "cut"), req(13, 1.0)], PHASES)
    rows, summary = release_day.load(str(tmp_path))
    assert release_day.report(rows, summary, "test") == (1, 1)
    out = capsys.readouterr().out
    assert "RESULT release-day.failed = 1" in out and "RESULT release-day.rollout_0.30.0_p50" in out


def test_the_recorded_excerpt_ci_mode_reads_is_whole():
    # An excerpt of a real run's records (the first requests of each phase it recorded): every phase has requests,
    # each request its outcome, and none fell outside the phases.
    if not os.path.isdir(release_day.FIXTURES):
        pytest.fail("bench/fixtures/release-day/ is missing: bash bench/run --small release-day reads it")
    rows, _summary = release_day.load(release_day.FIXTURES)
    phases = [r["phase"] for r in rows]
    assert phases and phases[0].startswith("baseline") and "between" not in phases
    assert all(r["sent"] > 0 and r["sent"] == r["succeeded"] + r["failed"] + r["cut"] for r in rows)
