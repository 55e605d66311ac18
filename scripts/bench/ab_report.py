#!/usr/bin/env python3
"""The A/B report of `scripts/bench/bench.sh --against REV`: one markdown table per scenario.

  python3 scripts/bench/ab_report.py --rev LABEL [--title TEXT] DIR

DIR holds one `--raw` file of the standalone program per contestant and round,
`<label>.r<round>.jsonl` (labels `head`, `head-again` and LABEL, the build at REV). Each row is a
figure of one configuration (redislock with a fixed lease or auto-renewal, or a floor: the same
code in every build) computed per run with the program's own rules (nearest-rank percentiles;
handoff = the next holder's acquire returned - the previous holder called release, pairs of
different workers), then the median over the rounds for each contestant, and the ratios
head/REV and head-again/head (the A/A row: the noise between two identical builds).
"verdict" (redislock rows): head is worse than REV (slower, or fewer per second) by more than the
noise of that row, or better by more, or neither. The noise is the larger of the row's A/A
difference (|head-again/head - 1|) and the head/REV difference of the same figure of the floor
(the same code in both builds, so another A/A measure). Rough still: with few rounds on a busy
machine read a "slower" together with every run's report in DIR, and run again.
"""
import argparse
import glob
import json
import math
import os
import re
import statistics
import sys


def pct(sorted_values, p):
    """Nearest rank, as the program's sys::pct_sorted."""
    if not sorted_values:
        return float("nan")
    k = min(math.floor(p / 100 * (len(sorted_values) - 1) + 0.5), len(sorted_values) - 1)  # Rust's round()
    return sorted_values[k]


def config(rec):
    peer = rec.get("peer", "?")
    if peer == "redislock":
        return "fixed lease" if "auto_renew=off" in rec.get("variant", "") else "auto-renewal"
    return {"floor": "floor (no library)", "handoff-floor": "handoff floor (no library)"}.get(peer, peer)


def contended(rec):
    rs = sorted((r for r in rec.get("records", []) if len(r) == 5), key=lambda r: r[1])
    pairs = list(zip(rs, rs[1:]))
    handoffs = sorted(max(b[1] - a[2], 0) for a, b in pairs if a[4] != b[4])
    lost = sum(rec.get("worker_incs", [])) - rec.get("final_counter", 0)
    overlaps = sum(1 for a, b in pairs if b[1] < a[2])
    return handoffs, lost, overlaps


# (scenario, metric name, unit, lower is better, function of a record)
METRICS = [
    ("u1", "p50", "µs", True, lambda r: pct(sorted(r["cycle_ns"]), 50) / 1e3),
    ("u1", "mean", "µs", True, lambda r: statistics.fmean(r["cycle_ns"]) / 1e3),
    ("u8", "throughput", "cycles/s", False, lambda r: r["cycles"] / (r["wall_ns"] / 1e9)),
    ("c8", "throughput", "incr/s", False, lambda r: r["cycles"] / (r["wall_ns"] / 1e9)),
    ("c8", "handoff p50", "µs", True, lambda r: pct(contended(r)[0], 50) / 1e3),
    ("h2", "handoff p50", "µs", True, lambda r: pct(contended(r)[0], 50) / 1e3),
]
FLOORS = {"u1": "floor (no library)", "u8": "floor (no library)",
          "c8": "handoff floor (no library)", "h2": "handoff floor (no library)"}
ORDER = ["fixed lease", "auto-renewal", "floor (no library)", "handoff floor (no library)"]


def fmt(x):
    if x != x:
        return "n/a"
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.1f}"


def medians(per_label, labels):
    return {lab: statistics.median(v) if (v := per_label.get(lab)) else float("nan") for lab in labels}


def ratio(a, b):
    return a / b if b and a == a and b == b else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", required=True, help="label of the build at REV")
    ap.add_argument("--title", default="")
    ap.add_argument("dir")
    a = ap.parse_args()
    labels = ["head", "head-again", a.rev]
    # values[(scenario, metric, config)][label] = [one value per round]
    values, rounds, problems = {}, {lab: 0 for lab in labels}, []
    for path in sorted(glob.glob(os.path.join(a.dir, "*.r*.jsonl"))):
        m = re.fullmatch(r"(.+)\.r(\d+)\.jsonl", os.path.basename(path))
        if not m or m.group(1) not in labels:
            continue
        lab = m.group(1)
        rounds[lab] += 1
        with open(path) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        for rec in recs:
            sc, cfg = rec.get("scenario"), config(rec)
            if sc in ("c8", "h2"):
                _, lost, overlaps = contended(rec)
                if lost or overlaps:
                    problems.append(f"{os.path.basename(path)} {sc} {cfg}: {lost} lost, {overlaps} overlaps")
            if rec.get("capped"):
                problems.append(f"{os.path.basename(path)} {sc} {cfg}: capped (stopped by --cap)")
            for msc, name, _, _, fn in METRICS:
                if msc == sc:
                    values.setdefault((sc, name, cfg), {}).setdefault(lab, []).append(fn(rec))
    if not values:
        sys.exit(f"ab_report.py: no records in {a.dir}")

    out = [f"## A/B: {a.title}" if a.title else "## A/B", ""]
    out.append("Runs per contestant: " + ", ".join(f"{lab} {rounds[lab]}" for lab in labels)
               + ". Median over the rounds; head-again is the same binary as head (A/A: the noise).")
    out.append("↓ lower is better, ↑ higher is better. verdict: head worse than " + a.rev
               + " by more than the noise = slower, better by more = faster; the noise of a row is the larger of"
               + " its A/A difference and the floor's head/" + a.rev + " difference (the floor is the same code in both builds).")
    for sc in ["u1", "u8", "c8", "h2"]:
        keys = sorted((k for k in values if k[0] == sc),
                      key=lambda k: ([m[1] for m in METRICS if m[0] == sc].index(k[1]),
                                     ORDER.index(k[2]) if k[2] in ORDER else 99))
        if not keys:
            continue
        out += ["", f"### {sc}", "",
                f"| figure | {a.rev} | head | head-again | head/{a.rev} | head-again/head | verdict |",
                "|---|---:|---:|---:|---:|---:|---|"]
        for key in keys:
            _, name, cfg = key
            unit, lower = next((m[2], m[3]) for m in METRICS if m[0] == sc and m[1] == name)
            med = medians(values[key], labels)
            ab, aa = ratio(med["head"], med[a.rev]), ratio(med["head-again"], med["head"])
            worse = ab - 1 if lower else 1 - ab  # > 0: head is worse than REV
            noise = abs(aa - 1)
            floor = values.get((sc, name, FLOORS[sc]))
            if cfg in FLOORS.values():
                verdict = "(noise gauge)"
            else:
                if floor:
                    fm = medians(floor, labels)
                    noise = max(noise, abs(ratio(fm["head"], fm[a.rev]) - 1))
                verdict = ("n/a" if worse != worse or noise != noise else
                           "slower" if worse > noise else "faster" if -worse > noise else "within noise")
            out.append(f"| {cfg}: {name} {unit} {'↓' if lower else '↑'} | {fmt(med[a.rev])} | {fmt(med['head'])} | "
                       f"{fmt(med['head-again'])} | {ab:.3f} | {aa:.3f} | {verdict} |")
    if problems:
        out += ["", "Runs to look at:", ""] + [f"* {p}" for p in problems]
    print("\n".join(out))


if __name__ == "__main__":
    main()
