"""The harness's port picker: children started together must never share a port."""

from __future__ import annotations

import socket

from tests.telemetry.promproc import free_port


def test_free_port_never_hands_out_a_port_twice() -> None:
    ports = [free_port() for _ in range(3000)]  # bind(0) alone repeats itself about 300 times in 3,000
    assert len(set(ports)) == len(ports)
    with socket.socket() as s:  # and each is free to bind
        s.bind(("127.0.0.1", ports[-1]))
