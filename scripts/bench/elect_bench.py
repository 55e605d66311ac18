#!/usr/bin/env python3
"""`redislock elect` beside `etcdctl elect` (BENCHMARKS.md, "Leader election").

Two figures, each the median (and range) of several rounds, rounds of the two tools interleaved:

- **New leader after kill -9**: leader A runs, candidate B waits, an observer watches
  (`redislock leader --watch`, `etcdctl elect --listen`); A's process gets SIGKILL. Measured from
  the kill to B's line saying it leads (redislock: B's command prints it when it starts;
  etcdctl: B prints its proposal when elected), and to the observer's line naming B. Without a
  resign this is bounded by the lease: redislock's `--lease`, etcd's session TTL (etcdctl 3.4's
  `elect` has no option for it: 60 s).
- **Resign**: the same, A ended with SIGTERM (redislock: forwarded to its command, which ends,
  and redislock resigns) or SIGINT (etcdctl: resigns and exits). The time to the observer's line
  is how soon an observer sees a change that is published.

The servers are private: a redis-server and an etcd on free loopback ports, removed at the end.
"""

import argparse
import os
import queue
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    """A free loopback port below 32768: the kernel hands out those above to client
    connections."""
    for _ in range(500):
        port = random.randint(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise SystemExit("no free loopback port below 32768")


def wait_port(port, limit=20.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


class Lines:
    """A process whose standard output lines are read, each with the time it arrived."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, text=True)
        self.q = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, pred, limit):
        deadline = time.monotonic() + limit
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            at, line = self.q.get(timeout=left)
            if pred(line):
                return at

    def end(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def round_(tool, how, name, limit):
    """One round: returns (seconds to the new leader, seconds to the observer's line)."""
    a = Lines(tool["lead"](name, "a"))
    procs = [a]
    try:
        a.wait_for(tool["leads"]("a"), 30)
        obs = Lines(tool["observe"](name))
        procs.append(obs)
        obs.wait_for(tool["sees"]("a"), 30)
        b = Lines(tool["lead"](name, "b"))
        procs.append(b)
        time.sleep(0.5)  # B campaigns, and waits
        t0 = time.monotonic()
        a.p.send_signal(signal.SIGKILL if how == "kill9" else tool["resign_signal"])
        tb = b.wait_for(tool["leads"]("b"), limit)
        to = obs.wait_for(tool["sees"]("b"), limit)
        return tb - t0, to - t0
    finally:
        for p in reversed(procs):
            p.end()


def summary(xs):
    if not xs:
        return "–", "–"
    ms = [x * 1000 for x in xs]
    return f"{statistics.median(ms):.0f} ms", f"{min(ms):.0f}–{max(ms):.0f} ms"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redislock", required=True)
    ap.add_argument("--rounds", type=int, default=7, help="rounds of each resign measurement")
    ap.add_argument("--kill-rounds", type=int, default=3, help="rounds of each kill -9 one")
    ap.add_argument("--lease", default="5s", help="redislock's short lease for kill -9")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="elect-bench-")
    rport, eport, epeer = free_port(), free_port(), free_port()
    servers = [subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(rport),
                                 "--save", "", "--appendonly", "no"],
                                stdout=subprocess.DEVNULL)]
    with_etcd = bool(shutil.which("etcd") and shutil.which("etcdctl"))
    ep = f"http://127.0.0.1:{eport}"
    if with_etcd:
        servers.append(subprocess.Popen(
            ["etcd", "--data-dir", os.path.join(tmp, "etcd"),
             "--listen-client-urls", ep, "--advertise-client-urls", ep,
             "--listen-peer-urls", f"http://127.0.0.1:{epeer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{epeer}",
             "--initial-cluster", f"default=http://127.0.0.1:{epeer}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        wait_port(rport)
        url = f"redis://127.0.0.1:{rport}/"
        env_url = ["env", f"REDIS_URL={url}"]

        def redislock(lease):
            return {
                "lead": lambda name, who: env_url + [
                    args.redislock, "elect", name, "--id", who, "--lease", lease, "--",
                    "sh", "-c", f"echo leading {who}; exec sleep 1000"],
                "leads": lambda who: lambda line: line == f"leading {who}",
                "observe": lambda name: env_url + [args.redislock, "leader", "--watch", "--json",
                                                   name],
                "sees": lambda who: lambda line: f'"leader":"{who}"' in line,
                "resign_signal": signal.SIGTERM,
            }

        tools = {f"redislock elect (--lease {args.lease})": redislock(args.lease),
                 "redislock elect (--lease 60s)": redislock("60s")}
        if with_etcd:
            wait_port(eport)
            subprocess.run(["etcdctl", "--endpoints", ep, "put", "warm", "1"],
                           stdout=subprocess.DEVNULL, check=True, timeout=30)
            tools["etcdctl elect (session TTL 60 s)"] = {
                "lead": lambda name, who: ["etcdctl", "--endpoints", ep, "elect", name, who],
                "leads": lambda who: lambda line: line == who,
                "observe": lambda name: ["etcdctl", "--endpoints", ep, "elect", "--listen", name],
                "sees": lambda who: lambda line: line == who,
                "resign_signal": signal.SIGINT,
            }
        results = {(t, h): [] for t in tools for h in ("resign", "kill9")}
        n = 0
        for how, rounds in (("resign", args.rounds), ("kill9", args.kill_rounds)):
            for r in range(rounds):
                order = list(tools)
                order = order[r % len(order):] + order[:r % len(order)]
                for t in order:
                    if how == "resign" and "60s" in t and "redislock" in t:
                        continue  # the lease plays no part in a resign
                    n += 1
                    name = f"eb{os.getpid()}x{n}"
                    try:
                        results[(t, how)].append(round_(tools[t], how, name, 120))
                    except TimeoutError:
                        print(f"{t} {how}: timed out", file=sys.stderr)
                    print(f"{t} {how} {r}: {results[(t, how)][-1:]}", file=sys.stderr)
        print("| tool | A ended by | new leader: median | range | observer sees it: median | "
              "range | rounds |")
        print("|---|---|---|---|---|---|---|")
        for (t, how), xs in results.items():
            if not xs:
                continue
            lead = summary([x[0] for x in xs])
            seen = summary([x[1] for x in xs])
            what = "kill -9" if how == "kill9" else "resign (SIGTERM / SIGINT)"
            print(f"| {t} | {what} | {lead[0]} | {lead[1]} | {seen[0]} | {seen[1]} | {len(xs)} |")
    finally:
        for s in servers:
            s.terminate()
            s.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
