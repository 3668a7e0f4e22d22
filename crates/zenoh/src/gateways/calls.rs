//! Service calls between gateways, carried by mail (`mail.rs`): the calls
//! this gateway forwarded and waits on (outgoing), the calls other
//! gateways sent here and the bridge has not answered yet (incoming), and
//! the refusals Zenoh's threads made, which the loop sends.
//!
//! A call goes to one gateway that provides the service (the lowest Zenoh
//! id among them, so every caller picks the same one); its answer comes
//! back by mail to the caller's key. A call that gets no answer fails:
//! at once when the providing gateway leaves (its presence token goes),
//! else after [`CALL_TIMEOUT_SECS`].
//!
//! Invariants:
//! - every call forwarded ends in exactly one `service_response` for the
//!   bridge: its answer, its refusal, its gateway's departure or its
//!   deadline, whichever comes first takes it out of `outgoing`;
//! - `outgoing` holds at most [`MAX_CALLS_TO_GATEWAYS`] calls and
//!   `incoming` at most [`MAX_REMOTE_CALLS`]; past either a call fails or
//!   is refused at once;
//! - deadlines are kept in the order they were made (one timeout for all),
//!   so expiring is O(1) per call;
//! - nothing here blocks: a few map operations under a lock, and
//!   non-blocking sends to the loop (`inbox.rs`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rosgate_core::hash::SeqMap;
use rosgate_core::nodes::Domain;
use rosgate_peers::lines::failure_line;
use rosgate_peers::Inbox;
use rosgate_wire::Raw;

use crate::keys;
use rosgate_wire::mail::{Mail, Record, Status, Writer};

/// Calls from other gateways waiting for an answer here (and, counted
/// apart, goals: `remote.rs`); more are answered at once with an error.
pub const MAX_REMOTE_CALLS: usize = 4096;

/// Calls this gateway forwarded to other gateways and waits on; more fail
/// at once (the hub answers their callers).
pub const MAX_CALLS_TO_GATEWAYS: usize = 16_384;

/// Seconds a call forwarded to another gateway waits for its answer. The
/// caller's own deadline (`--call-timeout`, at most `--max-call-timeout`)
/// fails it for the client sooner; this one frees the entry.
pub const CALL_TIMEOUT_SECS: u64 = 300;

/// Refusals decided on Zenoh's threads and waiting for the loop to mail
/// them; past it a refusal is dropped (the caller's own deadline fails
/// its call).
pub const MAX_PENDING_REFUSALS: usize = 4096;

/// Records taken from one mail; the rest of it is ignored (a mail is at
/// most about [`rosgate_wire::mail::MAIL_BATCH_BYTES`] from a gateway; this
/// bounds what a hostile one makes us allocate per sample).
const MAX_RECORDS_PER_MAIL: usize = 4096;

/// A call the bridge makes of another gateway's service.
pub(crate) struct Forward<'a> {
    pub domain: Domain,
    pub service: &'a str,
    /// The JSON id the answer must carry.
    pub id: &'a str,
    pub args: &'a [u8],
}

/// What the loop gets for a call forwarded from here.
#[derive(Debug)]
pub(crate) enum Reply {
    /// The provider's answer: `values` (one valid JSON value) and `result`
    /// for the bridge's call `id` (`Bridges::remote_answer`).
    Answer {
        domain: Domain,
        id: String,
        values: String,
        result: bool,
    },
    /// A `service_response` line failing the call (`Bridges::remote_reply`).
    Failed(Domain, String),
}

impl Reply {
    pub(crate) fn deliver(self, hub: &mut rosgate_core::hub::Bridges<'_>, now: Instant) {
        match self {
            Reply::Answer {
                domain,
                id,
                values,
                result,
            } => hub.remote_answer(domain, &id, Raw::from_valid_json(&values), result, now),
            Reply::Failed(domain, line) => hub.remote_reply(domain, line.as_bytes(), now),
        }
    }
}

/// Calls (or answers) of one mail handed to the loop per job, so a job's
/// work stays within a turn's budget (`INBOX_TURN_WORK` in the `rosgate`
/// crate's `inbox.rs`) whatever a mail holds.
const RECORDS_PER_JOB: usize = 256;

#[derive(Debug)]
struct OutCall {
    domain: Domain,
    service: Arc<str>,
    /// The JSON id the bridge called with (its answer must carry it).
    id: String,
    gateway: Arc<str>,
}

#[derive(Debug, Default)]
struct Outgoing {
    calls: SeqMap<u64, OutCall>,
    /// (deadline, call number), oldest first; an entry whose call was
    /// answered is skipped when it comes up.
    deadlines: VecDeque<(Instant, u64)>,
    next: u64,
}

#[derive(Debug, Default)]
struct Incoming {
    /// The number the bridge calls with -> the calling gateway and its
    /// number for the call.
    calls: SeqMap<u64, (Arc<str>, u64)>,
    next: u64,
}

/// See the module docs.
pub(crate) struct Calls {
    zid: String,
    inbox: Arc<Inbox>,
    outgoing: Mutex<Outgoing>,
    incoming: Mutex<Incoming>,
    /// Answers Zenoh's threads decided (refusals), for the loop to send.
    refusals: Mutex<Vec<(Arc<str>, u64, String)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding it leaves plain maps behind.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Calls {
    pub(crate) fn new(zid: String, inbox: Arc<Inbox>) -> Calls {
        Calls {
            zid,
            inbox,
            outgoing: Mutex::new(Outgoing::default()),
            incoming: Mutex::new(Incoming::default()),
            refusals: Mutex::new(Vec::new()),
        }
    }

    /// Loop thread: the bridge calls `service` (call `id`), provided by
    /// `gateway`: written to `mail` (that gateway's), or false when too
    /// many calls wait already.
    pub(crate) fn forward(
        &self,
        mail: &mut Writer,
        gateway: &Arc<str>,
        call: Forward<'_>,
        now: Instant,
    ) -> bool {
        let Forward {
            domain,
            service,
            id,
            args,
        } = call;
        let mut o = lock(&self.outgoing);
        if o.calls.len() >= MAX_CALLS_TO_GATEWAYS {
            return false;
        }
        o.next += 1;
        let n = o.next;
        o.calls.insert(
            n,
            OutCall {
                domain,
                service: Arc::from(service),
                id: id.to_string(),
                gateway: gateway.clone(),
            },
        );
        o.deadlines
            .push_back((now + Duration::from_secs(CALL_TIMEOUT_SECS), n));
        drop(o);
        mail.call(&self.zid, domain, n, service, args);
        true
    }

    /// Loop thread: the bridge answered call `id`; the calling gateway and
    /// its number for the call, if `id` is a call of another gateway.
    pub(crate) fn take_incoming(&self, id: &str) -> Option<(Arc<str>, u64)> {
        let n = parse_call_id(id)?;
        lock(&self.incoming).calls.remove(&n)
    }

    /// Loop thread: refusals made on Zenoh's threads, to be mailed.
    pub(crate) fn take_refusals(&self) -> Vec<(Arc<str>, u64, String)> {
        std::mem::take(&mut *lock(&self.refusals))
    }

    /// Loop thread: the calls past their deadline fail (their lines for
    /// the hub, with their domains); when the next one is due.
    pub(crate) fn expire(&self, now: Instant) -> (Vec<Reply>, Option<Instant>) {
        let mut o = lock(&self.outgoing);
        let mut lines = Vec::new();
        while let Some(&(at, n)) = o.deadlines.front() {
            if at > now {
                return (lines, Some(at));
            }
            o.deadlines.pop_front();
            if let Some(c) = o.calls.remove(&n) {
                lines.push(Reply::Failed(
                    c.domain,
                    failure_line(
                        &c.service,
                        &c.id,
                        "the provider's gateway did not answer in time",
                    ),
                ));
            }
        }
        // Answered calls leave their deadlines behind: with none waiting,
        // drop those too (bounded by the calls made since).
        if o.calls.is_empty() {
            o.deadlines.clear();
        }
        (lines, None)
    }

    /// Zenoh's thread: `gateway` left; the calls waiting on it fail.
    pub(crate) fn gateway_left(&self, gateway: &str) {
        let mut o = lock(&self.outgoing);
        let gone: Vec<u64> = o
            .calls
            .iter()
            .filter(|(_, c)| &*c.gateway == gateway)
            .map(|(&n, _)| n)
            .collect();
        let lines: Vec<Reply> = gone
            .into_iter()
            .filter_map(|n| o.calls.remove(&n))
            .map(|c| {
                Reply::Failed(
                    c.domain,
                    failure_line(&c.service, &c.id, "the provider's gateway left"),
                )
            })
            .collect();
        drop(o);
        self.to_loop(lines);
    }

    /// Zenoh's thread: mail from another gateway. Calls go to the loop as
    /// calls of the bridge (all of one mail in one job); answers go to the
    /// loop as the bridge's `service_response`s.
    /// Only mail from a gateway whose presence token lives (`present`) is
    /// read, as graphs are (`remote.rs`), so who can make this gateway
    /// call, and whom it answers, is bounded by `MAX_GATEWAYS`.
    pub(crate) fn on_mail(
        &self,
        payload: &[u8],
        present: impl Fn(&str) -> bool,
        valid: impl Fn(&[u8]) -> Option<String>,
    ) {
        let Some(mail) = Mail::decode(payload, MAX_RECORDS_PER_MAIL) else {
            self.inbox.drop_one();
            return;
        };
        if !keys::is_zid(mail.sender) || mail.sender == self.zid || !present(mail.sender) {
            self.inbox.drop_one();
            return;
        }
        let sender: Arc<str> = Arc::from(mail.sender);
        let mut calls: Vec<(Domain, String, u64, String)> = Vec::new();
        let mut answers = Vec::new();
        let mut refused = Vec::new();
        for r in mail.records {
            match r {
                Record::Call {
                    domain,
                    n,
                    service,
                    args,
                } => {
                    let Some(args) = valid(args) else {
                        refused.push((sender.clone(), n, "arguments are not one valid JSON value"));
                        continue;
                    };
                    let mut inc = lock(&self.incoming);
                    if inc.calls.len() >= MAX_REMOTE_CALLS {
                        drop(inc);
                        refused.push((
                            sender.clone(),
                            n,
                            "the gateway has too many calls from other gateways in progress",
                        ));
                        continue;
                    }
                    inc.next += 1;
                    let mine = inc.next;
                    inc.calls.insert(mine, (sender.clone(), n));
                    drop(inc);
                    calls.push((domain, service.to_string(), mine, args));
                }
                Record::Answer { n, status, body } => {
                    let mut o = lock(&self.outgoing);
                    // Only the gateway the call went to answers it.
                    if o.calls.get(&n).is_none_or(|c| c.gateway != sender) {
                        continue;
                    }
                    let Some(c) = o.calls.remove(&n) else {
                        continue;
                    };
                    drop(o);
                    answers.push(reply(c, status, body, &valid));
                }
            }
        }
        while !calls.is_empty() {
            let rest = calls.split_off(calls.len().min(RECORDS_PER_JOB));
            let chunk = std::mem::replace(&mut calls, rest);
            let numbers: Vec<u64> = chunk.iter().map(|c| c.2).collect();
            let sent = self.inbox.send(move |hub, now| {
                for (domain, service, mine, args) in chunk {
                    hub.remote_call(
                        rosgate_core::bridge::PeerId::Gateways,
                        domain,
                        &service,
                        &call_id(mine),
                        Raw::from_valid_json(&args),
                        now,
                    );
                }
            });
            if !sent {
                let mut inc = lock(&self.incoming);
                for mine in numbers {
                    if let Some((gw, n)) = inc.calls.remove(&mine) {
                        refused.push((gw, n, "the provider's gateway is too busy"));
                    }
                }
            }
        }
        if !refused.is_empty() {
            let mut r = lock(&self.refusals);
            for (gw, n, why) in refused {
                if r.len() >= MAX_PENDING_REFUSALS {
                    self.inbox.drop_one();
                    continue;
                }
                r.push((gw, n, why.to_string()));
            }
            drop(r);
            self.inbox.wake();
        }
        self.to_loop(answers);
    }

    /// Hands `replies` (for the bridge's calls) to the loop, at most
    /// [`RECORDS_PER_JOB`] per job.
    fn to_loop(&self, mut replies: Vec<Reply>) {
        while !replies.is_empty() {
            let rest = replies.split_off(replies.len().min(RECORDS_PER_JOB));
            let chunk = std::mem::replace(&mut replies, rest);
            let n = chunk.len();
            if !self.inbox.send(move |hub, now| {
                for r in chunk {
                    r.deliver(hub, now);
                }
            }) {
                // The callers' own deadlines on this gateway still fail them.
                self.inbox.drop_n(n as u64);
            }
        }
    }

    /// Calls waiting here, both ways (for the status).
    pub(crate) fn in_flight(&self) -> (usize, usize) {
        (
            lock(&self.outgoing).calls.len(),
            lock(&self.incoming).calls.len(),
        )
    }
}

/// What the bridge gets for call `c` from its gateway's answer.
fn reply(
    c: OutCall,
    status: Status,
    body: &[u8],
    valid: &impl Fn(&[u8]) -> Option<String>,
) -> Reply {
    let result = match status {
        Status::Ok => true,
        Status::Failed => false,
        Status::Refused => {
            let why = String::from_utf8_lossy(body);
            return Reply::Failed(
                c.domain,
                failure_line(
                    &c.service,
                    &c.id,
                    &format!("the provider's gateway refused the call: {why}"),
                ),
            );
        }
    };
    match valid(body) {
        Some(values) => Reply::Answer {
            domain: c.domain,
            id: c.id,
            values,
            result,
        },
        None => Reply::Failed(
            c.domain,
            failure_line(
                &c.service,
                &c.id,
                "the provider's gateway sent an invalid answer",
            ),
        ),
    }
}

/// The id the bridge calls with for another gateway's call `n` (a JSON
/// string once the hub quotes it).
fn call_id(n: u64) -> String {
    format!("fc{n}")
}

fn parse_call_id(id: &str) -> Option<u64> {
    id.strip_prefix("\"fc")?.strip_suffix('"')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn calls(jobs: Arc<AtomicUsize>) -> Calls {
        let inbox = Inbox::new(Arc::new(move |_: crate::Job| {
            jobs.fetch_add(1, Ordering::Relaxed);
            true
        }));
        Calls::new("aa".into(), Arc::new(inbox))
    }

    fn fwd<'a>(domain: Domain, service: &'a str, id: &'a str, args: &'a [u8]) -> Forward<'a> {
        Forward {
            domain,
            service,
            id,
            args,
        }
    }

    fn valid(b: &[u8]) -> Option<String> {
        let s = std::str::from_utf8(b).ok()?;
        serde_json::from_str::<serde_json::Value>(s).ok()?;
        Some(s.to_string())
    }

    /// A forwarded call is answered once: by its gateway's answer, and
    /// neither a second answer nor another gateway's takes it again.
    #[test]
    fn a_call_is_answered_once_and_only_by_its_gateway() {
        let jobs = Arc::new(AtomicUsize::new(0));
        let c = calls(jobs.clone());
        let now = Instant::now();
        let gw: Arc<str> = Arc::from("bb");
        let mut mail = Writer::default();
        assert!(c.forward(&mut mail, &gw, fwd(0, "/add", "\"rg-1\"", b"{}"), now));
        let m = mail.take();
        let sent = Mail::decode(&m, 10).expect("mail");
        assert_eq!(sent.sender, "aa");
        let Record::Call { n, .. } = sent.records[0] else {
            panic!("a call");
        };
        let mut other = Writer::default();
        other.answer("cc", n, Status::Ok, b"{\"sum\":3}");
        c.on_mail(&other.take(), |_| true, valid);
        assert_eq!(jobs.load(Ordering::Relaxed), 0, "not from another gateway");
        let mut ans = Writer::default();
        ans.answer("bb", n, Status::Ok, b"{\"sum\":3}");
        let ans = ans.take();
        c.on_mail(&ans, |_| true, valid);
        assert_eq!(jobs.load(Ordering::Relaxed), 1);
        c.on_mail(&ans, |_| true, valid);
        assert_eq!(jobs.load(Ordering::Relaxed), 1, "answered once");
        assert_eq!(c.in_flight(), (0, 0));
    }

    /// A call with no answer fails at its deadline or when its gateway
    /// leaves, whichever is first; and once.
    #[test]
    fn unanswered_calls_fail_at_the_deadline_or_when_the_gateway_leaves() {
        let jobs = Arc::new(AtomicUsize::new(0));
        let c = calls(jobs.clone());
        let now = Instant::now();
        let (b, d): (Arc<str>, Arc<str>) = (Arc::from("bb"), Arc::from("dd"));
        let mut mail = Writer::default();
        assert!(c.forward(&mut mail, &b, fwd(0, "/s", "\"rg-1\"", b"1"), now));
        assert!(c.forward(&mut mail, &d, fwd(0, "/s", "\"rg-2\"", b"1"), now));
        c.gateway_left("bb");
        assert_eq!(jobs.load(Ordering::Relaxed), 1);
        assert_eq!(c.in_flight(), (1, 0));
        let (lines, next) = c.expire(now);
        assert!(lines.is_empty());
        let due = next.expect("a deadline");
        assert_eq!(due, now + Duration::from_secs(CALL_TIMEOUT_SECS));
        let (lines, next) = c.expire(due);
        assert_eq!(lines.len(), 1);
        assert!(
            matches!(&lines[0], Reply::Failed(0, l) if l.contains("\"rg-2\"")),
            "{:?}",
            lines[0]
        );
        assert!(next.is_none());
        assert_eq!(c.in_flight(), (0, 0));
    }

    /// Calls from another gateway reach the loop in one job; invalid
    /// arguments and a full table are refused, to be mailed back.
    #[test]
    fn incoming_calls_go_to_the_loop_and_bad_ones_are_refused() {
        let jobs = Arc::new(AtomicUsize::new(0));
        let c = calls(jobs.clone());
        let mut m = Writer::default();
        m.call("bb", 0, 1, "/s", b"{\"a\":1}");
        m.call("bb", 0, 2, "/s", b"{\"a\":");
        m.call("bb", 0, 3, "/s", b"[]");
        c.on_mail(&m.take(), |_| true, valid);
        // One job for the calls; the refusal's wake is a job too.
        assert_eq!(jobs.load(Ordering::Relaxed), 2);
        assert_eq!(c.in_flight(), (0, 2));
        let refusals = c.take_refusals();
        assert_eq!(refusals.len(), 1);
        assert_eq!((&*refusals[0].0, refusals[0].1), ("bb", 2));
        let (gw, n) = c.take_incoming("\"fc1\"").expect("call 1");
        assert_eq!((&*gw, n), ("bb", 1));
        assert!(c.take_incoming("\"fc1\"").is_none());
        assert!(c.take_incoming("\"rg-1\"").is_none());
        // Its own mail, a sender that is no Zenoh id, or one with no
        // presence token: dropped.
        let mut own = Writer::default();
        own.call("aa", 0, 9, "/s", b"1");
        c.on_mail(&own.take(), |_| true, valid);
        let mut bad = Writer::default();
        bad.call("not/an id", 0, 9, "/s", b"1");
        c.on_mail(&bad.take(), |_| true, valid);
        let mut absent = Writer::default();
        absent.call("bb", 0, 9, "/s", b"1");
        c.on_mail(&absent.take(), |gw| gw != "bb", valid);
        assert_eq!(c.in_flight(), (0, 1));
    }
}
