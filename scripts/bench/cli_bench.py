#!/usr/bin/env python3
"""The redislock command-line tool beside flock(1) and `etcdctl lock` (BENCHMARKS.md, "The
command-line tool"). Run by scripts/bench/cli-bench.sh, which builds the tool; prints what it measures.

1. Start to running: from starting the tool (`redislock run NAME -- CMD`, `flock FILE CMD`,
   `etcdctl lock NAME CMD`, and CMD alone) to its command running, the lock free. CMD is
   `cat FIFO`: the time is taken when the harness's open() of the FIFO for writing returns, that
   is once `cat` has opened it. Rounds interleave the tools (the order rotates); median, p10, p90.
2. Queue order: one invocation holds the lock; 20 more are started one after another (100 ms
   apart, so that each is queued before the next starts); the holder then ends. Each queued
   command appends its number to a file: the order in which they ran, and how many pairs ran out
   of their arrival order (inversions; 0 = first come, first served).

The servers are private: a redis-server and an etcd on free loopback ports (never 6379/2379),
removed at the end. etcd is left out when `etcd`/`etcdctl` are not installed.
"""

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    while True:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in (6379, 2379, 2380):
            return port


def wait_port(port, limit=20.0):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"cli-bench: nothing listens on 127.0.0.1:{port}")


class Servers:
    def __init__(self, tmp, with_etcd):
        self.procs = []
        self.redis_port = free_port()
        self.procs.append(subprocess.Popen(
            ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", tmp],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_port(self.redis_port)
        self.etcd = None
        if with_etcd:
            client, peer = free_port(), free_port()
            self.procs.append(subprocess.Popen(
                ["etcd", "--data-dir", os.path.join(tmp, "etcd"),
                 "--listen-client-urls", f"http://127.0.0.1:{client}",
                 "--advertise-client-urls", f"http://127.0.0.1:{client}",
                 "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-cluster", f"default=http://127.0.0.1:{peer}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_port(client)
            self.etcd = f"http://127.0.0.1:{client}"
            # The first request of a fresh etcd waits for its leader election.
            subprocess.run(["etcdctl", "--endpoints", self.etcd, "put", "warm", "1"],
                           stdout=subprocess.DEVNULL, check=True, timeout=30)

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()


def tools(args, servers, tmp):
    """Each tool as a function from (lock name, command) to an argv."""
    url = f"redis://127.0.0.1:{servers.redis_port}/"
    t = {
        "redislock run": lambda name, cmd: [args.redislock, "--url", url, "run", name, "--"] + cmd,
        "flock(1)": lambda name, cmd: ["flock", os.path.join(tmp, name + ".lock")] + cmd,
    }
    if servers.etcd:
        t["etcdctl lock"] = lambda name, cmd: [
            "etcdctl", "--endpoints", servers.etcd, "lock", name, "--"] + cmd
    return t


def open_for_writing(fifo, limit=30.0):
    """open(fifo, O_WRONLY), which returns once a reader has opened it; a watchdog opens it for
    reading itself after `limit`, so that a tool that never runs its command cannot hang us."""
    done = threading.Event()

    def watchdog():
        if not done.wait(limit):
            fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)

    threading.Thread(target=watchdog, daemon=True).start()
    fd = os.open(fifo, os.O_WRONLY)
    done.set()
    return fd


def start_to_running(argv_of, names, fifo, rounds):
    times = {n: [] for n in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            argv = argv_of[n](f"bench-start-{r}", ["cat", fifo])
            t0 = time.perf_counter()
            p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            fd = open_for_writing(fifo)
            times[n].append((time.perf_counter() - t0) * 1000)
            os.close(fd)
            _, err = p.communicate(timeout=60)
            if p.returncode != 0:
                sys.exit(f"cli-bench: {n} failed ({p.returncode}): {err.decode().strip()}")
    return times


def queue_order(argv, tmp, n=20, gap=0.1):
    hold = os.path.join(tmp, "hold.fifo")
    if not os.path.exists(hold):
        os.mkfifo(hold)
    order = os.path.join(tmp, "order")
    open(order, "w").close()
    name = f"bench-queue-{time.monotonic_ns()}"
    holder = subprocess.Popen(argv(name, ["cat", hold]), stdout=subprocess.DEVNULL)
    fd = open_for_writing(hold)
    queued = []
    for i in range(n):
        queued.append(subprocess.Popen(
            argv(name, ["sh", "-c", f"echo {i} >> '{order}'"]), stdout=subprocess.DEVNULL))
        time.sleep(gap)
    os.close(fd)  # the holder's command ends: the lock goes to the queue
    holder.wait(timeout=60)
    for p in queued:
        p.wait(timeout=120)
    ran = [int(x) for x in open(order).read().split()]
    inversions = sum(1 for a in range(len(ran)) for b in range(a + 1, len(ran)) if ran[a] > ran[b])
    return ran, inversions


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--redislock", required=True, help="the redislock binary")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--queue-runs", type=int, default=3)
    args = ap.parse_args()
    with_etcd = bool(shutil.which("etcd") and shutil.which("etcdctl"))
    with tempfile.TemporaryDirectory(prefix="redislock-cli-bench-") as tmp:
        servers = Servers(tmp, with_etcd)
        try:
            argv_of = tools(args, servers, tmp)
            argv_of["the command alone"] = lambda name, cmd: cmd
            names = list(argv_of)
            fifo = os.path.join(tmp, "run.fifo")
            os.mkfifo(fifo)
            times = start_to_running(argv_of, names, fifo, args.rounds)
            print(f"Start to the command running, lock free ({args.rounds} interleaved rounds, ms):")
            print("| tool | median | p10 | p90 |")
            print("|---|---|---|---|")
            for n in names:
                xs = times[n]
                print(f"| {n} | {statistics.median(xs):.1f} | {pct(xs, 0.1):.1f} | {pct(xs, 0.9):.1f} |")
            if not with_etcd:
                print("(etcd/etcdctl not installed: etcdctl lock left out)")
            print()
            print("Order in which 20 queued invocations ran (started 100 ms apart, 0 first):")
            print("| tool | run | order | inversions (of 190 pairs) |")
            print("|---|---|---|---|")
            for n in names:
                if n == "the command alone":
                    continue
                for k in range(args.queue_runs):
                    ran, inv = queue_order(argv_of[n], tmp)
                    print(f"| {n} | {k + 1} | {' '.join(map(str, ran))} | {inv} |")
        finally:
            servers.stop()


if __name__ == "__main__":
    main()
