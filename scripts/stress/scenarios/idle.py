"""idle: no attack: the probe alone (the machine's noise floor)."""

import time

from ..bounded import ATTACK_MIN, Bounded, stall_check

DESCRIPTION = "no attack: the probe alone (the machine's noise floor)"
BUDGET_SECS = 120
BOUNDED = True


def run(r):
    """No attack: the probe alone, for the machine's noise floor (a busy
    machine delays the probe however idle the gateway is)."""
    b = Bounded(r, "idle", [])
    try:
        b.begin()
        time.sleep(ATTACK_MIN)
        b.quiet()
        b.leave()
        b.end(conns=5, opened=0)
        stall_check(r, b)
    finally:
        b.close()
