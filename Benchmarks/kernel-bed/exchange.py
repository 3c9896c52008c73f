#!/usr/bin/env python3
"""The kernel bed's exchange benchmark (BENCHMARKS.md): a fresh node's first exchange with a node
that is already running, with the fresh node on `hci0` inside the kernel bed's guest (Debian's 6.1
kernel under QEMU TCG, H4 over an emulated serial line) against the same fresh node on TCP on this
machine: same RootCanal, same running peer, same run. Also the guest's boot time, the node's CPU and
peak RSS in the guest and on the host, and the bed's wall time.

Exchange time: from the fresh node's "rotated" log line (its id is on the air; JSON log, millisecond
timestamps) to the first encounter in its database (first_encounter.py polls it every 20 ms; both
times from the clock of the machine the node runs on). Rounds are spaced by the
exchange's crowd memory (10 s), as in `TracerBench exchange`.

Usage: Benchmarks/kernel-bed/exchange.py [ROUNDS]   (after ./scripts/setup and swift build)
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACER = os.path.join(ROOT, ".build", "debug", "tracer")
PYTHON = os.environ.get("TRACER_BUMBLE_PYTHON", os.path.join(ROOT, ".venv-bumble", "bin", "python"))


def stamp(line: str) -> float:
    return datetime.fromisoformat(json.loads(line)["time"].replace("Z", "+00:00")).timestamp()


def exchange_seconds(log_path: str, first_path: str) -> float | None:
    """From the node's id on the air ("rotated") to its database's first encounter."""
    try:
        first = float(open(first_path).read().strip())
    except (OSError, ValueError):
        return None  # no encounter within the round's 30 s
    with open(log_path, errors="replace") as log:
        for line in log:
            if line.startswith("{") and json.loads(line).get("message") == "rotated":
                return first - stamp(line)
    return None


def usage(pid: int) -> tuple[float, int]:
    """CPU seconds and peak RSS (kB) of a running process."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])
    with open(f"/proc/{pid}/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    return ticks / os.sysconf("SC_CLK_TCK"), peak


def host_rounds(port: int, rounds: int, scratch: str) -> list[tuple[float | None, float, int]]:
    results = []
    for round in range(1, rounds + 1):
        log_path = os.path.join(scratch, f"host-round-{round}.log")
        first_path = os.path.join(scratch, f"host-round-{round}.first")
        poller = subprocess.Popen([sys.executable, os.path.join(ROOT, "Benchmarks/kernel-bed/first_encounter.py"),
                                   os.path.join(scratch, f"host-round-{round}.db"), "30"], stdout=open(first_path, "w"))
        time.sleep(1)
        with open(log_path, "w") as log:
            node = subprocess.Popen([TRACER, "run", "--db", os.path.join(scratch, f"host-round-{round}.db"),
                                     "--transport", f"tcp:127.0.0.1:{port}", "--continuous-scan",
                                     "--log-level", "debug", "--log-format", "json"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                    env=dict(os.environ, HOME=scratch))
        poller.wait()
        cpu, peak = usage(node.pid)
        node.send_signal(signal.SIGTERM)
        node.wait()
        results.append((exchange_seconds(log_path, first_path), cpu, peak))
        time.sleep(10)
    return results


def summary(name: str, rounds: list[tuple[float | None, float, int]]) -> float:
    times = [seconds * 1000 for seconds, _, _ in rounds if seconds is not None]
    failed = len(rounds) - len(times)
    print(f"{name}: median {statistics.median(times):.0f} ms over {len(times)} rounds"
          + (f" ({failed} without an exchange in 30 s)" if failed else "")
          + "; each (ms): " + " ".join(f"{t:.0f}" for t in times))
    print(f"{name}: CPU to the first exchange median {statistics.median(c for _, c, _ in rounds):.2f} s, "
          f"peak RSS median {statistics.median(p for _, _, p in rounds) / 1024:.1f} MB")
    return statistics.median(times)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    scratch = tempfile.mkdtemp(prefix="tracer-kernel-bench-")
    print(f"# Kernel bed exchange benchmark, {rounds} rounds each ({datetime.now().isoformat(timespec='seconds')}); files in {scratch}")
    # The launcher probes for free ports; another process can take one first, so a start is tried again.
    for _ in range(3):
        radio = subprocess.Popen([PYTHON, os.path.join(ROOT, "Tests/Support/rootcanal/rootcanal_phy.py"), "DEFAULT", "DEFAULT", "DEFAULT"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(scratch, "radio.log"), "a"),
                                 env=dict(os.environ, TRACER_ROOTCANAL_LOG_DIR=scratch), text=True)
        ready = radio.stdout.readline().split()
        if ready and ready[0] == "READY":
            break
        radio.wait()
    else:
        raise SystemExit(f"RootCanal did not start (see {scratch}/radio.log)")
    guest_port, peer_port, host_port = (int(port) for port in ready[1:4])
    peer = subprocess.Popen([TRACER, "run", "--db", os.path.join(scratch, "peer.db"), "--transport", f"tcp:127.0.0.1:{peer_port}",
                             "--continuous-scan"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(scratch, "peer.log"), "w"), env=dict(os.environ, HOME=scratch))
    try:
        time.sleep(3)
        host = host_rounds(host_port, rounds, scratch)
        results = os.path.join(scratch, "guest")
        started = time.monotonic()
        bed = subprocess.run([os.path.join(ROOT, "scripts/kernel-bed"), "--attach", "1", "--timeout", "600",
                              "--env", f"KBED_TRACER={TRACER}", "--env", f"KBED_ROUNDS={rounds}", results,
                              os.path.join(ROOT, "Benchmarks/kernel-bed/guest-exchange.sh"), str(guest_port)])
        bed_seconds = time.monotonic() - started
        if bed.returncode != 0:
            raise SystemExit(f"the kernel bed failed (status {bed.returncode}); logs in {results}")
        guest = []
        for round in range(1, rounds + 1):
            fields = dict(item.split("=", 1) for item in open(os.path.join(results, f"round-{round}.usage")).read().split())
            guest.append((exchange_seconds(os.path.join(results, f"round-{round}.log"), os.path.join(results, f"round-{round}.first")),
                          int(fields["ticks"]) / int(fields["hz"]), int(fields["peak_kb"])))
        host_median = summary("tcp (host)", host)
        guest_median = summary("hci0 (guest)", guest)
        print(f"ratio hci0/tcp (medians): {guest_median / host_median:.2f}x (target <= 1.2x)")
        guest_log = open(os.path.join(results, "guest.log")).read()
        up = next(line for line in guest_log.splitlines() if "adapter(s) up at" in line)
        print(f"guest: {up.split('kernel-bed: ')[1]} (guest clock from kernel start); "
              f"bed wall time {bed_seconds:.1f} s for boot, {rounds} rounds and power-off")
    finally:
        peer.send_signal(signal.SIGTERM)
        peer.wait()
        radio.stdin.close()
        radio.send_signal(signal.SIGTERM)
        radio.wait()


if __name__ == "__main__":
    main()
