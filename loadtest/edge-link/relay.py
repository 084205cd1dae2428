#!/usr/bin/env python3
"""A counting TCP relay: the edge link of loadtest/edge-link.sh.

  relay.py LISTEN_PORT TARGET_PORT OUT_FILE [MAX_SECONDS]

Listens on 127.0.0.1:LISTEN_PORT and relays every connection, byte for byte
(TLS passes through untouched), to 127.0.0.1:TARGET_PORT. Every second it
appends `unix_time down up` to OUT_FILE: the bytes relayed so far from the
target to the clients (the cloud-to-edge direction) and back. Stops by
itself after MAX_SECONDS (default 3600).
"""
import asyncio
import sys
import time

totals = {"down": 0, "up": 0}


async def pipe(reader, writer, direction):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            totals[direction] += len(data)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:  # noqa: BLE001 - the other side may be gone already
            pass


async def handle(client_reader, client_writer, target_port):
    try:
        target_reader, target_writer = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(
        pipe(client_reader, target_writer, "up"),
        pipe(target_reader, client_writer, "down"),
    )


async def report(out_file, max_seconds):
    start = time.time()
    with open(out_file, "a", buffering=1) as out:
        while time.time() - start < max_seconds:
            out.write(f"{time.time():.3f} {totals['down']} {totals['up']}\n")
            await asyncio.sleep(1)


async def main():
    listen_port, target_port, out_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    max_seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 3600
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, target_port), "127.0.0.1", listen_port
    )
    async with server:
        await report(out_file, max_seconds)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    asyncio.run(main())
