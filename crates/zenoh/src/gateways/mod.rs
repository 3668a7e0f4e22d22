//! The gateways peer: other rosgate gateways met in the same Zenoh session,
//! in rosgate's own key space (`keys.rs`), with the tables of what they
//! want and provide (`remote.rs`). See docs/federation.md.
//!
//! It owns this gateway's presence in the federation: its presence token,
//! the watchers of the others' tokens and graphs, a subscriber and an
//! interest token per topic local clients subscribe to, a queryable and a
//! provider token per service or action local clients offer, and the
//! queries that carry the bridge's calls and goals to other gateways.
//!
//! Invariants:
//! - a topic is subscribed across gateways (one subscriber, one interest
//!   token) only while local clients subscribe to it;
//! - every call forwarded ends in one `service_response` and every goal
//!   forwarded in one `action_result` (`FirstReply`, `GoalGuard`);
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

use crate::first_reply::FirstReply;
use crate::worker::{Declared, Decls};
use crate::{GOAL_QUERY_TIMEOUT_HOURS, GRAPH_INTERVAL_MS, LATCHED_ATTACHMENT, QUERY_TIMEOUT_SECS};
use remote::{Change, Shared};
use rosgate_peers::Inbox;
use rosgate_peers::{Peer, Put};

pub mod keys;
pub(crate) mod remote;

/// What this gateway declared (on the worker) for a topic its clients
/// subscribe to: the subscriber and the interest token, made together.
struct Wanted {
    _decl: Declared,
}

/// What this gateway declared (on the worker) for a service a local client
/// provides (a queryable and a provider token), or an action a local
/// client serves (then also the cancels' subscriber).
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
        let started = decls.adopt(
            "federation: this gateway's token and watchers",
            (presence, gateways, interest, providers, graphs),
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

    /// Declares the queryable and the provider token for a service a local
    /// client provides.
    fn provide(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        let sh = self.shared.clone();
        let service: Arc<str> = Arc::from(&*name);
        let key = keys::service_key(domain, &name);
        let token = keys::provider_key(
            rosgate_core::registry::Provided::Service,
            domain,
            &self.zid,
            ty,
            &name,
        );
        let decl = self.decls.declare(
            format!("federation: cannot offer service {name} to other gateways"),
            move |session: &Session| {
                let queryable = session
                    .declare_queryable(key)
                    .allowed_origin(Locality::Remote)
                    .callback(move |q: Query| sh.on_query(domain, &service, q))
                    .wait()?;
                let token = session.liveliness().declare_token(token).wait()?;
                Ok((queryable, token))
            },
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

    /// Forwards a call the bridge received (as the provider of another
    /// gateway's service) as a Zenoh query; its reply, or its absence,
    /// comes back as the bridge's `service_response`.
    fn forward_call(&self, domain: Domain, service: &str, id: &str, args: &[u8]) {
        // The first reply, or the query's end without one, answers the
        // caller.
        let (sh, service_name, call_id) =
            (self.shared.clone(), service.to_string(), id.to_string());
        let first = FirstReply::new(move |r: Option<&Reply>| {
            sh.on_reply(domain, &service_name, &call_id, r)
        });
        let sent = self
            .session
            .get(keys::service_key(domain, service))
            .payload(args.to_vec())
            .target(QueryTarget::BestMatching)
            // Every reply as it comes (feedback streams; Zenoh's default
            // would hold replies back to consolidate them).
            .consolidation(ConsolidationMode::None)
            .allowed_destination(Locality::Remote)
            .timeout(std::time::Duration::from_secs(QUERY_TIMEOUT_SECS))
            .callback(move |r: Reply| first.on(&r))
            .wait();
        if let Err(e) = sent {
            rosgate_core::log!(Debug, "federation: call of {service} not sent: {e}");
        }
    }
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

    /// Other gateways get the JSON (their bridges' queues carry JSON).
    fn publish(
        &mut self,
        domain: Domain,
        topic: &str,
        msg: &str,
        _cdr: Option<rosgate_peers::Cdr<'_>>,
        depth: Option<u32>,
    ) -> Put {
        let put = self
            .session
            .put(keys::topic_key(domain, topic), msg.as_bytes())
            .congestion_control(CongestionControl::Drop)
            .allowed_destination(Locality::Remote)
            .attachment(depth.map(|d| format!("{LATCHED_ATTACHMENT}{d}")))
            .wait();
        match put {
            Ok(()) => Put::Sent,
            Err(_) => Put::Dropped,
        }
    }

    fn id(&self) -> PeerId {
        PeerId::Gateways
    }

    fn call(&mut self, domain: Domain, service: &str, id: &str, args: &str, _now: Instant) -> bool {
        self.forward_call(domain, service, id, args.as_bytes());
        true
    }

    fn answer(&mut self, id: &str, values: &str, result: bool) {
        self.shared
            .answer(id, values, if result { "true" } else { "false" });
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
        self.announce_graph(hub, now)
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
