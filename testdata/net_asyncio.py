# Python asyncio on the virtual network: a line-echo server
# (asyncio.start_server on 127.0.0.1:0) with 5 concurrent clients
# (asyncio.open_connection) sending 10 lines each; asyncio.wait_for timing
# out on a read nothing will answer; a UDP ping-pong between two datagram
# endpoints.  Per-client results print in a fixed order; the order in which
# the server saw the lines depends on the schedule (under detrun it is the
# same on every run with one seed).
import asyncio
import sys

CLIENTS = 5
LINES = 10


async def tcp_echo():
    seen = []

    async def handle(reader, writer):
        while True:
            line = await reader.readline()
            if not line:
                break
            seen.append(line.decode().strip())
            writer.write(line)
            await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]

    async def client(k):
        reader, writer = await asyncio.open_connection(host, port)
        got = 0
        nbytes = 0
        for j in range(LINES):
            msg = f"c{k}m{j}\n".encode()
            writer.write(msg)
            await writer.drain()
            echo = await reader.readline()
            if echo != msg:
                raise SystemExit(f"net_asyncio: client {k}: bad echo {echo!r}")
            got += 1
            nbytes += len(echo)
        writer.write_eof()
        rest = await reader.read()
        writer.close()
        await writer.wait_closed()
        return k, got, nbytes, len(rest)

    results = await asyncio.gather(*(client(k) for k in range(CLIENTS)))
    for k, got, nbytes, rest in results:
        print(f"client {k}: {got} echoes, {nbytes} bytes, {rest} after eof")

    # A read that never completes: the server accepts and stays silent.
    idle_conns = []

    async def silent(reader, writer):
        idle_conns.append(writer)

    quiet = await asyncio.start_server(silent, "127.0.0.1", 0)
    qport = quiet.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", qport)
    try:
        await asyncio.wait_for(reader.read(1), timeout=0.5)
        print("timeout FAILED: read returned")
    except asyncio.TimeoutError:
        print("timeout ok")
    writer.close()
    await writer.wait_closed()
    for w in idle_conns:
        w.close()
    quiet.close()
    await quiet.wait_closed()

    server.close()
    await server.wait_closed()
    print(f"server lines: {len(seen)}")
    print("server order: " + " ".join(seen))


class PongServer(asyncio.DatagramProtocol):
    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.transport.sendto(b"pong " + data, addr)


class PingClient(asyncio.DatagramProtocol):
    def __init__(self):
        self.queue = asyncio.Queue()

    def datagram_received(self, data, addr):
        self.queue.put_nowait(data)

    def error_received(self, exc):
        self.queue.put_nowait(exc)


async def udp_pingpong():
    loop = asyncio.get_running_loop()
    srv_t, _ = await loop.create_datagram_endpoint(
        PongServer, local_addr=("127.0.0.1", 0)
    )
    addr = srv_t.get_extra_info("sockname")
    cli_t, cli = await loop.create_datagram_endpoint(PingClient, remote_addr=addr)
    for i in range(5):
        cli_t.sendto(f"ping {i}".encode())
        reply = await asyncio.wait_for(cli.queue.get(), timeout=5)
        if isinstance(reply, Exception):
            raise SystemExit(f"net_asyncio: udp error {reply!r}")
        print("udp:", reply.decode())
    cli_t.close()
    srv_t.close()


async def main():
    await tcp_echo()
    await udp_pingpong()
    print("done")


asyncio.run(main())
sys.stdout.flush()
