"""A hostile HTTP server on a loopback port: it accepts, reads the request, then answers nothing at all
(``silent``) or a status line and headers followed by one byte every `interval` seconds, forever (``drip``).

    with DripServer("drip", interval=0.2) as server:
        ...  # call server.url; server.closed_after lists, per connection, how long until the client hung up
"""

from __future__ import annotations

import socket
import threading
import time


class DripServer:
    def __init__(self, mode: str = "drip", *, interval: float = 0.2):
        if mode not in ("drip", "silent"):
            raise ValueError(mode)
        self.mode, self.interval = mode, interval
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.requests: list[bytes] = []
        self.closed_after: list[float] = []  # seconds from accepting to the client's hang-up, per connection
        self._stop = threading.Event()

    def __enter__(self) -> DripServer:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self.listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        started = time.monotonic()
        connection.settimeout(self.interval)
        received, asked = b"", False
        with connection:
            while not self._stop.is_set():
                try:
                    chunk = connection.recv(65536)
                except TimeoutError:
                    chunk = None
                except OSError:
                    break
                if chunk == b"":
                    break  # the client hung up
                if chunk:
                    received += chunk
                    if not asked and b"\r\n\r\n" in received:
                        asked = True
                        self.requests.append(received)
                        if self.mode == "drip":
                            connection.sendall(HEADERS)
                elif asked and self.mode == "drip":
                    try:
                        connection.sendall(b" ")
                    except OSError:
                        break
        self.closed_after.append(time.monotonic() - started)


HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
