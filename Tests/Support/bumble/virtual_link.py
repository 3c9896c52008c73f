#!/usr/bin/env python3
"""N Bumble virtual controllers on one LocalLink, each exposed as an H4 TCP server on 127.0.0.1.

Usage: virtual_link.py COUNT            (picks free ports)
       virtual_link.py PORT1 PORT2 ...  (uses these ports; a number < 100 is read as COUNT)

Prints one line "READY port1 port2 ..." once every server listens, then runs until stdin closes or
SIGTERM/SIGINT arrives. Controller i gets public address F0:00:00:00:00:<i+1> and static random
address C0:00:00:00:00:<i+1>, because stock controllers all share 00:00:00:00:00:00.
"""
import asyncio
import os
import random
import signal
import sys
import threading

from bumble import hci, ll
from bumble.controller import Controller
from bumble.hci import Address
from bumble.link import LocalLink
from bumble.transport import open_transport

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from launcher_support import block_until_stdin_closes, free_ports  # noqa: E402


class ChanceLink(LocalLink):
    """A LocalLink that hands each advertising PDU to the other controllers in a new random order.

    LocalLink keeps its controllers in a Python set and delivers every PDU in that set's order, which is fixed for
    the run: when two initiators answer the same advertising event, the same one wins every time, where on a real
    radio timing and noise decide. Each initiator sends its CONNECT_IND as it handles the advertisement, and the
    advertiser takes the first to arrive, so shuffling the delivery of each PDU leaves each race to chance.
    """

    def send_advertising_pdu(self, sender_controller, packet):
        loop = asyncio.get_running_loop()
        receivers = [controller for controller in self.controllers if controller is not sender_controller]
        random.shuffle(receivers)
        for controller in receivers:
            loop.call_soon(controller.on_ll_advertising_pdu, packet)


class FaithfulController(Controller):
    """Bumble's controller, with the two commands it leaves unfinished done as the Core specification says.

    Bumble takes LE Create Connection Cancel and goes on initiating: the attempt ends only if the peer advertises
    again, and HCI Reset does not end it either. An attempt to a peer that left (a node killed, an address rotated)
    then blocks the initiator for good, which no controller does (Core Vol 4 Part E 7.8.13): in the process tests a
    node that had made one such attempt never connected as central again, and a peer in the same state met it no more.
    Bumble's reset also keeps advertising, scanning and links, where a real one drops them all (7.3.2).
    """

    def on_hci_le_create_connection_cancel_command(self, command):
        pending = self.pending_le_connection
        if pending is None:
            return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.COMMAND_DISALLOWED_ERROR)
        if not isinstance(pending, hci.HCI_LE_Create_Connection_Command):
            return super().on_hci_le_create_connection_cancel_command(command)
        self.pending_le_connection = None
        # After the Command Complete this returns, as the specification orders them.
        asyncio.get_running_loop().call_soon(
            self.send_hci_packet,
            hci.HCI_LE_Connection_Complete_Event(
                status=hci.HCI_ErrorCode.UNKNOWN_CONNECTION_IDENTIFIER_ERROR,
                connection_handle=0,
                role=hci.Role.CENTRAL,
                peer_address_type=pending.peer_address_type,
                peer_address=pending.peer_address,
                connection_interval=0,
                peripheral_latency=0,
                supervision_timeout=0,
                central_clock_accuracy=0,
            ),
        )
        return hci.HCI_StatusReturnParameters(hci.HCI_ErrorCode.SUCCESS)

    def on_hci_reset_command(self, command):
        self.le_legacy_advertiser.stop()
        self.le_scan_enable = False
        self.pending_le_connection = None
        for connection in list(self.le_connections.values()):
            # The peer loses the link as it would on air, by supervision timeout; this host hears nothing of it.
            connection.send_ll_control_pdu(ll.TerminateInd(hci.HCI_ErrorCode.CONNECTION_TIMEOUT_ERROR))
            del self.le_connections[connection.peer_address]
        return super().on_hci_reset_command(command)


def requested_ports(arguments: list[str]) -> list[int]:
    if len(arguments) == 1 and int(arguments[0]) < 100:
        return free_ports(int(arguments[0]))
    if not arguments:
        return free_ports(2)
    return [int(argument) for argument in arguments]


async def main() -> None:
    # Blocked signals are inherited, and the Swift test process starts this from a thread that blocks SIGTERM.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    ports = requested_ports(sys.argv[1:])
    loop = asyncio.get_running_loop()
    stop = loop.create_future()

    def request_stop() -> None:
        if not stop.done():
            stop.set_result(None)

    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, request_stop)

    def wait_for_stdin_to_close() -> None:
        block_until_stdin_closes()
        loop.call_soon_threadsafe(request_stop)

    threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()

    link = ChanceLink()
    transports = []
    controllers = []
    for index, port in enumerate(ports):
        transport = await open_transport(f"tcp-server:127.0.0.1:{port}")
        transports.append(transport)
        controller = FaithfulController(
            f"C{index}",
            host_source=transport.source,
            host_sink=transport.sink,
            link=link,
            public_address=Address(f"F0:00:00:00:00:{index + 1:02X}", Address.PUBLIC_DEVICE_ADDRESS),
        )
        controller.random_address = Address(f"C0:00:00:00:00:{index + 1:02X}", Address.RANDOM_DEVICE_ADDRESS)
        controllers.append(controller)

    print("READY " + " ".join(str(port) for port in ports), flush=True)
    await stop
    for transport in transports:
        await transport.close()


if __name__ == "__main__":
    asyncio.run(main())
