//! The gateways peer: other rosgate gateways met in the same Zenoh session,
//! in rosgate's own key space (`keys.rs`), with the tables of what they
//! want and provide (`remote.rs`). See docs/federation.md.
//!
//! It owns this gateway's presence in the federation: its presence token,
//! the watchers of the others' tokens and graphs, its mailbox (calls and
//! answers from other gateways, `calls.rs`), a subscriber and an interest
//! token per topic local clients subscribe to, a provider token per service
//! (and a queryable per action) local clients offer, the mail and topic
//! runs of a loop turn, put at its end ([`Peer::flush`]), and the queries
//! that carry the bridge's goals to other gateways.
//!
//! Invariants:
//! - a topic is subscribed across gateways (one subscriber, one interest
//!   token) only while local clients subscribe to it;
//! - every call forwarded ends in one `service_response` (`calls.rs`) and
//!   every goal forwarded in one `action_result` (`GoalGuard`);
//! - what a turn gathered leaves in that turn, topic data before mail (a
//!   client's publishes before its call leave before the call), and a
//!   topic's messages in the order they came;
//! - this peer takes every call, goal, cancel and answer no other peer
//!   took: it is the last of [`crate::Federation`]'s peers.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rosgate_core::bridge::PeerId;
use rosgate_core::hub::Bridges;
use rosgate_core::hub::Offer;
use rosgate_core::nodes::Domain;
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, Query, QueryTarget, Reply};
use zenoh::sample::{Locality, Sample};
use zenoh::{Session, Wait};

use crate::worker::{Declared, Decls};
use crate::{GOAL_QUERY_TIMEOUT_HOURS, GRAPH_INTERVAL_MS, LATCHED_ATTACHMENT};
use mail::{Status, Writer};
use remote::{Change, Shared};
use rosgate_peers::Inbox;
use rosgate_peers::{Peer, Put};

pub mod calls;
pub mod keys;
pub use rosgate_wire::mail;
pub(crate) mod remote;

/// What this gateway declared (on the worker) for a topic its clients
/// subscribe to: the subscriber and the interest token, made together.
struct Wanted {
    _decl: Declared,
}

/// What this gateway declared (on the worker) for a service a local client
/// provides (a provider token), or an action a local client serves (a goal
/// queryable, the cancels' subscriber and a provider token).
struct Provided {
    _decl: Declared,
}

/// Sends an aborted result when a goal's query ends without one.
struct GoalGuard {
    shared: Arc<Shared>,
    domain: Domain,
    action: String,
    id: String,
    done: std::sync::atomic::AtomicBool,
}

impl GoalGuard {
    fn on(&self, reply: &Reply) {
        if !self.done.load(Ordering::Acquire)
            && self
                .shared
                .on_goal_reply(self.domain, &self.action, &self.id, Some(reply))
        {
            self.done.store(true, Ordering::Release);
        }
    }
}

impl Drop for GoalGuard {
    fn drop(&mut self) {
        if !self.done.swap(true, Ordering::AcqRel) {
            self.shared
                .on_goal_reply(self.domain, &self.action, &self.id, None);
        }
    }
}

/// Other gateways, as the loop thread sees them. See the module docs.
pub(crate) struct Gateways {
    session: Session,
    zid: String,
    shared: Arc<Shared>,
    /// The hand-off to the loop (`inbox.rs`).
    inbox: Arc<Inbox>,
    /// Every declaration goes through the worker (`worker.rs`), so the
    /// loop never waits for Zenoh's declaration locks.
    decls: Decls,
    /// The presence token and the four watchers, made at start-up and
    /// owned by the worker.
    _started: Declared,
    wanted: HashMap<(Domain, Rc<str>), Wanted>,
    provided: HashMap<(Offer, Domain, Rc<str>), Provided>,
    /// When this gateway last put its graph, the registrations' epoch
    /// then, and the domains it covered.
    last_graph: Option<Instant>,
    graph_epoch: u64,
    graph_domains: Vec<Domain>,
    /// This turn's mail (calls and answers), by receiving gateway; put at
    /// the end of the turn ([`Peer::flush`]), one sample per gateway.
    mail: HashMap<Arc<str>, Writer>,
    /// Which gateway each service's calls go to ([`Shared::gateway_for`]),
    /// remembered while the providers do not change (`called_epoch`,
    /// [`Shared::provider_epoch`]); at most
    /// [`remote::MAX_GATEWAYS`] services, then forgotten all at once.
    called: HashMap<Domain, HashMap<String, Option<Arc<str>>>>,
    called_epoch: u64,
    /// This turn's topic data, put at the end of the turn: runs of one
    /// topic's messages, in the order they came.
    topics_out: Vec<Batch>,
}

/// Messages of one topic put together as one sample: the messages joined
/// by `\n` (a bridge's `msg` is the value of one NDJSON line, so it holds
/// no raw line break; the receiver checks each piece anyway).
struct Batch {
    domain: Domain,
    topic: String,
    depth: Option<u32>,
    payload: Vec<u8>,
    count: u64,
}

impl Gateways {
    /// Announces this gateway and starts watching the others, their
    /// interest, their providers and their graphs.
    pub(crate) fn start(
        session: &Session,
        shared: Arc<Shared>,
        inbox: Arc<Inbox>,
        decls: Decls,
    ) -> Result<Gateways, String> {
        let zid = session.zid().to_string();
        let fail = |what: &str, e: zenoh::Error| format!("zenoh: cannot declare {what}: {e}");
        let presence = session
            .liveliness()
            .declare_token(keys::gateway_key(&zid))
            .wait()
            .map_err(|e| fail("this gateway's token", e))?;
        let sh = shared.clone();
        let gateways = session
            .liveliness()
            .declare_subscriber(keys::GATEWAYS_ALL)
            .history(true)
            .callback(move |s: Sample| sh.on_gateway(&s))
            .wait()
            .map_err(|e| fail("the gateway watcher", e))?;
        let sh = shared.clone();
        let interest = session
            .liveliness()
            .declare_subscriber(keys::INTEREST_ALL)
            .history(true)
            .callback(move |s: Sample| sh.on_interest(&s))
            .wait()
            .map_err(|e| fail("the interest watcher", e))?;
        let sh = shared.clone();
        let providers = session
            .liveliness()
            .declare_subscriber(keys::PROVIDERS_ALL)
            .history(true)
            .callback(move |s: Sample| sh.on_provider(&s))
            .wait()
            .map_err(|e| fail("the provider watcher", e))?;
        let sh = shared.clone();
        let graphs = session
            .declare_subscriber(keys::GRAPHS_ALL)
            .allowed_origin(Locality::Remote)
            .callback(move |s: Sample| sh.on_graph(&s))
            .wait()
            .map_err(|e| fail("the graph watcher", e))?;
        let sh = shared.clone();
        let mailbox = session
            .declare_subscriber(keys::mail_key(&zid))
            .allowed_origin(Locality::Remote)
            .callback(move |s: Sample| sh.on_mail(&s))
            .wait()
            .map_err(|e| fail("the mailbox", e))?;
        let started = decls.adopt(
            "federation: this gateway's token, watchers and mailbox",
            (presence, gateways, interest, providers, graphs, mailbox),
        );
        Ok(Gateways {
            session: session.clone(),
            zid,
            shared,
            inbox,
            decls,
            _started: started,
            wanted: HashMap::new(),
            provided: HashMap::new(),
            last_graph: None,
            graph_epoch: u64::MAX,
            graph_domains: Vec::new(),
            mail: HashMap::new(),
            called: HashMap::new(),
            called_epoch: u64::MAX,
            topics_out: Vec::new(),
        })
    }

    /// Puts this gateway's graph of each domain it has anything in, at
    /// most every [`crate::GRAPH_INTERVAL_MS`], when it may have changed or a
    /// gateway joined; a domain emptied gets an empty graph once. Returns
    /// when it wants the next turn at the latest (a change held back for
    /// the interval).
    fn announce_graph(&mut self, hub: &Bridges<'_>, now: Instant) -> Option<Instant> {
        let (domains, epoch) = hub.graph_state();
        let changed = epoch != self.graph_epoch || domains != self.graph_domains;
        if let Some(last) = self.last_graph {
            let due = last + std::time::Duration::from_millis(GRAPH_INTERVAL_MS as u64);
            if now < due {
                let joined = self.shared.republish.load(Ordering::Acquire);
                return (changed || joined).then_some(due);
            }
        }
        let joined = self.shared.republish.swap(false, Ordering::AcqRel);
        if !joined && !changed {
            return None;
        }
        self.last_graph = Some(now);
        self.graph_epoch = epoch;
        // Put on the worker, in order: a put waits for Zenoh's routing
        // tables, which a peer's departure holds for seconds (about 5 s in
        // `scripts/stress.sh fakenodes`, the loop sampled in this put);
        // an announcement at most every GRAPH_INTERVAL_MS is no hot path.
        let mut puts: Vec<(String, String)> = Vec::new();
        for &d in &domains {
            puts.push((keys::graph_key(d, &self.zid), hub.local_graph(d)));
        }
        for &d in self.graph_domains.iter().filter(|d| !domains.contains(d)) {
            puts.push((keys::graph_key(d, &self.zid), "{}".into()));
        }
        let queued = self.decls.run(move |session: &Session| {
            for (k, v) in puts {
                let _ = session
                    .put(k, v)
                    .allowed_destination(Locality::Remote)
                    .wait();
            }
        });
        if !queued {
            // The worker's queue is full: announce again next interval.
            self.graph_epoch = u64::MAX;
        }
        self.graph_domains = domains;
        None
    }

    /// Declares the subscriber and the interest token for a topic local
    /// clients subscribe to.
    fn want(&mut self, domain: Domain, topic: Rc<str>) {
        let key = keys::topic_key(domain, &topic);
        let token = keys::interest_key(domain, &self.zid, &topic);
        let name: Arc<str> = Arc::from(&*topic);
        let sh = self.shared.clone();
        let decl = self.decls.declare(
            format!("federation: cannot subscribe to {topic} across gateways"),
            move |session: &Session| {
                let data = session
                    .declare_subscriber(key)
                    // This gateway's own puts were delivered locally already.
                    .allowed_origin(Locality::Remote)
                    .callback(move |s: Sample| sh.on_sample(domain, &name, &s))
                    .wait()?;
                let token = session.liveliness().declare_token(token).wait()?;
                Ok((data, token))
            },
        );
        self.wanted.insert((domain, topic), Wanted { _decl: decl });
    }

    /// Declares the provider token for a service a local client provides:
    /// other gateways' calls of it come by mail (`calls.rs`).
    fn provide(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        let token = keys::provider_key(
            rosgate_core::registry::Provided::Service,
            domain,
            &self.zid,
            ty,
            &name,
        );
        let decl = self.decls.declare(
            format!("federation: cannot offer service {name} to other gateways"),
            move |session: &Session| session.liveliness().declare_token(token).wait(),
        );
        self.provided
            .insert((Offer::Service, domain, name), Provided { _decl: decl });
    }

    /// Declares the goal queryable, the cancel subscriber and the provider
    /// token for an action a local client serves.
    fn serve(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        let action: Arc<str> = Arc::from(&*name);
        let (sh, a) = (self.shared.clone(), action.clone());
        let sh2 = self.shared.clone();
        let (goal_key, cancel_key) = (
            keys::goal_key(domain, &name),
            keys::cancel_key(domain, &name),
        );
        let token = keys::provider_key(
            rosgate_core::registry::Provided::Action,
            domain,
            &self.zid,
            ty,
            &name,
        );
        let decl = self.decls.declare(
            format!("federation: cannot offer action {name} to other gateways"),
            move |session: &Session| {
                let queryable = session
                    .declare_queryable(goal_key)
                    .allowed_origin(Locality::Remote)
                    .callback(move |q: Query| sh.on_goal(domain, &a, q))
                    .wait()?;
                let cancels = session
                    .declare_subscriber(cancel_key)
                    .allowed_origin(Locality::Remote)
                    .callback(move |s: Sample| sh2.on_cancel(domain, &action, &s))
                    .wait()?;
                let token = session.liveliness().declare_token(token).wait()?;
                Ok((queryable, cancels, token))
            },
        );
        self.provided
            .insert((Offer::Action, domain, name), Provided { _decl: decl });
    }

    /// Forwards a goal the bridge received (as the server of another
    /// gateway's action) as a Zenoh query whose replies are its feedback
    /// and result; their absence ends the goal as aborted.
    fn forward_goal(&self, domain: Domain, action: &str, id: &str, ty: &str, args: &str) {
        let origin = format!("{}/{id}", self.zid);
        let payload = format!(
            "{{\"args\":{args},\"action_type\":{},\"origin\":{}}}",
            serde_json::Value::from(ty),
            serde_json::Value::from(origin)
        );
        let guard = GoalGuard {
            shared: self.shared.clone(),
            domain,
            action: action.to_string(),
            id: id.to_string(),
            done: std::sync::atomic::AtomicBool::new(false),
        };
        let sent = self
            .session
            .get(keys::goal_key(domain, action))
            .payload(payload)
            .target(QueryTarget::BestMatching)
            // Every reply as it comes (feedback streams; Zenoh's default
            // would hold replies back to consolidate them).
            .consolidation(ConsolidationMode::None)
            .allowed_destination(Locality::Remote)
            .timeout(std::time::Duration::from_secs(
                GOAL_QUERY_TIMEOUT_HOURS * 3600,
            ))
            .callback(move |r: Reply| guard.on(&r))
            .wait();
        if let Err(e) = sent {
            rosgate_core::log!(Debug, "federation: goal for {action} not sent: {e}");
        }
    }

    /// Forwards a cancel the bridge received for a goal it forwarded.
    fn forward_cancel(&self, domain: Domain, action: &str, id: &str) {
        let origin = format!("{}/{id}", self.zid);
        let _ = self
            .session
            .put(keys::cancel_key(domain, action), origin)
            .allowed_destination(Locality::Remote)
            .wait();
    }

    /// Puts this turn's topic batches, then its mail (after the topic
    /// data: a client's publishes before its call leave before the call,
    /// as they did through the bridge's queue). Returns the messages Zenoh
    /// refused.
    fn put_turn(&mut self) -> u64 {
        let mut dropped = 0;
        for b in self.topics_out.drain(..) {
            let put = self
                .session
                .put(keys::topic_key(b.domain, &b.topic), b.payload)
                .congestion_control(CongestionControl::Drop)
                .allowed_destination(Locality::Remote)
                .attachment(b.depth.map(|d| format!("{LATCHED_ATTACHMENT}{d}")))
                .wait();
            if put.is_err() {
                dropped += b.count;
            }
        }
        for (gw, n, why) in self.shared.calls.take_refusals() {
            self.mail
                .entry(gw)
                .or_default()
                .answer(&self.zid, n, Status::Refused, why.as_bytes());
        }
        for (gw, w) in self.mail.iter_mut() {
            if !w.is_empty() {
                put_mail(&self.session, gw, w.take());
            }
        }
        // Gateways mailed once keep an empty writer; bounded by
        // MAX_GATEWAYS, but a gateway long gone needs none.
        if self.mail.len() > remote::MAX_GATEWAYS {
            self.mail.clear();
        }
        dropped
    }
}

/// Puts the mail `w` gathered for gateway `gw` now if it holds a batch's
/// worth ([`mail::MAIL_BATCH_BYTES`]); the rest waits for the turn's end.
fn put_if_full(session: &Session, gw: &str, w: &mut Writer) {
    if w.len() >= mail::MAIL_BATCH_BYTES {
        put_mail(session, gw, w.take());
    }
}

/// Puts `mail` to gateway `gw`'s mailbox. Calls and answers are not shed
/// under congestion (as Zenoh's queries are not): they wait for room.
fn put_mail(session: &Session, gw: &str, mail: Vec<u8>) {
    let _ = session
        .put(keys::mail_key(gw), mail)
        .congestion_control(CongestionControl::Block)
        .allowed_destination(Locality::Remote)
        .wait();
}

impl Peer for Gateways {
    fn sync(&mut self, hub: &mut Bridges<'_>, now: Instant) {
        for c in self.shared.take_changes() {
            match c {
                Change::Interest(domain, topic, wanted, peer) => {
                    hub.remote_interest(peer, domain, &topic, wanted, now)
                }
                Change::Provider(kind, domain, name, ty, peer) => {
                    hub.remote_provider(kind, domain, &name, ty.as_deref(), peer)
                }
                Change::Left(gw) => hub.forget_gateway(&gw, now),
            }
        }
        // Graphs were parsed on Zenoh's threads; installing one is O(its
        // items), so a turn installs a bounded number and wakes for more.
        let (graphs, more) = self.shared.take_graphs(remote::GRAPH_ITEMS_PER_TURN);
        for (domain, gw, graph) in graphs {
            hub.install_remote_graph(&gw, domain, graph);
        }
        if more {
            self.inbox.wake();
        }
    }

    fn want(&mut self, _hub: &Bridges<'_>, domain: Domain, topic: Rc<str>) {
        Gateways::want(self, domain, topic);
    }

    fn unwant(&mut self, domain: Domain, topic: &Rc<str>) {
        self.wanted.remove(&(domain, topic.clone()));
    }

    fn provide(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        Gateways::provide(self, domain, name, ty);
    }

    fn unprovide(&mut self, domain: Domain, name: &Rc<str>) {
        self.provided
            .remove(&(Offer::Service, domain, name.clone()));
    }

    fn serve(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        Gateways::serve(self, domain, name, ty);
    }

    fn unserve(&mut self, domain: Domain, name: &Rc<str>) {
        self.provided.remove(&(Offer::Action, domain, name.clone()));
    }

    /// Other gateways get the JSON (their bridges' queues carry JSON),
    /// a turn's run of one topic's messages as one sample
    /// ([`Peer::flush`] puts them).
    fn publish(
        &mut self,
        domain: Domain,
        topic: &str,
        msg: &str,
        _cdr: Option<rosgate_peers::Cdr<'_>>,
        depth: Option<u32>,
    ) -> Put {
        let same = self.topics_out.last_mut().filter(|b| {
            b.domain == domain
                && b.depth == depth
                && b.topic == topic
                && b.payload.len() + 1 + msg.len() <= mail::MAIL_BATCH_BYTES
        });
        match same {
            Some(b) => {
                b.payload.push(b'\n');
                b.payload.extend_from_slice(msg.as_bytes());
                b.count += 1;
            }
            None => self.topics_out.push(Batch {
                domain,
                topic: topic.to_string(),
                depth,
                payload: msg.as_bytes().to_vec(),
                count: 1,
            }),
        }
        Put::Sent
    }

    fn flush(&mut self, hub: &mut Bridges<'_>) {
        let dropped = self.put_turn();
        if dropped > 0 {
            hub.count(
                rosgate_core::counters::Counter::FederationOutDropped,
                dropped,
            );
        }
    }

    fn id(&self) -> PeerId {
        PeerId::Gateways
    }

    /// Mails the call to the gateway that provides the service (put at the
    /// end of the turn, with the turn's other calls to it).
    fn call(&mut self, domain: Domain, service: &str, id: &str, args: &str, now: Instant) -> bool {
        let epoch = self.shared.provider_epoch.load(Ordering::Acquire);
        if epoch != self.called_epoch {
            self.called.clear();
            self.called_epoch = epoch;
        }
        let known = self
            .called
            .get(&domain)
            .and_then(|m| m.get(service))
            .cloned();
        let gw = match known {
            Some(gw) => gw,
            None => {
                let gw = self.shared.gateway_for(domain, service);
                if self.called.values().map(HashMap::len).sum::<usize>() >= remote::MAX_GATEWAYS {
                    self.called.clear();
                }
                self.called
                    .entry(domain)
                    .or_default()
                    .insert(service.to_string(), gw.clone());
                gw
            }
        };
        let Some(gw) = gw else {
            return false;
        };
        let w = self.mail.entry(gw.clone()).or_default();
        let call = calls::Forward {
            domain,
            service,
            id,
            args: args.as_bytes(),
        };
        if !self.shared.calls.forward(w, &gw, call, now) {
            return false;
        }
        put_if_full(&self.session, &gw, w);
        true
    }

    /// Mails the answer back to the calling gateway.
    fn answer(&mut self, id: &str, values: &str, result: bool) {
        let Some((gw, n)) = self.shared.calls.take_incoming(id) else {
            return;
        };
        let status = if result { Status::Ok } else { Status::Failed };
        let w = self.mail.entry(gw.clone()).or_default();
        w.answer(&self.zid, n, status, values.as_bytes());
        put_if_full(&self.session, &gw, w);
    }

    fn goal(
        &mut self,
        domain: Domain,
        action: &str,
        id: &str,
        ty: &str,
        args: &str,
        _now: Instant,
    ) -> bool {
        self.forward_goal(domain, action, id, ty, args);
        true
    }

    fn cancel(&mut self, domain: Domain, action: &str, id: &str) {
        self.forward_cancel(domain, action, id);
    }

    fn goal_update(&mut self, id: &str, values: &str, end: Option<(u8, bool)>) {
        let end = end.map(|(status, ok)| (status.to_string(), ok));
        let end = end
            .as_ref()
            .map(|(s, ok)| (s.as_str(), if *ok { "true" } else { "false" }));
        self.shared.goal_update(id, values, end);
    }

    fn turn(&mut self, hub: &mut Bridges<'_>, now: Instant) -> Option<Instant> {
        let (failed, next_call) = self.shared.calls.expire(now);
        for r in failed {
            r.deliver(hub, now);
        }
        match (self.announce_graph(hub, now), next_call) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn status(&self, status: &mut serde_json::Value) {
        if let Ok(serde_json::Value::Object(m)) =
            serde_json::from_str(&self.shared.status_json(self.wanted.len()))
        {
            if let serde_json::Value::Object(s) = status {
                s.extend(m);
            }
        }
    }
}
