"""The WebSocket client of the scenarios (RFC 6455, client side): the
opening request, masked frames, server frames parsed, and a connection
(`WsConn`) and a reader thread (`WsReader`) on top. The Rust tests, the
CLI and the simulation share `rosgate_wire::ws::client`
(crates/wire/src/ws/client.rs); this is the harness's one Python copy."""

import base64
import hashlib
import json
import os
import socket
import threading

from .common import HOST, KiB, Rejected, mono, readable


WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def ws_key():
    return base64.b64encode(os.urandom(16))


def ws_request(key):
    return (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")


def ws_frame(op, payload=b"", fin=True):
    """A masked client frame."""
    if isinstance(payload, str):
        payload = payload.encode()
    mask = os.urandom(4)
    n = len(payload)
    head = bytearray([(0x80 if fin else 0) | op])
    if n < 126:
        head.append(0x80 | n)
    elif n < 65536:
        head.append(0x80 | 126)
        head += n.to_bytes(2, "big")
    else:
        head.append(0x80 | 127)
        head += n.to_bytes(8, "big")
    head += mask
    if n:
        m = (mask * (n // 4 + 1))[:n]
        payload = (int.from_bytes(payload, "big") ^ int.from_bytes(m, "big")).to_bytes(n, "big")
    return bytes(head) + payload


def ws_parse(buf):
    """Complete server frames at the start of buf: ([(opcode, payload)], bytes used)."""
    out = []
    pos = 0
    n = len(buf)
    while n - pos >= 2:
        b1 = buf[pos + 1]
        ln = b1 & 0x7F
        hdr = 2
        if ln == 126:
            if n - pos < 4:
                break
            ln = int.from_bytes(buf[pos + 2:pos + 4], "big")
            hdr = 4
        elif ln == 127:
            if n - pos < 10:
                break
            ln = int.from_bytes(buf[pos + 2:pos + 10], "big")
            hdr = 10
        if b1 & 0x80:
            raise ValueError("masked server frame")
        if n - pos < hdr + ln:
            break
        out.append((buf[pos] & 0x0F, bytes(buf[pos + hdr:pos + hdr + ln])))
        pos += hdr + ln
    return out, pos


class WsConn:
    """A blocking WebSocket client (RFC 6455, masked frames, no extensions)."""

    def __init__(self, port, timeout=10.0, rcvbuf=None):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        s.settimeout(timeout)
        try:
            s.connect((HOST, port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            key = ws_key()
            s.sendall(ws_request(key))
            buf = bytearray()
            deadline = mono() + timeout
            while b"\r\n\r\n" not in buf:
                s.settimeout(max(0.001, deadline - mono()))
                d = s.recv(4096)
                if not d:
                    raise EOFError(f"no upgrade response: {bytes(buf)[:200]!r}")
                buf += d
        except BaseException:
            s.close()
            raise
        end = buf.find(b"\r\n\r\n") + 4
        head = bytes(buf[:end])
        accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest())
        if not head.startswith(b"HTTP/1.1 101") or accept not in head:
            s.close()
            raise Rejected(f"upgrade refused: {head[:200]!r}")
        self.s = s
        self.buf = bytearray(buf[end:])
        self.frames = []
        self.eof = False

    def send_frame(self, op, payload=b"", fin=True):
        self.s.sendall(ws_frame(op, payload, fin))

    def send_text(self, obj):
        if not isinstance(obj, (str, bytes)):
            obj = json.dumps(obj, separators=(",", ":"))
        self.send_frame(0x1, obj)

    def _fill(self, timeout):
        # select() rather than a socket timeout, which would also apply to
        # a sender on another thread
        try:
            ready = readable(self.s, timeout)
        except (ValueError, OSError):  # closed
            self.eof = True
            return
        if not ready:
            raise TimeoutError("websocket read timed out")
        try:
            d = self.s.recv(256 * KiB)
        except (socket.timeout, BlockingIOError):
            return
        except (ConnectionResetError, BrokenPipeError, OSError):
            d = b""
        if not d:
            self.eof = True
        self.buf += d

    def frame(self, timeout=10.0):
        """The next server frame (opcode, payload); None at EOF."""
        deadline = mono() + timeout
        while not self.frames:
            got, used = ws_parse(self.buf)
            if used:
                del self.buf[:used]
                self.frames.extend(got)
                break
            if self.eof:
                return None
            left = deadline - mono()
            if left <= 0:
                raise TimeoutError("websocket read timed out")
            self._fill(left)
        return self.frames.pop(0)

    def json(self, timeout=10.0):
        f = self.frame(timeout)
        if f is None:
            raise EOFError("websocket closed by the gateway")
        if f[0] != 0x1:
            raise ValueError(f"text frame expected, got opcode {f[0]}")
        return json.loads(f[1])

    def wait_for(self, pred, timeout=10.0):
        deadline = mono() + timeout
        while True:
            o = self.json(max(0.0, deadline - mono()))
            if pred(o):
                return o

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass



class WsReader(threading.Thread):
    """Reads a WsConn's frames until EOF or stop, handing each to fn(op, payload)."""

    def __init__(self, ws, fn):
        super().__init__(daemon=True)
        self.ws, self.fn = ws, fn
        self.stop_evt = threading.Event()
        self.eof = False
        self.errors = []

    def run(self):
        ws = self.ws
        while not self.stop_evt.is_set():
            try:
                f = ws.frame(0.2)
            except TimeoutError:
                continue
            except Exception as e:  # noqa: BLE001
                self.errors.append(repr(e))
                return
            if f is None:
                self.eof = True
                return
            try:
                self.fn(*f)
            except Exception as e:  # noqa: BLE001
                if len(self.errors) < 5:
                    self.errors.append(repr(e))

    def stop(self):
        self.stop_evt.set()
        self.join(10)
        return self
