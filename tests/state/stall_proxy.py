"""A TCP proxy in front of a Postgres server that forwards the login and then stops answering:
a server or pooler that accepted a connection and stalled."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

READY_FOR_QUERY = b"Z\x00\x00\x00\x05"  # the server's last message of a login


@contextmanager
def stalling_proxy(host: str, port: int) -> Iterator[int]:
    """A local port whose connections reach `host:port` until the login is done, then hear
    nothing more; closed (and every connection with it) on exit."""
    listener = socket.create_server(("127.0.0.1", 0))
    sockets: list[socket.socket] = [listener]
    stop = threading.Event()

    def serve(client: socket.socket) -> None:
        upstream = socket.create_connection((host, port))
        sockets.append(upstream)
        logged_in = False
        while not stop.is_set() and not logged_in:
            ready, _, _ = select.select([client, upstream], [], [], 0.1)
            for side in ready:
                data = side.recv(65536)
                if not data:
                    return
                (upstream if side is client else client).sendall(data)
                logged_in = logged_in or (side is upstream and READY_FOR_QUERY in data)
        stop.wait()  # the login is through: from now on, silence

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            sockets.append(client)
            threading.Thread(target=serve, args=(client,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        for sock in sockets:
            sock.close()
