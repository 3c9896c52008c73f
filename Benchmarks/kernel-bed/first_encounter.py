#!/usr/bin/env python3
"""Waits until a node's database holds its first encounter and prints that moment (Unix seconds,
this machine's clock), polling every 20 ms; exits 1 after TIMEOUT seconds. Started before the node,
so that in the kernel bed's guest Python's own start-up does not count.

Usage: first_encounter.py DATABASE TIMEOUT
"""
import os
import sqlite3
import sys
import time


def main() -> None:
    path, timeout = sys.argv[1], float(sys.argv[2])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            try:
                with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=0.05) as db:
                    if db.execute("SELECT count(*) FROM encounters").fetchone()[0] > 0:
                        print(f"{time.time():.3f}", flush=True)
                        return
            except sqlite3.Error:
                pass  # not created yet, or its schema still being written
        time.sleep(0.02)
    sys.exit(1)


if __name__ == "__main__":
    main()
