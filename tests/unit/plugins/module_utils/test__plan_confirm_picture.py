"""The memory picture (plugins/module_utils/planner/_plan_confirm_picture.py), checked as a person would (issue 42 item 3):
every segment in the legend, one colour per meaning, numbers that add up to the caption's total, no label over
another or off the canvas; then rendered to PNG by a real renderer (Debian's rsvg-convert, librsvg2-bin) and
looked at: nothing touches the image's edges, and every glyph lies inside the box the layout gave its label.

The PNGs are kept next to the report they picture: build/memory-picture/<case>/{report.md,memory.svg,memory.png}.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import struct
import subprocess
import zlib

import pytest

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_common as CM
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm as C
from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm_picture as PIC

from .test__plan_confirm import field_plan
from .test__plan_confirm_parse import metrics
from .test__plan_confirm_report import cpu_metrics, simulated_plan

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
KEEP = os.path.join(ROOT, "build", "memory-picture")
JOURNAL = "Model loading took 28.71 GiB memory and 40.1 seconds\nAvailable KV cache memory: 11.41 GiB\n"


def gpu_confirmed():
    r = field_plan(measured_kv_cache_bytes=int(11.41 * CM.GIB))
    led = r["ledger"]
    c = C.confirm(r, metrics(led["num_gpu_blocks"], tokens=led["gpu_kv_cache_tokens"]), JOURNAL)
    assert c["verdict"] == "confirmed"
    return c


def cpu_engine():
    """The simulated host: a 48 GB card planned, the CPU engine's 1 GiB test pool measured."""
    c = C.confirm(simulated_plan(), cpu_metrics(), engine_env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert c["verdict"] == "not_measured"
    return c


def replan():
    c = C.confirm(field_plan(), metrics(220), JOURNAL)
    assert c["verdict"] == "replan_needed" and c["restart"]
    return c


def nothing_measured():
    c = cpu_engine()
    report = dict(c["report"], memory=dict(c["report"]["memory"], measured=None))
    return dict(c, report=report, report_svg=PIC.render_svg(report))


CASES = {
    "gpu-confirmed": gpu_confirmed,
    "cpu-engine": cpu_engine,
    "replan": replan,
    "nothing-measured": nothing_measured,
}


def overlap(a, b):
    return (
        a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]
    )


def inside(a, b):
    return (
        b["x"] <= a["x"]
        and a["x"] + a["w"] <= b["x"] + b["w"]
        and b["y"] <= a["y"]
        and a["y"] + a["h"] <= b["y"] + b["h"]
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_layout_is_clean(case):
    report = CASES[case]()["report"]
    pic = PIC.layout(report, PIC.picture_notes(report))
    canvas = {"x": 2, "y": 2, "w": pic["width"] - 4, "h": pic["height"] - 4}
    for box in pic["texts"] + pic["rects"]:
        assert inside(box, canvas), box  # nothing clipped, nothing touching the edge
    texts = pic["texts"]
    for i, a in enumerate(texts):
        for b in texts[i + 1 :]:
            assert not overlap(a, b), (a, b)
    segments = [r for r in pic["rects"] if r["kind"] == "segment"]
    for t in texts:
        for r in pic["rects"]:
            if overlap(t, r):  # a label on a segment is that segment's, and inside it
                assert t["kind"] == "segment" and r["kind"] == "segment" and inside(t, r), (t, r)
                assert (t["meaning"], t["bar"]) == (r["meaning"], r["bar"])
    # one colour per meaning, and one meaning per colour
    colours = {}
    for r in pic["rects"]:
        colours.setdefault(r["meaning"], set()).add(r["fill"])
    assert all(len(v) == 1 for v in colours.values()), colours
    assert len(set(next(iter(v)) for v in colours.values())) == len(colours)
    # every meaning a bar shows has exactly one legend row, in its colour
    shown = set(s["meaning"] for segs in pic["bars"].values() if segs for s in segs)
    assert sorted(row["meaning"] for row in pic["legend"]) == sorted(shown)
    for row in pic["legend"]:
        assert [r["fill"] for r in pic["rects"] if r["kind"] == "swatch" and r["meaning"] == row["meaning"]] == [
            row["fill"]
        ]
        assert all(r["fill"] == row["fill"] for r in segments if r["meaning"] == row["meaning"])
    # each bar's numbers add up to the one total the caption states
    assert len(pic["caption_tenths"]) == 1
    total = pic["caption_tenths"][0]
    assert "adds up to %s GiB" % PIC.fmt_tenths(total) in pic["caption"]
    for segs in pic["bars"].values():
        if segs:
            assert sum(s["tenths"] for s in segs) == total
    # ...which is the card's (gpu_total_bytes), rounded
    assert total == int(round(report["memory"]["planned"]["total"] * 10.0 / CM.GIB))
    # a number that is in both bars (the same bytes) reads the same in both
    bars = [segs for segs in pic["bars"].values() if segs]
    if len(bars) == 2:
        for a in bars[0]:
            for b in bars[1]:
                if a["meaning"] == b["meaning"] and a["bytes"] == b["bytes"]:
                    assert a["tenths"] == b["tenths"], (a, b)
    # the segments span the bar, in order, without gaps
    for name in pic["bars"]:
        row = [r for r in segments if r["bar"] == name]
        for a, b in zip(row, row[1:]):
            assert abs(a["x"] + a["w"] - b["x"]) < 0.05
        if row:
            assert row[0]["x"] == PIC.BAR_X and abs(row[-1]["x"] + row[-1]["w"] - PIC.BAR_X - PIC.BAR_W) < 0.05


def test_the_cpu_engines_picture_says_what_was_not_measured():
    pic = PIC.layout(cpu_engine()["report"])
    measured = dict((s["meaning"], s) for s in pic["bars"]["measured"])
    assert PIC.fmt_tenths(measured["not_measured"]["tenths"]) == "43.6"  # the largest segment, in the legend
    assert "not_measured" in [row["meaning"] for row in pic["legend"]]
    assert measured["weights"]["source"] == "plan" and measured["kv_pool"]["source"] == "engine"
    labels = [t["text"] for t in pic["texts"] if t["kind"] == "segment" and t["bar"] == "measured"]
    assert "not measured 43.6" in labels


def test_tenths_add_up():
    g = CM.GIB
    assert sorted(PIC.tenths([g // 20] * 3, 3 * (g // 20))) == [0, 0, 1]  # 3 x 0.05 GiB: 0.1 GiB in all
    assert sum(PIC.tenths([g // 3] * 3, g)) == 10
    assert PIC.tenths([int(3.36 * g), int(0.27 * g), int(44.36 * g)], int(47.99 * g), absorb=1) == [34, 2, 444]
    assert PIC.wrap("a " * 200, 100) and all(PIC.text_width(line) <= 100 for line in PIC.wrap("a " * 200, 100))


# --- rendered, as a person sees it ----------------------------------------------------------------------


def read_png(path):
    """(width, height, rows of (r, g, b, a)) of an 8-bit RGB/RGBA non-interlaced PNG (rsvg-convert's)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, head = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            head = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, ctype, _comp, _filt, interlace = head
    assert depth == 8 and ctype in (2, 6) and interlace == 0, head
    bpp = 4 if ctype == 6 else 3
    raw, stride, prev, rows = zlib.decompress(idat), width * bpp, bytearray(width * bpp), []
    for y in range(height):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(
            [tuple(line[x * bpp : x * bpp + 3]) + ((line[x * bpp + 3],) if bpp == 4 else (255,)) for x in range(width)]
        )
        prev = line
    return width, height, rows


def inked(px):
    """Not the white background: drawn (an opaque pixel that is not white)."""
    return px[3] > 0 and px[:3] != (255, 255, 255)


RSVG = shutil.which("rsvg-convert")
needs_rsvg = pytest.mark.skipif(
    RSVG is None, reason="rsvg-convert not installed (Debian: apt-get install librsvg2-bin; .ci/setup does)"
)


def render(svg, png):
    with open(png[:-4] + ".svg", "w") as f:
        f.write(svg)
    subprocess.run([RSVG, "-o", png, png[:-4] + ".svg"], check=True)
    return read_png(png)


def touches_edge(rows):
    """Whether anything is drawn in the outer two pixels of a rendered picture."""
    edge = [rows[0], rows[1], rows[-1], rows[-2]] + [[r[0], r[1], r[-1], r[-2]] for r in rows]
    return any(inked(px) for line in edge for px in line)


def stray_label_ink(pic, png):
    """The pixels (x, y) drawn outside every label's box (1 px of anti-aliasing) when the labels alone are rendered
    in black to png: [] when the layout's boxes, which never overlap, are what the renderer draws."""
    texts = [dict(t, fill="#000000") for t in pic["texts"]]
    _w, _h, rows = render(PIC.to_svg(dict(pic, rects=[], texts=texts)), png)
    boxes = [(t["x"] - 1, t["y"] - 1, t["x"] + t["w"] + 1, t["y"] + t["h"] + 1) for t in texts]
    return [
        (x, y)
        for y, line in enumerate(rows)
        for x, px in enumerate(line)
        if inked(px) and not any(x0 <= x + 0.5 <= x1 and y0 <= y + 0.5 <= y1 for x0, y0, x1, y1 in boxes)
    ]


@needs_rsvg
@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_to_png_nothing_touches_the_edge(case):
    c = CASES[case]()
    keep = os.path.join(KEEP, case)
    if not os.path.isdir(keep):
        os.makedirs(keep)
    with open(os.path.join(keep, "report.md"), "w") as f:
        f.write(c.get("report_markdown") or "")
    pic = PIC.layout(c["report"], PIC.picture_notes(c["report"]))
    assert PIC.to_svg(pic) == c["report_svg"]
    width, height, rows = render(c["report_svg"], os.path.join(keep, "memory.png"))
    assert (width, height) == (pic["width"], pic["height"])
    assert not touches_edge(rows), "%s: something touches the image's edge" % case
    # each bar is drawn where the layout put it: the pixel in the middle of a wide segment has its colour
    for r in pic["rects"]:
        if r["kind"] == "segment" and r["w"] > 6:
            px = rows[int(r["y"] + 2)][int(r["x"] + 3)]
            assert "#%02x%02x%02x" % px[:3] == r["fill"], (r, px)


@needs_rsvg
@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_labels_stay_in_their_boxes(case, tmp_path):
    """The labels alone, rendered: every glyph's pixel lies in its label's box (1 px of anti-aliasing), so the
    layout's boxes, which never overlap, are what the renderer draws: no label over another, none clipped."""
    c = CASES[case]()
    pic = PIC.layout(c["report"], PIC.picture_notes(c["report"]))
    stray = stray_label_ink(pic, str(tmp_path / "labels.png"))
    assert not stray, "%s: ink outside every label box, e.g. %s" % (case, stray[:5])
