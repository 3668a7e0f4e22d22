"""The runner: `python3 -m stress [NAME...]` (scripts/stress.sh sets the
stage and runs this). Runs the named scenarios (all of them, in
`scenarios.ORDER`, when none are named), each under a watchdog, and ends
with `N passed, N failed`; the exit status is 0 only when all passed."""

import atexit
import os
import signal
import sys
import threading
import traceback

from . import scenarios
from .common import (
    ATTACKER_NICE, BIN, LOGDIR, QUICK, SOAK_SECS, Gateway, Report, attacker_priority, children, log, mono,
)


def watchdog(budget, name):
    def fire():
        log(f"  [FAIL] {name}: watchdog: still running after {budget:.0f} s; stopping")
        gw = Gateway.current
        if gw is not None:
            try:
                gw.proc.kill()
            except OSError:
                pass
        print(f"{name}: FAIL (watchdog)\n0 passed, 1 failed (aborted)", flush=True)
        os._exit(3)

    t = threading.Timer(budget, fire)
    t.daemon = True
    t.start()
    return t


def main(argv):
    known = scenarios.by_name()
    names = argv or list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        print(f"unknown scenario(s): {' '.join(unknown)}; choose from: {' '.join(known)}", file=sys.stderr)
        return 2
    if not os.access(BIN, os.X_OK):
        print(f"{BIN} not found: run `cargo build --release` (stress.sh does)", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    log(f"rosgate stress: {' '.join(names)}  (QUICK={int(QUICK)}, SOAK_SECS={SOAK_SECS:.0f}, logs in {LOGDIR})")
    passed = failed = 0
    for name in names:
        sc = known[name]
        budget = sc.BUDGET_SECS
        if budget is None:
            budget = SOAK_SECS + 300
        log(f"\n== {name}: {sc.DESCRIPTION}")
        if sc.BOUNDED:
            ok_nice = attacker_priority(True)
            log(f"  attackers at nice {ATTACKER_NICE}, gateway and probe at nice "
                + ("0" if ok_nice else f"{ATTACKER_NICE} too (no CAP_SYS_NICE: the probe may see CPU contention)"))
        r = Report(name)
        wd = watchdog(budget, name)
        t0 = mono()
        try:
            sc.run(r)
        except KeyboardInterrupt:
            r.check(False, "interrupted")
            wd.cancel()
            gw = Gateway.current
            if gw is not None:
                gw.stop()
            log(f"{name}: FAIL")
            failed += 1
            break
        except Exception as e:  # noqa: BLE001
            r.check(False, f"scenario raised {e!r}")
            traceback.print_exc()
            gw = Gateway.current
            if gw is not None:
                gw.stop()
        wd.cancel()
        if sc.BOUNDED:
            attacker_priority(False)
        ok = not r.failures and not getattr(r, "aborted", False)
        log(f"{name}: {'PASS' if ok else 'FAIL'} ({mono() - t0:.0f} s)")
        if ok:
            passed += 1
        else:
            failed += 1
    log(f"\n{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


def _kill_current_gateway():
    for p in children:
        if p.poll() is None:
            p.kill()
    gw = Gateway.current
    if gw is not None and gw.proc.poll() is None:
        gw.proc.kill()


if __name__ == "__main__":
    atexit.register(_kill_current_gateway)  # even if a scenario dies half-way
    sys.exit(main(sys.argv[1:]))
