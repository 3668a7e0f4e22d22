//! The DDS shell of the ROS 2 link (`rosgate_ros2::link`), behind the
//! [`Peer`] trait: the link decides, this executes with RustDDS on the
//! loop thread, sharing everything that is not DDS with the rmw_zenoh
//! shell (`rosgate_peers::ros2`: the link's queue, the hub's edge, the
//! graph and types into the hub).
//!
//! Each turn: discovery (from the pump, `pump.rs`) through the adapter
//! (`rosgate_ros2::link::rmw_dds::Graph`) into the link; the link's queue
//! (samples the pump took) into the link; the link's actions executed:
//! - `Subscribe`: a raw reader of `rt/<topic>`, typed as local clients
//!   named it or as the topic's DDS writers are (made when one is known),
//!   asking no more QoS than the writers offer; handed to the pump;
//! - `Publisher`/`Put`: this gateway's writer of `rt/<topic>`, typed as
//!   the ROS 2 subscription declared it (transient local at the hub's
//!   latched depth), and the client's JSON encoded as CDR of that type;
//!   a write never blocks the loop (reliable with `max_blocking_time` 0:
//!   what does not fit is shed and counted);
//! - calls both ways, as rmw_fastrtps makes them: this gateway joins a
//!   service ROS 2 serves as a client when its server is discovered (a
//!   request writer on `rq/<name>Request`, a reply reader on
//!   `rr/<name>Reply`), writes a call's request with its reply reader's
//!   GUID as the related sample identity, and matches the reply by the
//!   request's sequence number; a local service the link offers gets a
//!   request reader and a reply writer, and each reply carries its
//!   request's identity (the client's reply reader, or its writer, and the
//!   sequence number) as its related sample identity (`calls.rs`);
//! - goals both ways, with those services and the actions' topics
//!   (`goals.rs`);
//! - type descriptions (`Describe`): a call of the node's
//!   `~/get_type_description` (`calls.rs`);
//! - the link's deliveries: kept by the hub's edge, handed over in order.
//!
//! And this gateway in the ROS 2 graph: its node (`rosgate_<id>`) and the
//! nodes local clients declared, with this gateway's readers and writers,
//! on `ros_discovery_info` (as rmw_dds_common does), so `ros2 node list`
//! and `ros2 topic info -v` show them.
//!
//! Invariants: the link's (every call ends once; samples of this gateway's
//! own writers are not news: their GUIDs are the link's `OwnPublisher`s,
//! and the pump skips this participant's samples); every table here is
//! bounded by the link's (one reader per topic it subscribes, one writer
//! per topic it publishes).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::Token;
use rosgate_core::bridge::PeerId;
use rosgate_core::hub::Bridges;
use rosgate_core::nodes::Domain;
use rosgate_peers::ros2::asks::{self, Shell};
use rosgate_peers::ros2::edge::{HubEdge, Side};
use rosgate_peers::ros2::exec::{run_link, Exec};
use rosgate_peers::ros2::sync::LinkSync;
use rosgate_peers::{Cdr, Peer, Put};
use rosgate_ros2::cdr;
use rosgate_ros2::link::rmw_dds::{self, Graph, NodeInfo, ParticipantInfo, Role};
use rosgate_ros2::link::{self, Event, Gid, InQuery, Link, Stamp, ToHub};
use rosgate_ros2::registry::Registry;
use rosgate_ros2::rmw::{self, Qos};
use rustdds::no_key::DataWriter;
use rustdds::{DomainParticipant, Publisher, QosPolicies, RTPSEntity, Subscriber, TopicKind};

use crate::pump::{self, Disc, Kind, Pump};
use crate::qos;
use crate::raw::Raw;
use crate::requests::NoRequests;

mod calls;
mod goals;

use calls::{Client, Pending, Replying, Server};
pub use calls::{MAX_DDS_CLIENTS, MAX_DDS_WAITING_CALLS};

/// Milliseconds. The graph introspection lists is rebuilt at most this
/// often, however fast discovery runs (as the rmw_zenoh side's).
pub const DDS_GRAPH_INTERVAL_MS: u64 = 250;

pub(super) type Writer = DataWriter<Vec<u8>, Raw>;

/// One domain's DDS participant and what this gateway made in it.
pub(crate) struct Dom {
    pub(crate) dp: DomainParticipant,
    publisher: Publisher,
    subscriber: Subscriber,
    /// The participant's GUID (its `ros_discovery_info` GID).
    gid: Gid,
    graph: Graph,
    info_writer: Writer,
    /// Whether this gateway's `ros_discovery_info` must be written again.
    info_dirty: bool,
}

/// This gateway's reader of a topic, with the pump.
pub(super) struct Sub {
    pub(super) token: Token,
    pub(super) gid: Gid,
}

/// This gateway's writer of a topic.
struct Pub {
    writer: Writer,
    gid: Gid,
}

/// The DDS peer. See the module docs.
pub(crate) struct DdsPeer {
    domains: Vec<Domain>,
    doms: HashMap<Domain, Dom>,
    pump: Option<Pump>,
    link: Link,
    edge: HubEdge,
    sync: LinkSync,
    /// The link's queue's requests (none: requests come through the pump's
    /// discovery queue, decoded on the loop thread).
    queued: HashMap<InQuery, NoRequests>,
    next_in_query: u64,
    clients: HashMap<(Domain, Rc<str>), Client>,
    servers: HashMap<(Domain, Rc<str>), Server>,
    /// Calls sent, by the reply reader and the request's sequence number.
    pending: HashMap<pump::SampleId, Pending>,
    /// ROS 2 clients' requests the link has.
    replying: HashMap<InQuery, Replying>,
    /// ROS 2 action servers' types, by action (from the link's providers).
    action_types: HashMap<(Domain, Rc<str>), String>,
    /// Feedback topics of actions goals are in flight to.
    feedback: HashMap<(Domain, Rc<str>), Sub>,
    /// Local actions offered to ROS 2.
    offered_actions: HashMap<(Domain, Rc<str>), goals::OfferedAction>,
    goal_seq: u64,
    /// This gateway's readers and writers that matched a remote one
    /// (bounded by them: one entry each).
    matched: std::collections::HashSet<Gid>,
    /// Topics the link subscribes to, with the type local clients named
    /// (full ROS name), until a reader is made for them.
    wanted: HashMap<(Domain, String), Option<String>>,
    subs: HashMap<(Domain, Rc<str>), Sub>,
    pubs: HashMap<(Domain, Rc<str>), Pub>,
    /// Interest and providers the link decided, for the hub at the turn.
    to_hub: Vec<Side>,
    next_token: usize,
    /// Nodes local clients declared in bridged domains (namespace, name).
    client_nodes: Vec<(Domain, String, String)>,
    nodes_generation: Option<u64>,
    /// Writes shed (a full reliable history), calls refused, replies and
    /// requests that did not decode or matched no call, ever.
    shed: u64,
    refused: u64,
    /// DDS readers this gateway's writers could not meet (`qos::mismatch`).
    qos_mismatches: u64,
    stray: u64,
}

impl DdsPeer {
    pub(crate) fn new(
        domains: Vec<Domain>,
        doms: HashMap<Domain, Dom>,
        pump: Pump,
        types: Registry,
    ) -> DdsPeer {
        DdsPeer {
            domains,
            doms,
            pump: Some(pump),
            link: Link::with_types(types),
            edge: HubEdge::default(),
            sync: LinkSync::new(rosgate_peers::ros2::DDS_GRAPH),
            queued: HashMap::new(),
            next_in_query: 0,
            clients: HashMap::new(),
            servers: HashMap::new(),
            pending: HashMap::new(),
            replying: HashMap::new(),
            action_types: HashMap::new(),
            feedback: HashMap::new(),
            offered_actions: HashMap::new(),
            goal_seq: 0,
            matched: std::collections::HashSet::new(),
            wanted: HashMap::new(),
            subs: HashMap::new(),
            pubs: HashMap::new(),
            to_hub: Vec::new(),
            next_token: pump::FIRST_TOPIC_TOKEN,
            client_nodes: Vec::new(),
            nodes_generation: None,
            shed: 0,
            refused: 0,
            qos_mismatches: 0,
            stray: 0,
        }
    }

    fn shared(&self) -> Option<&Arc<pump::Shared>> {
        self.pump.as_ref().map(|p| &p.shared)
    }

    /// Discovery since the last turn, through the adapter, into the link;
    /// topics waiting for a writer's type retried.
    fn discovery(&mut self, now: Instant) {
        let Some(sh) = self.shared().cloned() else {
            return;
        };
        let mut events = Vec::new();
        let mut any = false;
        for (domain, d) in sh.take_discovery() {
            let Some(dom) = self.doms.get_mut(&domain) else {
                continue;
            };
            let dom = &mut dom.graph;
            any = true;
            match d {
                Disc::Found(ep) => dom.found(ep, &mut events),
                Disc::Lost(g) => dom.lost(&g, &mut events),
                Disc::ParticipantLost(p) => dom.participant_lost(&p, &mut events),
                Disc::Info(info) => dom.info(info, &mut events),
                Disc::Reply {
                    reader,
                    related,
                    payload,
                } => {
                    for e in events.drain(..) {
                        self.link.handle(e);
                    }
                    self.on_reply(reader, related, &payload);
                }
                Disc::Request {
                    service,
                    id,
                    payload,
                } => {
                    for e in events.drain(..) {
                        self.link.handle(e);
                    }
                    self.on_request(domain, &service, id, &payload, now);
                }
                Disc::Matched(gid) => {
                    for e in events.drain(..) {
                        self.link.handle(e);
                    }
                    self.on_matched(gid);
                }
                Disc::Feedback { action, payload } => {
                    for e in events.drain(..) {
                        self.link.handle(e);
                    }
                    self.on_feedback(domain, &action, &payload);
                }
            }
        }
        for e in events {
            self.link.handle(e);
        }
        if any {
            let waiting: Vec<(Domain, String)> = self
                .wanted
                .keys()
                .filter(|(d, t)| !self.subs.contains_key(&(*d, Rc::from(t.as_str()))))
                .cloned()
                .collect();
            for (d, t) in waiting {
                self.make_reader(d, &t);
            }
        }
    }

    /// A delivery of the link, kept by the hub's edge for the turn; what
    /// it asks of this shell besides, done.
    fn deliver(&mut self, t: ToHub) {
        let offered = &self.offered_actions;
        let side = self.edge.deliver(&mut self.link, t, |domain, action| {
            offered
                .get(&(domain, Rc::from(action)))
                .map(|o| o.ty.clone())
        });
        match side {
            Side::Nothing | Side::Wake | Side::GoalEnded { .. } => {}
            Side::Provider {
                kind,
                domain,
                ref name,
                ref ty,
            } => {
                if kind == rosgate_core::registry::Provided::Service {
                    self.client_of(domain, name, ty.as_deref());
                } else {
                    self.action_client_of(domain, name, ty.as_deref());
                }
                self.to_hub.push(side);
            }
            s @ Side::Interest { .. } => self.to_hub.push(s),
        }
        if let Some(sh) = self.shared() {
            sh.queue.inbox().wake();
        }
    }

    fn exec_subscribe(&mut self, domain: Domain, topic: String, ty: Option<String>, on: bool) {
        let k = (domain, topic.clone());
        if !on {
            self.wanted.remove(&k);
            if let Some(s) = self.subs.remove(&(domain, Rc::from(topic.as_str()))) {
                if let Some(sh) = self.shared() {
                    sh.remove(s.token);
                }
                self.info_changed(domain);
            }
            return;
        }
        self.wanted.insert(k, ty);
        self.make_reader(domain, &topic);
    }

    /// A reader of `topic` for the pump, typed as local clients named it
    /// or as its writers are; none yet when neither is known (made when a
    /// writer is discovered).
    fn make_reader(&mut self, domain: Domain, topic: &str) {
        let key = (domain, Rc::<str>::from(topic));
        if self.subs.contains_key(&key) {
            return;
        }
        let Some(dom) = self.doms.get(&domain) else {
            return;
        };
        let dds_topic = rmw_dds::dds_name(topic, Role::Topic);
        let writers: Vec<&rmw_dds::Endpoint> = dom
            .graph
            .endpoints()
            .filter(|e| e.writer && e.topic == dds_topic)
            .collect();
        let named = self
            .wanted
            .get(&(domain, topic.to_string()))
            .cloned()
            .flatten();
        let dds_type = named
            .as_deref()
            .and_then(rmw::dds_type_name)
            .or_else(|| writers.first().map(|w| w.dds_type.clone()));
        let Some(dds_type) = dds_type else {
            return;
        };
        let Some(ros_type) = rmw::ros_type_name(&dds_type) else {
            return;
        };
        let offered: Vec<Qos> = writers
            .iter()
            .filter(|w| w.dds_type == dds_type)
            .map(|w| w.qos)
            .collect();
        let q = qos::reader(&offered);
        let kind = Kind::Topic {
            domain,
            topic: topic.to_string(),
            ty: ros_type,
        };
        let what = format!("cannot subscribe to {topic}");
        if let Some(sub) = self.reader_to_pump(domain, dds_topic, dds_type, &q, kind, &what) {
            self.subs.insert(key, sub);
            self.info_changed(domain);
        }
    }

    /// A raw writer of DDS topic `topic` typed `dds_type` in `domain`,
    /// and its GID; `None` (logged, naming `what`) when RustDDS refuses.
    pub(super) fn writer(
        &self,
        domain: Domain,
        topic: String,
        dds_type: String,
        q: &QosPolicies,
        what: &str,
    ) -> Option<(Writer, Gid)> {
        let dom = self.doms.get(&domain)?;
        let made = dom
            .dp
            .create_topic(topic, dds_type, q, TopicKind::NoKey)
            .and_then(|t| {
                dom.publisher
                    .create_datawriter_no_key::<Vec<u8>, Raw>(&t, Some(q.clone()))
            });
        match made {
            Ok(w) => {
                let gid = w.guid().to_bytes();
                Some((w, gid))
            }
            Err(e) => {
                rosgate_core::log!(Warn, "dds: {what}: {e}");
                None
            }
        }
    }

    /// A raw reader of DDS topic `topic` typed `dds_type` in `domain`,
    /// handed to the pump as `kind`: its token and GID; `None` (logged,
    /// naming `what`, or counted by the pump) when it cannot be made.
    pub(super) fn reader_to_pump(
        &mut self,
        domain: Domain,
        topic: String,
        dds_type: String,
        q: &QosPolicies,
        kind: Kind,
        what: &str,
    ) -> Option<Sub> {
        let dom = self.doms.get(&domain)?;
        let made = dom
            .dp
            .create_topic(topic, dds_type, q, TopicKind::NoKey)
            .and_then(|t| {
                dom.subscriber
                    .create_simple_datareader_no_key::<Vec<u8>, Raw>(&t, Some(q.clone()))
            });
        let reader = match made {
            Ok(r) => r,
            Err(e) => {
                rosgate_core::log!(Warn, "dds: {what}: {e}");
                return None;
            }
        };
        let gid = reader.guid().to_bytes();
        self.next_token += 1;
        let token = Token(self.next_token);
        self.shared()?
            .add(token, reader, kind)
            .then_some(Sub { token, gid })
    }

    fn exec_publisher(
        &mut self,
        domain: Domain,
        topic: &str,
        ty: &str,
        hash: &str,
        latched: Option<u32>,
        on: bool,
    ) {
        if let Some(p) = self.pubs.remove(&(domain, Rc::from(topic))) {
            self.link.handle(Event::OwnPublisher {
                gid: p.gid,
                on: false,
            });
            self.info_changed(domain);
        }
        if !on {
            return;
        }
        let Some(dds_type) = rmw::dds_type_name(ty) else {
            return;
        };
        let topic_name = rmw_dds::dds_name(topic, Role::Topic);
        // The writer offers what the topic's DDS readers request (deadline,
        // liveliness); what it still cannot meet is reported, as rosgate
        // reports an incompatible pair among clients (`hub/qos.rs`).
        let requested: Vec<Qos> = self
            .doms
            .get(&domain)
            .into_iter()
            .flat_map(|d| d.graph.endpoints())
            .filter(|e| !e.writer && e.topic == topic_name && e.dds_type == dds_type)
            .map(|e| e.qos)
            .collect();
        let offered = Qos {
            reliability: rosgate_ros2::rmw::Reliability::Reliable,
            durability: if latched.is_some() {
                rosgate_ros2::rmw::Durability::TransientLocal
            } else {
                rosgate_ros2::rmw::Durability::Volatile
            },
            ..qos::offer(&requested)
        };
        for r in &requested {
            if let Some(why) = qos::mismatch(&offered, r) {
                self.qos_mismatches += 1;
                rosgate_core::log!(
                    Warn,
                    "dds: QoS mismatch on {topic}: this gateway's writer cannot meet a DDS reader's request: incompatible {why}; no messages flow to it"
                );
            }
        }
        let q = qos::writer_offering(latched, &offered);
        let what = format!("cannot publish {topic} ({ty}, {hash})");
        let Some((writer, gid)) = self.writer(domain, topic_name, dds_type, &q, &what) else {
            return;
        };
        self.link.handle(Event::OwnPublisher { gid, on: true });
        self.pubs
            .insert((domain, Rc::from(topic)), Pub { writer, gid });
        self.info_changed(domain);
    }

    /// The link puts a message on `topic` as CDR of `ty`: `own` (its own
    /// CDR of `ty`) as it is, else `msg` (JSON) encoded. False when it did
    /// not go out.
    fn exec_put(
        &mut self,
        domain: Domain,
        topic: &str,
        ty: &str,
        msg: &[u8],
        own: Option<&[u8]>,
    ) -> bool {
        let types = self.link.types().clone();
        let Some(p) = self.pubs.get(&(domain, Rc::from(topic))) else {
            return false;
        };
        let bytes = match own {
            Some(b) => Ok(b.to_vec()),
            None => rosgate_ros2::json::from_slice(msg)
                .map_err(|e| e.to_string())
                .and_then(|v| cdr::encode(&*types, ty, &v).map_err(|e| e.to_string())),
        };
        let bytes = match bytes {
            Ok(b) => b,
            Err(e) => {
                rosgate_core::log!(
                    Debug,
                    "dds: a message on {topic} not sent to ROS 2: it is not {ty}: {e}"
                );
                return false;
            }
        };
        if let Err(e) = p.writer.write(bytes, None) {
            // Reliable with no blocking time: a full history sheds.
            rosgate_core::log!(Debug, "dds: a message on {topic} shed: {e}");
            self.shed += 1;
            return false;
        }
        true
    }

    fn info_changed(&mut self, domain: Domain) {
        if let Some(d) = self.doms.get_mut(&domain) {
            d.info_dirty = true;
        }
    }

    /// This gateway's node name: `rosgate_<first 8 hex digits of its
    /// participant's GUID prefix>`, so two gateways in one graph differ.
    fn node_name(gid: &Gid) -> String {
        let hex = rmw_dds::participant_of(gid);
        format!("rosgate_{}", &hex[hex.len().saturating_sub(8)..])
    }

    /// Writes this gateway's `ros_discovery_info` of each domain where it
    /// changed: its node with its readers and writers, and the nodes local
    /// clients declared.
    fn write_infos(&mut self) {
        for (&domain, dom) in self.doms.iter_mut() {
            if !dom.info_dirty {
                continue;
            }
            dom.info_dirty = false;
            let mut gateway = NodeInfo {
                namespace: "/".into(),
                name: Self::node_name(&dom.gid),
                readers: Vec::new(),
                writers: Vec::new(),
            };
            for ((d, _), s) in &self.subs {
                if *d == domain {
                    gateway.readers.push(s.gid);
                }
            }
            for ((d, _), p) in &self.pubs {
                if *d == domain {
                    gateway.writers.push(p.gid);
                }
            }
            for ((d, _), c) in &self.clients {
                if *d == domain {
                    gateway.writers.push(c.writer_gid);
                    gateway.readers.push(c.reader);
                }
            }
            for ((d, _), s) in &self.servers {
                if *d == domain {
                    gateway.readers.push(s.reader);
                    gateway.writers.push(s.writer_gid);
                }
            }
            for ((d, _), f) in &self.feedback {
                if *d == domain {
                    gateway.readers.push(f.gid);
                }
            }
            for ((d, _), a) in &self.offered_actions {
                if *d == domain {
                    gateway.writers.extend(a.gids());
                }
            }
            let mut nodes = vec![gateway];
            for (d, ns, name) in &self.client_nodes {
                if *d == domain && nodes.len() < rmw_dds::MAX_DDS_NODES_PER_PARTICIPANT {
                    nodes.push(NodeInfo {
                        namespace: ns.clone(),
                        name: name.clone(),
                        readers: Vec::new(),
                        writers: Vec::new(),
                    });
                }
            }
            let info = ParticipantInfo {
                gid: dom.gid,
                nodes,
            };
            if let Err(e) = dom.info_writer.write(rmw_dds::encode_info(&info), None) {
                rosgate_core::log!(Debug, "dds: ros_discovery_info not written: {e}");
                dom.info_dirty = true;
            }
        }
    }

    /// Interest and providers the link decided, into the hub.
    fn tell_hub(&mut self, hub: &mut Bridges<'_>, now: Instant) {
        for s in self.to_hub.drain(..) {
            match s {
                Side::Interest { domain, topic, on } => {
                    hub.remote_interest(PeerId::Dds, domain, &topic, on, now)
                }
                Side::Provider {
                    kind,
                    domain,
                    name,
                    ty,
                } => hub.remote_provider(kind, domain, &name, ty.as_deref(), PeerId::Dds),
                _ => {}
            }
        }
    }

    /// The DDS side's part of `/rosgate/federation`.
    fn status_json(&self) -> serde_json::Value {
        let link = self.link.stats();
        let sh = self.shared();
        let load = |f: fn(&pump::Shared) -> u64| sh.map_or(0, |s| f(s));
        serde_json::json!({
            "domains": self.domains,
            "nodes": self.doms.values().map(|d| Self::node_name(&d.gid)).collect::<Vec<_>>(),
            "entities": link.entities,
            "subscriptions": link.topics_subscribed,
            "servers": link.services_served,
            "ignored": link.ignored,
            "undecodable": self.edge.undecodable() + link.unknown_type,
            "own_samples": link.own,
            "subscribed": self.subs.len(),
            "publishing": self.pubs.len(),
            "writes_shed": self.shed,
            "qos_mismatches": self.qos_mismatches,
            "requests_refused": self.refused,
            "calls_waiting": self.pending.len(),
            "requests_from_ros2": self.replying.len(),
            "clients": self.clients.len(),
            "serving": self.servers.len(),
            "stray_replies_or_requests": self.stray,
            "client_nodes": self.client_nodes.len(),
            "link_events_dropped": sh.map_or(0, |s| s.queue.dropped()),
            "discovery_dropped": load(|s| s.disc_dropped.load(std::sync::atomic::Ordering::Relaxed)),
            "readers_refused": load(|s| s.cmds_refused.load(std::sync::atomic::Ordering::Relaxed)),
            "bad_discovery_info": load(|s| s.bad_info.load(std::sync::atomic::Ordering::Relaxed)),
            "graph_refused": self.doms.values().map(|d| d.graph.refused).sum::<u64>(),
        })
    }
}

impl Dom {
    /// A domain's participant, limited to `network` (loopback by default),
    /// with its `ros_discovery_info` writer and (for the pump) reader.
    pub(crate) fn open(
        domain: Domain,
        network: std::net::IpAddr,
    ) -> Result<(Dom, pump::Reader), String> {
        let dp = rustdds::DomainParticipantBuilder::new(u16::from(domain))
            .with_only_networks([network])
            .build()
            .map_err(|e| format!("dds: cannot join domain {domain}: {e}"))?;
        let err = |e: rustdds::dds::result::CreateError| format!("dds: domain {domain}: {e}");
        let publisher = dp.create_publisher(&qos::writer(None)).map_err(err)?;
        let subscriber = dp.create_subscriber(&qos::reader(&[])).map_err(err)?;
        let info_topic = dp
            .create_topic(
                rmw_dds::DISCOVERY_TOPIC.into(),
                rmw_dds::DISCOVERY_TYPE.into(),
                &qos::discovery(false),
                TopicKind::NoKey,
            )
            .map_err(err)?;
        let info_writer = publisher
            .create_datawriter_no_key::<Vec<u8>, Raw>(&info_topic, Some(qos::discovery(false)))
            .map_err(err)?;
        let info_reader = subscriber
            .create_simple_datareader_no_key::<Vec<u8>, Raw>(
                &info_topic,
                Some(qos::discovery(true)),
            )
            .map_err(err)?;
        let gid = dp.guid().to_bytes();
        Ok((
            Dom {
                dp,
                publisher,
                subscriber,
                gid,
                graph: Graph::new(u32::from(domain)),
                info_writer,
                info_dirty: true,
            },
            info_reader,
        ))
    }
}

impl Exec for DdsPeer {
    fn link(&mut self) -> &mut Link {
        &mut self.link
    }

    fn subscribe(&mut self, domain: Domain, topic: &str, ty: Option<(String, String)>, on: bool) {
        self.exec_subscribe(domain, topic.to_string(), ty.map(|(t, _)| t), on);
    }

    fn publisher(
        &mut self,
        domain: Domain,
        topic: &str,
        ty: &str,
        hash: &str,
        latched: Option<u32>,
        on: bool,
    ) {
        self.exec_publisher(domain, topic, ty, hash, latched, on);
    }

    fn put(
        &mut self,
        domain: Domain,
        topic: &str,
        ty: &str,
        payload: &[u8],
        cdr: Option<&[u8]>,
    ) -> bool {
        self.exec_put(domain, topic, ty, payload, cdr)
    }

    fn call(
        &mut self,
        domain: Domain,
        service: &str,
        ty: &str,
        _hash: &str,
        query: link::QueryId,
        payload: &[u8],
    ) -> Result<(), String> {
        self.exec_call(domain, service, ty, query, payload)
    }

    fn send_goal(
        &mut self,
        domain: Domain,
        action: &str,
        uuid: [u8; 16],
        query: link::QueryId,
        goal: &[u8],
    ) -> Result<(), String> {
        self.exec_send_goal(domain, action, uuid, query, goal)
    }

    fn get_result(
        &mut self,
        domain: Domain,
        action: &str,
        uuid: [u8; 16],
        query: link::QueryId,
    ) -> Result<(), String> {
        self.exec_get_result(domain, action, uuid, query)
    }

    fn cancel_goal(&mut self, domain: Domain, action: &str, uuid: [u8; 16], query: link::QueryId) {
        self.exec_cancel(domain, action, uuid, query);
    }

    fn watch_feedback(&mut self, domain: Domain, action: &str, on: bool) {
        self.exec_watch_feedback(domain, action, on);
    }

    fn describe(
        &mut self,
        domain: Domain,
        node: &str,
        ty: &str,
        hash: &str,
        query: link::QueryId,
    ) -> Result<(), String> {
        self.exec_describe(domain, node, ty, hash, query)
    }

    fn offer(&mut self, domain: Domain, name: &str, ty: &str, action: bool, on: bool) {
        if action {
            self.exec_offer_action(domain, name, ty, on);
        } else {
            self.exec_offer(domain, name, ty, on);
        }
    }

    fn put_feedback(&mut self, domain: Domain, action: &str, uuid: [u8; 16], payload: &[u8]) {
        self.exec_put_action(domain, action, Some((uuid, payload)), &[]);
    }

    fn put_status(&mut self, domain: Domain, action: &str, goals: &[([u8; 16], Stamp, i8)]) {
        self.exec_put_action(domain, action, None, goals);
    }

    fn reply(&mut self, query: InQuery, answer: link::Answer) {
        self.exec_reply(query, answer);
    }

    fn deliver(&mut self, t: ToHub) {
        DdsPeer::deliver(self, t);
    }
}

impl Shell for DdsPeer {
    fn bridged(&self, domain: Domain) -> bool {
        self.domains.contains(&domain)
    }

    /// The link's actions, then a reader or writer made or dropped said
    /// on `ros_discovery_info` now, not at the next turn (the loop may
    /// sleep until then).
    fn run(&mut self) -> bool {
        let ok = run_link(self);
        self.write_infos();
        ok
    }
}

impl Peer for DdsPeer {
    /// The nodes local clients declared in bridged domains, mirrored on
    /// `ros_discovery_info` when the hub's nodes changed.
    fn sync(&mut self, hub: &mut Bridges<'_>, _now: Instant) {
        let generation = hub.nodes().generation();
        if self.nodes_generation == Some(generation) {
            return;
        }
        self.nodes_generation = Some(generation);
        let mut now = Vec::new();
        for &d in &self.domains {
            for (_, tag) in hub.nodes().in_domain(d) {
                if let Some(n) = hub.nodes().get(tag) {
                    now.push((d, n.namespace().to_string(), n.name().to_string()));
                }
            }
        }
        if now != self.client_nodes {
            self.client_nodes = now;
            for d in self.domains.clone() {
                self.info_changed(d);
            }
        }
    }

    fn want(&mut self, hub: &Bridges<'_>, domain: Domain, topic: Rc<str>) {
        asks::want(self, domain, &topic, hub.topic_type(domain, &topic), true);
    }

    fn unwant(&mut self, domain: Domain, topic: &Rc<str>) {
        asks::want(self, domain, topic, None, false);
    }

    fn provide(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        asks::provide(self, domain, &name, Some(ty));
    }

    /// The local provider went: the link answers its calls waiting with
    /// an error, and withdraws the offer.
    fn unprovide(&mut self, domain: Domain, name: &Rc<str>) {
        asks::provide(self, domain, name, None);
    }

    fn serve(&mut self, domain: Domain, name: Rc<str>, ty: &str) {
        asks::serve(self, domain, &name, Some(ty));
    }

    fn unserve(&mut self, domain: Domain, name: &Rc<str>) {
        asks::serve(self, domain, name, None);
    }

    fn publish(
        &mut self,
        domain: Domain,
        topic: &str,
        msg: &str,
        cdr: Option<Cdr<'_>>,
        depth: Option<u32>,
    ) -> Put {
        asks::publish(self, domain, topic, msg, cdr, depth)
    }

    fn id(&self) -> PeerId {
        PeerId::Dds
    }

    /// A call of a ROS 2 service: the link's, if a ROS 2 server serves it.
    fn call(&mut self, domain: Domain, service: &str, id: &str, args: &str, now: Instant) -> bool {
        asks::call(self, domain, service, id, args, now)
    }

    /// The local provider answered a ROS 2 client's call: the link replies.
    fn answer(&mut self, id: &str, values: &str, result: bool) {
        asks::answer(self, id, values, result);
    }

    /// A goal to a ROS 2 action server: the link's, with a fresh UUID.
    fn goal(
        &mut self,
        domain: Domain,
        action: &str,
        id: &str,
        _ty: &str,
        args: &str,
        now: Instant,
    ) -> bool {
        asks::send_goal(self, domain, action, id, args, now, |x| x.goal_uuid(id))
    }

    /// A local client cancels its goal to ROS 2: the link sends it (now,
    /// or when the server accepts the goal).
    fn cancel(&mut self, domain: Domain, _action: &str, id: &str) {
        asks::cancel_goal(self, domain, id);
    }

    fn goal_update(&mut self, id: &str, values: &str, end: Option<(u8, bool)>) {
        self.goal_from_local(id, values, end);
    }

    fn turn(&mut self, hub: &mut Bridges<'_>, now: Instant) -> Option<Instant> {
        self.discovery(now);
        if let Some(sh) = self.shared().cloned() {
            sh.queue.feed(
                &mut self.link,
                &mut self.queued,
                &mut self.next_in_query,
                now,
            );
        }
        self.run();
        self.tell_hub(hub, now);
        let types = self.link.types().clone();
        if let Some(sh) = self.shared().cloned() {
            self.edge
                .hand_over(hub, &types, sh.queue.inbox(), PeerId::Dds, now);
        }
        let interval = Duration::from_millis(DDS_GRAPH_INTERVAL_MS);
        self.sync
            .after_turn(&self.link, hub, &self.domains, interval, now)
    }

    /// The link's entities and the adapter's endpoints and node lists
    /// (what DDS participants announced).
    fn held_bytes(&self) -> usize {
        self.link.stats().bytes + self.doms.values().map(|d| d.graph.bytes()).sum::<usize>()
    }

    fn status(&self, status: &mut serde_json::Value) {
        status["dds"] = self.status_json();
    }

    /// Stops the pump (its readers go with it); the participants close as
    /// they drop.
    fn close(&mut self) {
        if let Some(p) = self.pump.take() {
            p.stop();
        }
    }
}
