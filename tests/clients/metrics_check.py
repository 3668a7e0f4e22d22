#!/usr/bin/env python3
"""rosgate's /metrics read by the Prometheus project's own Python parser.

    metrics_check.py http://127.0.0.1:9090/metrics

Fetches the URL with urllib, parses the body with
prometheus_client.parser.text_string_to_metric_families (the parser that
client library ships, written by people who did not write rosgate), and
checks the families: types, the labelled close and error families, the
three histograms (buckets ascending, +Inf last, cumulative, _count equal to
the +Inf bucket), no duplicate series. Prints one summary line; exits 1 on
the first failed check.
"""

import math
import sys
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

HISTOGRAMS = (
    "rosgate_call_latency_seconds",
    "rosgate_goal_duration_seconds",
    "rosgate_connection_queued_bytes",
)
# A few members every rosgate has; the full list is checked against
# /rosgate/stats by the Rust tests (crates/server/tests/it/http.rs).
GAUGES = ("rosgate_connections_open", "rosgate_topics", "rosgate_memory_bytes")
COUNTERS = ("rosgate_connections_accepted", "rosgate_http_requests", "rosgate_published")
FAMILIES = {"rosgate_closes": "reason", "rosgate_errors": "code"}


def fail(msg):
    print("metrics_check: FAIL: %s" % msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    url = sys.argv[1]
    with urllib.request.urlopen(url, timeout=10) as r:
        status = r.status
        ctype = r.headers.get("Content-Type", "")
        body = r.read().decode("utf-8")
    check(status == 200, "status %s" % status)
    check(ctype.startswith("text/plain; version=0.0.4"), "content type %r" % ctype)

    families = {}
    for fam in text_string_to_metric_families(body):
        check(fam.name not in families, "family %s twice" % fam.name)
        families[fam.name] = fam
    check(families, "no families")

    series = set()
    samples = 0
    for fam in families.values():
        check(fam.name.startswith("rosgate_"), "unprefixed family %s" % fam.name)
        check(fam.type in ("counter", "gauge", "histogram"), "%s has type %s" % (fam.name, fam.type))
        check(fam.documentation, "%s has no help" % fam.name)
        check(fam.samples, "%s has no samples" % fam.name)
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            check(key not in series, "duplicate series %r" % (key,))
            series.add(key)
            samples += 1
            if fam.type == "counter":
                # The parser names counter families without _total and
                # keeps the suffix on the samples.
                check(s.name == fam.name + "_total", "counter sample %s in %s" % (s.name, fam.name))
                check(s.value >= 0 and math.isfinite(s.value), "%s = %s" % (s.name, s.value))
            elif fam.type == "gauge":
                check(s.name == fam.name and not s.labels, "gauge sample %s%s" % (s.name, s.labels))

    for name in GAUGES:
        check(name in families and families[name].type == "gauge", "gauge %s" % name)
    for name in COUNTERS:
        check(name in families and families[name].type == "counter", "counter %s" % name)
    check(families["rosgate_connections_open"].samples[0].value >= 1, "this request is a connection")
    check(families["rosgate_http_requests"].samples[0].value >= 1, "this request is counted")
    for name, label in FAMILIES.items():
        fam = families.get(name)
        check(fam is not None and fam.type == "counter", "labelled counter family %s" % name)
        members = [s.labels.get(label) for s in fam.samples]
        check(all(members) and all(len(s.labels) == 1 for s in fam.samples),
              "%s: every sample has exactly the label %s" % (name, label))
        check(len(set(members)) == len(members), "%s: a member twice" % name)
    check("peer_closed" in [s.labels["reason"] for s in families["rosgate_closes"].samples],
          "closes has peer_closed")

    for name in HISTOGRAMS:
        fam = families.get(name)
        check(fam is not None and fam.type == "histogram", "histogram %s" % name)
        buckets = [(float(s.labels["le"]), s.value) for s in fam.samples if s.name == name + "_bucket"]
        count = [s.value for s in fam.samples if s.name == name + "_count"]
        total = [s.value for s in fam.samples if s.name == name + "_sum"]
        check(buckets, "%s has buckets" % name)
        check(len(count) == 1 and len(total) == 1, "%s has one _count and one _sum" % name)
        bounds = [b for b, _ in buckets]
        check(bounds == sorted(set(bounds)), "%s: le ascending %s" % (name, bounds))
        check(bounds[-1] == math.inf, "%s: +Inf last" % name)
        counts = [c for _, c in buckets]
        check(all(a <= b for a, b in zip(counts, counts[1:])), "%s: cumulative %s" % (name, counts))
        check(count[0] == counts[-1], "%s: _count %s != +Inf %s" % (name, count[0], counts[-1]))
        check(total[0] >= 0, "%s: _sum %s" % (name, total[0]))
    # This request's own connection is open while the queue sizes are sampled.
    queued = [s.value for s in families["rosgate_connection_queued_bytes"].samples
              if s.name.endswith("_count")][0]
    check(queued >= 1, "queued bytes sampled")

    latency = [s.value for s in families["rosgate_call_latency_seconds"].samples
               if s.name.endswith("_count")][0]
    print("metrics_check: ok: %d families, %d samples, %d call latencies observed (%s)"
          % (len(families), samples, latency, url))


if __name__ == "__main__":
    main()
