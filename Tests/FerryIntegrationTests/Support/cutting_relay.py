"""A TCP relay that cuts its connections: every CUT bytes that clients send through it.

    python3 cutting_relay.py PORT TARGET_PORT CUT [reset | corrupt=N | hold=SECONDS]

Listens on 127.0.0.1:PORT and forwards each connection to 127.0.0.1:TARGET_PORT (given as
`@FILE`, the port is read from FILE when each connection comes: for a server started after the
relay, because it must name the relay as its origin). When the
bytes forwarded from clients to the target reach the next multiple of CUT (counted over all
connections), the relay forwards exactly up to it, then resets the client's connection and
closes the target's (so the target still reads every byte it was given; with `reset`, it
resets the target's connection too, as a network that fails both ways). With `corrupt=N`, the
byte at position N of what clients send (counted over all connections) reaches the target
changed, once: what a checksum must catch. With `hold=SECONDS`, each connection waits that
long before the relay connects it to the target (what the client sent meanwhile follows
then): a server whose handshake is slow. After each cut and each connection's end it prints
`forwarded N cuts K`: N is what the target was sent in all.
"""
import asyncio
import sys

port, cut = int(sys.argv[1]), int(sys.argv[3])
target_argument = sys.argv[2]
mode = sys.argv[4] if len(sys.argv) > 4 else ""
reset = mode == "reset"
corrupt_at = int(mode.split("=", 1)[1]) if mode.startswith("corrupt=") else -1
hold = float(mode.split("=", 1)[1]) if mode.startswith("hold=") else 0
state = {"forwarded": 0, "next": cut, "cuts": 0}


def corrupted(chunk):
    """`chunk` with the byte at `corrupt_at` flipped, if it falls in it (once)."""
    global corrupt_at
    start = state["forwarded"]
    if 0 <= corrupt_at - start < len(chunk):
        at = corrupt_at - start
        chunk = chunk[:at] + bytes([chunk[at] ^ 0xFF]) + chunk[at + 1:]
        corrupt_at = -1
        print(f"corrupted byte {start + at}", flush=True)
    return chunk


def report():
    print(f"forwarded {state['forwarded']} cuts {state['cuts']}", flush=True)


async def upstream(reader, writer, client_writer):
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            chunk = corrupted(chunk)
            room = state["next"] - state["forwarded"]
            if len(chunk) >= room:
                writer.write(chunk[:room])
                await writer.drain()
                state["forwarded"] += room
                state["next"] += cut
                state["cuts"] += 1
                client_writer.transport.abort()
                if reset:
                    writer.transport.abort()
                else:
                    writer.close()
                report()
                return
            writer.write(chunk)
            await writer.drain()
            state["forwarded"] += len(chunk)
    except (ConnectionError, OSError):
        pass
    try:
        writer.write_eof()
    except (ConnectionError, OSError, RuntimeError):
        pass


async def downstream(reader, writer):
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    writer.close()


def target():
    """The port to forward to."""
    if target_argument.startswith("@"):
        with open(target_argument[1:]) as file:
            return int(file.read())
    return int(target_argument)


async def relay(client_reader, client_writer):
    if hold:
        await asyncio.sleep(hold)
    try:
        target_reader, target_writer = await asyncio.open_connection("127.0.0.1", target())
    except (OSError, ValueError):
        client_writer.transport.abort()
        return
    await asyncio.gather(
        upstream(client_reader, target_writer, client_writer),
        downstream(target_reader, client_writer),
    )
    report()


async def main():
    server = await asyncio.start_server(relay, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


asyncio.run(main())
