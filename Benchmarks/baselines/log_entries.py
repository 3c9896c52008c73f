"""Reading the ids a node holds of its followed list log, for the baselines.

The cache's `log/entries` file (docs/positive-list-format.md, "What a node keeps"): the log index
of the first entry held (8 bytes, big-endian), then every entry framed as in an entry bundle, its
2-byte big-endian length and its bytes. An ids entry is a 13-byte header (kind 1, batch number,
part, part count) and a run of 16-byte id records sorted by id, as the matcher reads them."""
import os
import struct

ENTRIES_FILE_HEADER_BYTES = 8
FRAME = struct.Struct(">H")
LOG_ENTRY_HEADER = struct.Struct(">BQHH")  # kind, batch number, part, part count
IDS_KIND = 1
ENTRY = struct.Struct(">qII")  # the id's 8 bytes as a signed integer, as the node stores it


def entries_path(cache_dir):
    return os.path.join(cache_dir, "log", "entries")


def id_runs(data):
    """The id records of every ids entry in an entries file's bytes, as memoryviews (one per
    entry, each sorted by id); key entries are skipped. A file cut inside an entry raises."""
    view = memoryview(data)
    offset = ENTRIES_FILE_HEADER_BYTES
    runs = []
    while offset < len(view):
        if offset + FRAME.size > len(view):
            raise ValueError(f"entries file cut inside a frame at byte {offset}")
        (length,) = FRAME.unpack_from(view, offset)
        start, end = offset + FRAME.size, offset + FRAME.size + length
        if end > len(view):
            raise ValueError(f"entries file cut inside an entry at byte {offset}")
        if length > LOG_ENTRY_HEADER.size and view[start] == IDS_KIND:
            runs.append(view[start + LOG_ENTRY_HEADER.size:end])
        offset = end
    return runs
