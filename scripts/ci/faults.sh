#!/usr/bin/env bash
# The network-fault matrix (tests/network_faults.rs), ignored cases included, with a report:
#
#   scripts/ci/faults.sh [--out DIR] [--rounds N] [-- EXTRA nextest ARGS, e.g. a test filter]
#
# Runs `cargo nextest run --test network_faults --run-ignored all --no-fail-fast --no-capture`
# with REDISLOCK_FAULTS_FULL=1 (the cases of the full matrix that the suite skips: Redlock with
# 5 masters, the write lock, the semaphore, Redisson's lock) N times (default 1), one test at a
# time (the cases time faults in seconds; two cores shared with a parallel case would blur the
# figures). Each case prints one `RESULT {json}` line (or `SKIPPED {json}` when nftables, or for
# the cases with C and PHP clients a C compiler or php with FFI, cannot be used); the report
# joins them with nextest's verdicts:
#
#   DIR/results.jsonl   one JSON object per case and round: the RESULT fields plus "round" and
#                       "status" (pass, fail, skipped)
#   DIR/report.md       a Markdown table of the same, with the command that produced it
#   DIR/run-N.log       nextest's output of round N
#
# DIR defaults to target/faults/<UTC date-time>. Needs root for the partitions (nftables;
# scripts/setup.sh installs it); without it those cases are reported as skipped. Exits non-zero
# if a case that is not ignored failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

out=""
rounds=1
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "faults.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || out="target/faults/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
: > "$out/results.jsonl"

command -v cargo-nextest >/dev/null || { echo "faults.sh: cargo nextest is needed" >&2; exit 1; }
cmd=(env REDISLOCK_FAULTS_FULL=1 cargo nextest run --test network_faults --run-ignored all --no-fail-fast --no-capture
     --test-threads 1 "${extra[@]}")
echo "faults.sh: ${cmd[*]} ($rounds round(s)) -> $out"
nice cargo nextest run --test network_faults --no-run >/dev/null

failed_required=0
for round in $(seq 1 "$rounds"); do
  log="$out/run-$round.log"
  set +e
  nice "${cmd[@]}" >"$log" 2>&1
  set -e
  python3 - "$log" "$round" "$out/results.jsonl" <<'PY' || failed_required=1
import json, re, sys
log, rnd, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(log, encoding="utf-8", errors="replace").read()
status = {}
for m in re.finditer(r"^\s+(PASS|FAIL|SIGSEGV|SIGABRT|TIMEOUT)\s+\[[^\]]*\]\s+(?:\([^)]*\)\s+)?\S+\s+(\S+)\s*$", text, re.M):
    status[m.group(2)] = "pass" if m.group(1) == "PASS" else "fail"
rows, seen = [], set()
for m in re.finditer(r"^(RESULT|SKIPPED) (\{.*\})\s*$", text, re.M):
    row = json.loads(m.group(2))
    test = row.get("test", "?")
    seen.add(test)
    row["round"] = rnd
    row["status"] = "skipped" if m.group(1) == "SKIPPED" else status.get(test, "unknown")
    rows.append(row)
for test, st in status.items():
    if test not in seen:
        rows.append({"test": test, "round": rnd, "status": st})
with open(dest, "a", encoding="utf-8") as f:
    for row in rows:
        f.write(json.dumps(row) + "\n")
ignored = set(re.findall(r"#\[ignore[^\]]*\]\s*fn (\w+)", open("tests/network_faults.rs").read()))
bad = [r["test"] for r in rows if r["status"] == "fail" and r["test"] not in ignored]
sys.exit(1 if bad else 0)
PY
done

python3 - "$out" "${cmd[*]}" <<'PY'
import json, sys, re
out, cmd = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(f"{out}/results.jsonl") if l.strip()]
ignored = set(re.findall(r"#\[ignore[^\]]*\]\s*fn (\w+)", open("tests/network_faults.rs").read()))
cols = [("case", "case"), ("round", "round"), ("status", "status"), ("grants", "grants"),
        ("grants_in_fault", "grants in fault"), ("overlaps", "overlaps"),
        ("tokens_twice", "tokens granted twice"), ("stale_accepted", "stale tokens accepted"),
        ("lost_updates", "lost updates"), ("regrant_ms", "granted again after heal (ms)"),
        ("longest_gap_ms", "longest gap (ms)"), ("overruns", "calls over bound"),
        ("foreign", "C / PHP clients: grants/accepted")]
lines = ["# Network-fault matrix", "", f"Command: `scripts/ci/faults.sh` → `{cmd}`", "",
         "Each case: 4 threads of 2 clients, exclusive lock, lease 2 s, wait 1.5 s, read timeout "
         "500 ms; 1 s warm-up, 3 s of fault, 3 s after; the `c+php` cases add one C and one PHP "
         "client process. `ignored` marks a case kept out of the "
         "suite (its reason is in tests/network_faults.rs).", "",
         "| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
for r in sorted(rows, key=lambda r: (r.get("case", r.get("test", "")), r["round"])):
    r = dict(r)
    r.setdefault("case", r.get("test", "?"))
    if r.get("test") in ignored:
        r["status"] += " (ignored)"
    if r["status"].startswith("skipped"):
        r["status"] += ": " + r.get("reason", "")
    lines.append("| " + " | ".join(str(r.get(k, "")) for k, _ in cols) + " |")
open(f"{out}/report.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
echo "faults.sh: report in $out/report.md, records in $out/results.jsonl"
exit "$failed_required"
