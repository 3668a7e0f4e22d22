"""One module per scenario. Each defines:

    DESCRIPTION   what it does, printed as `== NAME: DESCRIPTION` when it starts
    BUDGET_SECS   its watchdog in seconds (None: SOAK_SECS + 300)
    BOUNDED       whether its attackers run at nice 10 beside the gateway and the
                  probe (bounded.py); tlsflood and authguess set priorities themselves
    run(r)        the scenario: it starts its own gateway, fills the `Report` r
                  (common.py) and stops the gateway (`finish_gateway`)

A new scenario is a new file here plus its module in `ORDER`, the order
`scripts/stress.sh` runs them in when given no names (the soak last). Helpers
that only one scenario uses live in its file; shared ones in common.py,
ws.py, load.py or bounded.py.
"""

from . import (
    authguess, bigids, bignum, churn, closecodes, conns10k, fanoutstart, fdlimit, goalsleave, idle,
    idleflood, longline, metrics, nodechurn, nonreaders, partial, providerchurn, rosapiwalk,
    services, shutdown, slowsub, soak, statsburst, subpairs, tlsflood, topicstats, trickle,
    unadvertise, wsids, zenohflood, fakenodes,
)

ORDER = [
    conns10k,
    churn,
    slowsub,
    longline,
    fdlimit,
    providerchurn,
    partial,
    bigids,
    trickle,
    nonreaders,
    statsburst,
    wsids,
    services,
    subpairs,
    unadvertise,
    idleflood,
    bignum,
    shutdown,
    closecodes,
    fanoutstart,
    tlsflood,
    idle,
    topicstats,
    rosapiwalk,
    nodechurn,
    metrics,
    goalsleave,
    authguess,
    zenohflood,
    fakenodes,
    soak,
]


def by_name():
    """{name: module} in ORDER."""
    return {m.__name__.rsplit(".", 1)[1]: m for m in ORDER}
