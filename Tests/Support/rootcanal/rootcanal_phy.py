#!/usr/bin/env python3
"""N RootCanal virtual controllers on one LE phy, each an H4 TCP server, in one rootcanal process.

Usage: rootcanal_phy.py [--ports P1,P2,...] SPEC [SPEC ...]

Each SPEC is one controller's model: DEFAULT, LAIRD_BL654 or CSR_RCK_PTS_DONGLE, optionally with
"+strict" (LAIRD_BL654+strict); a bare number N stands for N x DEFAULT. Controllers get distinct free
ports (or --ports, one per controller, for a "radio" that must come back where it was).

Prints one line "READY port1 port2 ..." (in SPEC order) once rootcanal's log shows every port
listening, then runs until stdin closes or SIGTERM/SIGINT arrives, and then stops rootcanal. Same
protocol as ../bumble/virtual_link.py, so a harness can launch either.

rootcanal's log (its stderr: every HCI command it received, and why it refused or ignored things)
goes to a file in $TRACER_ROOTCANAL_LOG_DIR, or a new temporary directory; its path is printed on
stderr ("rootcanal log: PATH"). A failed start prints the log's tail on stderr and exits 1.

Unlike the Bumble launcher, rootcanal listens on every interface (it has no bind-address option):
run it on a machine or network namespace of your own.
"""
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

MODELS = ("DEFAULT", "LAIRD_BL654", "CSR_RCK_PTS_DONGLE")
START_TIMEOUT_S = 15.0


def fail(message: str, log_path: str | None = None) -> None:
    print(f"rootcanal_phy: {message}", file=sys.stderr, flush=True)
    if log_path:
        try:
            with open(log_path, errors="replace") as log:
                tail = log.readlines()[-40:]
            print(f"rootcanal_phy: last lines of {log_path}:", file=sys.stderr)
            sys.stderr.write("".join(tail))
        except OSError as error:
            print(f"rootcanal_phy: cannot read {log_path}: {error}", file=sys.stderr)
    sys.stderr.flush()
    sys.exit(1)


def parse_specs(arguments: list[str]) -> list[tuple[str, bool]]:
    """(preset, strict) per controller, in order."""
    models: list[tuple[str, bool]] = []
    for argument in arguments:
        if argument.isdigit():
            models += [("DEFAULT", False)] * int(argument)
            continue
        name, plus, flag = argument.partition("+")
        if name not in MODELS or (plus and flag != "strict"):
            fail(f"unknown controller spec {argument!r}: expected one of {', '.join(MODELS)}, "
                 "optionally followed by +strict, or a count")
        models.append((name, bool(plus)))
    if not models:
        fail("no controllers requested (usage: rootcanal_phy.py SPEC [SPEC ...])")
    return models


def rootcanal_binary() -> str:
    """The binary inside the rootcanal wheel that the running Python has (as rootcanal.binaries finds it)."""
    spec = importlib.util.find_spec("rootcanal")
    os_name = {"darwin": "macos"}.get(sys.platform, sys.platform)
    if spec is None or not spec.submodule_search_locations:
        fail(f"the rootcanal package is not installed for {sys.executable}: run ./scripts/setup "
             "(it installs rootcanal==1.10.0 into .venv-bumble)")
    package = list(spec.submodule_search_locations)[0]
    binary = os.path.join(package, "bin", f"{os_name}-{platform.machine()}", "rootcanal")
    if not os.access(binary, os.X_OK):
        fail(f"no rootcanal binary at {binary}: run ./scripts/setup (it installs rootcanal==1.10.0 into .venv-bumble)")
    return binary


def free_ports(count: int) -> list[int]:
    # All probes stay open until every port is picked, so the kernel cannot hand out one port twice.
    # A port can still be taken between the probes and rootcanal's bind; rootcanal then logs
    # "Error binding ..." and this launcher reports a failed start, which the test harness retries.
    probes = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def configuration(models: list[tuple[str, bool]], ports: list[int]) -> str:
    blocks = []
    for (preset, strict), port in zip(models, ports):
        options = f"preset: {preset}" + (" strict: true" if strict else "")
        blocks.append(f"tcp_server {{ tcp_port: {port} configuration {{ {options} }} }}")
    return " ".join(blocks)


def die_with_parent() -> None:
    # rootcanal must not outlive this launcher, even when the launcher is SIGKILLed.
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def wait_until_listening(process: subprocess.Popen, log_path: str, ports: list[int]) -> None:
    """Returns once the log shows 'Listening on: P' for every port; fails on a bind error or exit."""
    wanted = {f"Listening on: {port} " for port in ports}
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        with open(log_path, errors="replace") as log:
            text = log.read()
        # The log line is "posix_async_socket_server.cc:79  Listening on: 41231 (6)".
        if all(line in text for line in wanted):
            return
        if "Error binding" in text:
            fail("rootcanal could not bind a port (taken by another process?)", log_path)
        if process.poll() is not None:
            fail(f"rootcanal exited with status {process.returncode} before listening", log_path)
        if time.monotonic() > deadline:
            missing = sorted(line.split()[2] for line in wanted if line not in text)
            fail(f"rootcanal did not listen on {', '.join(missing)} within {START_TIMEOUT_S:.0f} s", log_path)
        time.sleep(0.02)


def stop_rootcanal(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> None:
    arguments = sys.argv[1:]
    requested: list[int] | None = None
    if arguments and arguments[0].startswith("--ports"):
        value = arguments[0].partition("=")[2] if "=" in arguments[0] else (arguments[1] if len(arguments) > 1 else "")
        arguments = arguments[1:] if "=" in arguments[0] else arguments[2:]
        try:
            requested = [int(port) for port in value.split(",") if port]
        except ValueError:
            fail(f"--ports takes comma-separated numbers, not {value!r}")
    models = parse_specs(arguments)
    if requested is not None and len(requested) != len(models):
        fail(f"--ports names {len(requested)} ports for {len(models)} controllers")
    binary = rootcanal_binary()

    # Four more ports for rootcanal's own servers (the classic HCI port, the test channel and the two
    # link servers): distinct from each other and from the controllers'.
    picked = free_ports(len(models) + 4 - (0 if requested is None else len(models)))
    hci_ports = requested if requested is not None else picked[:len(models)]
    hci_port, test_port, link_port, link_ble_port = picked[-4:]

    log_directory = os.environ.get("TRACER_ROOTCANAL_LOG_DIR") or tempfile.mkdtemp(prefix="tracer-rootcanal-")
    os.makedirs(log_directory, exist_ok=True)
    log_path = os.path.join(log_directory, f"rootcanal-{hci_ports[0]}-{os.getpid()}.log")
    print(f"rootcanal log: {log_path}", file=sys.stderr, flush=True)

    stop = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: stop.set())

    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [binary, f"-hci_port={hci_port}", f"-test_port={test_port}", f"-link_port={link_port}",
             f"-link_ble_port={link_ble_port}", f"-configuration={configuration(models, hci_ports)}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    try:
        # hci_port is not in the list: with a configuration naming tcp_server ports, rootcanal opens
        # those instead and never listens on -hci_port.
        wait_until_listening(process, log_path, hci_ports + [test_port, link_port, link_ble_port])

        def wait_for_stdin_to_close() -> None:
            # os.read on the raw descriptor: a thread blocked in the buffered reader holds its lock.
            try:
                while os.read(sys.stdin.fileno(), 4096):
                    pass
            except (OSError, ValueError):
                pass
            stop.set()

        def wait_for_rootcanal() -> None:
            process.wait()
            stop.set()

        threading.Thread(target=wait_for_stdin_to_close, daemon=True).start()
        threading.Thread(target=wait_for_rootcanal, daemon=True).start()
        print("READY " + " ".join(str(port) for port in hci_ports), flush=True)
        while not stop.wait(0.5):
            pass
        if process.poll() is not None:
            fail(f"rootcanal exited with status {process.returncode} while in use", log_path)
    finally:
        stop_rootcanal(process)


if __name__ == "__main__":
    main()
