#!/usr/bin/env python3
"""A TCP proxy in front of the tests' object store (moto) that cuts or stalls connections part-way
through uploads, as a flaky network or a restarting load balancer does (ServerOutageTests).

    faulty_proxy.py TARGET_PORT

Listens on a free port of 127.0.0.1 and prints "READY <port>". Reads its mode from stdin, one
word a line, and exits when stdin closes:

    pass      forwards everything.
    cut       every PUT: forwards its head and half its body, then closes both sides (the store
              never gets it whole, the client sees its connection reset).
    flaky     PUTs in turn: cut as above; passed; answered by the store but the answer cut before
              it reaches the client (the object is stored, the client does not know); passed. The
              third PUT stalls besides: half its body is forwarded, then nothing more either way,
              the connection held open until the client gives up.

A mode taken is logged as "MODE <mode> <n>", n the last connection accepted before it.
Every connection is logged on stdout once it ends: "CONN <n> <METHOD> <path> <fault> <status>",
the status being the store's answer ("-" when it gave none), so a test can tell which uploads
were stored and in what order. Standard library only: it runs on moto's Python or any other.
"""
import asyncio
import sys

mode = "pass"
puts = 0
cycle = 0
connections = 0


def log(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def read_head(reader):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = await reader.read(65536)
        if not chunk:
            return head, b""
        head += chunk
    end = head.index(b"\r\n\r\n") + 4
    return head[:end], head[end:]


def content_length(head):
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


def fault_for(method):
    """The fault this connection gets, by the mode and the PUTs seen so far: in flaky mode no
    upload fails more than twice in a row (stall, drop, pass at worst), so a client that tries
    three times gets each through."""
    global puts, cycle
    if method != "PUT" or mode == "pass":
        return "pass"
    puts += 1
    if mode == "cut":
        return "cut"
    if puts == 3:
        return "stall"
    cycle += 1
    return ["cut", "pass", "drop", "pass"][(cycle - 1) % 4]


async def pump(reader, writer):
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def answer_status(reader, client_writer, forward):
    """Reads the store's answer; forwards it when `forward` (else only a 100 Continue). Returns
    its status."""
    data = b""
    status = "-"
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            data += chunk
            # An interim 100 Continue goes through: the client waits for it before its body.
            while data.startswith(b"HTTP/1.1 100") and b"\r\n\r\n" in data:
                end = data.index(b"\r\n\r\n") + 4
                client_writer.write(data[:end])
                await client_writer.drain()
                data = data[end:]
            if data.startswith(b"HTTP/") and b"\r\n" in data:
                status = data.split(b" ", 2)[1].decode()
                if not forward:
                    return status
            if forward and data and not data.startswith(b"HTTP/1.1 100"):
                client_writer.write(data)
                await client_writer.drain()
                data = b""
    except (ConnectionError, asyncio.CancelledError):
        pass
    return status


async def handle(client_reader, client_writer, target_port):
    global connections
    connections += 1
    number = connections
    head, rest = await read_head(client_reader)
    if not head:
        client_writer.close()
        return
    request_line = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    method, path = request_line[0], request_line[1] if len(request_line) > 1 else "?"
    fault = fault_for(method)
    upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target_port)
    status = "-"
    try:
        if fault in ("cut", "stall"):
            half = content_length(head) // 2
            body = rest
            while len(body) < half:
                chunk = await client_reader.read(65536)
                if not chunk:
                    break
                body += chunk
            # The head and half the body, the interim answer (if any) passed back meanwhile.
            upstream_writer.write(head + body[:half])
            await upstream_writer.drain()
            if fault == "stall":
                # Nothing more either way, until the client gives up and closes.
                while await client_reader.read(65536):
                    pass
        elif fault == "drop":
            upstream_writer.write(head + rest)
            await upstream_writer.drain()
            forwarding = asyncio.ensure_future(pump(client_reader, upstream_writer))
            status = await answer_status(upstream_reader, client_writer, forward=False)
            forwarding.cancel()
        else:
            upstream_writer.write(head + rest)
            await upstream_writer.drain()
            forwarding = asyncio.ensure_future(pump(client_reader, upstream_writer))
            status = await answer_status(upstream_reader, client_writer, forward=True)
            forwarding.cancel()
    except ConnectionError:
        pass
    finally:
        for writer in (client_writer, upstream_writer):
            try:
                if fault != "pass" and writer is client_writer:
                    # A reset, as a dropped connection looks to the client.
                    sock = writer.get_extra_info("socket")
                    if sock is not None:
                        import socket
                        import struct
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.close()
            except Exception:
                pass
        log("CONN %d %s %s %s %s" % (number, method, path, fault, status))


async def read_modes():
    global mode, puts, cycle
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        word = line.strip()
        if word in ("pass", "cut", "flaky"):
            mode, puts, cycle = word, 0, 0
            # With the number of the last connection accepted before: a connection accepted
            # earlier may end later, under the old mode's fault.
            log("MODE %s %d" % (word, connections))


async def main():
    target_port = int(sys.argv[1])
    server = await asyncio.start_server(lambda r, w: handle(r, w, target_port), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    log("READY %d" % port)
    async with server:
        await read_modes()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
