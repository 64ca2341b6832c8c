#!/usr/bin/env python3
"""The run report draws the run's own numbers.

    report_values.py TESSEL WORK

Trains gpt-demo.toml for 30 steps (validation every 5) on 2 pipeline stages under mpirun (MPIRUN_FLAGS
from the environment) into WORK/run, writes its report with
`tessel report`, and reads every chart back: each <svg> must parse as XML, and each point of the loss,
step-time and memory charts, mapped back through the chart's own axis ticks (two ticks give the linear
map from pixels to values), must be the value of metrics.csv it claims to show (step and rank from the
x axis and the series label), to within the 0.05 pixel that the 0.1 pixel coordinates round to. A chart
that plots another column, another rank or shifted steps fails, naming the chart, series and step.
Exits 0, or 1 listing what differs.
"""
import csv
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

TESSEL, WORK = sys.argv[1], os.path.abspath(sys.argv[2])
SOURCE = os.environ.get("TESSEL_SOURCE_DIR", os.getcwd())
MIB = 1024.0 * 1024.0
PREFIX = {"f": 1e-15, "p": 1e-12, "n": 1e-9, "\u00b5": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9,
          "T": 1e12, "P": 1e15, "E": 1e18}


def tick_value(text):
    m = re.fullmatch(r"(-?[0-9.]+)(\D*)", text.strip())
    return float(m.group(1)) * PREFIX[m.group(2)]


def axis_maps(svg):
    """(pixel x -> value, pixel y -> value) from the axis group's tick marks and their labels."""
    axis = next(g for g in svg.iter("g") if g.get("class") == "axis")
    xs, ys = [], []
    for t in axis.iter("text"):
        if t.get("class") != "tick":
            continue
        if t.get("text-anchor") == "end":  # a y tick: its label sits 4 px below the tick line
            ys.append((float(t.get("y")) - 4, tick_value(t.text)))
        else:
            xs.append((float(t.get("x")), tick_value(t.text)))

    def linear(pairs):
        (p0, v0), (p1, v1) = min(pairs), max(pairs)
        return lambda p: v0 + (p - p0) * (v1 - v0) / (p1 - p0), abs((v1 - v0) / (p1 - p0))

    return linear(xs), linear(ys)


def points(series):
    out = []
    for path in series.iter("path"):
        out += [(float(x), float(y)) for x, y in re.findall(r"[ML](-?[0-9.]+) (-?[0-9.]+)", path.get("d"))]
    for c in series.iter("circle"):
        out.append((float(c.get("cx")), float(c.get("cy"))))
    return out


def main():
    out = os.path.join(WORK, "run")
    shutil.rmtree(out, ignore_errors=True)
    # Two pipeline stages under mpirun: the ranks' wall and compute times differ by their waits, so that a
    # chart of the wrong one of the two, or of the other rank, is seen.
    sets = ["train.steps=30", "train.warmup_steps=2", "train.val_every=5", "metrics.port_base=0",
            f"job.output_dir={out}", "resources.threads_per_worker=1", "pipeline.stages=2", "resources.workers=2"]
    cmd = ["mpirun"] + os.environ.get("MPIRUN_FLAGS", "").split() + ["--enable-recovery", "-np", "3", TESSEL, "run",
                                                                     os.path.join(SOURCE, "jobs/examples/gpt-demo.toml")]
    for s in sets:
        cmd += ["--set", s]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stderr[-2000:], file=sys.stderr)
        return 1
    report = subprocess.run([TESSEL, "report", out], capture_output=True, text=True)
    if report.returncode != 0:
        print(report.stderr, file=sys.stderr)
        return 1
    rows = {}
    for r in csv.DictReader(open(os.path.join(out, "metrics.csv"))):
        rows[(int(r["rank"]), int(r["step"]))] = r
    html = open(os.path.join(out, "report.html"), encoding="utf-8").read()
    charts = {}
    for text in re.findall(r"<svg\b.*?</svg>", html, re.S):
        try:
            svg = ET.fromstring(text)
        except ET.ParseError as e:
            print(f"an <svg> of the report is not XML: {e}", file=sys.stderr)
            return 1
        charts[svg.get("data-chart")] = svg
    # What each series of the checked charts shows, from its label.
    columns = {
        "loss": [(r"training loss \(rank (\d+)\)", lambda r: float(r["loss"])),
                 (r"validation loss \(rank (\d+)\)", lambda r: float(r["val_loss"]) if r["val_loss"] else None)],
        "step-time": [(r"rank (\d+).* wall", lambda r: float(r["step_seconds"]) * 1e3),
                      (r"rank (\d+).* compute", lambda r: float(r["compute_seconds"]) * 1e3)],
        "memory": [(r"rank (\d+).* resident", lambda r: float(r["resident_bytes"]) / MIB),
                   (r"rank (\d+).* activations", lambda r: float(r["activation_bytes"]) / MIB)],
    }
    problems, checked = [], 0
    for chart, kinds in columns.items():
        svg = charts.get(chart)
        if svg is None:
            problems.append(f"no chart {chart}")
            continue
        (to_x, _), (to_y, per_pixel) = axis_maps(svg)
        seen = set()
        for g in svg.iter("g"):
            if g.get("class") != "series":
                continue
            label = g.get("data-series")
            kind = next(((pattern, f) for pattern, f in kinds if re.fullmatch(pattern, label)), None)
            if kind is None:
                continue
            seen.add(kind[0])
            rank = int(re.fullmatch(kind[0], label).group(1))
            pts = points(g)
            want_steps = sorted(s for (rk, s), r in rows.items() if rk == rank and kind[1](r) is not None)
            got_steps = []
            for px, py in pts:
                step = to_x(px)
                if abs(step - round(step)) > 0.01:
                    problems.append(f"{chart} / {label}: a point at x = {step:.3f}, not a step")
                    continue
                step = round(step)
                got_steps.append(step)
                want = kind[1](rows[(rank, step)]) if (rank, step) in rows else None
                got = to_y(py)
                if want is None or abs(got - want) > 0.06 * per_pixel + 1e-9 * abs(want):
                    problems.append(f"{chart} / {label}, step {step}: plotted {got:.6g}, metrics.csv has {want}")
                checked += 1
            if sorted(got_steps) != want_steps:
                problems.append(f"{chart} / {label}: plots steps {sorted(got_steps)}, metrics.csv has {want_steps}")
        for pattern, _ in kinds:
            if pattern not in seen:
                problems.append(f"{chart}: no series matching {pattern!r}")
    for p in problems[:20]:
        print("PROBLEM:", p, file=sys.stderr)
    if problems:
        print(f"{len(problems)} points or series differ from metrics.csv", file=sys.stderr)
        return 1
    print(f"PASS: {len(charts)} charts parse as XML; {checked} points of the loss, step-time and memory charts "
          f"are metrics.csv's values, read back through each chart's ticks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
