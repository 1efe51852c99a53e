"""The ratio, target and /proc/<pid>/io logic every bench reports through (no timings asserted)."""

import hashlib
import json
import os

import pytest

import benchlib as B

PROC_IO = """rchar: 4294970000
wchar: 4294967296
syscr: 520
syscw: 512
read_bytes: 4294967296
write_bytes: 4294967296
cancelled_write_bytes: 0
"""


def test_parse_proc_io():
    io = B.parse_proc_io(PROC_IO)
    assert io["rchar"] == 4294970000 and io["read_bytes"] == 4294967296 and io["cancelled_write_bytes"] == 0
    with pytest.raises(ValueError):
        B.parse_proc_io("Name: python3\n")


def test_proc_io_of_self_is_readable_and_grows():
    before = B.proc_io()
    with open(__file__, "rb") as f:
        n = len(f.read())
    delta = B.io_delta(before, B.proc_io())
    assert delta["rchar"] >= n


def test_run_measured_counts_the_child_tree(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 300000)
    _secs, io = B.run_measured(["sh", "-c", "cat %s > /dev/null" % p])
    assert io["rchar"] >= 300000


@pytest.mark.parametrize(
    "target,value,verdict",
    [
        ("<= 1.05", 1.0, "met"),
        ("<= 1.05", 1.06, "missed"),
        ("< 1", 1.0, "missed"),
        (">= 1", 3.3, "met"),
        (">0.5", 0.4, "missed"),
        (None, 2.0, "info"),
        ("<= 1", None, "info"),
    ],
)
def test_verdict(target, value, verdict):
    assert B.verdict(value, target) == verdict


def test_parse_target_rejects_garbage():
    assert B.parse_target("  <=  0.15 ") == ("<=", 0.15)
    with pytest.raises(ValueError):
        B.parse_target("about 1")


def test_margin_is_headroom_factor():
    assert B.margin(0.5, "<= 1") == pytest.approx(2.0)
    assert B.margin(3.0, ">= 1") == pytest.approx(3.0)
    assert B.margin(2.0, "<= 1") == pytest.approx(0.5)
    assert B.margin(0, "<= 1") == float("inf")
    assert B.margin(1, None) is None


def test_ratio():
    assert B.ratio(3, 1.5) == 2.0
    assert B.ratio(1, 0) is None and B.ratio(None, 1) is None


def test_result_lines_and_summary(tmp_path, monkeypatch, capsys):
    out = tmp_path / "r.jsonl"
    monkeypatch.setenv("AIRGAP_BENCH_RESULTS", str(out))
    monkeypatch.setenv("AIRGAP_BENCH_SMALL", "0")
    monkeypatch.setattr("sys.argv", ["x"])
    B.result("medium", "reads_per_bundle", 1.0001, "medium bytes / bundle", target="<= 1.05")
    B.result("staging", "x", 0.5, "slower", target=">= 1")
    B.skipped("identity", "oci_vs_docker_load", "no docker")
    assert "RESULT medium.reads_per_bundle = 1.00x target <= 1.05: MET" in capsys.readouterr().out
    recs = B.load_results(str(out))
    assert [r["verdict"] for r in recs] == ["met", "missed", "skipped"]
    table = B.summary_table(recs)
    assert "medium.reads_per_bundle" in table and "missed" in table
    md = B.summary_table(recs, markdown=True).splitlines()
    assert md[0].startswith("| result |") and len(md) == 2 + len(recs)
    assert B.main(["summary", str(out)]) == 0


def test_small_mode_never_judges(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRGAP_BENCH_SMALL", "1")
    monkeypatch.delenv("AIRGAP_BENCH_RESULTS", raising=False)
    assert B.result("x", "y", 9.0, "w", target="<= 1")["verdict"] == "not judged (small)"


def test_fmt_value():
    assert B.fmt_value(1.0, "x") == "1.00x"
    assert B.fmt_value(0.0021, "s") == "2.1 ms"
    assert B.fmt_value(None, "x") == "-"
    assert B.fmt_value(12345.0, "x") == "12345x"


def test_write_file_sha_matches_content(tmp_path):
    p = str(tmp_path / "a" / "f.bin")
    sha = B.write_file(p, 3 * B.MIB + 17, "seed")
    with open(p, "rb") as f:
        data = f.read()
    assert len(data) == 3 * B.MIB + 17 and hashlib.sha256(data).hexdigest() == sha
    # Different MiB blocks differ (no run a deduplicating medium could shortcut).
    assert data[: B.MIB] != data[B.MIB : 2 * B.MIB]


def test_make_bundle_and_manifest(tmp_path):
    entries = B.make_bundle(str(tmp_path), [10, 0, 4096])
    B.write_manifest(str(tmp_path), entries)
    with open(os.path.join(str(tmp_path), "manifest.yml")) as f:
        assert json.load(f)["artifacts"] == entries
    assert [e["size"] for e in entries] == [10, 0, 4096]
    sums = (tmp_path / "SHA256SUMS").read_text().splitlines()
    assert len(sums) == 3 and all("  artifacts/blob-" in s for s in sums)


def test_drop_cache_is_best_effort(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 8192)
    assert B.drop_cache([str(p), str(tmp_path / "missing")]) == 1


def test_need_space_refuses(tmp_path):
    with pytest.raises(SystemExit):
        B.need_space(str(tmp_path), 1 << 60)


def test_scratch_is_per_process(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRGAP_BENCH_DIR", str(tmp_path))
    d = B.scratch("x")
    assert os.path.isdir(d) and str(os.getpid()) in os.path.basename(d)
    monkeypatch.delenv("AIRGAP_BENCH_KEEP", raising=False)
    B.cleanup(d)
    assert not os.path.exists(d)
