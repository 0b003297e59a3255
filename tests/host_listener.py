"""A TCP listener on every address of this host, for tests that show a sandbox cannot reach it."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading

from waiting import wait_for


@contextlib.contextmanager
def listening():
    """(port, received): the first bytes each client sent, in arrival order."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.1)
    received, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    received.append(conn.recv(200).decode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], received
    finally:
        stop.set()
        thread.join()
        server.close()


def arrived(received, count, seconds=10.0):
    """The listener's messages once `count` have arrived (or those that had when the time was up)."""
    try:
        wait_for(lambda: len(received) >= count, seconds, f"{count} messages", interval=0.05)
    except AssertionError:
        pass
    return sorted(received)


def bridge_gateway(client):
    """The host's address on Docker's default bridge: what a container with networking reaches."""
    config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return config.get("Gateway") or str(next(ipaddress.ip_network(config["Subnet"]).hosts()))
