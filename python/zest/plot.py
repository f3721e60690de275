"""zest plot: one step's memory and timeline as a self-contained HTML page
(inline SVG, no scripts or files it loads), and a PNG of it through a
headless browser.

From rank 0's Chrome trace (`--trace`): the pool's and the gathered
parameters' bytes as the step allocates and frees (measured), and the
step's lanes: compute, the waits inside it, and the transfers on the link,
each named by its unit. From zestc's report (`--report-json`): the
predicted peak and footprint, drawn over the measurement, what the step's
arguments hold outside the pool (shards, optimizer state, accumulators),
and the units with their schedule, optimizer state and accumulators."""

import html
import json
import os
import shutil
import subprocess

from .tools import LaunchError

WIDTH, LANE, CHART = 1100, 22, 260
COLORS = {"compute": "#4c78a8", "wait": "#e45756", "comm": "#72b7b2"}


def read_trace(path):
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as error:
        raise LaunchError(f"'{path}' is not a Zest trace: {error}")
    steps = [e for e in events if e.get("cat") == "step"]
    if not steps:
        raise LaunchError(f"'{path}' has no step: run with --trace")
    # The last step: the pool and caches are warm.
    last = max(steps, key=lambda e: e["ts"])
    begin, end = last["ts"], last["ts"] + last["dur"]
    inside = [e for e in events if begin <= e.get("ts", -1) <= end]
    before = [e for e in counter_series(events, "pool bytes") if e[0] < begin]
    return last, inside, before[-1][1] if before else 0


def counter_series(events, name):
    return [
        (e["ts"], e["args"]["bytes"])
        for e in events
        if e.get("ph") == "C" and e.get("name") == name
    ]


def read_report(path):
    if not path:
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as error:
        raise LaunchError(f"'{path}' is not zestc's --report-json: {error}")


def predicted_peaks(report):
    """(label, bytes) lines to draw: the plan's peak and footprint, one
    line where they are equal."""
    if not report:
        return []
    lines = {}
    for function in report.get("functions", []):
        for key, label in (
            ("predicted_peak_pool_bytes", "predicted peak pool"),
            ("predicted_pool_footprint_bytes", "predicted pool footprint"),
        ):
            if key in function:
                lines.setdefault(function[key], []).append(
                    f"{label} ({function['name']})"
                )
    return [(", ".join(labels), value) for value, labels in sorted(lines.items())]


def steps_path(points, x, y):
    """A step function through `points`: bytes hold until the next event."""
    coordinates, last = [], None
    for ts, value in points:
        if last is not None:
            coordinates.append(f"{x(ts):.1f},{y(last):.1f}")
        coordinates.append(f"{x(ts):.1f},{y(value):.1f}")
        last = value
    return " ".join(coordinates)


def allocations(events, start_bytes):
    """(time, pool bytes) right after each allocation: where the pool's
    counter rises."""
    rises, previous = [], start_bytes
    for ts, value in counter_series(events, "pool bytes"):
        if value > previous:
            rises.append((ts, value))
        previous = value
    return rises


def predicted_allocations(report, count):
    """The plan's entry point with `count` allocations (the step the trace
    ran): its pool bytes after each, and the same split by kind (gathered
    parameters, parameter gradients, the rest); None if there is none."""
    for function in (report or {}).get("functions", []):
        series = function.get("predicted_pool_after_allocation") or []
        if len(series) == count:
            kinds = function.get("predicted_kinds_after_allocation") or []
            return series, kinds if len(kinds) == count else None
    return None, None


KINDS = (
    ("gathered parameters", "#f58518"),
    ("parameter gradients", "#b279a2"),
    ("activations and temporaries", "#9ecae9"),
)


def kind_areas(measured, kinds, x, y, end):
    """The plan's pool at each allocation, stacked by kind: one band per
    kind from that allocation to the next (frees between them are not
    drawn)."""
    if not kinds:
        return []
    times = [ts for ts, _ in measured] + [end]
    parts, below = [], [0] * len(kinds)
    for index, (name, color) in enumerate(KINDS):
        above = [b + k[index] for b, k in zip(below, kinds)]
        upper = " ".join(
            f"{x(times[i]):.1f},{y(v):.1f} {x(times[i + 1]):.1f},{y(v):.1f}"
            for i, v in enumerate(above)
        )
        lower = " ".join(
            f"{x(times[i + 1]):.1f},{y(v):.1f} {x(times[i]):.1f},{y(v):.1f}"
            for i, v in reversed(list(enumerate(below)))
        )
        parts.append(
            f'<polygon class="kind" points="{upper} {lower}" fill="{color}" '
            f'fill-opacity="0.45" stroke="none"><title>{name} (predicted)'
            "</title></polygon>"
        )
        below = above
    return parts


def kinds_legend(kinds):
    if not kinds:
        return ""
    return (
        "<p id='kinds'>Shaded, the plan's pool at each allocation by kind: "
        + ", ".join(
            f"<span style='background:{color};opacity:0.7'>&nbsp;&nbsp;&nbsp;</span> {name}"
            for name, color in KINDS
        )
        + ".</p>"
    )


def allocation_marks(measured, predicted, x, y):
    """A dot at each allocation where the plan put the pool, and what
    agreed."""
    if predicted is None:
        return [], (
            "The plan's pool after each allocation is not shown (no report, "
            "or another number of allocations)."
        )
    marks = [
        f'<circle class="predicted-point" cx="{x(ts):.1f}" cy="{y(p):.1f}" '
        'r="2" fill="#54a24b"/>'
        for (ts, _), p in zip(measured, predicted)
    ]
    equal = sum(m == p for (_, m), p in zip(measured, predicted))
    return marks, (
        f"Green dots: the plan's pool bytes after each of the step's "
        f"{len(predicted)} allocations; {equal} of {len(predicted)} equal "
        "the measurement."
    )


def memory_svg(step, events, peaks, measured, predicted, kinds):
    """The pool's and the gathered bytes over the step, and the plan's:
    its peaks, its pool after each `measured` allocation, split by kind."""
    begin, duration = step["ts"], max(step["dur"], 1e-9)
    series = {
        "pool bytes": counter_series(events, "pool bytes"),
        "gathered bytes": counter_series(events, "gathered bytes"),
    }
    top = max([b for s in series.values() for _, b in s] + [b for _, b in peaks] + [1])
    x = lambda ts: 60 + (ts - begin) / duration * (WIDTH - 80)
    y = lambda b: 20 + (1 - b / top) * (CHART - 40)
    parts = [
        f'<svg id="memory" width="{WIDTH}" height="{CHART}" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    parts += kind_areas(measured, kinds, x, y, begin + duration)
    for (name, points), color in zip(series.items(), ("#4c78a8", "#f58518")):
        path = steps_path(points, x, y)
        parts.append(
            f'<polyline class="measured" points="{path}" fill="none" '
            f'stroke="{color}" stroke-width="1.5"><title>{name} '
            "(measured)</title></polyline>"
        )
    for label, value in peaks:
        parts.append(
            f'<line class="predicted" x1="60" x2="{WIDTH - 20}" '
            f'y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#54a24b" '
            'stroke-dasharray="6 4"/>'
            f'<text x="64" y="{y(value) - 4:.1f}" font-size="11">'
            f"{html.escape(label)}: {value / 2**20:.2f} MiB</text>"
        )
    marks, caption = allocation_marks(measured, predicted, x, y)
    parts += marks
    parts.append(f'<text x="4" y="14" font-size="11">{top / 2**20:.2f} MiB</text>')
    parts.append("</svg>")
    return (
        "".join(parts)
        + f"<p id='agreement'>{html.escape(caption)}</p>"
        + kinds_legend(kinds)
    )


def lanes_svg(step, events):
    """Compute, waits and transfers of the step, one lane each."""
    begin, duration = step["ts"], max(step["dur"], 1e-9)
    x = lambda ts: 60 + (ts - begin) / duration * (WIDTH - 80)
    lanes = ["compute", "wait", "comm"]
    height = LANE * len(lanes) + 30
    parts = [
        f'<svg id="timeline" width="{WIDTH}" height="{height}" '
        'xmlns="http://www.w3.org/2000/svg">'
    ]
    for row, lane in enumerate(lanes):
        parts.append(
            f'<text x="4" y="{row * LANE + 15}" font-size="11">' f"{lane}</text>"
        )
        for e in events:
            if e.get("ph") != "X" or e.get("cat") != lane:
                continue
            left, right = x(e["ts"]), x(e["ts"] + e["dur"])
            parts.append(
                f'<rect class="{lane}" x="{left:.1f}" y="{row * LANE + 3}" '
                f'width="{max(right - left, 0.5):.1f}" height="{LANE - 6}" '
                f'fill="{COLORS[lane]}"><title>{html.escape(e["name"])} '
                f'({e["dur"] / 1e3:.3f} ms)</title></rect>'
            )
    parts.append(
        f'<text x="60" y="{height - 6}" font-size="11">0 ms</text>'
        f'<text x="{WIDTH - 90}" y="{height - 6}" font-size="11">'
        f"{duration / 1e3:.3f} ms</text></svg>"
    )
    return "".join(parts)


def peak_units(report):
    """Per unit, its gathered parameters and gradients at the highest
    predicted peak of the report's entry points."""
    functions = [f for f in report.get("functions", []) if f.get("peak_breakdown")]
    if not functions:
        return {}
    top = max(functions, key=lambda f: f["predicted_peak_pool_bytes"])
    return top["peak_breakdown"]["units"]


def units_table(report):
    if not report or not report.get("units"):
        return "<p>No report (zestc --report-json): units not shown.</p>"
    at_peak = peak_units(report)
    rows = [
        "<table id='units'><tr><th>unit</th><th>kind</th><th>bytes</th>"
        "<th>shard bytes</th><th>prefetch</th><th>decision</th>"
        "<th>optimizer state</th><th>accumulators</th>"
        "<th>gathered at the peak</th><th>gradients at the peak</th>"
        "<th>activations at the peak</th></tr>"
    ]
    for unit in report["units"]:
        share = at_peak.get(unit["name"], {})
        cells = [
            unit.get(k, "")
            for k in (
                "name",
                "kind",
                "bytes",
                "shard_bytes",
                "prefetch",
                "decision",
                "optimizer_state_bytes",
                "accumulator_bytes",
            )
        ] + [
            share.get(kind, 0)
            for kind in ("gathered_bytes", "gradient_bytes", "other_bytes")
        ]
        rows.append(
            "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"
        )
    return "".join(rows) + "</table>"


def arguments_note(report):
    """What the step holds outside the pool, for the entry point with the
    most arguments: its parameter shards, optimizer state and gradient
    accumulators (the units' sums) and the rest (the batch, the
    hyperparameters)."""
    functions = report.get("functions", []) if report else []
    if not functions or not report.get("units"):
        return ""
    total = max(f.get("argument_bytes", 0) for f in functions)
    host = max(f.get("host_argument_bytes", 0) for f in functions)
    parts = {
        name: sum(u.get(key, 0) for u in report["units"])
        for name, key in (
            ("parameter shards", "shard_bytes"),
            ("optimizer state", "optimizer_state_bytes"),
            ("gradient accumulators", "accumulator_bytes"),
        )
    }
    parts["the batch and the rest"] = max(total - sum(parts.values()), 0)
    text = ", ".join(f"{name} {value / 2**20:.2f} MiB" for name, value in parts.items())
    where = f" ({host / 2**20:.2f} MiB of them in pinned host memory)" if host else ""
    return (
        f"<p id='arguments'>Outside the pool, held for the whole run: "
        f"{total / 2**20:.2f} MiB of arguments per rank{where}: "
        f"{html.escape(text)}.</p>"
    )


def page(trace, report_path):
    step, events, start_bytes = read_trace(trace)
    report = read_report(report_path)
    measured = allocations(events, start_bytes)
    predicted, kinds = predicted_allocations(report, len(measured))
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>Zest step: {html.escape(step['name'])}</title>"
        "<style>body{font-family:sans-serif;margin:20px}"
        "td,th{padding:2px 10px;text-align:left}</style></head><body>"
        f"<h1>{html.escape(step['name'])}: {step['dur'] / 1e3:.3f} ms</h1>"
        "<h2>Memory (rank 0)</h2>"
        "<p>Measured pool (blue) and gathered parameter (orange) bytes; the "
        "plan's predictions dashed.</p>"
        + memory_svg(step, events, predicted_peaks(report), measured, predicted, kinds)
        + arguments_note(report)
        + "<h2>Timeline (rank 0)</h2>"
        + lanes_svg(step, events)
        + "<h2>Units</h2>"
        + units_table(report)
        + "</body></html>"
    )


def browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise LaunchError("no headless browser for --png: install chromium")


def screenshot(html_path, png_path):
    """The page as a PNG, rendered by headless Chromium."""
    command = [
        browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--screenshot={os.path.abspath(png_path)}",
        "--window-size=1200,1000",
        "file://" + os.path.abspath(html_path),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not os.path.isfile(png_path):
        raise LaunchError(
            f"the browser failed to render '{html_path}': "
            f"{done.stderr.strip()[-300:]}"
        )


def plot(args):
    with open(args.output, "w") as out:
        out.write(page(args.trace, args.report))
    print(f"zest: wrote '{args.output}'")
    if args.png:
        screenshot(args.output, args.png)
        print(f"zest: wrote '{args.png}'")
