#!/usr/bin/env python3
"""Baseline (a) for `TracerBench match`: the positive list matched with SQLite, as a user might.

Loads every id the node holds of its followed list log (the cache's entries file) into a SQLite table (one transaction, one prepared
INSERT through executemany, fed by a generator that decodes the entries with struct), then joins it
with the node's encounters table on the id, with the same window rule as Tracer's matcher: an
encounter counts when it overlaps the id's validity window widened by the clock-skew tolerance.

The list table lives in memory (on disk it took about 50 % longer). Its layout is the fastest of
the three a user would try (see --layout; 10 million ids, 100,000 encounters, 2 cores): a plain
table with an index on the id built after the load ("indexed": 10.3 s load + 0.2 s join) beat
keying the table by id (WITHOUT ROWID, random-order inserts into the B-tree: 11.3 s + 0.2 s) and
no index at all (8.8 s + 7.0 s: the planner then scans the list for the window join).

Python is not what makes this slow: decoding the 10 million entries takes about 2 s of the load,
and the sqlite3 shell alone, with no Python, takes about 8 s to insert 10 million generated rows
and index them.

Prints one JSON object: load and join times, ids loaded, matches.
"""
import argparse
import json
import sqlite3
import sys
import time

from log_entries import ENTRY, entries_path, id_runs


def entries(path, counter):
    """Every id record of the entries file, in log order; adds their number to counter[0]."""
    with open(path, "rb") as file:
        data = file.read()
    for run in id_runs(data):
        counter[0] += len(run) // ENTRY.size
        yield from ENTRY.iter_unpack(run)


LAYOUTS = {
    "heap": "CREATE TABLE listed (id INTEGER NOT NULL, valid_from INTEGER NOT NULL, valid_until INTEGER NOT NULL)",
    "without-rowid": "CREATE TABLE listed (id INTEGER PRIMARY KEY, valid_from INTEGER NOT NULL, valid_until INTEGER NOT NULL) WITHOUT ROWID",
    "indexed": "CREATE TABLE listed (id INTEGER NOT NULL, valid_from INTEGER NOT NULL, valid_until INTEGER NOT NULL)",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="the node's database")
    parser.add_argument("--cache-dir", required=True, help="a node's list cache holding the followed log (log/entries)")
    parser.add_argument("--work-db", default=":memory:", help="where the list table goes (default: in memory)")
    parser.add_argument("--layout", choices=sorted(LAYOUTS), default="indexed")
    parser.add_argument("--tolerance", type=int, default=300, help="clock-skew tolerance, seconds")
    arguments = parser.parse_args()

    started = time.perf_counter()
    connection = sqlite3.connect(arguments.work_db, isolation_level=None)
    # Nothing here needs to survive a crash: no journal, no fsync.
    connection.execute("PRAGMA journal_mode = OFF")
    connection.execute("PRAGMA synchronous = OFF")
    connection.execute(LAYOUTS[arguments.layout])
    entry_count = [0]
    connection.execute("BEGIN")
    connection.executemany("INSERT INTO listed VALUES (?, ?, ?)", entries(entries_path(arguments.cache_dir), entry_count))
    connection.execute("COMMIT")
    if arguments.layout == "indexed":
        connection.execute("CREATE INDEX listed_by_id ON listed(id)")
    loaded = time.perf_counter()

    connection.execute("ATTACH DATABASE ? AS node", (arguments.db,))
    (matches,) = connection.execute(
        """
        SELECT count(*) FROM node.encounters AS e JOIN listed AS l ON l.id = e.peer_id
        WHERE e.last_seen >= l.valid_from - :tolerance AND e.first_seen <= l.valid_until + :tolerance
        """,
        {"tolerance": arguments.tolerance},
    ).fetchone()
    joined = time.perf_counter()

    json.dump({
        "loadSeconds": loaded - started,
        "joinSeconds": joined - loaded,
        "idsLoaded": entry_count[0],
        "matches": matches,
        "layout": arguments.layout,
        "sqlite": sqlite3.sqlite_version,
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()
