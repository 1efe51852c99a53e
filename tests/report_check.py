"""Check the deployment reports a run fetched, as a person reading them would (issue 42's "Done when").

Usage:
  python3 tests/report_check.py REPORTS_DIR [...]      (a host's folder: build/reports/<host>, or one service's)

For each service folder (one holding report.json):
- report.md and memory.svg say what report.json says: each is exactly what the collection renders from report.json
  (plugins/module_utils/planner/_plan_confirm_report.py render_markdown and render_svg), so the verdict, the tables and the
  promises cannot disagree; the verdict line is printed;
- the memory picture is rendered to memory.png next to the report by a real renderer (rsvg-convert, Debian's
  librsvg2-bin; said and skipped without it) and looked at as the picture's unit test does: nothing touches the
  image's edge, and every glyph lies in the box the layout gave its label (no label over another, none clipped).

Exit status: 0 every report agrees and every picture is clean; 1 otherwise (each problem printed); 2 no report.json
under the folders given.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK_BASE = os.path.join(ROOT, "build", "collections")  # tests/link-collection.sh
if LINK_BASE not in sys.path:
    sys.path.insert(0, LINK_BASE)

from ansible_collections.airgap.vllm.plugins.module_utils.planner import _plan_confirm_picture as PIC  # noqa: E402
from ansible_collections.airgap.vllm.plugins.module_utils.planner._plan_confirm_report import (  # noqa: E402
    render_markdown,
    render_svg,
    stated_verdict,
)

# The picture's own checks of a rendered PNG (one home: the picture's unit test).
from ansible_collections.airgap.vllm.tests.unit.plugins.module_utils.test__plan_confirm_picture import (  # noqa: E402
    RSVG,
    render,
    stray_label_ink,
    touches_edge,
)


def service_dirs(paths):
    """Every folder under paths (or one of them) that holds a report.json, sorted."""
    out = []
    for top in paths:
        for d, _dirs, files in os.walk(top):
            if "report.json" in files:
                out.append(d)
    return sorted(out)


def _read(path):
    with open(path) as handle:
        return handle.read()


def agreement(folder):
    """The problems of one report folder's report.md and memory.svg against its report.json ([] when they agree)."""
    report = json.loads(_read(os.path.join(folder, "report.json")))
    problems = []
    for name, rendered in (("report.md", render_markdown(report)), ("memory.svg", render_svg(report))):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            problems.append("%s: missing" % name)
        elif _read(path).rstrip("\n") != rendered.rstrip("\n"):  # the file as written, a final newline aside
            problems.append("%s: not what report.json renders to (the two say different things)" % name)
    return report, problems


def picture(folder, report):
    """memory.png rendered next to the report; the problems a person would see in it ([] when it is clean)."""
    pic = PIC.layout(report, PIC.picture_notes(report))
    with tempfile.TemporaryDirectory() as tmp:
        # render() writes the SVG beside the PNG: in a folder of its own, never over the fetched memory.svg.
        width, height, rows = render(PIC.to_svg(pic), os.path.join(tmp, "memory.png"))
        shutil.copyfile(os.path.join(tmp, "memory.png"), os.path.join(folder, "memory.png"))
    problems = []
    if (width, height) != (pic["width"], pic["height"]):
        problems.append("memory.png is %dx%d, the layout %dx%d" % (width, height, pic["width"], pic["height"]))
    if touches_edge(rows):
        problems.append("memory.png: something touches the image's edge")
    # The labels alone, in black: every glyph inside its label's box (1 px of anti-aliasing).
    with tempfile.TemporaryDirectory() as tmp:
        stray = stray_label_ink(pic, os.path.join(tmp, "labels.png"))
    if stray:
        problems.append(
            "memory.png: ink outside every label's box (a label clipped or over another), e.g. %s" % stray[:3]
        )
    return problems


def check(paths, out=sys.stdout):
    """Check every report under paths; the exit status (see the module's documentation)."""
    folders = service_dirs(paths)
    if not folders:
        out.write("report_check: no report.json under %s\n" % " ".join(paths))
        return 2
    bad = 0
    for folder in folders:
        report, problems = agreement(folder)
        out.write("report %s: verdict %s: %s\n" % (folder, report.get("verdict"), stated_verdict(report)))
        if RSVG is None:
            out.write("  memory.png not rendered: no rsvg-convert (Debian: apt-get install librsvg2-bin)\n")
        else:
            problems += picture(folder, report)
        for problem in problems:
            out.write("  PROBLEM %s\n" % problem)
        if problems:
            bad += 1
        else:
            out.write(
                "  report.md and memory.svg agree with report.json%s\n"
                % ("" if RSVG is None else "; memory.png rendered, clean: %s" % os.path.join(folder, "memory.png"))
            )
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        sys.exit(2)
    sys.exit(check(sys.argv[1:]))
