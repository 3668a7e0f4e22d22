"""providerchurn: service providers churn while callers call."""

from ..common import Gateway, QUICK, check_clean, finish_gateway, mono, stats
from ..load import ProviderChurn

DESCRIPTION = "service providers churn while callers call"
BUDGET_SECS = 400
BOUNDED = False


def run(r):
    calls = 300 if QUICK else 2500
    callers = 4
    gw = Gateway("providerchurn", ["--call-timeout-ms", "2000"])
    try:
        t0 = mono()
        pc = ProviderChurn(gw.port, "/churn_svc", callers, calls_per_caller=calls).start()
        done = pc.wait_callers(240)
        t = mono() - t0
        pc.stop()
        st = stats(gw.port)
        tot = pc.totals()
        r.fig(f"{callers} callers x {calls} calls in {t:.1f} s; {pc.providers} providers came and went, "
              f"answering {pc.provider_answers} calls, {pc.bogus_sent} bogus service_responses sent")
        r.fig(f"responses: {tot['responses']}/{tot['sent']} ok={tot['ok']} no_provider={tot['no_provider']} "
              f"provider_gone={tot['provider_gone']} unadvertised={tot['unadvertised']} timed_out={tot['timed_out']} "
              f"other={tot['other_fail']}; unanswered={tot['unanswered']} duplicate_or_unknown={tot['duplicate_or_unknown']} "
              f"misrouted={tot['misrouted']}; max latency {tot['max_latency'] * 1000:.0f} ms")
        r.fig(f"gateway: calls_forwarded={st['calls_forwarded']} calls_answered={st['calls_answered']} "
              f"responses_stale={st['responses_stale']} failed_no_provider={st['calls_failed_no_provider']} "
              f"failed_provider_gone={st['calls_failed_provider_gone']} timed_out={st['calls_timed_out']}")
        ok_clean, _, text = check_clean(gw.port)
        r.fig(text)
        r.check(done and not pc.errors, f"callers finished, no client errors {pc.errors[:3]}")
        r.check(tot["sent"] == callers * calls and tot["responses"] == tot["sent"] and tot["unanswered"] == 0,
                "every call got a response")
        r.check(tot["duplicate_or_unknown"] == 0, "no call got two responses")
        r.check(tot["misrouted"] == 0, "no response reached the wrong caller")
        r.check(tot["ok"] > 0 and tot["provider_gone"] + tot["unadvertised"] > 0, "both answers and provider losses happened")
        r.check(st["responses_stale"] >= pc.bogus_sent, "every bogus response was refused as stale")
        r.check(ok_clean, "no leak")
    finally:
        finish_gateway(r, gw)
