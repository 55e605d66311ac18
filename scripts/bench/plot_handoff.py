#!/usr/bin/env python3
"""Plot the h2 handoff-latency distribution of every lock implementation as one PNG.

  python3 scripts/bench/plot_handoff.py [-o docs/handoff.png] [--title TEXT] INPUT [INPUT ...]

INPUT is a JSON-lines file of README-format records (the standalone program's --raw file,
e.g. bench-results/<run>/standalone.jsonl) or a peers results directory (every *.jsonl in it,
e.g. bench-results/<run>/peers). Only h2 records are used. Handoff = the next holder's acquire
returned - the previous holder called release, over consecutive records (sorted by acquire
time) of *different* workers: the same rule as shared/bench/peers/analyze.py.

The figure has two panels on a log time axis: the empirical CDF of each implementation's
handoffs, and a box plot (whiskers p1-p99) sorted by median, with p50 / p99 in the labels.

matplotlib is needed; when this python lacks it, the script creates a venv
($REDISLOCK_PLOT_VENV, default /tmp/redislock-plot-venv), pip-installs matplotlib into it and
re-runs itself there.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

VENV = os.environ.get("REDISLOCK_PLOT_VENV", "/tmp/redislock-plot-venv")


def ensure_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("REDISLOCK_PLOT_REEXEC"):
        sys.exit(f"plot_handoff.py: matplotlib still missing in {sys.executable}")
    py = os.path.join(VENV, "bin", "python")
    if not os.path.exists(py):
        print(f"plot_handoff.py: creating {VENV} with matplotlib", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    if subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode != 0:
        subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", "matplotlib"], check=True)
    env = dict(os.environ, REDISLOCK_PLOT_REEXEC="1")
    os.execve(py, [py, os.path.abspath(__file__)] + sys.argv[1:], env)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))]


def handoffs_us(rec):
    rs = sorted((r for r in rec.get("records", []) if len(r) == 5), key=lambda r: r[1])
    return [(b[1] - a[2]) / 1e3 for a, b in zip(rs, rs[1:]) if a[4] != b[4]]


def read_inputs(paths):
    """[(label, [handoff µs])] for every h2 record found."""
    series = []
    for path in paths:
        if os.path.isdir(path):
            files = sorted(f for f in glob.glob(os.path.join(path, "*.jsonl")) if not f.endswith("runlog.jsonl"))
        else:
            files = [path]
        for f in files:
            step = os.path.basename(f)[:-6].rsplit("_", 1)[0] if os.path.isdir(path) else None
            for line in open(f):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("scenario") != "h2":
                    continue
                h = handoffs_us(rec)
                if not h:
                    continue
                lang, peer, variant = rec.get("lang", "?"), rec.get("peer", "?"), rec.get("variant", "")
                label = f"{step}: {lang} {peer}" if step else f"standalone: {lang} {peer}"
                if peer in ("redislock", "floor") or not step:
                    label += f" ({variant})"
                series.append((label, h))
    return series


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("-o", "--out", default="docs/handoff.png")
    ap.add_argument("--title", default="h2 handoff latency: release called -> other worker's acquire returned")
    a = ap.parse_args()
    series = read_inputs(a.inputs)
    if not series:
        sys.exit("plot_handoff.py: no h2 records with cross-worker handoffs in " + " ".join(a.inputs))
    ensure_matplotlib()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    series.sort(key=lambda s: statistics.median(s[1]))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 0.5 * len(series) + 5),
                                   gridspec_kw={"width_ratios": [1, 1.15]})
    cmap = plt.get_cmap("tab20")
    styles = ["-", "--", "-.", ":"]
    for i, (label, h) in enumerate(series):
        xs = sorted(h)
        ys = [(k + 1) / len(xs) for k in range(len(xs))]
        ax1.step(xs, ys, where="post", label=label, color=cmap(i % 20), ls=styles[(i // 20) % 4], lw=1.3)
    ax1.set_xscale("log")
    ax1.set_xlabel("handoff (µs, log scale)")
    ax1.set_ylabel("fraction of handoffs")
    ax1.set_title("empirical CDF")
    ax1.axvline(1000, color="grey", ls=":", lw=1)
    ax1.text(1000, 0.02, " 1 ms", color="grey", fontsize=8)
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.12), ncol=1, frameon=False)

    labels = [f"{lab}\np50 {pct(h, 50):.0f} µs, p99 {pct(h, 99):.0f} µs, n={len(h)}" for lab, h in series]
    box = dict(whis=(1, 99), showfliers=True, flierprops={"markersize": 2, "alpha": 0.4})
    try:
        ax2.boxplot([h for _, h in series], orientation="horizontal", **box)  # matplotlib >= 3.10
    except TypeError:
        ax2.boxplot([h for _, h in series], vert=False, **box)
    ax2.set_yticks(range(1, len(series) + 1))
    ax2.set_yticklabels(labels, fontsize=7)
    ax2.set_xscale("log")
    ax2.set_xlabel("handoff (µs, log scale); box p25-p75, whiskers p1-p99")
    ax2.set_title("sorted by median")
    ax2.grid(True, axis="x", which="both", alpha=0.3)
    for ax in (ax1, ax2):
        ax.xaxis.set_minor_formatter(NullFormatter())
    fig.suptitle(a.title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    fig.savefig(a.out, dpi=110)
    print(f"plot_handoff.py: wrote {a.out} ({len(series)} series)")


if __name__ == "__main__":
    main()
