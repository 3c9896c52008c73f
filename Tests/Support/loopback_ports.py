"""Free TCP ports on 127.0.0.1 for the virtual-controller launchers (bumble/virtual_link.py, rootcanal/rootcanal_phy.py)."""
import socket


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
