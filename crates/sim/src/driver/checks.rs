//! The invariants, checked against the hub's own tables and decisions:
//! - after every hub call (`accounting.rs`): what it queued, shed and
//!   closed, and the frames in the memory ledger;
//! - after every step ([`Sim::end_of_step`]): the gauges, the service and
//!   topic tables of every domain the simulation uses (the gauges sum
//!   them all) and every connection's indexes equal the model's, no
//!   open connection holds more control bytes than its limit, the memory
//!   ledger equals what the model says is held (frames, control, input,
//!   calls, registrations, per connection and in all) and the counters of
//!   closes, refusals, name and node errors and drops agree with the
//!   model's;
//! - parameters, after every step too: every domain's store (values,
//!   types, descriptors, holders) and the `parameters` gauge equal the
//!   model's, validations in flight count as calls of their requesters,
//!   and the parameters' bytes are in the ledger's registrations, those
//!   of owned nodes charged to their owning connection;
//! - nodes, names and domains, after every step too: each connection is
//!   in the domain the model says and resolves names when it should; the
//!   node table holds exactly the model's nodes (per connection in
//!   declaration order, per domain, their bytes); every registration is
//!   attributed to the node that made it (each topic's (connection, node)
//!   pairs, each service's node), so destroying a node withdrew exactly
//!   its registrations; and domains are isolated by construction: topic
//!   and service tables are compared domain by domain, a publish is
//!   queued only to subscribers of its domain and of its expanded name
//!   (the frame's exact bytes, counted by `delivered`), a call forwarded
//!   only to its domain's provider;
//! - whenever a client has read everything ([`Sim::check_quiescent`]):
//!   every line the model owes it arrived (publish frames shed were
//!   identified when they went, so every other one must arrive);
//! - for every connection freed: the hub and the model agree on why it
//!   closed, and a client that reads everything got its last words
//!   ([`Sim::check_last_words`]: the handshake refusal, the close frame
//!   echoed, the 1002, or the 1001 of a shutdown);
//! - at the end ([`Sim::finish`]): every call got its one response, and
//!   every table (every domain's registry, the node table) and the whole
//!   ledger are empty once everyone has left, but for the parameters the
//!   gateway holds (nobody's);
//!   after a shutdown, every connection left as soon as its output was
//!   written and the requests sent meanwhile were ignored.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rosgate_core::codes::ErrorCode;
use rosgate_core::counters::{Counter, Gauge, Gauges};
use rosgate_core::limits::TIMER_TICK_MS;
use rosgate_core::nodes::DOMAINS;
use rosgate_core::registry::{NodeTag, Provided, Role};
use rosgate_core::{CloseReason, ConnRef};

use super::{Sim, COUNTED_ERRORS};
use crate::actions::{Action, Req, MAX_CLIENTS, SIM_DOMAINS};
use crate::model::goals::{Fate, GoalResp, WaitModel};
use crate::model::{ReadMode, Services, ENTRY_BYTES};
use crate::violation::Violation;

fn conn_tuple(c: ConnRef) -> (u32, u32) {
    (c.key, c.gen)
}

/// The counters of actions, parameters and QoS the model keeps
/// ([`crate::model::Model::count`]).
const MODEL_COUNTERS: &[Counter] = &[
    Counter::FederationIn,
    Counter::GoalsSent,
    Counter::GoalsSucceeded,
    Counter::GoalsCanceled,
    Counter::GoalsAborted,
    Counter::GoalsFailedNoServer,
    Counter::GoalsFailedServerGone,
    Counter::GoalsFailedRefused,
    Counter::GoalsTimedOut,
    Counter::GoalsFailedShutdown,
    Counter::GoalsOrphaned,
    Counter::GoalResultsOrphaned,
    Counter::GoalCancels,
    Counter::FeedbackForwarded,
    Counter::FeedbackStale,
    Counter::ActionMessagesStale,
    Counter::CallsWaited,
    Counter::QosIncompatible,
    Counter::QosSkipped,
    Counter::LatchedDelivered,
    Counter::LatchEvicted,
    Counter::ThrottleDropped,
    Counter::ReliableWarnings,
    Counter::PeerNotifications,
    Counter::ParamsDeclared,
    Counter::ParamSetsAccepted,
    Counter::ParamSetsRejected,
    Counter::ParamValidations,
    Counter::ParamValidationsFailed,
    Counter::ParamEvents,
];

/// Subscribers and publishers of one topic.
type Members = (BTreeSet<(u32, u32)>, BTreeSet<(u32, u32)>);

impl Sim {
    /// Updates the model's stall and soft-limit clocks and checks the
    /// tables.
    pub(crate) fn end_of_step(&mut self) -> Result<(), Violation> {
        let at = self.offset;
        let max_control = self.limits.max_control_bytes;
        let soft = self.limits.control_soft_bytes;
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.model.clients[s].as_mut() else {
                continue;
            };
            let Some(q) = self.hub.out(c.conn.key) else {
                return Err(self.violation(format!("slot {s}: live client has no hub connection")));
            };
            let empty = q.is_empty();
            if c.wrote || (c.empty_at_start && !empty) {
                c.out_since = at;
            }
            let control = q.control_bytes();
            // Above the soft limit since the first push past it, unless a
            // write brought it down meanwhile.
            if control <= soft {
                c.soft_since = None;
            } else if c.soft_since.is_none() || c.soft_dipped {
                c.soft_since = Some(at);
            }
            if control > max_control {
                return Err(self.violation(format!(
                    "slot {s}: {control} control bytes queued (limit {max_control}) and still open"
                )));
            }
        }
        self.check_interest()?;
        self.check_tables()
    }

    /// The hub's tables equal the model's.
    pub(crate) fn check_tables(&self) -> Result<(), Violation> {
        // Read once: the gauges sum every domain's tables.
        let g = self.hub.inspect().gauges();
        self.check_gauges(&g)?;
        self.check_services()?;
        self.check_topics()?;
        self.check_conn_indexes()?;
        // Nodes first: the attribution pairs the hub's nodes with the
        // model's in declaration order.
        self.check_nodes(&g)?;
        self.check_attribution()?;
        self.check_qos()?;
        self.check_params(&g)?;
        self.check_ledger(&g)?;
        self.check_counters()
    }

    /// The full name of `who`'s node `tag`, as the hub has it (`None`:
    /// the connection itself).
    fn hub_node_label(&self, who: ConnRef, tag: NodeTag) -> Option<String> {
        if tag == NodeTag::CONN {
            return None;
        }
        let node = self
            .hub
            .inspect()
            .nodes()
            .get(tag)
            .filter(|n| n.owner() == who);
        Some(node.map_or_else(
            || format!("(no node {tag:?} of this connection)"),
            |n| n.full_name().to_string(),
        ))
    }

    /// The full name of `slot`'s node `uid` as the model has it (`None`:
    /// the connection itself).
    fn model_node_label(&self, slot: usize, uid: Option<u64>) -> Option<String> {
        uid.map(|u| self.model.client(slot).node_label(Some(u)))
    }

    /// Every declared node, per connection (in declaration order, the
    /// default node first) and per domain (in order of full name), with
    /// its owner, domain and bytes; each connection's domain and whether
    /// it resolves names.
    fn check_nodes(&self, g: &Gauges) -> Result<(), Violation> {
        let nodes = self.hub.inspect().nodes();
        let mut count = 0;
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let Some(hc) = self.hub.conn(c.conn.key) else {
                return Err(self.violation(format!("slot {s} missing from the hub")));
            };
            if (hc.domain(), hc.resolves()) != (c.domain, c.resolves) {
                return Err(self.violation(format!(
                    "slot {s} (domain, resolves names): hub {:?}, model {:?}",
                    (hc.domain(), hc.resolves()),
                    (c.domain, c.resolves)
                )));
            }
            count += c.nodes.len();
            let hub = nodes
                .of(c.conn)
                .iter()
                .map(|&k| nodes.get(NodeTag(k)))
                .map(|n| n.map(|n| (n.full_name(), n.domain(), n.owner() == c.conn)));
            let model = c
                .nodes
                .iter()
                .map(|n| Some((n.full.as_str(), c.domain, true)));
            if !hub.clone().eq(model.clone()) {
                return Err(self.violation(format!(
                    "slot {s} nodes (full name, domain, owned), the default first: hub {:?}, model {:?}",
                    hub.collect::<Vec<_>>(),
                    model.collect::<Vec<_>>()
                )));
            }
        }
        let gauge = g.get(Gauge::Nodes);
        if nodes.len() != count || gauge != count as u64 || nodes.bytes() != self.model.node_bytes()
        {
            return Err(self.violation(format!(
                "{} nodes ({gauge} by the gauge) holding {} bytes; the model has {count} holding {}",
                nodes.len(),
                nodes.bytes(),
                self.model.node_bytes()
            )));
        }
        // Each domain's listing (what introspection shows), when there is
        // anything to list.
        if count > 0 {
            for d in SIM_DOMAINS {
                let hub: Vec<&str> = nodes.in_domain(d).map(|(n, _)| n).collect();
                let mut model: Vec<&str> = self
                    .model
                    .live()
                    .filter(|c| c.domain == d)
                    .flat_map(|c| c.nodes.iter().map(|n| n.full.as_str()))
                    .collect();
                model.sort_unstable();
                if hub != model {
                    return Err(self
                        .violation(format!("nodes of domain {d}: hub {hub:?}, model {model:?}")));
                }
            }
        }
        // Domains with a client that completed its opening and is open.
        let mut domains: Vec<u8> = self
            .model
            .live()
            .filter(|c| c.established && c.is_open())
            .map(|c| c.domain)
            .collect();
        domains.sort_unstable();
        domains.dedup();
        let gauge = g.get(Gauge::Domains);
        if gauge != domains.len() as u64 {
            return Err(self.violation(format!(
                "the domains gauge is {gauge}, clients are in domains {domains:?}"
            )));
        }
        Ok(())
    }

    fn check_gauges(&self, g: &Gauges) -> Result<(), Violation> {
        let m = self.model.gauges();
        let h = [
            Gauge::ConnectionsOpen,
            Gauge::CallsPending,
            Gauge::Topics,
            Gauge::Subscriptions,
            Gauge::Publishers,
            Gauge::Services,
        ]
        .map(|x| g.get(x));
        if h != m
            || self.hub.conn_count() as u64 != m[0]
            || self.hub.inspect().calls().len() as u64 != m[1]
        {
            return Err(self.violation(format!(
                "gauges [conns, calls, topics, subs, pubs, services]: hub {h:?}, model {m:?}"
            )));
        }
        let goals = self.model.goals.iter().filter(|x| x.in_table()).count();
        let m = self.model.gauges_more();
        let h = [Gauge::Actions, Gauge::GoalsPending, Gauge::CallsWaiting].map(|x| g.get(x));
        if h != m || self.hub.inspect().calls().goal_count() != goals {
            return Err(self.violation(format!(
                "gauges [actions, goals, waiting]: hub {h:?}, model {m:?}"
            )));
        }
        let pending = self.model.live().filter(|c| !c.established).count() as u64;
        if g.get(Gauge::ConnectionsPending) != pending {
            return Err(self.violation(format!(
                "connections_pending is {}, {pending} clients have not completed their opening",
                g.get(Gauge::ConnectionsPending)
            )));
        }
        let mem = self.hub.memory();
        let ledger = [
            (Gauge::MemoryBytes, mem.total()),
            (Gauge::MemoryBudgetBytes, self.limits.max_memory_bytes),
            (Gauge::MemoryFramesBytes, mem.frames),
            (Gauge::MemoryEntriesBytes, mem.entries),
            (Gauge::MemoryControlBytes, mem.control),
            (Gauge::MemoryInputBytes, mem.input),
            (Gauge::MemoryCallsBytes, mem.calls),
            (Gauge::MemoryRegistrationsBytes, mem.registrations),
            (Gauge::MemoryFederationBytes, mem.federation),
            (Gauge::MemoryTfBytes, mem.tf),
        ];
        for (gauge, want) in ledger {
            if g.get(gauge) != want as u64 {
                return Err(self.violation(format!(
                    "gauge {} is {}, memory() says {want}",
                    gauge.label(),
                    g.get(gauge)
                )));
            }
        }
        Ok(())
    }

    /// The services of every domain the simulation uses, their providers
    /// and the node each provider advertised it for.
    fn check_services(&self) -> Result<(), Violation> {
        self.check_provided(Provided::Service, &self.model.services)?;
        self.check_provided(Provided::Action, &self.model.actions)
    }

    /// The services (or actions) of every domain the simulation uses, their
    /// providers and the node each provider advertised it for.
    fn check_provided(&self, kind: Provided, table: &Services) -> Result<(), Violation> {
        type Entry = ((u32, u32), Option<String>);
        let mut hub: BTreeMap<(u8, &str), Entry> = BTreeMap::new();
        for d in SIM_DOMAINS {
            let r = self.hub.inspect().registry_in(d);
            for n in r.provided_names(kind, true) {
                let Some(s) = r.provided(kind, n) else {
                    continue;
                };
                let node = self.hub_node_label(s.provider(), s.node());
                hub.insert((d, n), (conn_tuple(s.provider()), node));
            }
        }
        let model: BTreeMap<(u8, &str), Entry> = table
            .iter()
            .map(|((d, n), s)| {
                let node = match self.model.slot_of(s.provider) {
                    Some(k) => self.model_node_label(k, s.node),
                    None => Some("(provider gone)".into()),
                };
                ((*d, n.as_str()), (conn_tuple(s.provider), node))
            })
            .collect();
        if hub != model {
            return Err(self.violation(format!(
                "{kind:?}s by (domain, name), (provider, node): hub {hub:?}, model {model:?}"
            )));
        }
        Ok(())
    }

    /// The topics of every domain the simulation uses: subscribers and
    /// publishers, one pass over the model's clients.
    fn check_topics(&self) -> Result<(), Violation> {
        let mut model: BTreeMap<(u8, &str), Members> = BTreeMap::new();
        for c in self.model.live() {
            for (sub, regs) in [(true, &c.subs), (false, &c.pubs)] {
                for t in regs.keys() {
                    let m = model.entry((c.domain, t.as_str())).or_default();
                    let m = if sub { &mut m.0 } else { &mut m.1 };
                    m.insert(conn_tuple(c.conn));
                }
            }
        }
        let mut hub: BTreeMap<(u8, &str), Members> = BTreeMap::new();
        for d in SIM_DOMAINS {
            for t in self.hub.inspect().registry_in(d).topics() {
                let members = (
                    t.subscribers().iter().copied().map(conn_tuple).collect(),
                    t.publishers().iter().copied().map(conn_tuple).collect(),
                );
                hub.insert((d, t.name()), members);
            }
        }
        if hub != model {
            return Err(self.violation(format!(
                "topics by (domain, name): hub {hub:?}, model {model:?}"
            )));
        }
        Ok(())
    }

    /// Which node made each registration: for every declared node (and
    /// the connection itself) of a client that declared any, the topics
    /// it subscribes to and publishes and the services it provides. (A
    /// client without nodes has only its own keys, and a key the hub kept
    /// for a node that went shows in the per-connection key counts.)
    fn check_attribution(&self) -> Result<(), Violation> {
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c.as_ref().filter(|c| !c.nodes.is_empty()) else {
                continue;
            };
            let registry = self.hub.inspect().registry_in(c.domain);
            let tags = self
                .hub
                .inspect()
                .nodes()
                .of(c.conn)
                .iter()
                .map(|&k| NodeTag(k));
            let model_uids = c.nodes.iter().map(|n| Some(n.uid));
            for (tag, uid) in tags.chain([NodeTag::CONN]).zip(model_uids.chain([None])) {
                let mut hub = Vec::new();
                let mut model = Vec::new();
                for (role, regs) in [(Role::Subscriber, &c.subs), (Role::Publisher, &c.pubs)] {
                    let mut got = registry.topics_of(c.conn, Some(tag), role);
                    got.sort_unstable();
                    hub.push(got);
                    model.push(
                        regs.iter()
                            .filter(|(_, keys)| keys.iter().any(|(n, _)| *n == uid))
                            .map(|(t, _)| t.as_str())
                            .collect::<Vec<_>>(),
                    );
                }
                let mut got = registry.services_of(c.conn, Some(tag));
                got.sort_unstable();
                hub.push(got);
                model.push(
                    self.model
                        .services
                        .iter()
                        .filter(|(_, x)| x.provider == c.conn && x.node == uid)
                        .map(|((_, n), _)| n.as_str())
                        .collect(),
                );
                if hub != model {
                    let node = self.model_node_label(s, uid);
                    return Err(self.violation(format!(
                        "slot {s}, node {node:?} (its own when None): (subscribes, publishes, provides) hub {hub:?}, model {model:?}"
                    )));
                }
            }
        }
        Ok(())
    }

    /// What each connection holds and the calls naming it; whether it
    /// completed its opening.
    fn check_conn_indexes(&self) -> Result<(), Violation> {
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let Some(hc) = self.hub.conn(c.conn.key) else {
                return Err(self.violation(format!("slot {s} missing from the hub")));
            };
            let owned = self
                .model
                .services
                .values()
                .filter(|p| p.provider == c.conn)
                .count();
            let held = self.hub.inspect().registry_in(c.domain).held_by(c.conn);
            let hub = (
                held.subscriptions,
                held.advertisements,
                held.services,
                self.hub.inspect().calls().in_flight(c.conn),
                self.hub.inspect().calls().serving(c.conn),
                held.entries,
                hc.is_established(),
            );
            let model = (
                c.subs.len(),
                c.pubs.len(),
                owned,
                self.model.calls_made(c.conn),
                self.model.calls_served(c.conn),
                [c.entries(true), c.entries(false)],
                c.established,
            );
            if hc.gen() != c.conn.gen || !hc.is_open() || hub != model {
                return Err(self.violation(format!(
                    "slot {s} indexes (subs, pubs, services, calls made, calls served, registrations, opened): hub {hub:?}, model {model:?}"
                )));
            }
            let goals = &self.model.goals;
            let hub = (
                held.actions,
                self.hub.inspect().calls().goals_in_flight(c.conn),
                self.hub.inspect().calls().serving_goals(c.conn),
            );
            let model = (
                self.model
                    .actions
                    .values()
                    .filter(|p| p.provider == c.conn)
                    .count(),
                goals
                    .iter()
                    .filter(|g| g.caller == c.conn && g.fate == Fate::Alive)
                    .count(),
                goals
                    .iter()
                    .filter(|g| g.server == c.conn && g.in_table())
                    .count(),
            );
            if hub != model {
                return Err(self.violation(format!(
                    "slot {s} (actions, goals made, goals served): hub {hub:?}, model {model:?}"
                )));
            }
        }
        Ok(())
    }

    /// The memory ledger equals what the model says the hub holds: the
    /// distinct shared frames queued, what every queued topic entry costs,
    /// the control bytes queued, the partial
    /// input of each connection, the bytes of the calls each made and of
    /// the registrations each holds (`docs/limits.md`'s arithmetic), and
    /// `queued_bytes` is every queue's topic and control bytes.
    fn check_ledger(&self, g: &Gauges) -> Result<(), Violation> {
        let mem = self.hub.memory();
        let (mut control, mut queued, mut input, mut entries) = (0, 0, 0, 0);
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            let Some(hc) = self.hub.conn(c.conn.key) else {
                return Err(self.violation(format!("slot {s} missing from the hub")));
            };
            let q = hc.out();
            control += q.control_bytes();
            queued += q.control_bytes() + q.topic_bytes();
            input += c.held;
            entries += ENTRY_BYTES * c.exp.topic.len();
            if q.entry_bytes() != ENTRY_BYTES * c.exp.topic.len() {
                return Err(self.violation(format!(
                    "slot {s}: its topic entries cost {} bytes, the model queues {} frames",
                    q.entry_bytes(),
                    c.exp.topic.len()
                )));
            }
            // The frames queued, less what was written of a partly written
            // head (which the client holds): when what it holds could also
            // be the start of a control line, either.
            let full: usize = c.exp.topic.iter().map(|f| f.wire.len()).sum();
            let part = c.head_part();
            let head = c
                .exp
                .topic
                .front()
                .filter(|f| !part.is_empty() && f.wire.starts_with(&part));
            let ok =
                q.topic_bytes() == full || head.is_some() && q.topic_bytes() == full - part.len();
            if !ok {
                return Err(self.violation(format!(
                    "slot {s}: {} topic bytes queued, the model's {} frames hold {full} ({} received of the head)",
                    q.topic_bytes(),
                    c.exp.topic.len(),
                    part.len()
                )));
            }
            let mine = (
                hc.input_held(),
                self.hub.inspect().calls().bytes_of(c.conn),
                self.hub
                    .inspect()
                    .registry_in(c.domain)
                    .held_by(c.conn)
                    .bytes,
                self.hub.inspect().params_in(c.domain).owned_bytes(c.conn),
            );
            let want = (
                c.held,
                self.model.calls_bytes_of(c.conn),
                self.model.reg_bytes_of(s),
                self.model.params.owned_bytes(c.domain, c.conn),
            );
            if mine != want {
                return Err(self.violation(format!(
                    "slot {s} holds (partial input, calls, registrations, parameters) {mine:?} bytes, the model says {want:?}"
                )));
            }
        }
        let hub = (
            mem.frames,
            mem.entries,
            mem.control,
            mem.input,
            mem.calls,
            mem.registrations,
            g.get(Gauge::QueuedBytes) as usize,
        );
        let model = (
            self.model.frames_bytes,
            entries,
            control,
            input,
            self.model.calls_bytes(),
            self.model.reg_bytes(),
            queued,
        );
        let waiting: usize = self
            .model
            .waiting
            .iter()
            .filter(|w| w.alive)
            .map(WaitModel::bytes)
            .sum();
        if hub != model || self.hub.inspect().calls().bytes() + waiting != mem.calls {
            return Err(self.violation(format!(
                "memory (frames, entries, control, input, calls, registrations, queued_bytes): hub {hub:?}, model {model:?}"
            )));
        }
        Ok(())
    }

    /// The counters of what the model validated: closes by reason,
    /// refusals at the connection limit, the error kinds it keeps, topic
    /// frames shed for memory, calls failed by the shutdown.
    fn check_counters(&self) -> Result<(), Violation> {
        let st = self.hub.counters();
        for &r in CloseReason::ALL {
            if st.closes_of(r) != self.closes[r.index()] {
                return Err(self.violation(format!(
                    "closes.{} is {}, the model saw {}",
                    r.label(),
                    st.closes_of(r),
                    self.closes[r.index()]
                )));
            }
        }
        for code in COUNTED_ERRORS {
            if st.errors_of(code) != self.errors[code.index()] {
                return Err(self.violation(format!(
                    "errors.{} is {}, the model sent {}",
                    code.label(),
                    st.errors_of(code),
                    self.errors[code.index()]
                )));
            }
        }
        let pairs = [
            (
                Counter::ConnectionsRejected,
                self.counts.rejected_connections,
            ),
            (Counter::DroppedForMemory, self.counts.memory_shed_frames),
            (Counter::CallsFailedShutdown, self.failed_shutdown),
            (
                Counter::NamesRejected,
                self.errors[ErrorCode::InvalidName.index()],
            ),
        ];
        for &c in MODEL_COUNTERS {
            let want = self.model.counted[c.index()];
            if st.get(c) != want {
                return Err(self.violation(format!(
                    "{} is {}, the model counts {want}",
                    c.label(),
                    st.get(c)
                )));
            }
        }
        for (c, want) in pairs {
            if st.get(c) != want {
                return Err(self.violation(format!(
                    "{} is {}, the model says {want}",
                    c.label(),
                    st.get(c)
                )));
            }
        }
        Ok(())
    }

    /// The hub has no output for `slot`: every expected line arrived.
    pub(crate) fn check_quiescent(&mut self, slot: usize) -> Result<(), Violation> {
        let step = self.step_no;
        let c = self.model.client_mut(slot);
        let v = |what: String| Violation { step, what };
        if let Some(f) = c.exp.topic.front() {
            return Err(v(format!(
                "slot {slot} never got publish {} (and it was not shed)",
                String::from_utf8_lossy(&f.line)
            )));
        }
        if let Some(((id, level), n)) = c.exp.statuses.iter().next() {
            return Err(v(format!(
                "slot {slot} is missing {n} status(es) id={id} level={level:?}"
            )));
        }
        if c.exp.anon_error + c.exp.anon_warning + c.exp.anon_info > 0 {
            return Err(v(format!(
                "slot {slot} is missing {} error, {} warning and {} info statuses without id",
                c.exp.anon_error, c.exp.anon_warning, c.exp.anon_info
            )));
        }
        if let Some(k) = c.exp.forwards.front() {
            return Err(v(format!("slot {slot} never got forwarded {k:?}")));
        }
        if let Some(g) = c.exp.cancels.first() {
            return Err(v(format!("slot {slot} never got the cancel of goal {g}")));
        }
        if let Some((id, r)) = c
            .exp
            .goal_results
            .iter()
            .find(|(_, r)| !matches!(r, GoalResp::Pending(_) | GoalResp::Waiting(_)))
        {
            return Err(v(format!(
                "slot {slot} never got goal result id={id}: {r:?}"
            )));
        }
        if let Some(p) = c.exp.peers.front() {
            return Err(v(format!("slot {slot} never got peers {p:?}")));
        }
        if let Some((id, r)) = c.exp.responses.iter().find(|(_, r)| !r.unsettled()) {
            return Err(v(format!("slot {slot} never got response id={id}: {r:?}")));
        }
        if let Some(r) = c.exp.anon_responses.iter().find(|r| !r.unsettled()) {
            return Err(v(format!(
                "slot {slot} never got response without id: {r:?}"
            )));
        }
        if let Some(p) = c.exp.pongs.front() {
            return Err(v(format!("slot {slot} never got the pong for {p:?}")));
        }
        if let Some(w) = c.ws() {
            if w.hs_done && w.answer.is_some() {
                return Err(v(format!(
                    "slot {slot} never got an answer to its handshake ({:?})",
                    w.answer
                )));
            }
        }
        Ok(())
    }

    /// A client that reads everything and was just closed by the hub after
    /// a handshake refusal, a close frame, a protocol error or, at a
    /// shutdown, once its output was written, got that answer in full
    /// (the refusal, the close frame echoed, the 1002, the 1001), and
    /// nothing after it. Closes for other reasons owe nothing.
    pub(crate) fn check_last_words(
        &self,
        slot: usize,
        reason: CloseReason,
    ) -> Result<(), Violation> {
        let c = self.model.client(slot);
        let Some(w) = c.ws() else { return Ok(()) };
        let owed = match reason {
            CloseReason::ProtocolError => w.protocol_close,
            CloseReason::OriginRefused => w.origin_refused,
            CloseReason::PeerClosed | CloseReason::Shutdown => w.close.is_some(),
            _ => false,
        };
        if owed && (!w.done || !c.inbuf.is_empty()) {
            return Err(self.violation(format!(
                "slot {slot} closed ({reason:?}) without its last words (close frame {:?}, refusal {:?}, {} bytes left over)",
                w.close,
                w.answer,
                c.inbuf.len()
            )));
        }
        Ok(())
    }

    /// Lets everyone read, runs the clock past every deadline, checks that
    /// every call got its one response, then disconnects everyone and checks
    /// that every table is empty. After a shutdown, the drain instead:
    /// everyone must leave once its output is written.
    pub fn finish(&mut self) -> Result<(), Violation> {
        if self.model.draining {
            return self.finish_shutdown();
        }
        for c in self.model.clients.iter_mut().flatten() {
            c.mode = ReadMode::All;
        }
        self.settle()?;
        let jump = self.limits.max_call_timeout.max(self.limits.call_timeout)
            + Duration::from_millis(3 * TIMER_TICK_MS);
        self.offset += jump;
        self.step(&Action::Clock { v: 0 })?;
        self.step(&Action::Clock { v: 0 })?;
        self.check_all_answered()?;
        let now = self.now();
        for s in 0..MAX_CLIENTS {
            let Some(c) = self.model.clients[s].as_mut() else {
                continue;
            };
            c.closed_by_us = true;
            let key = c.conn.key;
            let pre = self.pre();
            self.hub.on_eof(key, now);
            self.after_call(super::accounting::Cause::Gone { slot: s }, pre)?;
        }
        self.free_phase()?;
        self.check_tables()?;
        self.check_empty()
    }

    /// The end of a run that shut down: two turns with the read modes as
    /// they are (who has output left stays, unless a deadline closes it),
    /// a request from every client (ignored: nothing may come of it), then
    /// everyone reads and must be gone once drained; the tables and the
    /// ledger are then empty.
    pub(crate) fn finish_shutdown(&mut self) -> Result<(), Violation> {
        for _ in 0..2 {
            self.step(&Action::Clock { v: 300 })?;
        }
        for s in 0..MAX_CLIENTS {
            if self.model.clients[s].is_none() {
                continue;
            }
            let req = Req::Call {
                service: 0,
                timeout: 0,
                args: 0,
                id: 1,
            };
            self.step(&Action::Send {
                slot: s as u8,
                style: 0,
                split: 0,
                req,
            })?;
        }
        for c in self.model.clients.iter_mut().flatten() {
            c.mode = ReadMode::All;
        }
        for _ in 0..8 {
            if self.model.live().next().is_none() {
                break;
            }
            self.step(&Action::Clock { v: 0 })?;
        }
        if let Some(s) = self.model.clients.iter().position(Option::is_some) {
            return Err(self.violation(format!(
                "slot {s} still open after reading everything during a shutdown"
            )));
        }
        if let Some(k) = self.model.calls.iter().position(|c| c.alive) {
            return Err(
                self.violation(format!("model call {k} still in flight after the shutdown"))
            );
        }
        self.check_tables()?;
        self.check_empty()
    }

    /// Output queued by frees is flushed on the next turn: a few empty
    /// turns until no queue holds anything.
    fn settle(&mut self) -> Result<(), Violation> {
        for _ in 0..8 {
            self.step(&Action::Clock { v: 0 })?;
            let busy = self
                .model
                .live()
                .any(|c| self.hub.out(c.conn.key).is_some_and(|q| !q.is_empty()));
            if !busy {
                break;
            }
        }
        Ok(())
    }

    /// After every deadline: no call in flight, no response owed, nothing
    /// half received.
    fn check_all_answered(&self) -> Result<(), Violation> {
        if let Some(w) = self.model.waiting.iter().position(|w| w.alive) {
            return Err(self.violation(format!(
                "request {w} still waits for a provider after every deadline"
            )));
        }
        if let Some(k) = self.model.calls.iter().position(|c| c.alive) {
            return Err(self.violation(format!(
                "model call {k} still in flight after every deadline"
            )));
        }
        for (s, c) in self.model.clients.iter().enumerate() {
            let Some(c) = c else { continue };
            if let Some((id, r)) = c.exp.responses.iter().next() {
                return Err(
                    self.violation(format!("slot {s}: call id={id} never answered ({r:?})"))
                );
            }
            if let Some(r) = c.exp.anon_responses.first() {
                return Err(self.violation(format!(
                    "slot {s}: a call without id never answered ({r:?})"
                )));
            }
            if !c.head_part().is_empty() {
                return Err(self.violation(format!(
                    "slot {s}: a partial line, frame or fragmented message is left"
                )));
            }
        }
        Ok(())
    }

    /// Every gauge and table is zero once everyone left, but for the
    /// parameters the gateway holds (nobody's: they outlive every client)
    /// and the bytes they count for.
    fn check_empty(&self) -> Result<(), Violation> {
        let g = self.hub.inspect().gauges();
        let (held, held_bytes) = self.model.params.held();
        // Every gauge but the budget (a setting, not state) is back to zero.
        let mut all: Vec<u64> = Gauge::ALL
            .iter()
            .filter(|&&x| x != Gauge::MemoryBudgetBytes)
            .map(|&x| match x {
                Gauge::Parameters => g.get(x) - held.min(g.get(x) as usize) as u64,
                Gauge::MemoryBytes | Gauge::MemoryRegistrationsBytes => {
                    g.get(x) - held_bytes.min(g.get(x) as usize) as u64
                }
                _ => g.get(x),
            })
            .collect();
        all.extend(
            [
                self.hub.conn_count(),
                self.hub.inspect().calls().len(),
                self.hub.inspect().nodes().len(),
                self.hub.inspect().nodes().bytes(),
            ]
            .map(|x| x as u64),
        );
        if all.iter().any(|&x| x != 0) {
            return Err(self.violation(format!("tables not empty after everyone left: {all:?}")));
        }
        for d in 0..DOMAINS {
            let r = self.hub.inspect().registry_in(d as u8);
            let left = [
                r.topic_count(),
                r.service_count(),
                r.bytes(),
                r.members().count(),
            ];
            if left.iter().any(|&x| x != 0) {
                return Err(self.violation(format!(
                    "domain {d}'s registry not empty after everyone left (topics, services, bytes, members): {left:?}"
                )));
            }
        }
        let mem = self.hub.memory();
        let held_ok = mem.total() == held_bytes
            && mem.registrations == held_bytes
            && g.get(Gauge::Parameters) == held as u64;
        if !held_ok || self.model.frames_bytes != 0 || !self.model.frames.is_empty() {
            return Err(self.violation(format!(
                "memory held after everyone left: {mem:?} (model frames {})",
                self.model.frames_bytes
            )));
        }
        Ok(())
    }
}
