"""Stress scenarios for rosgate (run through scripts/stress.sh).

Not part of the default test suite. Everything talks to 127.0.0.1 only, every
scenario is bounded in connections, bytes and time, and each one starts its
own gateway (so the figures are independent) and stops it by PID at the end.

    scripts/stress.sh                       # every scenario, full size
    scripts/stress.sh conns10k churn        # a selection
    QUICK=1 scripts/stress.sh               # everything shortened (soak 30 s)
    SOAK_SECS=1200 scripts/stress.sh soak   # a longer soak
    PYTHONPATH=scripts python3 -m stress idle   # without stress.sh's set-up
                                                # (ulimit, release build, PID file)

Scenarios: conns10k churn slowsub longline fdlimit providerchurn soak, and
the bounded-memory-and-work attacks: partial bigids trickle nonreaders
statsburst wsids services subpairs unadvertise idleflood bignum shutdown
closecodes fanoutstart tlsflood authguess, and the answers that walk a
table: idle topicstats rosapiwalk nodechurn metrics goalsleave (each run
beside a probe process and judged against the bounds described in
bounded.py). Each prints its figures and PASS/FAIL; the run ends with
`N passed, N failed` and exits non-zero when anything failed.

The package, one file per concern:

    __main__.py      the runner: names -> scenarios, watchdog, the summary
    common.py        configuration, the gateway process, a line client, stats, Report
    ws.py            the WebSocket client (RFC 6455, client side)
    load.py          the first scenarios' loads, mixed again by the soak
    bounded.py       the bounded scenarios' frame: bounds, probe, newcomers, `Bounded`
    probe.py         the probe process (standalone, started by path)
    scenarios/       one file per scenario (see scenarios/__init__.py to add one)

Python 3.11 standard library only.
"""
