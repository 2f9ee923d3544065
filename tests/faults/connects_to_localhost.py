"""Fault: opens a TCP connection to 127.0.0.1 (port 9; the sandbox must stop it before it matters)."""
import socket


def kernel(self):
    with socket.create_connection(("127.0.0.1", 9), timeout=2) as conn:
        conn.sendall(b"hello")
    return self
