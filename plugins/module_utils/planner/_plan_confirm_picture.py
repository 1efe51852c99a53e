# -*- coding: utf-8 -*-
# Copyright: airgap.vllm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The memory picture of the deployment report (memory.svg): two stacked bars, planned and measured.

Pure functions, stdlib only, Python 3.7-clean. ``layout`` computes every box of the picture in Python (each
segment, each label, each legend row, each caption line) and ``to_svg`` only writes those boxes out, so a test
checks the picture geometrically: no label overlaps another or leaves the canvas, every meaning has exactly one
legend row and one colour, and each bar's numbers add up to the total the caption states.

Text widths are estimated from DejaVu Sans (the widest common sans, Debian's default): an upper bound, which
tests/unit/plugins/module_utils/test__plan_confirm_picture.py checks against rsvg-convert's rendering.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_common import GIB

__metaclass__ = type

# One colour per meaning, in the order the bars stack them. (key, legend name, fill, colour of text on it)
MEANINGS = (
    ("weights", "weights", "#4e79a7", "#ffffff"),
    ("other", "other planned use (activations, non-torch, CUDA graphs)", "#f28e2b", "#1a1a1a"),
    ("not_measured", "not measured (the rest of the planned budget)", "#9c9c9c", "#1a1a1a"),
    ("kv_pool", "KV pool", "#59a14f", "#ffffff"),
    ("free", "free (outside gpu_memory_utilization)", "#e3e3e3", "#1a1a1a"),
)
SHORT = {"weights": "weights", "other": "other", "not_measured": "not measured", "kv_pool": "KV pool", "free": "free"}

FONT_SIZE = 11
ASCENT, DESCENT = 0.84, 0.26  # of the font size, around the baseline; checked against the renderer
WIDTH = 760
MARGIN = 12
BAR_X = 92
BAR_W = WIDTH - BAR_X - MARGIN
BAR_H = 26
LINE = 17
PAD = 4
COLUMNS = (MARGIN + 18, 430, 520)  # legend: meaning, planned, measured

# DejaVu Sans advance widths in em, rounded up; anything not listed counts as the widest class.
_NARROW = set("iljI.,:;'|!")
_SEMI = set("frt()[]- /")
_WIDE = set("mwMW%=@")


def text_width(text, size=FONT_SIZE):
    """An upper bound of the rendered width of ``text`` in px."""
    em = 0.0
    for ch in text:
        if ch in _NARROW:
            em += 0.34
        elif ch in _SEMI:
            em += 0.44
        elif ch in _WIDE:
            em += 1.0
        elif ch.isupper():
            em += 0.78
        elif ch.isdigit() or ch.islower():
            em += 0.66
        else:
            em += 0.84
    return em * size


def text_box(x, top, text, kind, fill="#1a1a1a", size=FONT_SIZE):
    """A line of text whose box starts at (x, top): its baseline is top + ASCENT * size."""
    return {
        "kind": kind,
        "x": round(x, 2),
        "y": round(top, 2),
        "w": round(text_width(text, size), 2),
        "h": round((ASCENT + DESCENT) * size, 2),
        "baseline": round(top + ASCENT * size, 2),
        "text": text,
        "fill": fill,
    }


def tenths(parts, total, absorb=None):
    """Each of ``parts`` (bytes) in tenths of a GiB, adding up to ``total`` in tenths: each rounded to the
    nearest, and what rounding left over goes to the part at index ``absorb`` (a bar's remainder, itself a
    difference), so one number reads the same in both bars; without one, or where it cannot take it, to the
    largest remainders."""
    want = int(round(total * 10.0 / GIB))
    exact = [p * 10.0 / GIB for p in parts]
    out = [int(round(e)) for e in exact]
    short = want - sum(out)
    if absorb is not None and out[absorb] + short >= 0:
        out[absorb] += short
        return out
    out = [int(e) for e in exact]
    order = sorted(range(len(parts)), key=lambda i: exact[i] - out[i], reverse=True)
    for i in order[: max(0, want - sum(out))]:
        out[i] += 1
    return out


def fmt_tenths(t):
    return "%d.%d" % (t // 10, t % 10)


def bar_segments(stack, measured):
    """The segments of one bar of _plan_confirm_report.memory_bars, in stacking order:
    [{"meaning", "bytes", "source": "engine" | "plan"}]."""
    if measured:
        return [
            {
                "meaning": "weights",
                "bytes": int(stack["weights"]),
                "source": "engine" if stack.get("weights_measured") else "plan",
            },
            {"meaning": "not_measured", "bytes": int(stack["other"]), "source": "plan"},
            {"meaning": "kv_pool", "bytes": int(stack["kv_pool"]), "source": "engine"},
            {"meaning": "free", "bytes": int(stack["free"]), "source": "plan"},
        ]
    return [
        {"meaning": key, "bytes": max(0, int(stack[key])), "source": "plan"}
        for key in ("weights", "other", "kv_pool", "free")
    ]


def layout(report, notes=None):
    """Every box of the memory picture: {"width", "height", "rects", "texts", "bars", "legend", "caption",
    "caption_tenths"}. ``rects`` are segments and legend swatches ({"kind", "x", "y", "w", "h", "fill",
    "meaning"}), ``texts`` the text boxes (text_box); ``bars`` per bar the segments with their ``tenths``."""
    memory = report["memory"]
    colour = dict((m[0], m[2]) for m in MEANINGS)
    ink = dict((m[0], m[3]) for m in MEANINGS)
    bars = []
    for name in ("planned", "measured"):
        stack = memory.get(name)
        segs = bar_segments(stack, name == "measured") if stack else None
        bars.append((name, segs))
    sums = [sum(s["bytes"] for s in segs) for _n, segs in bars if segs]
    card = int(memory["planned"].get("total") or 0)
    scale = max([card] + sums + [1])
    for _n, segs in bars:
        if segs:
            parts = [s["bytes"] for s in segs]
            absorb = [i for i, s in enumerate(segs) if s["meaning"] in ("other", "not_measured")]
            for seg, t in zip(segs, tenths(parts, sum(parts), absorb[0] if absorb else None)):
                seg["tenths"] = t
    totals = sorted(set(sum(s["tenths"] for s in segs) for _n, segs in bars if segs))
    rects, texts = [], []
    top = MARGIN
    if len(totals) == 1:
        caption = "Memory per GPU in GiB: each bar adds up to %s GiB%s" % (
            fmt_tenths(totals[0]),
            ", the card's total" if card and sum(s["bytes"] for s in bars[0][1]) == card else "",
        )
    else:
        caption = "Memory per GPU in GiB: %s" % ", ".join(
            "the %s bar adds up to %s GiB" % (n, fmt_tenths(sum(s["tenths"] for s in segs))) for n, segs in bars if segs
        )
    texts.append(text_box(MARGIN, top, caption, "caption"))
    top += LINE + 6
    out_bars = {}
    for name, segs in bars:
        texts.append(text_box(MARGIN, top + (BAR_H - (ASCENT + DESCENT) * FONT_SIZE) / 2.0, name, "row"))
        out_bars[name] = segs
        if not segs:
            texts.append(
                text_box(
                    BAR_X, top + (BAR_H - (ASCENT + DESCENT) * FONT_SIZE) / 2.0, "the engine reported no KV pool", "row"
                )
            )
            top += BAR_H + 10
            continue
        x = float(BAR_X)
        for seg in segs:
            w = BAR_W * seg["bytes"] / float(scale)
            if w > 0:
                rects.append(
                    {
                        "kind": "segment",
                        "bar": name,
                        "x": round(x, 2),
                        "y": top,
                        "w": round(w, 2),
                        "h": BAR_H,
                        "fill": colour[seg["meaning"]],
                        "meaning": seg["meaning"],
                        "title": "%s: %s %s GiB (%s)"
                        % (name, SHORT[seg["meaning"]], fmt_tenths(seg["tenths"]), seg["source"]),
                    }
                )
            # a label inside the segment when it fits, else the number alone, else none (the legend has it)
            for label in ("%s %s" % (SHORT[seg["meaning"]], fmt_tenths(seg["tenths"])), fmt_tenths(seg["tenths"])):
                if text_width(label) + 2 * PAD <= w:
                    box = text_box(x + PAD, top + (BAR_H - (ASCENT + DESCENT) * FONT_SIZE) / 2.0, label, "segment")
                    box["fill"], box["meaning"], box["bar"] = ink[seg["meaning"]], seg["meaning"], name
                    texts.append(box)
                    break
            x += w
        top += BAR_H + 10
    # the legend: one row per meaning that any bar shows, with its numbers per bar and their sum
    present = [m for m in MEANINGS if any(segs and any(s["meaning"] == m[0] for s in segs) for _n, segs in bars)]
    top += 4
    header = ("GiB", "planned", "measured")
    for col, head in zip(COLUMNS, header):
        texts.append(text_box(col, top, head, "legend_head"))
    top += LINE
    legend = []
    for key, name, fill, _ink in present:
        rects.append({"kind": "swatch", "x": MARGIN, "y": top + 1, "w": 12, "h": 10, "fill": fill, "meaning": key})
        texts.append(text_box(COLUMNS[0], top, name, "legend"))
        row = {"meaning": key, "name": name, "fill": fill}
        for col, (bar_name, segs) in zip(COLUMNS[1:], bars):
            seg = [s for s in (segs or []) if s["meaning"] == key]
            cell = "-"
            if seg:
                cell = fmt_tenths(seg[0]["tenths"]) + (
                    " (planned)" if bar_name == "measured" and seg[0]["source"] == "plan" else ""
                )
                row[bar_name] = seg[0]["tenths"]
            texts.append(text_box(col, top, cell, "legend"))
        legend.append(row)
        top += LINE
    texts.append(text_box(COLUMNS[0], top, "total", "legend"))
    for col, (_n, segs) in zip(COLUMNS[1:], bars):
        texts.append(text_box(col, top, fmt_tenths(sum(s["tenths"] for s in segs)) if segs else "-", "legend"))
    top += LINE + 6
    for note in notes or []:
        for line in wrap(note, WIDTH - 2 * MARGIN):
            texts.append(text_box(MARGIN, top, line, "note"))
            top += LINE - 2
    return {
        "width": WIDTH,
        "height": int(top + MARGIN),
        "rects": rects,
        "texts": texts,
        "bars": out_bars,
        "legend": legend,
        "caption": caption,
        "caption_tenths": totals,
    }


def wrap(text, width):
    """``text`` in lines no wider than ``width`` px (by text_width), broken at spaces."""
    lines, line = [], ""
    for word in text.split(" "):
        candidate = (line + " " + word) if line else word
        if line and text_width(candidate) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    return lines + ([line] if line else [])


def picture_notes(report):
    """What the measured bar measured, in the picture's words (from the report)."""
    memory = report["memory"]
    notes = []
    if memory.get("measured"):
        notes.append(
            "Measured by the engine: the KV pool (vllm:cache_config_info)%s; the rest of the measured bar is the "
            "plan's, marked (planned)."
            % (" and the weights (journal)" if memory["measured"].get("weights_measured") else "")
        )
    pool = report.get("pool") or {}
    if pool.get("explained_by"):
        notes.append(pool["explained_by"][:1].upper() + pool["explained_by"][1:] + ".")
    return notes


def to_svg(pic):
    """The SVG of a layout: nothing is placed here that layout did not place."""
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
        'font-family="DejaVu Sans, sans-serif" font-size="%d">'
        % (pic["width"], pic["height"], pic["width"], pic["height"], FONT_SIZE),
        '<rect x="0" y="0" width="%d" height="%d" fill="#ffffff"/>' % (pic["width"], pic["height"]),
    ]
    for r in pic["rects"]:
        out.append(
            '<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s>%s</rect>'
            % (
                r["x"],
                r["y"],
                r["w"],
                r["h"],
                r["fill"],
                ' data-meaning="%s"' % r["meaning"],
                "<title>%s</title>" % _xml(r["title"]) if r.get("title") else "",
            )
        )
    for t in pic["texts"]:
        out.append('<text x="%s" y="%s" fill="%s">%s</text>' % (t["x"], t["baseline"], t["fill"], _xml(t["text"])))
    out.append("</svg>")
    return "".join(out)


def render_svg(report):
    """memory.svg of a deployment report (_plan_confirm_report.deployment_report)."""
    return to_svg(layout(report, picture_notes(report)))


def _xml(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
