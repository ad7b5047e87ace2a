"""The server's connection limits, each hit by a hostile client over real
sockets: a 10 GB Content-Length refused at once, oversized headers (431),
a slowloris client (headers trickled in: closed at --header-timeout), an
idle keep-alive connection (closed at --idle-timeout), a silent WebSocket
(pinged, then closed at --ws-ping-timeout), 10,000 idle connections (the
open count stays bounded and /health still answers) and a full house of
busy connections (503 too_many_connections)."""
import base64
import os
import resource
import socket
import time

import pytest


def recv_all(s, timeout):
    """Bytes until the server closes (b'' read) or `timeout`; (data, closed)."""
    s.settimeout(timeout)
    data = b""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return data, False
        except ConnectionResetError:
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


def health(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data, _ = recv_all(s, 10)
    return data


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture(scope="module")
def srv(start_server):
    return start_server("--header-timeout", 2, "--idle-timeout", 2, "--ws-ping-timeout", 2)


def test_ten_gigabyte_content_length_is_refused_at_once(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        t0 = time.time()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 10737418240\r\n\r\n")
        s.settimeout(5)
        head = s.recv(4096)
        elapsed = time.time() - t0
    assert head.startswith(b"HTTP/1.1 413"), head
    assert b"over the limit of" in head or b"request_too_large" in head
    assert elapsed < 2, f"413 took {elapsed:.1f} s"


def test_oversized_headers_are_431(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n")
        data, _ = recv_all(s, 5)
    assert data.startswith(b"HTTP/1.1 431"), data[:200]


def test_slowloris_is_closed_at_the_header_timeout(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        t0 = time.time()
        s.sendall(b"GET /health HTTP/1.1\r\n")
        closed = False
        for i in range(40):  # one header byte every 0.25 s: 10 s if never closed
            try:
                s.sendall(b"X-Slow-%d: y\r\n" % i if i % 8 == 0 else b"")
                s.settimeout(0.25)
                if s.recv(4096) == b"":
                    closed = True
                    break
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                break
        elapsed = time.time() - t0
    assert closed, "a slowloris client kept its connection for 10 s"
    assert 1.5 < elapsed < 5, f"closed after {elapsed:.1f} s, expected about 2 (--header-timeout)"


def test_idle_keep_alive_is_closed_at_the_idle_timeout(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(5)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        t0 = time.time()
        _, closed = recv_all(s, 8)
        elapsed = time.time() - t0
    assert closed
    assert 1.5 < elapsed < 5, f"closed after {elapsed:.1f} s, expected about 2 (--idle-timeout)"


def frame_opcodes(data):
    """The opcodes of the unmasked server frames in `data`."""
    ops, i = [], 0
    while i + 2 <= len(data):
        n = data[i + 1] & 0x7F
        ops.append(data[i] & 0x0F)
        i += 2
        if n == 126:
            n, i = int.from_bytes(data[i:i + 2], "big"), i + 2
        elif n == 127:
            n, i = int.from_bytes(data[i:i + 8], "big"), i + 8
        i += n
    return ops


def test_silent_websocket_is_closed_at_the_ping_timeout(srv):
    # A raw WebSocket client that completes the handshake and then never
    # answers anything, not even the server's ping.
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
        key = base64.b64encode(os.urandom(16))
        s.sendall(b"GET /v1/stream HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
        s.settimeout(5)
        assert s.recv(4096).startswith(b"HTTP/1.1 101")
        t0 = time.time()
        data, closed = recv_all(s, 10)
        elapsed = time.time() - t0
    assert closed, "a silent WebSocket stayed open for 10 s"
    # The hello text frame comes first, then the server's ping (opcode 9).
    assert 9 in frame_opcodes(data), f"expected a ping, got {data[:32]!r}"
    assert 1.5 < elapsed < 6, f"closed after {elapsed:.1f} s, expected about 2 (--ws-ping-timeout)"


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"needs {want} file descriptors; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def test_ten_thousand_idle_connections_stay_bounded(start_server):
    n, limit = 10000, 1024
    raise_fd_limit(n + 2000)  # before the server starts: it inherits the limit
    srv = start_server("--max-connections", limit)
    before = open_fds(srv.proc.pid)
    conns = []
    try:
        for _ in range(n):
            conns.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
        # Every connection is accepted, and the oldest idle ones are closed to
        # make room: the server holds about `limit`, not 10,000.
        deadline = time.time() + 30
        while time.time() < deadline and srv.metrics().get('troupe_open_connections{kind="http"}', 0) > limit + 1:
            time.sleep(0.2)
        t0 = time.time()
        reply = health(srv)
        elapsed = time.time() - t0
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
        assert elapsed < 5, f"/health took {elapsed:.1f} s"
        held = open_fds(srv.proc.pid) - before
        assert held <= limit + 16, f"the server holds {held} descriptors for {n} idle connections"
    finally:
        for c in conns:
            c.close()


def open_busy(port):
    """A connection in the middle of a request's headers."""
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    c.sendall(b"GET /health HTTP/1.1\r\n")
    return c


def closed_by_server(c):
    c.setblocking(False)
    try:
        return c.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        c.settimeout(10)


def test_busy_connections_at_the_limit_get_503(start_server):
    srv = start_server("--max-connections", 4, "--header-timeout", 30)
    busy = []
    try:
        # Four connections each in the middle of a request's headers: not idle.
        busy = [open_busy(srv.port) for _ in range(4)]
        # Until the server has accepted all four and read their first bytes
        # (under load that takes longer than any fixed sleep), a fifth client
        # gets in, by closing one the server still sees as idle (no byte read
        # yet): open a new busy one in its place and ask again.
        deadline = time.time() + 20
        reply = health(srv)
        while not reply.startswith(b"HTTP/1.1 503") and time.time() < deadline:
            time.sleep(0.1)
            for i, c in enumerate(busy):
                if closed_by_server(c):
                    c.close()
                    busy[i] = open_busy(srv.port)
            reply = health(srv)
        assert reply.startswith(b"HTTP/1.1 503"), reply[:200]
        assert b"too_many_connections" in reply and b"Retry-After: 1" in reply
        # One finishes its request and waits idle: the next client gets in.
        busy[0].sendall(b"Host: x\r\n\r\n")
        busy[0].settimeout(5)
        assert busy[0].recv(4096).startswith(b"HTTP/1.1 200")
        time.sleep(0.2)
        assert health(srv).startswith(b"HTTP/1.1 200")
    finally:
        for c in busy:
            c.close()
