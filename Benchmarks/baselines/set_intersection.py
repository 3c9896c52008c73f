#!/usr/bin/env python3
"""Baseline (b) for `TracerBench match`: the positive list matched with Python sets.

The idiomatic version: the encounters' peer ids into a set, every listed id into a set, intersect
them, then apply the window rule to the hits only (an encounter counts when it overlaps the id's
validity window widened by the clock-skew tolerance). The ids come from the node's followed list
log (the cache's entries file, mapped). The windows of the few hits are found by binary search in
the entries whose id range holds them (each entry's ids are sorted), so the window check costs
next to nothing and the figure is the set work itself.

Prints one JSON object: time, ids read, matches.
"""
import argparse
import json
import mmap
import sqlite3
import sys
import time

from log_entries import ENTRY, entries_path, id_runs


def id_range(run):
    """The first and last id of a sorted run, as unsigned integers."""
    (first, _, _) = ENTRY.unpack_from(run, 0)
    (last, _, _) = ENTRY.unpack_from(run, len(run) - ENTRY.size)
    return first & 0xFFFF_FFFF_FFFF_FFFF, last & 0xFFFF_FFFF_FFFF_FFFF


def window_of(listed_id, runs, ranges):
    """The (valid_from, valid_until) of a listed id, by binary search in each sorted run whose id
    range holds it. Ids sort as unsigned big-endian integers, so compare them as such."""
    wanted = listed_id & 0xFFFF_FFFF_FFFF_FFFF
    for run, (first, last) in zip(runs, ranges):
        if wanted < first or wanted > last:
            continue
        low, high = 0, len(run) // ENTRY.size
        while low < high:
            middle = (low + high) // 2
            candidate, valid_from, valid_until = ENTRY.unpack_from(run, middle * ENTRY.size)
            candidate &= 0xFFFF_FFFF_FFFF_FFFF
            if candidate == wanted:
                return valid_from, valid_until
            if candidate < wanted:
                low = middle + 1
            else:
                high = middle
    raise LookupError(f"listed id {listed_id} not found again")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="the node's database")
    parser.add_argument("--cache-dir", required=True, help="a node's list cache holding the followed log (log/entries)")
    parser.add_argument("--tolerance", type=int, default=300, help="clock-skew tolerance, seconds")
    arguments = parser.parse_args()

    started = time.perf_counter()
    connection = sqlite3.connect(arguments.db)
    encounters = connection.execute("SELECT peer_id, first_seen, last_seen FROM encounters").fetchall()
    encounter_ids = {peer_id for peer_id, _, _ in encounters}

    with open(entries_path(arguments.cache_dir), "rb") as file:
        # Mapped rather than read: the binary searches touch a few pages.
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    runs = id_runs(mapped)
    list_ids = set()
    for run in runs:
        list_ids.update(listed_id for listed_id, _, _ in ENTRY.iter_unpack(run))

    hits = list_ids & encounter_ids
    ranges = [id_range(run) for run in runs]
    windows = {listed_id: window_of(listed_id, runs, ranges) for listed_id in hits}
    matches = sum(
        1
        for peer_id, first_seen, last_seen in encounters
        if peer_id in windows
        and last_seen >= windows[peer_id][0] - arguments.tolerance
        and first_seen <= windows[peer_id][1] + arguments.tolerance
    )
    finished = time.perf_counter()

    json.dump({"seconds": finished - started, "idsRead": len(list_ids), "matches": matches}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
