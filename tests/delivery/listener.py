"""A plain TCP listener that records every byte sent to it: where a hostile setting would send
patchit's requests (and the token in them). A test asserts it heard nothing."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Listener:
    url: str
    heard: list[bytes] = field(default_factory=list)


def _serve(server: socket.socket, listener: Listener, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            conn, _addr = server.accept()
        except TimeoutError:
            continue
        with conn:
            conn.settimeout(1.0)
            data = b""
            try:
                while chunk := conn.recv(65536):
                    data += chunk
                    if b"\r\n\r\n" in data:  # a request's head: enough to see a token
                        break
            except TimeoutError:
                pass
            listener.heard.append(data)


@contextmanager
def listening() -> Iterator[Listener]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.1)
    listener = Listener(f"http://127.0.0.1:{server.getsockname()[1]}")
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(server, listener, stop), daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        stop.set()
        thread.join(5)
        server.close()
