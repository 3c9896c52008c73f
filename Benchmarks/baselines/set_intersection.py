#!/usr/bin/env python3
"""Baseline (b) for `TracerBench match`: the positive list matched with Python sets.

The idiomatic version: the encounters' peer ids into a set, every listed id into a set, intersect
them, then apply the window rule to the hits only (an encounter counts when it overlaps the id's
validity window widened by the clock-skew tolerance). The windows of the few hits are found by
binary search in the sorted batch files, so the window check costs next to nothing and the figure
is the set work itself.

Prints one JSON object: time, ids read, matches.
"""
import argparse
import json
import mmap
import sqlite3
import sys
import time

from batch_files import ENTRY, HEADER_BYTES, SIGNATURE_BYTES, batch_paths, read_body


def window_of(listed_id, bodies):
    """The (valid_from, valid_until) of a listed id, by binary search in each sorted batch.
    Ids sort as unsigned big-endian integers, so compare them as such."""
    wanted = listed_id & 0xFFFF_FFFF_FFFF_FFFF
    for body in bodies:
        low, high = 0, len(body) // ENTRY.size
        while low < high:
            middle = (low + high) // 2
            candidate, valid_from, valid_until = ENTRY.unpack_from(body, middle * ENTRY.size)
            candidate &= 0xFFFF_FFFF_FFFF_FFFF
            if candidate == wanted:
                return valid_from, valid_until
            if candidate < wanted:
                low = middle + 1
            else:
                high = middle
    raise LookupError(f"listed id {listed_id} not found again")


def mapped_body(path):
    """The entries of a batch file, mapped rather than read: a binary search touches a few pages."""
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    return memoryview(mapped)[HEADER_BYTES:len(mapped) - SIGNATURE_BYTES]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="the node's database")
    parser.add_argument("--cache-dir", required=True, help="a directory of the list's signed batch files (batches/N.tplb, the retired format 1 the benchmark still writes)")
    parser.add_argument("--tolerance", type=int, default=300, help="clock-skew tolerance, seconds")
    arguments = parser.parse_args()

    started = time.perf_counter()
    connection = sqlite3.connect(arguments.db)
    encounters = connection.execute("SELECT peer_id, first_seen, last_seen FROM encounters").fetchall()
    encounter_ids = {peer_id for peer_id, _, _ in encounters}

    paths = batch_paths(arguments.cache_dir)
    list_ids = set()
    for path in paths:
        list_ids.update(listed_id for listed_id, _, _ in ENTRY.iter_unpack(read_body(path)))

    hits = list_ids & encounter_ids
    bodies = [mapped_body(path) for path in paths]
    windows = {listed_id: window_of(listed_id, bodies) for listed_id in hits}
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
