//! What Zenoh's threads learn, shared with the loop: which gateways are up,
//! which topics they want, and the samples they send (handed on as jobs).
//!
//! Invariants:
//! - callbacks never block: a lock held for a few map operations, a
//!   non-blocking send to the loop;
//! - a remote gateway's interest is kept per (domain, topic, gateway), so
//!   the hub hears of a topic once when the first gateway wants it and once
//!   when the last one stops (its token deleted, or its whole gateway lost);
//! - the tables are bounded ([`MAX_GATEWAYS`], [`MAX_REMOTE_INTEREST`]):
//!   beyond them, announcements are ignored and counted.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rosgate_core::nodes::Domain;
use rosgate_wire::decode::{self, Op, Request};
use rosgate_wire::Raw;
use zenoh::sample::{Sample, SampleKind};

use crate::{keys, Job, ToLoop, INBOX_BYTES};

/// Gateways. Other gateways remembered; more are ignored (and counted).
pub const MAX_GATEWAYS: usize = 1024;

/// (domain, topic, gateway) interest entries remembered; more are ignored
/// (and counted).
pub const MAX_REMOTE_INTEREST: usize = 65536;

#[derive(Debug, Default)]
struct Tables {
    /// Other gateways up, with when this one first saw them (Unix ms).
    gateways: BTreeMap<String, u64>,
    /// Topics other gateways want, and which gateways.
    interest: HashMap<(Domain, String), BTreeSet<String>>,
    entries: usize,
    /// Transitions the loop has not taken yet.
    changes: Vec<(Domain, String, bool)>,
    /// Gateways that came or went, ever.
    joined: u64,
    left: u64,
    ignored: u64,
}

/// See the module docs.
pub(crate) struct Shared {
    zid: String,
    to_loop: ToLoop,
    tables: Mutex<Tables>,
    changed: AtomicBool,
    pub(crate) pending_bytes: AtomicUsize,
    dropped: AtomicU64,
    received: AtomicU64,
    dropped_total: AtomicU64,
}

impl Shared {
    pub(crate) fn new(zid: String, to_loop: ToLoop) -> Shared {
        Shared {
            zid,
            to_loop,
            tables: Mutex::new(Tables::default()),
            changed: AtomicBool::new(false),
            pending_bytes: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            received: AtomicU64::new(0),
            dropped_total: AtomicU64::new(0),
        }
    }

    fn tables(&self) -> MutexGuard<'_, Tables> {
        // A panic elsewhere while holding it leaves plain maps behind.
        self.tables.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the loop for a change it takes in its next turn; a refused
    /// wake means the loop is busy (a full inbox) and will turn anyway.
    fn wake(&self) {
        self.changed.store(true, Ordering::Release);
        let _ = (self.to_loop)(Box::new(|_, _| {}));
    }

    /// A gateway's presence token came or went.
    pub(crate) fn on_gateway(&self, s: &Sample) {
        let Some(gw) = keys::gateway_of(s.key_expr().as_str()) else {
            return;
        };
        if gw == self.zid {
            return;
        }
        let mut t = self.tables();
        match s.kind() {
            SampleKind::Put => {
                if t.gateways.len() >= MAX_GATEWAYS {
                    t.ignored += 1;
                    return;
                }
                if !t.gateways.contains_key(gw) {
                    t.gateways.insert(gw.to_string(), unix_ms());
                    t.joined += 1;
                    rosgate_core::log!(Info, "federation: gateway {gw} joined");
                }
            }
            SampleKind::Delete => {
                if t.gateways.remove(gw).is_some() {
                    t.left += 1;
                    rosgate_core::log!(Info, "federation: gateway {gw} left");
                }
            }
        }
    }

    /// Another gateway's interest token for a topic came or went.
    pub(crate) fn on_interest(&self, s: &Sample) {
        let Some((domain, gw, topic)) = keys::interest_of(s.key_expr().as_str()) else {
            return;
        };
        if gw == self.zid {
            return;
        }
        let mut t = self.tables();
        let key = (domain, topic);
        let change = match s.kind() {
            SampleKind::Put => {
                if t.entries >= MAX_REMOTE_INTEREST {
                    t.ignored += 1;
                    return;
                }
                let set = t.interest.entry(key.clone()).or_default();
                let first = set.is_empty();
                let added = set.insert(gw);
                t.entries += usize::from(added);
                first && added
            }
            SampleKind::Delete => {
                let Some(set) = t.interest.get_mut(&key) else {
                    return;
                };
                let removed = set.remove(&gw);
                let last = removed && set.is_empty();
                if last {
                    t.interest.remove(&key);
                }
                t.entries -= usize::from(removed);
                last
            }
        };
        if change {
            let wanted = s.kind() == SampleKind::Put;
            t.changes.push((key.0, key.1, wanted));
            drop(t);
            self.wake();
        }
    }

    /// A sample of a topic this gateway wants: validated here, on Zenoh's
    /// thread, then handed to the loop.
    pub(crate) fn on_sample(self: &std::sync::Arc<Self>, domain: Domain, topic: &str, s: &Sample) {
        let payload = s.payload().to_bytes();
        let Some(msg) = valid_msg(&payload) else {
            self.drop_one();
            return;
        };
        let n = msg.len();
        if self.pending_bytes.fetch_add(n, Ordering::AcqRel) + n > INBOX_BYTES {
            self.pending_bytes.fetch_sub(n, Ordering::AcqRel);
            self.drop_one();
            return;
        }
        let me = self.clone();
        let topic = topic.to_string();
        let job: Job = Box::new(move |hub, now| {
            me.pending_bytes.fetch_sub(n, Ordering::AcqRel);
            hub.remote_publish(domain, &topic, Raw::from_valid_json(&msg), now);
        });
        if (self.to_loop)(job) {
            self.received.fetch_add(1, Ordering::Relaxed);
        } else {
            self.pending_bytes.fetch_sub(n, Ordering::AcqRel);
            self.drop_one();
        }
    }

    fn drop_one(&self) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        self.dropped_total.fetch_add(1, Ordering::Relaxed);
    }

    /// Interest transitions since the last call, in the order they came.
    pub(crate) fn take_changes(&self) -> Vec<(Domain, String, bool)> {
        if !self.changed.swap(false, Ordering::AcqRel) {
            return Vec::new();
        }
        std::mem::take(&mut self.tables().changes)
    }

    /// Samples dropped since the last call.
    pub(crate) fn take_dropped(&self) -> u64 {
        self.dropped.swap(0, Ordering::Relaxed)
    }

    /// The network side of `/rosgate/federation`.
    pub(crate) fn status_json(&self, wanted: usize) -> String {
        let t = self.tables();
        let gateways: Vec<serde_json::Value> = t
            .gateways
            .iter()
            .map(|(id, since)| serde_json::json!({"id": id, "since_ms": since}))
            .collect();
        serde_json::json!({
            "gateway": self.zid,
            "gateways": gateways,
            "topics_wanted_here": wanted,
            "remote_interest_entries": t.entries,
            "gateways_joined": t.joined,
            "gateways_left": t.left,
            "announcements_ignored": t.ignored,
            "samples_received": self.received.load(Ordering::Relaxed),
            "samples_dropped": self.dropped_total.load(Ordering::Relaxed),
            "inbox_bytes": self.pending_bytes.load(Ordering::Relaxed),
        })
        .to_string()
    }
}

/// `payload` as one JSON value the wire decoder accepts (the same checks
/// as a client's `msg`: UTF-8, depth, numbers), with raw CR and LF (JSON
/// whitespace) blanked so it cannot split an NDJSON line.
fn valid_msg(payload: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(payload).ok()?;
    let text: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let line = format!("{{\"op\":\"publish\",\"topic\":\"/x\",\"msg\":{text}}}");
    match decode::decode(line.as_bytes()) {
        Ok(Request {
            op: Op::Publish { msg, .. },
            ..
        }) if msg.get() == text => Some(text),
        _ => None,
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::valid_msg;

    #[test]
    fn only_one_valid_json_value_passes_and_line_breaks_are_blanked() {
        assert_eq!(
            valid_msg(br#"{"data":1}"#).as_deref(),
            Some(r#"{"data":1}"#)
        );
        assert_eq!(valid_msg(b"{\"a\":\n1}").as_deref(), Some("{\"a\": 1}"));
        for bad in [
            &b""[..],
            b"{",
            b"{\"a\":1}}",
            b"{\"a\":1},\"op\":\"x\"",
            b"\xff",
            b"{\"a\":1e999}",
        ] {
            assert_eq!(valid_msg(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
