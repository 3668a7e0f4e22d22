#!/usr/bin/env python3
"""Issue 29's TF numbers: the gateway as tf2_web_republisher against the
raw alternative (every client subscribed to /tf). docs/performance.md,
"TF for the web (issue 29)", has the results and how to read them.

Standard library only. Every run starts its own gateway on ephemeral
loopback ports, talks TCP JSON lines to it (docs/protocol.md), and stops
everything it started (a deadline on every wait).

The load, per run:
  - one publisher connection: `tf2_msgs/msg/TFMessage` on /tf at --pub-hz
    (100) with --frames (200) transforms: world->base (fixed),
    base->mover and base->link_0..link_197; every stamp is the wall clock
    of the publish; each link's translation x is the publish time in
    seconds since the run's origin (so every link moves 1 cm per 10 ms,
    past any small threshold, and a client can read the publish time
    back from a composed transform); the mover stays still and jumps at
    random publishes (on average every --jump-ms, 230 ms, uncorrelated
    with the 100 ms ticks): its x is the publish time of its last jump;
  - mode `repub`: --clients (50) connections, each sending the ROS 2
    action goal `/tf2_web_republisher` (roslib's ROS2TFClient) for 20
    source frames (the mover and 19 links, different per client) in
    target `world` at rate --rate (10 Hz), thresholds 0.001 m / 0.001 rad;
  - mode `raw`: the same connections subscribed to /tf;
  - mode `none`: the publisher alone (the gateway's cost of /tf when no
    TF client exists: /tf is then not parsed).
A mode written `MODE:alt` runs the --alt gateway binary (a before/after in
the same interleaved run).
The clients are spread over --procs processes (4), which read every byte.

Measured over --secs (30) after --warmup (3) s, per run:
  - gateway CPU: utime+stime from /proc/PID/stat, % of one core;
  - bytes: read by the clients (all), and the gateway's bytes_out delta
    (/rosgate/stats, which also gives dropped, dropped_for_memory,
    depth_dropped, delivered);
  - latency, two kinds:
      change: from the publish of a change to the client's receipt of the
        update showing it. repub: the mover's jumps (each mover transform
        a client receives is a new jump; its x says when it was
        published). raw: every message is a change: receipt minus the
        first transform's stamp, on every message;
      age (repub only): receipt minus the publish time of the newest link
        pose in each feedback (how old the data a client draws is);
      tick (repub only): receipt minus the feedback's header stamp (the
        gateway's wall time at the tick): the delivery part;
  - clients' CPU (getrusage of each client process, summed, % of one
    core), and the publisher's messages sent against due.

  python3 scripts/tf-perf.py [--order repub,raw,repub,raw] [--secs 30] ...
prints a markdown table (also written to --out, target/tf-perf.md) and
every run's raw numbers as JSON lines (--out with .jsonl).
"""

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import resource
import selectors
import socket
import subprocess
import sys
import time

GOAL_TYPE = "tf2_web_republisher_interfaces/action/TFSubscription"
N_LINKS_PER_CLIENT = 19


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def line(obj):
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


# ------------------------------------------------------------------ gateway


class Gateway:
    def __init__(self, binary, workdir, extra):
        self.log_path = os.path.join(workdir, "gw.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0",
             "--foxglove-listen", "off", "--log-level", "warn"] + extra,
            stdout=subprocess.DEVNULL, stderr=self.log)
        self.port = None
        end = time.monotonic() + 10
        pat = re.compile(r"^rosgate .* listening on (?:tcp://)?[0-9.]+:([0-9]+)")
        while time.monotonic() < end and self.port is None:
            if self.proc.poll() is not None:
                break
            with open(self.log_path) as f:
                for ln in f:
                    m = pat.match(ln)
                    if m:
                        self.port = int(m.group(1))
                        break
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            with open(self.log_path) as f:
                sys.exit("tf-perf.py: the gateway did not start: " + f.read()[-500:])
        self.stats_sock = connect(self.port)
        self.stats_sock.settimeout(5)
        self.stats_buf = b""
        self.n = 0

    def cpu_secs(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # fields[0] is field 3 (state): utime is field 14, stime 15.
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stats(self):
        self.n += 1
        sid = f"st{self.n}"
        self.stats_sock.sendall(line({"op": "call_service", "service": "/rosgate/stats",
                                      "id": sid, "args": {}}))
        end = time.monotonic() + 5
        while time.monotonic() < end:
            while b"\n" in self.stats_buf:
                ln, self.stats_buf = self.stats_buf.split(b"\n", 1)
                m = json.loads(ln)
                if m.get("op") == "service_response" and m.get("id") == sid:
                    return m["values"]
            chunk = self.stats_sock.recv(1 << 16)
            if not chunk:
                break
            self.stats_buf += chunk
        sys.exit("tf-perf.py: no /rosgate/stats answer")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()


# ---------------------------------------------------------------- publisher


def publisher(port, frames, hz, jump_ms, origin_ns, stop_at, ready, out):
    # A punctual publisher on a busy host: its stalls would show as stale
    # data in the republisher's feedback ("age"), not as gateway cost.
    try:
        os.nice(-5)
    except OSError:
        pass
    s = connect(port)
    s.sendall(line({"op": "advertise", "topic": "/tf", "type": "tf2_msgs/msg/TFMessage"}))
    s.setblocking(False)
    n_links = frames - 2
    rnd = random.Random(29)
    jump_p = (1000.0 / hz) / jump_ms
    mover_x = 0.0
    rot = '"rotation":{"x":0.0,"y":0.0,"z":0.0,"w":1.0}}}'
    period = 1.0 / hz
    t0 = time.monotonic()
    sent = 0
    pending = b""
    behind = 0
    gaps = 0
    max_gap = 0.0
    last = None
    while time.time() < stop_at:
        due = t0 + sent * period
        now = time.monotonic()
        if now < due:
            time.sleep(min(due - now, 0.002))
            continue
        if now - due > period:
            behind += 1
        ns = time.time_ns()
        if last is not None:
            gap = (ns - last) / 1e9
            max_gap = max(max_gap, gap)
            gaps += gap > 2 * period
        last = ns
        x = (ns - origin_ns) / 1e9
        if rnd.random() < jump_p:
            mover_x = x
        st = f'{{"header":{{"stamp":{{"sec":{ns // 10**9},"nanosec":{ns % 10**9}}},"frame_id":'
        parts = [
            f'{st}"world"}},"child_frame_id":"base","transform":{{"translation":'
            f'{{"x":0.0,"y":0.5,"z":0.0}},{rot}',
            f'{st}"base"}},"child_frame_id":"mover","transform":{{"translation":'
            f'{{"x":{mover_x!r},"y":-1.0,"z":0.0}},{rot}',
        ]
        xs = repr(x)
        for i in range(n_links):
            parts.append(f'{st}"base"}},"child_frame_id":"link_{i}","transform":{{"translation":'
                         f'{{"x":{xs},"y":{i * 0.01:.2f},"z":0.0}},{rot}')
        msg = ('{"op":"publish","topic":"/tf","msg":{"transforms":['
               + ",".join(parts) + "]}}\n").encode()
        if sent == 0:
            out.put(("pub_line_bytes", len(msg)))
        pending += msg
        sent += 1
        try:
            k = s.send(pending)
            pending = pending[k:]
        except BlockingIOError:
            pass
        try:
            while s.recv(1 << 16):
                pass
        except (BlockingIOError, InterruptedError):
            pass
        if sent == 20:
            ready.set()
    s.setblocking(True)
    s.settimeout(5)
    if pending:
        s.sendall(pending)
    out.put(("pub", {"sent": sent, "secs": time.monotonic() - t0, "late": behind,
                  "gaps_over_2_periods": gaps, "max_gap_ms": round(max_gap * 1e3, 1)}))
    s.close()


# ------------------------------------------------------------------ clients


def percentiles(xs):
    if not xs:
        return {}
    xs = sorted(xs)

    def p(q):
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    return {"n": len(xs), "p50": p(0.5), "p90": p(0.9), "p99": p(0.99), "max": xs[-1]}


SEC_RE = re.compile(rb'"sec":(\d+),"nanosec":(\d+)')


def client_proc(port, mode, ids, n_links, rate, origin_ns, start_at, stop_at, out):
    sel = selectors.DefaultSelector()
    conns = {}
    for k in ids:
        s = connect(port)
        if mode == "repub":
            srcs = ["mover"] + [f"link_{(k * N_LINKS_PER_CLIENT + j) % n_links}"
                                for j in range(N_LINKS_PER_CLIENT)]
            s.sendall(line({"op": "send_action_goal", "id": f"g{k}",
                            "action": "/tf2_web_republisher", "action_type": GOAL_TYPE,
                            "feedback": True,
                            "args": {"source_frames": srcs, "target_frame": "world",
                                     "angular_thres": 0.001, "trans_thres": 0.001,
                                     "rate": rate}}))
        else:
            s.sendall(line({"op": "subscribe", "topic": "/tf",
                            "type": "tf2_msgs/msg/TFMessage"}))
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        conns[s] = bytearray()
    nbytes = 0
    nlines = 0
    other = 0
    change, age, tick = [], [], []
    r0 = None
    measuring = False
    while True:
        now_w = time.time()
        if now_w >= stop_at:
            break
        if not measuring and now_w >= start_at:
            measuring = True
            ru = resource.getrusage(resource.RUSAGE_SELF)
            r0 = ru.ru_utime + ru.ru_stime
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                chunk = s.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                continue
            t_ns = time.time_ns()
            if not chunk:
                sel.unregister(s)
                continue
            if measuring:
                nbytes += len(chunk)
            buf = conns[s]
            start = len(buf)
            buf += chunk
            pos = 0
            k = buf.find(b"\n", start)
            while k >= 0:
                if measuring:
                    nlines += 1
                    if mode == "raw":
                        m = SEC_RE.search(buf, pos, min(k, pos + 200))
                        if m:
                            change.append((t_ns - int(m.group(1)) * 10**9
                                           - int(m.group(2))) / 1e6)
                        else:
                            other += 1
                    else:
                        msg = json.loads(bytes(buf[pos:k]))
                        if msg.get("op") == "action_feedback":
                            tfs = msg["values"]["transforms"]
                            newest = None
                            for tr in tfs:
                                x = tr["transform"]["translation"]["x"]
                                pub_ns = origin_ns + x * 1e9
                                if tr["child_frame_id"] == "mover":
                                    change.append((t_ns - pub_ns) / 1e6)
                                elif newest is None or x > newest:
                                    newest = x
                            if newest is not None:
                                age.append((t_ns - origin_ns - newest * 1e9) / 1e6)
                            stp = tfs[0]["header"]["stamp"] if tfs else None
                            if stp:
                                tick.append((t_ns - stp["sec"] * 10**9 - stp["nanosec"]) / 1e6)
                        else:
                            other += 1
                pos = k + 1
                k = buf.find(b"\n", pos)
            del buf[:pos]
    ru = resource.getrusage(resource.RUSAGE_SELF)
    cpu = ru.ru_utime + ru.ru_stime - (r0 or 0)
    for s in conns:
        s.close()
    out.put(("client", {"bytes": nbytes, "lines": nlines, "other": other, "cpu": cpu,
                        "change": change, "age": age, "tick": tick}))


# --------------------------------------------------------------------- runs


def run(args, spec, workdir, index):
    mode, _, alt = spec.partition(":")
    binary = args.alt if alt else args.gateway
    if not os.access(binary, os.X_OK):
        sys.exit(f"tf-perf.py: {binary} is not an executable")
    gw = Gateway(binary, workdir, [])
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    ready = ctx.Event()
    procs = []
    try:
        origin_ns = time.time_ns()
        setup = 3.0
        start_at = time.time() + setup + args.warmup
        stop_at = start_at + args.secs
        pub = ctx.Process(target=publisher, args=(gw.port, args.frames, args.pub_hz,
                                                   args.jump_ms, origin_ns, stop_at + 0.5,
                                                   ready, out))
        pub.start()
        procs.append(pub)
        if not ready.wait(10):
            sys.exit("tf-perf.py: the publisher did not start")
        ids = list(range(args.clients))
        for p in range(args.procs if mode != "none" else 0):
            c = ctx.Process(target=client_proc,
                            args=(gw.port, mode, ids[p::args.procs], args.frames - 2,
                                  args.rate, origin_ns, start_at, stop_at, out))
            c.start()
            procs.append(c)
        time.sleep(max(0.0, start_at - time.time()))
        s0, c0, t0 = gw.stats(), gw.cpu_secs(), time.monotonic()
        load0 = os.getloadavg()
        perf = None
        if args.perf and spec in args.perf_modes.split(","):
            perf = subprocess.Popen(["perf", "record", "-F", "499", "--call-graph", "dwarf,16384", "-o",
                                     f"{args.perf}.{index}",
                                     "-p", str(gw.proc.pid), "--", "sleep",
                                     str(max(1, int(stop_at - time.time()) - 1))],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(max(0.0, stop_at - time.time()))
        if perf is not None:
            try:
                perf.wait(10)
            except subprocess.TimeoutExpired:
                perf.terminate()
                perf.wait(5)
        s1, c1, t1 = gw.stats(), gw.cpu_secs(), time.monotonic()
        load1 = os.getloadavg()
        results = {"client": [], "pub": None}
        end = time.monotonic() + 30
        want = args.procs if mode != "none" else 0
        while (len(results["client"]) < want or results["pub"] is None) \
                and time.monotonic() < end:
            try:
                kind, v = out.get(timeout=1)
            except Exception:
                continue
            if kind == "client":
                results["client"].append(v)
            elif kind == "pub":
                results["pub"] = v
            else:
                results[kind] = v
        for p in procs:
            p.join(5)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)
        gw.stop()
    secs = t1 - t0
    cl = results["client"]

    def delta(k):
        return s1.get(k, 0) - s0.get(k, 0)

    row = {
        "mode": spec,
        "binary": binary,
        "secs": round(secs, 2),
        "gw_cpu_pct": round(100 * (c1 - c0) / secs, 1),
        "clients_cpu_pct": round(100 * sum(c["cpu"] for c in cl) / args.secs, 1),
        "client_procs_reported": len(cl),
        "client_bytes_per_s": sum(c["bytes"] for c in cl) / args.secs,
        "client_lines_per_s": sum(c["lines"] for c in cl) / args.secs,
        "other_lines": sum(c["other"] for c in cl),
        "gw_bytes_out_per_s": delta("bytes_out") / secs,
        "gw_bytes_in_per_s": delta("bytes_in") / secs,
        "delivered": delta("delivered"),
        "dropped": delta("dropped"),
        "dropped_for_memory": delta("dropped_for_memory"),
        "depth_dropped": delta("depth_dropped"),
        "dropped_total_at_end": s1.get("dropped", 0),
        "closes_at_end": {k: v for k, v in s1.items() if k.startswith("closes.") and v},
        "memory_tf_bytes": s1.get("memory_tf_bytes"),
        "pub": results["pub"],
        "pub_line_bytes": results.get("pub_line_bytes"),
        "load": [round(x, 2) for x in load0 + load1],
        "change_ms": percentiles([x for c in cl for x in c["change"]]),
        "age_ms": percentiles([x for c in cl for x in c["age"]]),
        "tick_ms": percentiles([x for c in cl for x in c["tick"]]),
    }
    return row


def fmt_ms(p, k):
    return f"{p[k]:.1f}" if p else "n/a"


def table(rows):
    out = [
        "| run | mode | gateway CPU | clients CPU (procs) | bytes to clients/s | gateway bytes_out/s "
        "| lines/s | change p50 / p99 ms (n) | age p50 / p99 ms | tick->client p50 / p99 ms "
        "| dropped | pub sent / gaps > 20 ms (max ms) | load 1m (start, end) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for i, r in enumerate(rows, 1):
        ch, ag, tk = r["change_ms"], r["age_ms"], r["tick_ms"]
        pub = r["pub"] or {}
        out.append(
            f"| {i} | {r['mode']} | {r['gw_cpu_pct']}% | {r['clients_cpu_pct']}% "
            f"({r['client_procs_reported']}) | {r['client_bytes_per_s'] / 1e6:.2f} MB/s "
            f"| {r['gw_bytes_out_per_s'] / 1e6:.2f} MB/s | {r['client_lines_per_s']:.0f} "
            f"| {fmt_ms(ch, 'p50')} / {fmt_ms(ch, 'p99')} ({ch.get('n', 0)}) "
            f"| {fmt_ms(ag, 'p50')} / {fmt_ms(ag, 'p99')} "
            f"| {fmt_ms(tk, 'p50')} / {fmt_ms(tk, 'p99')} | {r['dropped']} "
            f"| {pub.get('sent', '?')} / {pub.get('gaps_over_2_periods', '?')} "
        f"({pub.get('max_gap_ms', '?')}) "
            f"| {r['load'][0]}, {r['load'][3]} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gateway", default=os.environ.get("ROSGATE_BIN", "target/release/rosgate"))
    ap.add_argument("--order", default="repub,raw,repub,raw")
    ap.add_argument("--secs", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--pub-hz", type=float, default=100)
    ap.add_argument("--rate", type=float, default=10)
    ap.add_argument("--jump-ms", type=float, default=230)
    ap.add_argument("--out", default="target/tf-perf.md")
    ap.add_argument("--alt", default="", help="the gateway of `MODE:alt` runs")
    ap.add_argument("--perf", default="",
                    help="perf record -g the gateway over the window of every run "
                         "listed in --perf-modes, into PERF.<run number>")
    ap.add_argument("--perf-modes", default="repub")
    args = ap.parse_args()
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if not os.access(args.gateway, os.X_OK):
        sys.exit(f"tf-perf.py: {args.gateway} missing: cargo build --release -p rosgate")
    workdir = os.path.join("target", "tf-perf")
    os.makedirs(workdir, exist_ok=True)
    rows = []
    jl = os.path.splitext(args.out)[0] + ".jsonl"
    with open(jl, "w") as f:
        for mode in args.order.split(","):
            print(f"tf-perf.py: run {len(rows) + 1}: {mode}, load {os.getloadavg()}",
                  file=sys.stderr)
            row = run(args, mode, workdir, len(rows) + 1)
            rows.append(row)
            f.write(json.dumps(row) + "\n")
            f.flush()
            print(json.dumps({k: row[k] for k in ("mode", "gw_cpu_pct", "clients_cpu_pct",
                                                  "client_bytes_per_s", "change_ms",
                                                  "dropped")}), file=sys.stderr)
    t = table(rows)
    with open(args.out, "w") as f:
        f.write(t + "\n")
    print(t)


if __name__ == "__main__":
    main()
