"""What the virtual-controller launchers (bumble/virtual_link.py, rootcanal/rootcanal_phy.py) share: free TCP
ports on 127.0.0.1, and the wait for the test harness to close their standard input (their signal to stop)."""
import os
import socket
import sys


def free_ports(count: int) -> list[int]:
    # All probes stay open until every port is picked, so the kernel cannot hand out one port twice.
    # A port can still be taken between the probes and the launcher's bind; that shows up as a failed
    # start, which the test harness retries.
    probes = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def block_until_stdin_closes() -> None:
    """Returns once standard input reaches its end. Run it on a thread of its own."""
    # os.read on the raw descriptor, not sys.stdin.buffer: a daemon thread blocked inside the buffered
    # reader holds its lock, and interpreter shutdown after SIGTERM then aborts (SIGABRT, exit status -6).
    try:
        while os.read(sys.stdin.fileno(), 4096):
            pass
    except (OSError, ValueError):
        pass
