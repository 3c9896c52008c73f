#!/usr/bin/env python3
"""N RootCanal virtual controllers on one LE phy, each an H4 TCP server, in one rootcanal process.

Usage: rootcanal_phy.py [--ports P1,P2,...] [--direct] SPEC [SPEC ...]

Each SPEC is one controller's model: DEFAULT, LAIRD_BL654 or CSR_RCK_PTS_DONGLE, optionally with
"+strict" (LAIRD_BL654+strict); a bare number N stands for N x DEFAULT. Controllers get distinct free
ports, or --ports (one per controller) for a "radio" that must come back where it was.

Prints one line "READY port1 port2 ..." (in SPEC order) once rootcanal's log shows every port
listening, then runs until stdin closes or SIGTERM/SIGINT arrives, and then stops rootcanal. Same
protocol as ../bumble/virtual_link.py, so a harness can launch either.

Relay: rootcanal writes each H4 packet in two send() calls (the type octet, then the rest) on a socket
without TCP_NODELAY, so on loopback every packet after the first of a burst waits for the host's
delayed ACK: about 44 ms per HCI command instead of 5. A real controller on USB or UART has no such
stall. So by default the READY ports belong to a byte-for-byte relay in this process (127.0.0.1 only)
that acknowledges at once (TCP_QUICKACK) and forwards without delay (TCP_NODELAY); a connection to a
READY port is a connection to its controller, and closing either side closes the other, so a host
closing its socket still removes its controller. --direct hands out rootcanal's own ports instead.

rootcanal's log (every HCI command it received, and why it refused or ignored things) goes to a file
in $TRACER_ROOTCANAL_LOG_DIR, or a new temporary directory; its path is printed on stderr
("rootcanal log: PATH"). A failed start prints the log's tail on stderr and exits 1.

rootcanal itself listens on every interface (it has no bind-address option): run it on a machine or
network namespace of your own.
"""
import argparse
import asyncio
import ctypes
import importlib.util
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from launcher_support import block_until_stdin_closes, free_ports  # noqa: E402

MODELS = ("DEFAULT", "LAIRD_BL654", "CSR_RCK_PTS_DONGLE")
START_TIMEOUT_S = 15.0


class StartFailure(Exception):
    def __init__(self, message: str, log_path: str | None = None):
        super().__init__(message)
        self.log_path = log_path


def report(failure: StartFailure) -> None:
    print(f"rootcanal_phy: {failure}", file=sys.stderr)
    if failure.log_path:
        try:
            with open(failure.log_path, errors="replace") as log:
                tail = log.readlines()[-40:]
            print(f"rootcanal_phy: last lines of {failure.log_path}:", file=sys.stderr)
            sys.stderr.write("".join(tail))
        except OSError as error:
            print(f"rootcanal_phy: cannot read {failure.log_path}: {error}", file=sys.stderr)
    sys.stderr.flush()


def parse_specs(arguments: list[str]) -> list[tuple[str, bool]]:
    """(preset, strict) per controller, in order."""
    models: list[tuple[str, bool]] = []
    for argument in arguments:
        if argument.isdigit():
            models += [("DEFAULT", False)] * int(argument)
            continue
        name, plus, flag = argument.partition("+")
        if name not in MODELS or (plus and flag != "strict"):
            raise StartFailure(f"unknown controller spec {argument!r}: expected one of {', '.join(MODELS)}, "
                               "optionally followed by +strict, or a count")
        models.append((name, bool(plus)))
    if not models:
        raise StartFailure("no controllers requested (usage: rootcanal_phy.py SPEC [SPEC ...])")
    return models


def rootcanal_binary() -> str:
    """The binary inside the rootcanal wheel that the running Python has (where rootcanal.binaries finds it)."""
    setup = "run ./scripts/setup (it installs rootcanal==1.10.0 into .venv-bumble)"
    spec = importlib.util.find_spec("rootcanal")
    if spec is None or not spec.submodule_search_locations:
        raise StartFailure(f"the rootcanal package is not installed for {sys.executable}: {setup}")
    os_name = {"darwin": "macos"}.get(sys.platform, sys.platform)
    package = list(spec.submodule_search_locations)[0]
    binary = os.path.join(package, "bin", f"{os_name}-{platform.machine()}", "rootcanal")
    if not os.access(binary, os.X_OK):
        raise StartFailure(f"no rootcanal binary at {binary}: {setup}")
    return binary


def configuration(models: list[tuple[str, bool]], ports: list[int]) -> str:
    blocks = []
    for (preset, strict), port in zip(models, ports):
        options = f"preset: {preset}" + (" strict: true" if strict else "")
        blocks.append(f"tcp_server {{ tcp_port: {port} configuration {{ {options} }} }}")
    return " ".join(blocks)


def prepare_child() -> None:
    # rootcanal must not outlive this launcher, even when the launcher is SIGKILLed.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Blocked signals are inherited across exec: without this, SIGTERM never reaches rootcanal when the Swift test
    # process (whose threads block it) started this launcher, and every stop waited 2 s for the SIGKILL.
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


async def wait_until_listening(process: subprocess.Popen, log_path: str, ports: list[int]) -> None:
    """Returns once the log shows every port listening; fails on a bind error, an exit or a timeout."""
    # rootcanal logs "posix_async_socket_server.cc:79  Listening on: 41231 (6)" per server socket, and
    # "Error binding test channel listener socket to port: 41231, Address already in use" (then runs on
    # without that port) when a bind fails.
    wanted = {port: f"Listening on: {port} " for port in ports}
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with open(log_path, errors="replace") as log:
            text = log.read()
        if all(line in text for line in wanted.values()):
            return
        if "Error binding" in text:
            raise StartFailure("rootcanal could not bind a port (taken by another process?)", log_path)
        if process.poll() is not None:
            raise StartFailure(f"rootcanal exited with status {process.returncode} before listening", log_path)
        if time.monotonic() > deadline:
            missing = ", ".join(str(port) for port, line in wanted.items() if line not in text)
            raise StartFailure(f"rootcanal did not listen on {missing} within {START_TIMEOUT_S:.0f} s", log_path)
        await asyncio.sleep(0.02)


def quick_ack(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        except OSError:
            pass


def no_delay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def pump(reader: asyncio.StreamReader, source: asyncio.StreamWriter, sink: asyncio.StreamWriter) -> None:
    """Copies bytes until end of file or an error, acknowledging each read at once."""
    try:
        while chunk := await reader.read(65536):
            # Linux clears TCP_QUICKACK again by itself; set after each read, it also sends the ACK
            # the kernel was holding back, which releases rootcanal's next (Nagle-held) segment.
            quick_ack(source)
            sink.write(chunk)
            await sink.drain()
    except (ConnectionError, OSError):
        pass


async def relay(listen_port: int, controller_port: int, connections: set) -> asyncio.AbstractServer:
    async def serve(host_reader: asyncio.StreamReader, host_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        connections.add(task)
        controller_writer = None
        try:
            controller_reader, controller_writer = await asyncio.open_connection("127.0.0.1", controller_port)
            for writer in (host_writer, controller_writer):
                no_delay(writer)
            # Either direction ending ends both: a host that closes removes its controller, and a
            # rootcanal that goes away closes the host's socket.
            directions = [asyncio.create_task(pump(host_reader, host_writer, controller_writer)),
                          asyncio.create_task(pump(controller_reader, controller_writer, host_writer))]
            try:
                await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for direction in directions:
                    direction.cancel()
        except (ConnectionError, OSError) as error:
            print(f"rootcanal_phy: relay {listen_port} -> {controller_port}: {error}", file=sys.stderr, flush=True)
        finally:
            for writer in (host_writer, controller_writer):
                if writer is not None:
                    writer.close()
            connections.discard(task)

    return await asyncio.start_server(serve, "127.0.0.1", listen_port)


async def run(arguments: argparse.Namespace) -> int:
    # The Swift test process starts this from a thread that blocks SIGTERM, and blocked signals are inherited.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    models = parse_specs(arguments.specs)
    requested = None
    if arguments.ports:
        try:
            requested = [int(port) for port in arguments.ports.split(",") if port]
        except ValueError:
            raise StartFailure(f"--ports takes comma-separated numbers, not {arguments.ports!r}")
        if len(requested) != len(models):
            raise StartFailure(f"--ports names {len(requested)} ports for {len(models)} controllers")
    binary = rootcanal_binary()

    # rootcanal's own servers (the classic HCI port, the test channel, the two link servers), the
    # controllers' ports inside rootcanal, and (unless given) the READY ports: all distinct.
    count = len(models)
    picked = free_ports(4 + count * (1 if arguments.direct else 2) - (count if requested else 0))
    hci_port, test_port, link_port, link_ble_port = picked[:4]
    rest = picked[4:]
    public_ports = requested or rest[:count]
    if not requested:
        rest = rest[count:]
    controller_ports = public_ports if arguments.direct else rest[:count]

    log_directory = os.environ.get("TRACER_ROOTCANAL_LOG_DIR") or tempfile.mkdtemp(prefix="tracer-rootcanal-")
    os.makedirs(log_directory, exist_ok=True)
    log_path = os.path.join(log_directory, f"rootcanal-{public_ports[0]}-{os.getpid()}.log")
    print(f"rootcanal log: {log_path}", file=sys.stderr, flush=True)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signal_number, stop.set)

    with open(log_path, "wb") as log:
        # rootcanal logs on stdout and stderr; both go to the file.
        process = subprocess.Popen(
            [binary, f"-hci_port={hci_port}", f"-test_port={test_port}", f"-link_port={link_port}",
             f"-link_ble_port={link_ble_port}", f"-configuration={configuration(models, controller_ports)}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=prepare_child)
    servers = []
    connections: set = set()
    try:
        # Not -hci_port: with tcp_server blocks in the configuration, rootcanal listens on those instead.
        await wait_until_listening(process, log_path, controller_ports + [test_port, link_port, link_ble_port])
        if not arguments.direct:
            try:
                for public, inner in zip(public_ports, controller_ports):
                    servers.append(await relay(public, inner, connections))
            except OSError as error:
                raise StartFailure(f"cannot listen on a relay port: {error}", log_path)

        def wait_for_stdin_to_close() -> None:
            block_until_stdin_closes()
            loop.call_soon_threadsafe(stop.set)

        def wait_for_rootcanal() -> None:
            process.wait()
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()
        threading.Thread(target=wait_for_rootcanal, daemon=True).start()
        print("READY " + " ".join(str(port) for port in public_ports), flush=True)
        await stop.wait()
        if process.poll() is not None:
            report(StartFailure(f"rootcanal exited with status {process.returncode} while in use", log_path))
            return 1
        return 0
    finally:
        for server in servers:
            server.close()
        for connection in list(connections):
            connection.cancel()
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ports", help="comma-separated ports for the controllers, in SPEC order")
    parser.add_argument("--direct", action="store_true", help="hand out rootcanal's own ports (no relay)")
    parser.add_argument("specs", nargs="+", metavar="SPEC")
    arguments = parser.parse_args()
    try:
        sys.exit(asyncio.run(run(arguments)))
    except StartFailure as failure:
        report(failure)
        sys.exit(1)


if __name__ == "__main__":
    main()
