#!/usr/bin/env python3
"""Developer self-check: every tracer_attacker.py mode against the honest Bumble peers, on fresh virtual links.

Usage: selfcheck_attackers.py [--python PATH] [--only MODE ...]

Pairs: garbage-writer vs tracer_peripheral.py, silent-peripheral vs tracer_central.py, link-holder vs
tracer_peripheral.py, flooder vs tracer_peripheral.py --connections 1000, no-service vs tracer_central.py,
replayer vs tracer_central.py. Each pair gets its own virtual_link.py process. Prints one JSON summary on stdout
({"logs": dir, "results": {mode: {...}}, "ok": true}); exits 1 with {"error", "context"} on the first failed
assertion. Takes about 30 s. Not wired into CI.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selfcheck import DEFAULT_PYTHON, Scenario, check

REPLAYED_ID = "0badc0ffee123456"


class LinkWithControllers(Scenario):
    """selfcheck.py's Scenario with a chosen number of virtual controllers (it always starts 2)."""

    def __init__(self, python: str, log_directory: Path, name: str, controllers: int):
        super().__init__(python, log_directory, name)
        self.controllers = controllers

    def __enter__(self):
        self.link = self.spawn("virtual_link.py", [str(self.controllers)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE)
        line = self.link.stdout.readline().decode().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"virtual_link.py did not start: {line}")
        self.ports = [int(port) for port in line[1:]]
        return self


def transport_args(scenario: Scenario, index: int) -> list[str]:
    return ["--transport", scenario.transport(index)]


def garbage_writer(python: str, logs: Path) -> dict:
    with Scenario(python, logs, "garbage-writer") as scenario:
        peripheral = scenario.spawn("tracer_peripheral.py", [*transport_args(scenario, 1), "--timeout", "60"])
        scenario.wait_for_ready(peripheral)
        attacker = scenario.spawn("tracer_attacker.py", [
            "--mode", "garbage-writer", *transport_args(scenario, 0), "--op-timeout", "0.5", "--timeout", "60"],
            stderr_name="attacker")
        attacker_rc, result = scenario.result(attacker, 70)
        peripheral_rc, peripheral_json = scenario.result(peripheral, 10)
    check(attacker_rc == 0, "garbage-writer failed", result)
    check(peripheral_rc == 0, "peripheral under garbage failed", peripheral_json)
    check(result["service_found"] and result["setup_error"] is None, "garbage-writer setup", result)
    check(not result["link_dropped_by_peer"], "Bumble peripheral dropped the link", result)
    check(result["attempts"] >= 90, "attempt count", result["attempts"])
    log = {entry["step"]: entry["answer"] for entry in result["log"]}
    for length in (0, 1, 7, 9, 11, 20, 200):
        check(log[f"write-req len {length}"] == "error 0x0d", f"write-req len {length}", log)
        check(log[f"write-cmd len {length}"] is None, f"write-cmd len {length} answered", log)
    check(log["read write-char"] == "error 0x02", "read of write characteristic", log)
    check(log["read handle 0xffff"] == "error 0x01", "read of handle 0xffff", log)
    check(log["write-req handle 0x0000"] == "error 0x01", "write to handle 0", log)
    check(result["errors"].get("0x0d", 0) >= 7 and result["errors"].get("0x01", 0) >= 10, "error counts",
          result["errors"])
    check(result["answered_commands"] == 0, "a command was answered", result)
    check(result["id_read_after"] == "a1a2a3a4a5a6a7a8", "id read after the attack", result["id_read_after"])
    check(peripheral_json["connections"] == 1, "peripheral connections", peripheral_json)
    return {key: value for key, value in result.items() if key != "log"}


def silent_peripheral(python: str, logs: Path) -> dict:
    with Scenario(python, logs, "silent-peripheral") as scenario:
        silent = scenario.spawn("tracer_attacker.py", [
            "--mode", "silent-peripheral", *transport_args(scenario, 1), "--connections", "1", "--duration", "20"],
            stderr_name="attacker")
        scenario.wait_for_ready(silent)
        central = scenario.spawn("tracer_central.py", [*transport_args(scenario, 0), "--op-timeout", "1.5"])
        central_rc, central_json = scenario.result(central, 30)
        silent_rc, result = scenario.result(silent, 30)
    # The central's id read must time out: tracer_central.py treats that as a failed step (exit 1).
    check(central_rc == 1 and "read id" in central_json.get("error", ""), "central read did not time out",
          central_rc, central_json)
    check(silent_rc == 0, "silent-peripheral failed", result)
    check(result["connections"] == 1 and result["reads_received"] == 1, "silent-peripheral counts", result)
    check(len(result["held_ms"]) == 1 and result["held_ms"][0] >= 1400, "held_ms", result)
    check(result["advertising_data"] == "02010611077653a6b3bd937f9cf247aa5a00009aa0020a04", "AD bytes", result)
    return {"attacker": result, "central": central_json}


def link_holder(python: str, logs: Path) -> dict:
    with Scenario(python, logs, "link-holder") as scenario:
        peripheral = scenario.spawn("tracer_peripheral.py", [*transport_args(scenario, 1), "--timeout", "30"])
        scenario.wait_for_ready(peripheral)
        started = time.monotonic()
        attacker = scenario.spawn("tracer_attacker.py", [
            "--mode", "link-holder", *transport_args(scenario, 0), "--target", "C0:00:00:00:00:B2",
            "--duration", "3"], stderr_name="attacker")
        attacker_rc, result = scenario.result(attacker, 40)
        elapsed = time.monotonic() - started
        peripheral_rc, peripheral_json = scenario.result(peripheral, 10)
    check(attacker_rc == 0, "link-holder failed", result)
    # Bumble's peripheral never drops an idle link, so the holder keeps it for the whole --duration.
    check(result["connected"] and result["disconnected_after_ms"] is None and result["reason"] is None,
          "link-holder result", result)
    check(elapsed >= 3, "link-holder returned early", elapsed)
    check(peripheral_rc == 0 and peripheral_json["connections"] == 1, "peripheral", peripheral_json)
    return result


def flooder(python: str, logs: Path) -> dict:
    # Three controllers: the flooder, the peripheral, and a fresh one for the honest central afterwards.
    with LinkWithControllers(python, logs, "flooder", 3) as scenario:
        peripheral = scenario.spawn("tracer_peripheral.py", [
            *transport_args(scenario, 1), "--connections", "1000", "--timeout", "60"])
        scenario.wait_for_ready(peripheral)
        attacker = scenario.spawn("tracer_attacker.py", [
            "--mode", "flooder", *transport_args(scenario, 0), "--duration", "4"], stderr_name="attacker")
        attacker_rc, result = scenario.result(attacker, 40)
        check(peripheral.poll() is None, "peripheral died under the flood", peripheral.stderr_path)
        # The honest peripheral must still serve a normal central after the flood.
        central = scenario.spawn("tracer_central.py", transport_args(scenario, 2))
        central_rc, central_json = scenario.result(central, 30)
    check(attacker_rc == 0, "flooder failed", result)
    check(result["connections"] >= 10, "too few flood connections", result)
    check(result["failures"] == 0, "flood connect failures", result)
    check(central_rc == 0 and central_json["read_id"] == "a1a2a3a4a5a6a7a8", "central after the flood",
          central_json)
    return result


def no_service(python: str, logs: Path) -> dict:
    with Scenario(python, logs, "no-service") as scenario:
        attacker = scenario.spawn("tracer_attacker.py", [
            "--mode", "no-service", *transport_args(scenario, 1), "--connections", "1", "--duration", "20"],
            stderr_name="attacker")
        scenario.wait_for_ready(attacker)
        central = scenario.spawn("tracer_central.py", transport_args(scenario, 0))
        central_rc, central_json = scenario.result(central, 30)
        attacker_rc, result = scenario.result(attacker, 30)
    check(central_rc == 0, "central failed", central_json)
    check(central_json["service_found"] is False and central_json["read_id"] is None, "central found a service",
          central_json)
    check(central_json["adv_data"] == "02010611077653a6b3bd937f9cf247aa5a00009aa0020a04", "AD bytes", central_json)
    check(attacker_rc == 0 and result["connections"] == 1, "no-service result", result)
    check(result["discovery_requests"] >= 1, "no discovery request counted", result)
    return {"attacker": result, "central_service_found": central_json["service_found"]}


def replayer(python: str, logs: Path) -> dict:
    with Scenario(python, logs, "replayer") as scenario:
        attacker = scenario.spawn("tracer_attacker.py", [
            "--mode", "replayer", *transport_args(scenario, 1), "--id", REPLAYED_ID, "--connections", "1",
            "--duration", "20"], stderr_name="attacker")
        scenario.wait_for_ready(attacker)
        central = scenario.spawn("tracer_central.py", transport_args(scenario, 0))
        central_rc, central_json = scenario.result(central, 30)
        attacker_rc, result = scenario.result(attacker, 30)
    check(central_rc == 0 and central_json["read_id"] == REPLAYED_ID, "central read id", central_json)
    check(attacker_rc == 0, "replayer failed", result)
    check(result["replayed_id"] == REPLAYED_ID and result["connections"] == 1 and result["reads"] == 1,
          "replayer result", result)
    check([write["value"] for write in result["writes"]] ==
          ["1122334455667788", "1122334455667788c404", "1122334455667788"], "replayer writes", result["writes"])
    check(result["address"] == "C0:00:00:00:0A:06", "replayer default address", result["address"])
    return result


CHECKS = {
    "garbage-writer": garbage_writer,
    "silent-peripheral": silent_peripheral,
    "link-holder": link_holder,
    "flooder": flooder,
    "no-service": no_service,
    "replayer": replayer,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=os.environ.get("BUMBLE_PYTHON", str(DEFAULT_PYTHON)))
    parser.add_argument("--only", nargs="*", choices=list(CHECKS), help="run only these modes")
    arguments = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="tracer-selfcheck-attackers-"))
    results = {}
    for mode in arguments.only or CHECKS:
        started = time.monotonic()
        results[mode] = CHECKS[mode](arguments.python, logs)
        results[mode]["selfcheck_s"] = round(time.monotonic() - started, 1)
    print(json.dumps({"logs": str(logs), "results": results, "ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
