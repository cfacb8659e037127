"""Plot morello's GFLOP/s next to OpenBLAS's, per shape, as an SVG bar chart (stdlib only).

    python benchmarks/plot.py TABLE [-o OUT.svg] [--title TEXT]

TABLE is one of (chosen by its name's ending):

- ``.csv``: a header row with the columns ``shape``, ``morello_gflops`` and
  ``openblas_gflops`` (others are ignored), one row per shape; lines starting with ``#``
  are comments (say there where the figures come from);
- ``.json``: a list of objects with those three keys;
- ``.md`` or ``.txt``: the Markdown table ``benchmarks/paired.py`` prints (its rows
  ``| shape | morello GFLOP/s | OpenBLAS GFLOP/s | ratio | rounds ahead |``), e.g.
  ``python benchmarks/paired.py > run.md``; the first such table in the file is read.

The SVG (to stdout without ``-o``) has one pair of bars per shape, in the table's order,
each labelled with its figure, and the ratio morello/OpenBLAS under the shape. Only
figures that were measured belong in it: the script computes nothing but the ratio.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from xml.sax.saxutils import escape

Row = tuple[str, float, float]  # (shape, morello GFLOP/s, OpenBLAS GFLOP/s)

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 40, 64  # margins around the plot area
COLOURS = ("#2b6cb0", "#c05621")  # morello, OpenBLAS
FONT = 'font-family="sans-serif" font-size="12"'


def read_table(path: Path) -> list[Row]:
    """The (shape, morello, OpenBLAS) rows of ``path``, in their order."""
    text = path.read_text()
    if path.suffix == ".csv":
        lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        rows = [(r["shape"], float(r["morello_gflops"]), float(r["openblas_gflops"]))
                for r in csv.DictReader(lines)]
    elif path.suffix == ".json":
        rows = [(str(r["shape"]), float(r["morello_gflops"]), float(r["openblas_gflops"]))
                for r in json.loads(text)]
    elif path.suffix in (".md", ".txt"):
        rows = _markdown_rows(text)
    else:
        raise SystemExit(f"{path}: expected a .csv, .json or .md table")
    if not rows:
        raise SystemExit(f"{path}: no rows")
    return rows


def _markdown_rows(text: str) -> list[Row]:
    """The rows of the first table whose header starts ``| shape | morello GFLOP/s``."""
    rows: list[Row] = []
    inside = False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|"):
            if inside:
                break
            continue
        if cells[0] == "shape" and cells[1].startswith("morello GFLOP/s"):
            inside = True
        elif inside and not set(cells[0]) <= {"-"}:
            rows.append((cells[0], float(cells[1]), float(cells[2])))
    return rows


def _axis(value: float) -> tuple[float, int]:
    """A grid step (1, 2, 2.5 or 5 times a power of ten) and the number of steps, at most
    6, whose top is at or above ``value``."""
    scale = 10.0 ** (len(str(int(max(value, 1)))) - 2)
    step = next(m * scale for m in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5, 10, 20)
                if value / (m * scale) <= 6)
    return step, max(1, -int(-value // step))


def svg(rows: list[Row], title: str = "") -> str:
    """The chart as SVG text: pairs of bars on a shared GFLOP/s axis from 0."""
    step, steps = _axis(max(max(m, o) for _, m, o in rows))
    top = step * steps
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    group = plot_w / len(rows)
    bar = group * 0.35

    def y(v: float) -> float:
        return TOP + plot_h * (1 - v / top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
           f'viewBox="0 0 {WIDTH} {HEIGHT}">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>']
    if title:
        out.append(f'<text x="{WIDTH / 2:.1f}" y="18" text-anchor="middle" {FONT} '
                   f'font-weight="bold">{escape(title)}</text>')
    for i in range(steps + 1):  # grid lines and axis labels
        v = step * i
        out.append(f'<line x1="{LEFT}" y1="{y(v):.1f}" x2="{WIDTH - RIGHT}" y2="{y(v):.1f}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" text-anchor="end" {FONT}>'
                   f'{v:g}</text>')
    out.append(f'<text x="14" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" {FONT} '
               f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">GFLOP/s</text>')
    for i, (shape, ours, theirs) in enumerate(rows):
        x0 = LEFT + group * i + (group - 2 * bar) / 2
        for j, v in enumerate((ours, theirs)):
            x = x0 + j * bar
            out.append(f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bar:.1f}" '
                       f'height="{y(0) - y(v):.1f}" fill="{COLOURS[j]}"/>')
            out.append(f'<text x="{x + bar / 2:.1f}" y="{y(v) - 4:.1f}" text-anchor="middle" '
                       f'{FONT}>{v:g}</text>')
        mid = LEFT + group * (i + 0.5)
        out.append(f'<text x="{mid:.1f}" y="{y(0) + 16:.1f}" text-anchor="middle" {FONT}>'
                   f'{escape(shape)}</text>')
        out.append(f'<text x="{mid:.1f}" y="{y(0) + 31:.1f}" text-anchor="middle" {FONT} '
                   f'fill="#555">{ours / theirs:.2f}x</text>')
    for j, name in enumerate(("morello", "OpenBLAS")):  # legend, bottom left
        x = LEFT + j * 110
        out.append(f'<rect x="{x}" y="{HEIGHT - 16}" width="12" height="12" '
                   f'fill="{COLOURS[j]}"/>')
        out.append(f'<text x="{x + 16}" y="{HEIGHT - 6}" {FONT}>{name}</text>')
    out.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 6}" text-anchor="end" {FONT} '
               f'fill="#555">under each shape: morello / OpenBLAS</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("table", type=Path, help="a .csv, .json or .md table (see above)")
    ap.add_argument("-o", "--out", type=Path, help="the SVG file (default: stdout)")
    ap.add_argument("--title", default="", help="a title above the chart")
    args = ap.parse_args(argv)
    text = svg(read_table(args.table), args.title)
    if args.out is None:
        sys.stdout.write(text)
    else:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
