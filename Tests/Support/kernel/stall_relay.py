#!/usr/bin/env python3
"""A TCP relay between QEMU's serial line and a RootCanal controller's H4 port that can stall.

scripts/kernel-bed --stall-line N puts one in the path of the guest's line N. While the file FLAG
exists (the guest scenario creates it in its results folder, which is this host's RESULTS), the
relay reads neither side: the guest's commands wait in the socket buffers and the controller says
nothing, yet both connections stay open, so the node sees a controller that stops answering
without its transport closing. Nothing is dropped, so H4's framing survives: once FLAG is removed,
what waited is delivered in order, as from a controller that was busy.

Usage: stall_relay.py FLAG CONTROLLER_PORT PORT_FILE LOG
Listens on a free loopback port, writes it to PORT_FILE, serves one connection (QEMU's), and logs
each stall and resumption with the host's time to LOG.
"""
import os
import select
import socket
import sys
import time


def main():
    flag, controller_port, port_file, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    log = open(log_path, "a", buffering=1)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    with open(port_file + ".tmp", "w") as out:
        out.write(f"{listener.getsockname()[1]}\n")
    os.rename(port_file + ".tmp", port_file)
    guest, _ = listener.accept()
    controller = socket.create_connection(("127.0.0.1", controller_port))
    for end in (guest, controller):
        end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    peer = {guest: controller, controller: guest}
    log.write(f"{time.time():.3f} relaying to controller port {controller_port}\n")
    stalled = False
    while True:
        now_stalled = os.path.exists(flag)
        if now_stalled != stalled:
            stalled = now_stalled
            log.write(f"{time.time():.3f} {'stalled' if stalled else 'resumed'}\n")
        if stalled:
            # The flag is a file the guest writes over 9p, which has no change notification to wait on.
            time.sleep(0.05)
            continue
        readable, _, _ = select.select([guest, controller], [], [], 0.05)
        for end in readable:
            data = end.recv(65536)
            if not data:
                log.write(f"{time.time():.3f} {'guest' if end is guest else 'controller'} closed\n")
                return
            peer[end].sendall(data)


if __name__ == "__main__":
    main()
