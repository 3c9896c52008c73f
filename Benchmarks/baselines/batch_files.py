"""Reading the list cache's batch files (docs/positive-list-format.md), for the baselines."""
import os
import struct

HEADER_BYTES = 40
SIGNATURE_BYTES = 64
ENTRY = struct.Struct(">qII")  # the id's 8 bytes as a signed integer, as the node stores it


def batch_paths(cache_dir):
    directory = os.path.join(cache_dir, "batches")
    names = [name for name in os.listdir(directory) if name.endswith(".tplb")]
    return [os.path.join(directory, name) for name in sorted(names, key=lambda name: int(name.split(".")[0]))]


def read_body(path):
    """The entries of a batch file: the file without its header and signature."""
    with open(path, "rb") as file:
        data = file.read()
    return memoryview(data)[HEADER_BYTES:len(data) - SIGNATURE_BYTES]
