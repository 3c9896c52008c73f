#!/usr/bin/env python3
"""Developer self-check: tracer_central.py against tracer_peripheral.py over fresh virtual controllers.

Usage: selfcheck.py [--rounds 20] [--python PATH]

Scenario 1 runs the single happy path and asserts on both JSON objects; scenario 2 runs the rounds benchmark.
Each scenario gets its own virtual_link.py process (a controller is not reusable across tests, NOTES.md).
Prints one JSON summary on stdout; exits non-zero on the first failed assertion. Not pytest, not in CI yet.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_PYTHON = HERE.parents[2] / ".venv-bumble" / "bin" / "python"


class Scenario:
    """One virtual link plus the processes attached to it; everything is torn down on exit."""

    def __init__(self, python: str, log_directory: Path, name: str):
        self.python = python
        self.log_directory = log_directory
        self.name = name
        self.processes: list[subprocess.Popen] = []

    def __enter__(self):
        # virtual_link.py stops when its stdin closes, so hold a pipe to it for the scenario's lifetime.
        self.link = self.spawn("virtual_link.py", ["2"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        line = self.link.stdout.readline().decode().split()
        if not line or line[0] != "READY":
            raise RuntimeError(f"virtual_link.py did not start: {line}")
        self.ports = [int(port) for port in line[1:]]
        return self

    def __exit__(self, *_):
        # Closing its stdin is virtual_link.py's orderly stop; signals below are only the fallback.
        self.link.stdin.close()
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()

    def spawn(self, script: str, arguments: list[str], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
              stderr_name: str | None = None) -> subprocess.Popen:
        stderr_path = self.log_directory / f"{self.name}-{stderr_name or Path(script).stem}.err"
        process = subprocess.Popen(
            [self.python, str(HERE / script), *arguments],
            stdin=stdin,
            stdout=stdout,
            stderr=open(stderr_path, "wb"),
            cwd=HERE,
        )
        process.stderr_path = stderr_path
        self.processes.append(process)
        return process

    def transport(self, index: int) -> str:
        return f"tcp-client:127.0.0.1:{self.ports[index]}"

    @staticmethod
    def wait_for_ready(process: subprocess.Popen, deadline_s: float = 10.0) -> None:
        # The peripheral announces READY on stderr (stdout carries only its final JSON).
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if b"READY" in process.stderr_path.read_bytes():
                return
            if process.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"peripheral not ready; stderr in {process.stderr_path}")

    @staticmethod
    def result(process: subprocess.Popen, timeout: float) -> tuple[int, dict]:
        stdout, _ = process.communicate(timeout=timeout)
        return process.returncode, json.loads(stdout)


def check(condition: bool, message: str, *context) -> None:
    if not condition:
        print(json.dumps({"error": message, "context": context}, default=str))
        sys.exit(1)


def happy_path(python: str, logs: Path) -> dict:
    with Scenario(python, logs, "single") as scenario:
        peripheral = scenario.spawn("tracer_peripheral.py", ["--transport", scenario.transport(1)])
        scenario.wait_for_ready(peripheral)
        central = scenario.spawn("tracer_central.py", ["--transport", scenario.transport(0)])
        central_rc, central_json = scenario.result(central, 30)
        peripheral_rc, peripheral_json = scenario.result(peripheral, 30)

    check(central_rc == 0, "central failed", central_json)
    check(peripheral_rc == 0, "peripheral failed", peripheral_json)
    check(central_json["advertiser"] == "C0:00:00:00:00:B2", "advertiser address", central_json["advertiser"])
    check(central_json["adv_data"] == "02010611077653a6b3bd937f9cf247aa5a00009aa0020a04", "AD bytes",
          central_json["adv_data"])
    check(central_json["tx_power"] == 4, "tx power", central_json["tx_power"])
    check(central_json["service_found"], "service not found", central_json)
    check(central_json["read_id"] == "a1a2a3a4a5a6a7a8", "read id", central_json["read_id"])
    writes = [(w["value"], w["with_response"], w["result"], w["att_error"]) for w in central_json["writes"]]
    check(writes == [
        ("1122334455667788", True, "ok", None),
        ("1122334455667788c404", True, "ok", None),
        ("1122334455667788", False, "ok", None),
        ("11223344556677", True, "error", 0x0D),
    ], "central writes", writes)
    check(central_json["read_write_char_error"] == 0x02, "read of write characteristic",
          central_json["read_write_char_error"])
    check(peripheral_json["connections"] == 1, "peripheral connections", peripheral_json)
    check(peripheral_json["writes"] == [
        {"value": "1122334455667788", "with_response": True},
        {"value": "1122334455667788c404", "with_response": True},
        {"value": "1122334455667788", "with_response": False},
    ], "peripheral writes", peripheral_json["writes"])
    check(peripheral_json["reads"] == 1, "peripheral reads", peripheral_json)
    return {"central": central_json, "peripheral": peripheral_json}


def rounds(python: str, logs: Path, count: int) -> dict:
    timeout = str(max(20, count * 2))
    with Scenario(python, logs, "rounds") as scenario:
        peripheral = scenario.spawn("tracer_peripheral.py", [
            "--transport", scenario.transport(1), "--connections", str(count), "--timeout", timeout])
        scenario.wait_for_ready(peripheral)
        central = scenario.spawn("tracer_central.py", [
            "--transport", scenario.transport(0), "--rounds", str(count), "--timeout", timeout])
        central_rc, central_json = scenario.result(central, float(timeout) + 10)
        peripheral_rc, peripheral_json = scenario.result(peripheral, float(timeout) + 10)

    check(central_rc == 0, "rounds central failed", central_json)
    check(peripheral_rc == 0, "rounds peripheral failed", peripheral_json)
    check(len(central_json["round_total_ms"]) == count, "round count", central_json)
    check(peripheral_json["connections"] == count, "rounds peripheral connections", peripheral_json)
    check(len(peripheral_json["writes"]) == count, "rounds peripheral writes", peripheral_json)
    return {
        "median_ms": central_json["median_ms"],
        "median_exchange_ms": central_json["median_exchange_ms"],
        "median_phase_ms": central_json["median_phase_ms"],
        "round_total_ms": central_json["round_total_ms"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--python", default=os.environ.get("BUMBLE_PYTHON", str(DEFAULT_PYTHON)))
    arguments = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="tracer-selfcheck-"))
    summary = {"logs": str(logs), "single": happy_path(arguments.python, logs)}
    if arguments.rounds:
        summary["rounds"] = rounds(arguments.python, logs, arguments.rounds)
    summary["ok"] = True
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
