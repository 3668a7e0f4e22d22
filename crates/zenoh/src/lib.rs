//! Gateways federated over Zenoh (issue 16): the network side of the
//! federation seam in `rosgate_core::hub` (`hub/federation.rs`).
//!
//! Zenoh runs its own threads. What they receive reaches the mio loop only
//! as jobs through the loop's bounded inbox ([`ToLoop`]); a full inbox
//! drops topic samples (counted) and never blocks Zenoh. What the loop
//! sends goes out from the loop thread itself in [`Federation::turn`]:
//! puts with congestion control `Drop`, so a slow network sheds rather
//! than stalling the loop.
//!
//! The rules (docs/federation.md: subscribe upstream only while somebody
//! downstream listens, once per topic however many listen):
//! - a gateway declares a Zenoh subscriber and an *interest* liveliness
//!   token for a topic only while it has local subscribers of it;
//! - a gateway puts a topic's messages into Zenoh only while some other
//!   gateway's interest token for it is alive: its bridge subscribes then,
//!   and the bridge's queue is what [`Federation::turn`] drains;
//! - one sample per publish, whatever the number of interested gateways
//!   or of their subscribers: fan-out stays local.
//!
//! Invariants:
//! - no Zenoh callback blocks or takes a lock the loop holds for long: the
//!   shared tables (`remote::Shared`) are locked for a few map operations;
//! - the bytes of samples waiting in the inbox are bounded by
//!   [`INBOX_BYTES`]; the remote tables by [`remote::MAX_GATEWAYS`] and
//!   [`remote::MAX_REMOTE_INTEREST`];
//! - a payload from the network is delivered only if it is one JSON value
//!   the wire decoder accepts, with raw line breaks blanked (it is framed
//!   into NDJSON lines for clients).

mod first_reply;
mod gateways;
mod ros2;

pub use gateways::keys;
use gateways::remote;

use std::collections::HashMap;
use std::io::IoSlice;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use rosgate_core::counters::Counter;
use rosgate_core::hub::{InterestChange, Offer};
use rosgate_core::nodes::Domain;
use rosgate_core::out::MAX_IOVECS;
use rosgate_core::Hub;
use rosgate_ros2::registry::Registry;
use rosgate_wire::decode::{self, Op, Request};
use zenoh::liveliness::LivelinessToken;
use zenoh::pubsub::Subscriber;
use zenoh::qos::CongestionControl;
use zenoh::query::{ConsolidationMode, Query, QueryTarget, Queryable, Reply};
use zenoh::sample::{Locality, Sample};
use zenoh::{Session, Wait};

use first_reply::FirstReply;
use remote::{Change, Shared};
pub use remote::{MAX_GATEWAYS, MAX_REMOTE_CALLS, MAX_REMOTE_INTEREST};
pub use ros2::{RosSettings, MAX_ROS_ENTITIES, ROS_GRAPH};

/// Work for the loop thread.
pub type Job = Box<dyn FnOnce(&mut Hub, Instant) + Send>;

/// Queues a job for the loop thread without blocking; false when refused
/// (the inbox is full or the loop has stopped).
pub type ToLoop = Arc<dyn Fn(Job) -> bool + Send + Sync>;

/// Bytes. Samples from other gateways waiting in the loop's inbox; past
/// it, further samples are dropped and counted (`federation_in_dropped`).
pub const INBOX_BYTES: usize = 64 << 20;

/// Bytes. Taken from the bridges' queues per loop turn; the rest waits
/// for the next turn (so one busy topic cannot hold the loop).
pub const DRAIN_BYTES_PER_TURN: usize = 4 << 20;

/// Milliseconds. Zenoh's link lease when no `--zenoh-config` says
/// otherwise: a gateway cut off (not closed) is lost by the others
/// within it (Zenoh's own default is 10 s).
pub const DEFAULT_LEASE_MS: u64 = 3000;

/// Milliseconds. The longest wait between attempts to reach a
/// `--zenoh-connect` endpoint that is down (Zenoh's default is 4 s).
pub const DEFAULT_RETRY_MAX_MS: u64 = 1000;

/// How the gateway joins Zenoh (the `--zenoh-*` flags).
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// Endpoints to connect to (`tcp/host:port`).
    pub connect: Vec<String>,
    /// Endpoints to listen on.
    pub listen: Vec<String>,
    /// `peer` (default), `client` or `router`.
    pub mode: Option<String>,
    /// A Zenoh configuration file (JSON5) for everything else: TLS, access
    /// control, routing. The flags above override its fields.
    pub config_file: Option<PathBuf>,
    /// Multicast scouting on (off unless asked for).
    pub scouting: bool,
    /// The ROS 2 graphs (rmw_zenoh) joined, and the types known.
    pub ros: RosSettings,
}

/// Where the gateway listens for Zenoh when neither `--zenoh-listen` nor
/// `--zenoh-config` says: loopback, a port of the system's choosing (other
/// gateways on this host can still reach it through Zenoh's gossip).
pub const DEFAULT_LISTEN: &str = "tcp/127.0.0.1:0";

impl Settings {
    /// The endpoints it listens on, as the log names them.
    pub fn listen_shown(&self) -> Vec<String> {
        match (self.listen.is_empty(), &self.config_file) {
            (false, _) => self.listen.clone(),
            (true, None) => vec![DEFAULT_LISTEN.to_string()],
            (true, Some(f)) => vec![format!("as {} says", f.display())],
        }
    }
}

/// Where a gateway that joins a ROS 2 graph connects when no endpoint is
/// given: where rmw_zenoh's nodes look for their router.
pub const ROS_DEFAULT_ROUTER: &str = "tcp/localhost:7447";

impl Settings {
    /// The Zenoh configuration these settings make.
    pub fn zenoh_config(&self) -> Result<zenoh::Config, String> {
        let mut c = match &self.config_file {
            Some(p) => zenoh::Config::from_file(p)
                .map_err(|e| format!("--zenoh-config {}: {e}", p.display()))?,
            None => zenoh::Config::default(),
        };
        let mut set = |key: &str, value: String| {
            c.insert_json5(key, &value)
                .map_err(|e| format!("zenoh setting {key} = {value}: {e}"))
        };
        if let Some(m) = &self.mode {
            if !matches!(m.as_str(), "peer" | "client" | "router") {
                return Err(format!(
                    "--zenoh-mode {m:?}: expected peer, client or router"
                ));
            }
            set("mode", format!("{m:?}"))?;
        }
        if !self.connect.is_empty() {
            set("connect/endpoints", json_list(&self.connect))?;
        } else if !self.ros.domains.is_empty()
            && self.listen.is_empty()
            && self.config_file.is_none()
        {
            set("connect/endpoints", json_list(&[ROS_DEFAULT_ROUTER.into()]))?;
        }
        if !self.listen.is_empty() {
            set("listen/endpoints", json_list(&self.listen))?;
        } else if self.config_file.is_none() {
            // Zenoh's own default for a peer is every interface, without
            // authentication: nothing listens beyond loopback unless asked.
            set("listen/endpoints", json_list(&[DEFAULT_LISTEN.into()]))?;
        }
        // Off unless the flag: a gateway talks only to what it is given.
        set("scouting/multicast/enabled", self.scouting.to_string())?;
        if self.config_file.is_none() {
            set("transport/link/tx/lease", DEFAULT_LEASE_MS.to_string())?;
            set(
                "connect/retry",
                format!(
                    "{{period_init_ms: 250, period_max_ms: {DEFAULT_RETRY_MAX_MS}, period_increase_factor: 2}}"
                ),
            )?;
        }
        Ok(c)
    }
}

fn json_list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", quoted.join(","))
}

/// Seconds. The longest a call forwarded to another gateway waits for its
/// reply in Zenoh (the default `--max-call-timeout-ms`); the caller's own
/// deadline on its gateway is usually shorter and fails it first.
pub const QUERY_TIMEOUT_SECS: u64 = 300;

/// What this gateway declared for a topic its clients subscribe to.
struct Wanted {
    _data: Subscriber<()>,
    _token: LivelinessToken,
}

/// What this gateway declared for a service a local client provides, or
/// an action a local client serves (then also the cancels' subscriber).
struct Provided {
    _queryable: Queryable<()>,
    _cancels: Option<Subscriber<()>>,
    _token: LivelinessToken,
}

/// Milliseconds. This gateway's graph is put at most this often (when it
/// changed), so other gateways' introspection lags by at most about this.
pub const GRAPH_INTERVAL_MS: u128 = 250;

/// A sample's attachment saying it comes from a latched (transient local)
/// publisher keeping that many messages: `latched=<depth>`.
pub const LATCHED_ATTACHMENT: &str = "latched=";

/// Hours. The longest a goal sent to another gateway waits in Zenoh for
/// its result: goals may run for long; the caller's own `timeout` (and
/// `--goal-timeout-ms`) on its gateway apply as for a local server.
pub const GOAL_QUERY_TIMEOUT_HOURS: u64 = 24;

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

/// The loop thread's side of the federation. See the module docs.
pub struct Federation {
    session: Session,
    zid: String,
    shared: Arc<Shared>,
    _presence: LivelinessToken,
    _gateways: Subscriber<()>,
    _interest: Subscriber<()>,
    _providers: Subscriber<()>,
    wanted: HashMap<(Domain, Rc<str>), Wanted>,
    provided: HashMap<(Offer, Domain, Rc<str>), Provided>,
    changes: Vec<InterestChange>,
    _graphs: Subscriber<()>,
    /// When this gateway last put its graph, the registrations' epoch
    /// then, and the domains it covered.
    last_graph: Option<Instant>,
    graph_epoch: u64,
    graph_domains: Vec<Domain>,
    buf: Vec<u8>,
    last_status: Option<Instant>,
    /// The ROS 2 graphs joined (`--ros-domain`), if any.
    ros: Option<ros2::RosLink>,
}

impl std::fmt::Debug for Federation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Federation")
            .field("zid", &self.zid)
            .finish_non_exhaustive()
    }
}

/// Settings checked and every file they name read (`--zenoh-config`,
/// `--interfaces`), before anything is bound or opened: start-up reports a
/// bad flag or file first, whatever else would fail later (a busy port).
pub struct Prepared {
    config: zenoh::Config,
    ros: Option<(RosSettings, Registry)>,
}

impl Settings {
    /// Checks every flag and reads every file: what [`Federation::start`]
    /// needs, with nothing opened yet.
    pub fn prepare(&self) -> Result<Prepared, String> {
        let config = self.zenoh_config()?;
        let ros = if self.ros.domains.is_empty() {
            None
        } else {
            self.ros.check()?;
            Some((self.ros.clone(), self.ros.registry()?))
        };
        Ok(Prepared { config, ros })
    }
}

impl Federation {
    /// Opens the Zenoh session, announces this gateway and starts
    /// watching the others and their interest.
    pub fn start(prepared: Prepared, to_loop: ToLoop) -> Result<Federation, String> {
        let Prepared { config, ros } = prepared;
        let session = zenoh::open(config)
            .wait()
            .map_err(|e| format!("zenoh: cannot open a session: {e}"))?;
        let zid = session.zid().to_string();
        let shared = Arc::new(Shared::new(zid.clone(), to_loop));
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
        let ros = match ros {
            None => None,
            Some((settings, types)) => Some(ros2::RosLink::start(
                &session,
                &settings,
                types,
                shared.clone(),
            )?),
        };
        Ok(Federation {
            session,
            zid,
            shared,
            _presence: presence,
            _gateways: gateways,
            _interest: interest,
            _providers: providers,
            wanted: HashMap::new(),
            provided: HashMap::new(),
            changes: Vec::new(),
            _graphs: graphs,
            last_graph: None,
            graph_epoch: u64::MAX,
            graph_domains: Vec::new(),
            buf: Vec::new(),
            last_status: None,
            ros,
        })
    }

    /// This gateway's Zenoh id.
    pub fn zid(&self) -> &str {
        &self.zid
    }

    /// One loop turn's work: remote interest into the hub, local interest
    /// into Zenoh, the bridges' queued messages into Zenoh, counters and
    /// the status into the hub.
    pub fn turn(&mut self, hub: &mut Hub, now: Instant) {
        for c in self.shared.take_changes() {
            match c {
                Change::Interest(domain, topic, wanted) => {
                    hub.remote_interest(domain, &topic, wanted, now)
                }
                Change::Provider(kind, domain, name, ty) => {
                    hub.remote_provider(kind, domain, &name, ty.as_deref())
                }
                Change::Graph(domain, gw, json) => hub.set_remote_graph(&gw, domain, &json),
                Change::Left(gw) => hub.forget_gateway(&gw, now),
            }
        }
        hub.take_interest_changes(&mut self.changes, now);
        if let Some(r) = &mut self.ros {
            r.sync_nodes(&self.session, hub);
        }
        let changes = std::mem::take(&mut self.changes);
        for c in &changes {
            let key = (c.domain, c.name.clone());
            match (c.kind, c.wanted) {
                (Offer::Topic, true) => {
                    self.want(c.domain, c.name.clone());
                    if let Some(r) = &mut self.ros {
                        r.want(&self.session, hub, c.domain, c.name.clone());
                    }
                }
                (Offer::Topic, false) => {
                    self.wanted.remove(&key);
                    if let Some(r) = &mut self.ros {
                        r.unwant(c.domain, &c.name);
                    }
                }
                (Offer::Service, true) => {
                    self.provide(c.domain, c.name.clone(), &c.ty);
                    if let Some(r) = &mut self.ros {
                        r.provide(&self.session, c.domain, c.name.clone(), &c.ty);
                    }
                }
                (Offer::Action, true) => {
                    self.serve(c.domain, c.name.clone(), &c.ty);
                    if let Some(r) = &mut self.ros {
                        r.serve_action(&self.session, c.domain, c.name.clone(), &c.ty);
                    }
                }
                (Offer::Service, false) => {
                    self.provided.remove(&(c.kind, c.domain, c.name.clone()));
                    if let Some(r) = &mut self.ros {
                        r.unprovide(c.domain, &c.name);
                    }
                }
                (Offer::Action, false) => {
                    self.provided.remove(&(c.kind, c.domain, c.name.clone()));
                    if let Some(r) = &mut self.ros {
                        r.unserve_action(c.domain, &c.name);
                    }
                }
            }
        }
        self.changes = changes;
        self.changes.clear();
        self.announce_graph(hub, now);
        if let Some(r) = &mut self.ros {
            r.turn(&self.session, hub, now);
        }
        let links: Vec<(Domain, u32)> = hub.federation_links().collect();
        for (domain, key) in links {
            self.drain(hub, domain, key, now);
        }
        let dropped = self.shared.take_dropped();
        if dropped > 0 {
            hub.count_n(Counter::FederationInDropped, dropped);
        }
        if self
            .last_status
            .is_none_or(|t| now.saturating_duration_since(t).as_millis() >= 200)
        {
            self.last_status = Some(now);
            let mut status = self.shared.status_json(self.wanted.len());
            if let Some(r) = &self.ros {
                if let Ok(mut v) = serde_json::from_str::<serde_json::Value>(&status) {
                    v["ros2"] = r.status_json();
                    status = v.to_string();
                }
            }
            hub.set_federation_status(status);
        }
    }

    /// Puts this gateway's graph of each domain it has anything in, at
    /// most every [`GRAPH_INTERVAL_MS`], when it may have changed or a
    /// gateway joined; a domain emptied gets an empty graph once.
    fn announce_graph(&mut self, hub: &Hub, now: Instant) {
        if self
            .last_graph
            .is_some_and(|t| now.saturating_duration_since(t).as_millis() < GRAPH_INTERVAL_MS)
        {
            return;
        }
        let (domains, epoch) = hub.graph_state();
        let joined = self.shared.republish.swap(false, Ordering::AcqRel);
        if !joined && epoch == self.graph_epoch && domains == self.graph_domains {
            return;
        }
        self.last_graph = Some(now);
        self.graph_epoch = epoch;
        for &d in &domains {
            let _ = self
                .session
                .put(keys::graph_key(d, &self.zid), hub.local_graph(d))
                .allowed_destination(Locality::Remote)
                .wait();
        }
        for &d in self.graph_domains.iter().filter(|d| !domains.contains(d)) {
            let _ = self
                .session
                .put(keys::graph_key(d, &self.zid), "{}")
                .allowed_destination(Locality::Remote)
                .wait();
        }
        self.graph_domains = domains;
    }

    /// Declares the subscriber and the interest token for a topic local
    /// clients subscribe to.
    fn want(&mut self, domain: Domain, topic: Rc<str>) {
        let key = keys::topic_key(domain, &topic);
        let name: Arc<str> = Arc::from(&*topic);
        let sh = self.shared.clone();
        let data = self
            .session
            .declare_subscriber(key)
            // This gateway's own puts were delivered locally already.
            .allowed_origin(Locality::Remote)
            .callback(move |s: Sample| sh.on_sample(domain, &name, &s))
            .wait();
        let token = self
            .session
            .liveliness()
            .declare_token(keys::interest_key(domain, &self.zid, &topic))
            .wait();
        match (data, token) {
            (Ok(d), Ok(t)) => {
                self.wanted.insert(
                    (domain, topic),
                    Wanted {
                        _data: d,
                        _token: t,
                    },
                );
            }
            (d, t) => {
                let e = d.err().or(t.err()).map(|e| e.to_string());
                rosgate_core::log!(
                    Warn,
                    "federation: cannot subscribe to {topic} across gateways: {}",
                    e.unwrap_or_default()
                );
            }
        }
    }

    /// Declares the queryable and the provider token for a service a local
    /// client provides.
    fn provide(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        let sh = self.shared.clone();
        let service: Arc<str> = Arc::from(&*name);
        let queryable = self
            .session
            .declare_queryable(keys::service_key(domain, &name))
            .allowed_origin(Locality::Remote)
            .callback(move |q: Query| sh.on_query(domain, &service, q))
            .wait();
        let token = self
            .session
            .liveliness()
            .declare_token(keys::provider_key(
                rosgate_core::registry::Provided::Service,
                domain,
                &self.zid,
                ty,
                &name,
            ))
            .wait();
        match (queryable, token) {
            (Ok(q), Ok(t)) => {
                self.provided.insert(
                    (Offer::Service, domain, name),
                    Provided {
                        _queryable: q,
                        _cancels: None,
                        _token: t,
                    },
                );
            }
            (q, t) => {
                let e = q.err().or(t.err()).map(|e| e.to_string());
                rosgate_core::log!(
                    Warn,
                    "federation: cannot offer service {name} to other gateways: {}",
                    e.unwrap_or_default()
                );
            }
        }
    }

    /// Declares the goal queryable, the cancel subscriber and the provider
    /// token for an action a local client serves.
    fn serve(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        let action: Arc<str> = Arc::from(&*name);
        let (sh, a) = (self.shared.clone(), action.clone());
        let queryable = self
            .session
            .declare_queryable(keys::goal_key(domain, &name))
            .allowed_origin(Locality::Remote)
            .callback(move |q: Query| sh.on_goal(domain, &a, q))
            .wait();
        let sh = self.shared.clone();
        let cancels = self
            .session
            .declare_subscriber(keys::cancel_key(domain, &name))
            .allowed_origin(Locality::Remote)
            .callback(move |s: Sample| sh.on_cancel(domain, &action, &s))
            .wait();
        let token = self
            .session
            .liveliness()
            .declare_token(keys::provider_key(
                rosgate_core::registry::Provided::Action,
                domain,
                &self.zid,
                ty,
                &name,
            ))
            .wait();
        match (queryable, cancels, token) {
            (Ok(q), Ok(c), Ok(t)) => {
                self.provided.insert(
                    (Offer::Action, domain, name),
                    Provided {
                        _queryable: q,
                        _cancels: Some(c),
                        _token: t,
                    },
                );
            }
            (q, c, t) => {
                let e = q.err().or(c.err()).or(t.err()).map(|e| e.to_string());
                rosgate_core::log!(
                    Warn,
                    "federation: cannot offer action {name} to other gateways: {}",
                    e.unwrap_or_default()
                );
            }
        }
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

    /// Sends what the bridge of `domain` has queued: one put per message.
    fn drain(&mut self, hub: &mut Hub, domain: Domain, key: u32, now: Instant) {
        let Some(out) = hub.out(key) else {
            return;
        };
        if out.is_empty() {
            return;
        }
        let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
        let n = out.fill(&mut iov, DRAIN_BYTES_PER_TURN);
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        for s in &iov[..n] {
            buf.extend_from_slice(s);
        }
        hub.wrote(key, buf.len(), now);
        let (mut sent, mut dropped) = (0u64, 0u64);
        // Whether the topic's messages cross marked as latched, asked once
        // per topic per drain.
        let mut latched: Option<(String, Option<u32>)> = None;
        for line in buf.split(|&b| b == b'\n') {
            // Statuses answering the bridge's own requests are skipped.
            let (topic, msg) =
                match decode::decode(line) {
                    Ok(Request {
                        op: Op::Publish { topic, msg },
                        ..
                    }) => (topic, msg),
                    Ok(Request {
                        op: Op::CallService { service, args, .. },
                        id: Some(id),
                        ..
                    }) => {
                        let args = args.map_or("{}", |a| a.get());
                        let to_ros = self.ros.as_mut().is_some_and(|r| {
                            r.call(&self.session, domain, &service, id.get(), args)
                        });
                        if !to_ros {
                            self.forward_call(domain, &service, id.get(), args.as_bytes());
                        }
                        continue;
                    }
                    Ok(Request {
                        op: Op::ServiceResponse { values, result, .. },
                        id: Some(id),
                        ..
                    }) => {
                        let values = values.map_or("null", |v| v.get());
                        let ros = self
                            .ros
                            .as_ref()
                            .is_some_and(|r| r.answer(id.get(), values, result.get()));
                        if !ros {
                            self.shared.answer(id.get(), values, result.get());
                        }
                        continue;
                    }
                    Ok(Request {
                        op: Op::SendActionGoal(g),
                        id: Some(id),
                        ..
                    }) => {
                        let ty = g.action_type.as_deref().unwrap_or("");
                        let args = g.args.map_or("{}", |a| a.get());
                        let to_ros = self.ros.as_mut().is_some_and(|r| {
                            r.send_goal(&self.session, domain, &g.action, id.get(), args)
                        });
                        if !to_ros {
                            self.forward_goal(domain, &g.action, id.get(), ty, args);
                        }
                        continue;
                    }
                    Ok(Request {
                        op: Op::CancelActionGoal { action },
                        id: Some(id),
                        ..
                    }) => {
                        let to_ros = self.ros.as_mut().is_some_and(|r| {
                            r.cancel_goal(&self.session, domain, &action, id.get())
                        });
                        if !to_ros {
                            self.forward_cancel(domain, &action, id.get());
                        }
                        continue;
                    }
                    Ok(Request {
                        op: Op::ActionFeedback { values, .. },
                        id: Some(id),
                        ..
                    }) => {
                        let ros = self
                            .ros
                            .as_ref()
                            .is_some_and(|r| r.goal_update(id.get(), values.get(), None));
                        if !ros {
                            self.shared.goal_update(id.get(), values.get(), None);
                        }
                        continue;
                    }
                    Ok(Request {
                        op:
                            Op::ActionResult {
                                values,
                                status,
                                result,
                                ..
                            },
                        id: Some(id),
                        ..
                    }) => {
                        let values = values.map_or("null", |v| v.get());
                        let end = Some((status.get(), result.get()));
                        let ros = self
                            .ros
                            .as_ref()
                            .is_some_and(|r| r.goal_update(id.get(), values, end));
                        if !ros {
                            self.shared.goal_update(id.get(), values, end);
                        }
                        continue;
                    }
                    _ => continue,
                };
            let depth = match &latched {
                Some((t, d)) if *t == *topic => *d,
                _ => {
                    let d = hub.latched_depth(domain, &topic);
                    latched = Some((topic.to_string(), d));
                    d
                }
            };
            let put = self
                .session
                .put(keys::topic_key(domain, &topic), msg.get().as_bytes())
                .congestion_control(CongestionControl::Drop)
                .allowed_destination(Locality::Remote)
                .attachment(depth.map(|d| format!("{LATCHED_ATTACHMENT}{d}")))
                .wait();
            match put {
                Ok(()) => sent += 1,
                Err(_) => dropped += 1,
            }
            if let Some(r) = &mut self.ros {
                if !r.publish(&self.session, domain, &topic, msg.get(), depth) {
                    dropped += 1;
                }
            }
        }
        self.buf = buf;
        hub.count_n(Counter::FederationOut, sent);
        hub.count_n(Counter::FederationOutDropped, dropped);
    }

    /// Topics this gateway declared interest in.
    pub fn wanted_count(&self) -> usize {
        self.wanted.len()
    }

    /// Samples waiting in the loop's inbox, in bytes.
    pub fn inbox_bytes(&self) -> usize {
        self.shared.pending_bytes.load(Ordering::Relaxed)
    }

    /// Withdraws this gateway from the federation (its tokens go at once,
    /// so the others need not wait for the lease).
    pub fn close(self) {
        let Federation { session, .. } = self;
        let _ = session.close().wait();
    }
}
