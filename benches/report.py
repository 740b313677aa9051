#!/usr/bin/env python3
"""Turns criterion's results into the README's tables and one SVG chart.

    cargo bench --bench pool          # writes target/criterion/
    python3 benches/report.py         # prints Markdown tables, writes benches/results.svg

Standard library only. Times are criterion's median estimates. For the
multi-thread groups a criterion iteration runs one operation on every thread
at once, so the aggregate cost per operation is the time divided by the
thread count (the tables show both).
"""

import json
import math
import os
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(__file__), "..", "target", "criterion")
SVG = os.path.join(os.path.dirname(__file__), "results.svg")


def load():
    """{group: {bench: (median ns, elements per iteration or None)}}"""
    results = defaultdict(dict)
    for dirpath, _, files in os.walk(ROOT):
        if "benchmark.json" not in files or not dirpath.endswith("new"):
            continue
        with open(os.path.join(dirpath, "benchmark.json")) as f:
            bench = json.load(f)
        with open(os.path.join(dirpath, "estimates.json")) as f:
            estimates = json.load(f)
        elements = (bench.get("throughput") or {}).get("Elements")
        name = bench["function_id"] + ("/" + bench["value_str"] if bench.get("value_str") else "")
        results[bench["group_id"]][name] = (estimates["median"]["point_estimate"], elements)
    return results


def table(results, group, per, floor="thread_local floor"):
    rows = results.get(group)
    if not rows:
        return ""
    base = rows.get(floor, (None,))[0]
    out = [f"\n**{group}** ({per})\n", "| pool | ns | x floor |", "| --- | ---: | ---: |"]
    for name, (ns, elements) in sorted(rows.items(), key=lambda kv: kv[1][0]):
        n = ns / elements if elements else ns
        ratio = f"{ns / base:.2f}" if base else ""
        out.append(f"| {name} | {n:.1f} | {ratio} |")
    return "\n".join(out)


def svg_chart(results):
    """Two panels: hot-path throughput against threads, and cost by size."""
    width, height, pad = 900, 380, 60
    panel = (width - 3 * pad) / 2
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]

    def axes(x0, title, xlabel, ylabel):
        y0 = height - pad
        parts.append(f'<text x="{x0 + panel / 2}" y="24" text-anchor="middle" font-size="14">{title}</text>')
        parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + panel}" y2="{y0}" stroke="black"/>')
        parts.append(f'<line x1="{x0}" y1="{pad}" x2="{x0}" y2="{y0}" stroke="black"/>')
        parts.append(f'<text x="{x0 + panel / 2}" y="{height - 20}" text-anchor="middle">{xlabel}</text>')
        parts.append(
            f'<text x="{x0 - 45}" y="{(pad + y0) / 2}" text-anchor="middle" '
            f'transform="rotate(-90 {x0 - 45} {(pad + y0) / 2})">{ylabel}</text>'
        )

    def series(x0, points, xs, ymax, color, label, index, log_x=False, log_y=None, dash=False):
        import math

        y0 = height - pad

        def sx(v):
            lo, hi = (math.log2(xs[0]), math.log2(xs[-1])) if log_x else (xs[0], xs[-1])
            v = math.log2(v) if log_x else v
            return x0 + (v - lo) / ((hi - lo) or 1) * panel

        def sy(v):
            if log_y:
                lo, hi = math.log10(log_y[0]), math.log10(log_y[1])
                return y0 - (math.log10(v) - lo) / (hi - lo) * (y0 - pad)
            return y0 - v / ymax * (y0 - pad)

        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
        style = ' stroke-dasharray="6,4"' if dash else ""
        parts.append(
            f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{style}/>'
        )
        for x, y in points:
            parts.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>')
        parts.append(f'<text x="{x0 + 10}" y="{pad + 16 * index}" fill="{color}">{label}</text>')
        return sx, sy

    # Scaling: million operations per second against threads.
    scaling = results.get("scaling", {})
    lines = defaultdict(list)
    for name, (ns, elements) in scaling.items():
        label, threads = name.rsplit("/", 1)
        lines[label].append((int(threads), elements / ns * 1e3))
    x0 = pad
    axes(x0, "hot path throughput", "threads", "million ops/s")
    if lines:
        xs = sorted({t for pts in lines.values() for t, _ in pts})
        base = dict(lines.get("stashpool with", []))
        ideal = [(t, base[xs[0]] * t) for t in xs] if xs[0] in base else []
        ymax = max([v for pts in lines.values() for _, v in pts] + [v for _, v in ideal]) * 1.15
        for i, (label, pts) in enumerate(sorted(lines.items())):
            sx, sy = series(x0, sorted(pts), xs, ymax, colors[i], label, i + 1)
        if ideal:
            series(x0, ideal, xs, ymax, "#888888", "linear (N x one thread)", len(lines) + 1, dash=True)
        for t in xs:
            parts.append(f'<text x="{sx(t):.1f}" y="{height - pad + 16}" text-anchor="middle">{t}</text>')
        parts.append(f'<text x="{x0 - 8}" y="{sy(ymax / 1.15):.1f}" text-anchor="end">{ymax / 1.15:.0f}</text>')

    # Sizes: ns per use against buffer size (log scale).
    by_size = defaultdict(list)
    for group, rows in results.items():
        if group.startswith("sizes/"):
            size = int(group.split("/")[1])
            for name, (ns, _) in rows.items():
                by_size[name].append((size, ns))
    x0 = 2 * pad + panel
    axes(x0, "one buffer, by size", "bytes (log scale)", "ns per use (log scale)")
    if by_size:
        xs = sorted({s for pts in by_size.values() for s, _ in pts})
        values = [v for pts in by_size.values() for _, v in pts]
        decades = (10 ** math.floor(math.log10(min(values))), 10 ** math.ceil(math.log10(max(values))))
        for i, (label, pts) in enumerate(sorted(by_size.items())):
            sx, sy = series(
                x0, sorted(pts), xs, None, colors[i], label, i + 1, log_x=True, log_y=decades
            )
        for s in xs:
            text = f"{s // 1024}K" if s >= 1024 else str(s)
            parts.append(f'<text x="{sx(s):.1f}" y="{height - pad + 16}" text-anchor="middle">{text}</text>')
        tick = decades[0]
        while tick <= decades[1]:
            parts.append(f'<text x="{x0 - 8}" y="{sy(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
            tick *= 10

    parts.append("</svg>")
    with open(SVG, "w") as f:
        f.write("\n".join(parts) + "\n")


def main():
    results = load()
    if not results:
        sys.exit(f"no criterion results under {ROOT}: run `cargo bench --bench pool` first")
    for group, per in [
        ("hot/1", "ns per get-write-return"),
        ("hot/all", "aggregate ns per operation, all threads"),
        ("overflow/1", "ns per buffer"),
        ("overflow/all", "aggregate ns per buffer, all threads"),
        ("handoff", "ns per buffer"),
    ]:
        print(table(results, group, per))
    svg_chart(results)
    print(f"\nwrote {os.path.relpath(SVG)}")


if __name__ == "__main__":
    main()
