"""tests/report_check.py, which tests/simulate runs over the reports it fetched (issue 42's "Done when"): a report whose
report.md or memory.svg says something report.json does not is named, and the memory picture is rendered to
memory.png next to the report and looked at."""

import io
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import report_check  # noqa: E402

from ansible_collections.airgap.vllm.tests.unit.plugins.module_utils.test__plan_confirm_picture import (  # noqa: E402
    CASES,
)


def write_case(folder, case="cpu-engine"):
    c = CASES[case]()
    os.makedirs(folder)
    with open(os.path.join(folder, "report.json"), "w") as f:
        json.dump(c["report"], f, indent=2)
    with open(os.path.join(folder, "report.md"), "w") as f:
        f.write(c["report_markdown"])
    with open(os.path.join(folder, "memory.svg"), "w") as f:
        f.write(c["report_svg"].rstrip("\n"))  # as the role writes it: no final newline
    return c


def check(*paths):
    out = io.StringIO()
    return report_check.check([str(p) for p in paths], out), out.getvalue()


def test_a_report_as_the_collection_writes_it_agrees(tmp_path):
    c = write_case(str(tmp_path / "airgap-kylin-sim" / "vllm"))
    rc, out = check(tmp_path / "airgap-kylin-sim")
    assert rc == 0, out
    assert "verdict not_measured: %s" % c["report"]["verdict_text"] in out
    assert "report.md and memory.svg agree with report.json" in out
    svg = (tmp_path / "airgap-kylin-sim" / "vllm" / "memory.svg").read_text()
    if report_check.RSVG:
        assert (tmp_path / "airgap-kylin-sim" / "vllm" / "memory.png").is_file()
        assert (tmp_path / "airgap-kylin-sim" / "vllm" / "memory.svg").read_text() == svg  # not rewritten
        assert "memory.png rendered, clean" in out
    else:
        assert "memory.png not rendered: no rsvg-convert" in out


def test_a_report_md_that_says_another_verdict_is_named(tmp_path):
    folder = tmp_path / "vllm"
    c = write_case(str(folder), "gpu-confirmed")
    md = (folder / "report.md").read_text()
    (folder / "report.md").write_text(md.replace(c["report"]["verdict_text"], "KV pool not as planned"))
    rc, out = check(folder)
    assert rc == 1, out
    assert "PROBLEM report.md: not what report.json renders to" in out
    (folder / "report.md").write_text(md + "\n")  # a final newline more is the same report
    rc, out = check(folder)
    assert rc == 0, out
    (folder / "memory.svg").unlink()
    rc, out = check(folder)
    assert rc == 1 and "PROBLEM memory.svg: missing" in out, out


def test_no_report_is_said(tmp_path):
    rc, out = check(tmp_path)
    assert rc == 2 and "no report.json under" in out
