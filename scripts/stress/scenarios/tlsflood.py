"""tlsflood: bursts of 2000 ClientHellos at a --tls-cert gateway beside a TLS probe."""

import json
import os
import socket
import subprocess
import time

from ..bounded import PROBE_MAX, PROBE_P99, Probe, close_all, counters, mass_connect
from ..common import (
    Gateway, HOST, QUICK, answered, attacker_priority, finish_gateway, mono, ms, pct, raise_nofile,
)

DESCRIPTION = "bursts of 2000 ClientHellos at a --tls-cert gateway beside a TLS probe"
BUDGET_SECS = 300
BOUNDED = False


def tls_cert(dirname):
    """A self-signed certificate for localhost (openssl), made now: (cert, key)."""
    cert, key = os.path.join(dirname, "cert.pem"), os.path.join(dirname, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-addext", "basicConstraints=critical,CA:FALSE"], check=True, capture_output=True)
    return cert, key


def client_hello(cert):
    """The bytes of one TLS ClientHello for localhost (the same bytes may be
    sent on any number of connections: each costs the gateway a key
    exchange and a signature, the attacker nothing)."""
    import ssl
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl.create_default_context(cafile=cert).wrap_bio(inc, out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def tls_stats(port, cert):
    import ssl
    s = ssl.create_default_context(cafile=cert).wrap_socket(
        socket.create_connection((HOST, port), timeout=10), server_hostname="localhost")
    try:
        s.sendall(b'{"op":"call_service","service":"/rosgate/stats","id":"st","args":{}}\n')
        buf = b""
        while b"\n" not in buf:
            d = s.recv(65536)
            if not d:
                raise EOFError("stats: closed")
            buf += d
        return json.loads(buf.split(b"\n")[0])["values"]
    finally:
        s.close()


def run(r):
    """Crowds of ClientHellos at a gateway with --tls-cert, beside a TLS
    probe: each costs the gateway a key exchange and a signature (100-300
    µs), the attacker nothing (the same bytes on every connection, never
    finished). At most TLS_HANDSHAKES_PER_TURN server flights per loop
    turn, and connections still handshaking are passed over beyond that, so
    a burst is answered over many short turns and the probe's requests are
    read at once instead of behind the crowd."""
    import tempfile
    n = 500 if QUICK else 2000
    rounds = 2 if QUICK else 3
    limit = raise_nofile(n + 600)
    if limit < n + 300:
        r.check(False, f"client fd limit {limit} < {n + 300}: raise `ulimit -n` (stress.sh does)")
        return
    d = tempfile.mkdtemp(prefix="rosgate-stress-tls-")
    try:
        cert, key = tls_cert(d)
    except (OSError, subprocess.CalledProcessError) as e:
        r.check(False, f"openssl could not make a certificate: {e}")
        return
    hello = client_hello(cert)
    gw = Gateway("tlsflood", ["--tls-cert", cert, "--tls-key", key, "--handshake-timeout-ms", "5000"])
    probe = Probe(gw.port, "/probe-tlsflood", ca=cert)
    attacker_priority(True)
    try:
        time.sleep(0.5)
        t0 = mono()
        cpu0 = gw.cpu()
        figs, all_ok = [], True
        for i in range(rounds):
            t = mono()
            socks, failed = mass_connect(gw.port, n, hello=lambda _i: hello, window=n)
            got, last = answered(socks, 60)
            figs.append(f"{got}/{n} answered in {last - t:.2f} s ({failed} connect failures)")
            all_ok = all_ok and got == n
            close_all(socks)
            time.sleep(0.3)
        t1 = mono()
        cpu = gw.cpu() - cpu0
        time.sleep(0.3)
        probe.stop()
        rtts, fails = probe.window(t0, t1)
        p50, p99, mx = pct(rtts, 0.5), pct(rtts, 0.99), max(rtts, default=0.0)
        attacker_priority(False)
        st = tls_stats(gw.port, cert)
        r.fig(f"attack: {rounds} bursts of {n} ClientHellos sent at once: " + "; ".join(figs)
              + f"; gateway CPU {cpu:.2f} s ({1e6 * cpu / (rounds * n):.0f} us per hello)")
        r.fig(f"probe (TLS): {len(rtts)} round trips, p50 {ms(p50)} p99 {ms(p99)} max {ms(mx)}, "
              f"failures {len(fails)} {fails[:2]}")
        r.fig(counters(st, ["tls_handshakes", "tls_handshake_failures", "closes.tls_error",
                            "closes.peer_closed", "closes.handshake_timeout"]))
        r.check(all_ok, "every ClientHello answered")
        r.check(not fails and rtts and p99 < PROBE_P99 and mx < PROBE_MAX,
                f"probe p99 {ms(p99)} < 10 ms and max {ms(mx)} < 100 ms, no failure")
    finally:
        attacker_priority(False)
        if probe.proc.poll() is None:
            probe.stop()
        finish_gateway(r, gw)
        subprocess.run(["rm", "-rf", d])
