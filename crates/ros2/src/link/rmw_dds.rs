//! The DDS adapter, pure: what DDS discovery announces (endpoints by GUID,
//! with their topic, type, QoS and USER_DATA) and what ROS 2 nodes say on
//! the `ros_discovery_info` topic (`rmw_dds_common/msg/ParticipantEntitiesInfo`:
//! which endpoint belongs to which node) as the link's [`Entity`]s and
//! [`Event`]s, and the topic and type names the shell's readers and
//! writers use. The shell that owns the DDS participants (`rosgate-dds`)
//! calls these; nothing here knows a DDS implementation.
//!
//! ROS 2 over DDS, as rmw_fastrtps_cpp and rmw_cyclonedds_cpp spell it
//! (the "Topic and Service name mapping to DDS" design article,
//! <https://design.ros2.org/articles/topic_and_service_names.html>):
//! - a topic `/chatter` is the DDS topic `rt/chatter`; a service `/add` is
//!   two topics, `rq/addRequest` (requests: the client writes, the server
//!   reads) and `rr/addReply` (replies);
//! - a type `std_msgs/msg/String` is `std_msgs::msg::dds_::String_`; a
//!   service's request and response types end in `_Request_`/`_Response_`;
//! - an endpoint's USER_DATA carries `typehash=RIHS01_<hex>;` (Jazzy);
//! - an entity's GID is its 16-byte GUID (participant prefix and entity
//!   id), which is what `ros_discovery_info` lists under each node.
//!
//! Invariants:
//! - an entity is given to the link only once both its endpoint and the
//!   node that owns it are known, and withdrawn ([`Event::Gone`]) as soon
//!   as either goes: the link never sees an entity without its node;
//! - the tables are bounded ([`MAX_DDS_ENDPOINTS`] endpoints,
//!   [`MAX_DDS_PARTICIPANTS`] participants' node lists, each at most
//!   [`MAX_DDS_NODES_PER_PARTICIPANT`] nodes and [`MAX_DDS_GIDS_PER_NODE`]
//!   GIDs per node); what does not fit is refused and counted;
//! - bytes that do not decode as a `ParticipantEntitiesInfo` give `None`,
//!   never a guess nor a panic.

use std::collections::{BTreeMap, HashMap};

use super::{Domain, Entity, EntityKind, Event, Gid, Qos};
use crate::rmw;

/// DDS endpoints (readers and writers of other participants) remembered.
pub const MAX_DDS_ENDPOINTS: usize = super::MAX_ENTITIES;
/// Participants whose `ros_discovery_info` node lists are remembered.
pub const MAX_DDS_PARTICIPANTS: usize = 1024;
/// Nodes one participant's `ros_discovery_info` may list; a longer list is
/// refused whole (counted).
pub const MAX_DDS_NODES_PER_PARTICIPANT: usize = 1024;
/// Reader or writer GIDs one node of a `ros_discovery_info` may list; a
/// longer list is refused whole (counted).
pub const MAX_DDS_GIDS_PER_NODE: usize = 4096;

/// The DDS topic that carries ROS 2's node graph.
pub const DISCOVERY_TOPIC: &str = "ros_discovery_info";
/// Its DDS type.
pub const DISCOVERY_TYPE: &str = "rmw_dds_common::msg::dds_::ParticipantEntitiesInfo_";

/// What a DDS topic is to ROS 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// `rt/<topic>`: a topic's data.
    Topic,
    /// `rq/<service>Request`: a service's requests.
    Request,
    /// `rr/<service>Reply`: a service's replies.
    Reply,
}

/// A DDS topic name as ROS 2's name and role (`rt/chatter` -> `/chatter`).
/// `None` for a topic that is not ROS 2's (`ros_discovery_info`, another
/// DDS application's).
pub fn ros_name(dds: &str) -> Option<(String, Role)> {
    let (role, rest) = if let Some(r) = dds.strip_prefix("rt/") {
        (Role::Topic, r)
    } else if let Some(r) = dds.strip_prefix("rq/") {
        (Role::Request, r.strip_suffix("Request")?)
    } else if let Some(r) = dds.strip_prefix("rr/") {
        (Role::Reply, r.strip_suffix("Reply")?)
    } else {
        return None;
    };
    if rest.is_empty() {
        return None;
    }
    Some((format!("/{rest}"), role))
}

/// The DDS topic name of a ROS 2 name in a role (`/chatter` -> `rt/chatter`).
pub fn dds_name(ros: &str, role: Role) -> String {
    // One `/` only: the mapping is the inverse of `ros_name` for any name.
    let bare = ros.strip_prefix('/').unwrap_or(ros);
    match role {
        Role::Topic => format!("rt/{bare}"),
        Role::Request => format!("rq/{bare}Request"),
        Role::Reply => format!("rr/{bare}Reply"),
    }
}

/// The DDS type names of a service `pkg/srv/X`: request and response.
pub fn service_types(ros: &str) -> Option<(String, String)> {
    let base = rmw::dds_type_name(ros)?;
    let stem = base.strip_suffix('_')?;
    Some((format!("{stem}_Request_"), format!("{stem}_Response_")))
}

/// The type hash an endpoint's USER_DATA announces (`typehash=RIHS01_...;`),
/// or empty. The value may come as the parameter's bytes whole (a CDR
/// length first, padding after), so the key is looked for anywhere.
pub fn type_hash(user_data: &[u8]) -> String {
    const KEY: &[u8] = b"typehash=";
    let Some(at) = user_data.windows(KEY.len()).position(|w| w == KEY) else {
        return String::new();
    };
    let rest = &user_data[at + KEY.len()..];
    let end = rest.iter().position(|&b| b == b';').unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end])
        .ok()
        .filter(|h| h.starts_with("RIHS01_") && h.len() <= 80)
        .unwrap_or("")
        .to_string()
}

/// USER_DATA announcing `hash`, as rmw_fastrtps writes it.
pub fn user_data(hash: &str) -> Vec<u8> {
    if hash.is_empty() {
        Vec::new()
    } else {
        format!("typehash={hash};").into_bytes()
    }
}

/// One DDS endpoint another participant announced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub guid: Gid,
    /// A writer (else a reader).
    pub writer: bool,
    /// The DDS topic and type names.
    pub topic: String,
    pub dds_type: String,
    pub qos: Qos,
    /// The type hash its USER_DATA announced (may be empty).
    pub hash: String,
}

impl Endpoint {
    /// The kind, name and ROS type this endpoint is to ROS 2's graph:
    /// topic writers and readers are publishers and subscriptions; a
    /// request reader is a service server and a request writer a client
    /// (the reply topic's endpoints are their other halves, not listed).
    pub fn ros(&self) -> Option<(EntityKind, String, String)> {
        let (name, role) = ros_name(&self.topic)?;
        match role {
            Role::Topic => {
                let ty = rmw::ros_type_name(&self.dds_type)?;
                let kind = if self.writer {
                    EntityKind::Publisher
                } else {
                    EntityKind::Subscription
                };
                Some((kind, name, ty))
            }
            Role::Request => {
                let ty =
                    rmw::dds_service_type(&self.dds_type).and_then(|t| rmw::ros_type_name(&t))?;
                let kind = if self.writer {
                    EntityKind::ServiceClient
                } else {
                    EntityKind::ServiceServer
                };
                Some((kind, name, ty))
            }
            Role::Reply => None,
        }
    }
}

/// The participant prefix of a GUID (its first 12 bytes) as hex: the
/// link's `participant` of every entity the participant has.
pub fn participant_of(gid: &Gid) -> String {
    gid[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// One node of a `ParticipantEntitiesInfo`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeInfo {
    pub namespace: String,
    pub name: String,
    pub readers: Vec<Gid>,
    pub writers: Vec<Gid>,
}

impl NodeInfo {
    /// The node's fully qualified name.
    pub fn fqn(&self) -> String {
        if self.namespace.ends_with('/') {
            format!("{}{}", self.namespace, self.name)
        } else {
            format!("{}/{}", self.namespace, self.name)
        }
    }
}

/// A `rmw_dds_common/msg/ParticipantEntitiesInfo`: the participant's GID
/// and its nodes with their endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParticipantInfo {
    pub gid: Gid,
    pub nodes: Vec<NodeInfo>,
}

/// A CDR reader of the few shapes `ParticipantEntitiesInfo` has, after
/// the 4-byte encapsulation header (alignment counts from its end).
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    little: bool,
}

impl Reader<'_> {
    fn align(&mut self, n: usize) {
        let rel = self.at - 4;
        self.at += (n - rel % n) % n;
    }

    fn u32(&mut self) -> Option<u32> {
        self.align(4);
        let s: [u8; 4] = self.b.get(self.at..self.at + 4)?.try_into().ok()?;
        self.at += 4;
        Some(if self.little {
            u32::from_le_bytes(s)
        } else {
            u32::from_be_bytes(s)
        })
    }

    fn gid(&mut self) -> Option<Gid> {
        let g: Gid = self.b.get(self.at..self.at + 16)?.try_into().ok()?;
        self.at += 16;
        Some(g)
    }

    /// A string bounded as `string<=256`, NUL-terminated in CDR.
    fn string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        if n == 0 || n > 257 {
            return None;
        }
        let s = self.b.get(self.at..self.at + n)?;
        self.at += n;
        let (nul, text) = s.split_last()?;
        if *nul != 0 {
            return None;
        }
        String::from_utf8(text.to_vec()).ok()
    }

    /// A sequence's length, if it is within `max` and the bytes left
    /// could hold that many of `min_each` bytes.
    fn len(&mut self, max: usize, min_each: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n <= max && n.saturating_mul(min_each) <= self.b.len().saturating_sub(self.at))
            .then_some(n)
    }

    fn gids(&mut self) -> Option<Vec<Gid>> {
        let n = self.len(MAX_DDS_GIDS_PER_NODE, 16)?;
        (0..n).map(|_| self.gid()).collect()
    }
}

/// Decodes a `ParticipantEntitiesInfo` sample (CDR with its encapsulation
/// header); `None` when it does not decode or breaks a bound.
pub fn decode_info(cdr: &[u8]) -> Option<ParticipantInfo> {
    let little = match cdr.get(..2)? {
        [0, 1] | [0, 3] => true,
        [0, 0] | [0, 2] => false,
        _ => return None,
    };
    let mut r = Reader {
        b: cdr,
        at: 4,
        little,
    };
    let gid = r.gid()?;
    // A node needs at least its two string lengths and two sequence lengths.
    let n = r.len(MAX_DDS_NODES_PER_PARTICIPANT, 16)?;
    let mut nodes = Vec::with_capacity(n);
    for _ in 0..n {
        let namespace = r.string()?;
        let name = r.string()?;
        let readers = r.gids()?;
        let writers = r.gids()?;
        nodes.push(NodeInfo {
            namespace,
            name,
            readers,
            writers,
        });
    }
    Some(ParticipantInfo { gid, nodes })
}

/// A CDR writer for [`encode_info`] (little endian, with the header).
struct Writer(Vec<u8>);

impl Writer {
    fn align(&mut self, n: usize) {
        while (self.0.len() - 4) % n != 0 {
            self.0.push(0);
        }
    }
    fn u32(&mut self, v: usize) {
        self.align(4);
        self.0
            .extend_from_slice(&u32::try_from(v).unwrap_or(u32::MAX).to_le_bytes());
    }
    fn string(&mut self, s: &str) {
        self.u32(s.len() + 1);
        self.0.extend_from_slice(s.as_bytes());
        self.0.push(0);
    }
    fn gids(&mut self, g: &[Gid]) {
        self.u32(g.len());
        for g in g {
            self.0.extend_from_slice(g);
        }
    }
}

/// Encodes this gateway's `ParticipantEntitiesInfo` (CDR little endian,
/// with its encapsulation header), as rmw_dds_common's typesupport does.
pub fn encode_info(info: &ParticipantInfo) -> Vec<u8> {
    let mut w = Writer(vec![0, 1, 0, 0]);
    w.0.extend_from_slice(&info.gid);
    w.u32(info.nodes.len());
    for n in &info.nodes {
        w.string(&n.namespace);
        w.string(&n.name);
        w.gids(&n.readers);
        w.gids(&n.writers);
    }
    w.0
}

/// The GID the link knows a node by: its participant's prefix and a hash
/// of its name (DDS gives nodes no GUID of their own).
fn node_gid(participant: &Gid, fqn: &str) -> Gid {
    let mut g = *participant;
    // FNV-1a, 32 bits: stable across runs, enough to tell one
    // participant's nodes apart.
    let mut h: u32 = 0x811c_9dc5;
    for b in fqn.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    g[12..].copy_from_slice(&h.to_be_bytes());
    g
}

/// What the adapter remembers of one domain's DDS graph, turned into the
/// link's events (see the module docs).
#[derive(Debug, Default)]
pub struct Graph {
    domain: Domain,
    endpoints: HashMap<Gid, Endpoint>,
    /// Each participant's nodes, by its 12-byte prefix.
    infos: HashMap<[u8; 12], ParticipantInfo>,
    /// The entities given to the link, by GID, per participant.
    given: HashMap<[u8; 12], BTreeMap<Gid, Entity>>,
    /// Endpoints or node lists refused by a bound, ever.
    pub refused: u64,
    /// What the tables hold, for the memory ledger ([`Graph::bytes`]).
    bytes: usize,
}

/// Bytes an endpoint or a node list costs beside its strings and GIDs
/// (the map entries, the struct), for the memory ledger.
const DDS_ENTRY_COST: usize = 96;

fn endpoint_cost(e: &Endpoint) -> usize {
    DDS_ENTRY_COST + e.topic.len() + e.dds_type.len() + e.hash.len()
}

fn info_cost(i: &ParticipantInfo) -> usize {
    DDS_ENTRY_COST
        + i.nodes
            .iter()
            .map(|n| {
                DDS_ENTRY_COST
                    + n.namespace.len()
                    + n.name.len()
                    + 16 * (n.readers.len() + n.writers.len())
            })
            .sum::<usize>()
}

fn prefix(g: &Gid) -> [u8; 12] {
    let mut p = [0; 12];
    p.copy_from_slice(&g[..12]);
    p
}

impl Graph {
    /// The graph of `domain`.
    pub fn new(domain: Domain) -> Graph {
        Graph {
            domain,
            ..Graph::default()
        }
    }

    /// Bytes the endpoints and node lists remembered hold (the entities
    /// given to the link are the link's to count).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The endpoint of GID `gid`, if known.
    pub fn endpoint(&self, gid: &Gid) -> Option<&Endpoint> {
        self.endpoints.get(gid)
    }

    /// The endpoints known, in no order.
    pub fn endpoints(&self) -> impl Iterator<Item = &Endpoint> {
        self.endpoints.values()
    }

    /// An endpoint was discovered (or announced again).
    pub fn found(&mut self, ep: Endpoint, out: &mut Vec<Event>) {
        if !self.endpoints.contains_key(&ep.guid) && self.endpoints.len() >= MAX_DDS_ENDPOINTS {
            self.refused += 1;
            return;
        }
        let p = prefix(&ep.guid);
        self.bytes += endpoint_cost(&ep);
        if let Some(old) = self.endpoints.insert(ep.guid, ep) {
            self.bytes -= endpoint_cost(&old);
        }
        self.settle(p, out);
    }

    /// An endpoint was lost.
    pub fn lost(&mut self, gid: &Gid, out: &mut Vec<Event>) {
        if let Some(old) = self.endpoints.remove(gid) {
            self.bytes -= endpoint_cost(&old);
            self.settle(prefix(gid), out);
        }
    }

    /// A participant said which nodes it has (`ros_discovery_info`).
    pub fn info(&mut self, info: ParticipantInfo, out: &mut Vec<Event>) {
        let p = prefix(&info.gid);
        if !self.infos.contains_key(&p) && self.infos.len() >= MAX_DDS_PARTICIPANTS {
            self.refused += 1;
            return;
        }
        self.bytes += info_cost(&info);
        if let Some(old) = self.infos.insert(p, info) {
            self.bytes -= info_cost(&old);
        }
        self.settle(p, out);
    }

    /// A participant left: its nodes and endpoints go.
    pub fn participant_lost(&mut self, p: &[u8; 12], out: &mut Vec<Event>) {
        if let Some(old) = self.infos.remove(p) {
            self.bytes -= info_cost(&old);
        }
        let mut freed = 0;
        self.endpoints.retain(|g, e| {
            let keep = prefix(g) != *p;
            if !keep {
                freed += endpoint_cost(e);
            }
            keep
        });
        self.bytes -= freed;
        self.settle(*p, out);
    }

    /// The entities participant `p` has now, against those given: the
    /// differences, as the link's events (gone first).
    fn settle(&mut self, p: [u8; 12], out: &mut Vec<Event>) {
        let now = self.entities(&p);
        let before = self.given.remove(&p).unwrap_or_default();
        for (gid, e) in &before {
            if now.get(gid) != Some(e) {
                out.push(Event::Gone(*gid));
            }
        }
        for (gid, e) in &now {
            if before.get(gid) != Some(e) {
                out.push(Event::Appeared(e.clone()));
            }
        }
        if !now.is_empty() {
            self.given.insert(p, now);
        }
    }

    /// What participant `p`'s nodes and endpoints make, as entities.
    fn entities(&self, p: &[u8; 12]) -> BTreeMap<Gid, Entity> {
        let mut out = BTreeMap::new();
        let Some(info) = self.infos.get(p) else {
            return out;
        };
        let participant = participant_of(&info.gid);
        for node in &info.nodes {
            let fqn = node.fqn();
            let gid = node_gid(&info.gid, &fqn);
            out.insert(
                gid,
                Entity {
                    gid,
                    kind: EntityKind::Node,
                    domain: self.domain,
                    participant: participant.clone(),
                    node: fqn.clone(),
                    name: String::new(),
                    ty: String::new(),
                    hash: String::new(),
                    qos: Qos::keep_last(0),
                },
            );
            for g in node.readers.iter().chain(&node.writers) {
                let Some(ep) = self.endpoints.get(g) else {
                    continue;
                };
                let Some((kind, name, ty)) = ep.ros() else {
                    continue;
                };
                out.insert(
                    *g,
                    Entity {
                        gid: *g,
                        kind,
                        domain: self.domain,
                        participant: participant.clone(),
                        node: fqn.clone(),
                        name,
                        ty,
                        hash: ep.hash.clone(),
                        qos: ep.qos,
                    },
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `ros_discovery_info` sample rclpy 7.1.6 on Fast DDS 2.14 (the
    /// Jazzy wheels) put for one node `/talker` (its parameter services'
    /// readers and writers, `/rosout`, `/parameter_events`, `/chatter`,
    /// `/latched`: 7 readers, 11 writers), as rosgate's RustDDS raw
    /// reader received it.
    fn captured() -> Vec<u8> {
        include_bytes!("tests_dds_info.bin").to_vec()
    }

    #[test]
    fn names_map_both_ways_and_others_are_not_ros() {
        assert_eq!(
            ros_name("rt/chatter"),
            Some(("/chatter".into(), Role::Topic))
        );
        assert_eq!(
            ros_name("rq/talker/get_parametersRequest"),
            Some(("/talker/get_parameters".into(), Role::Request))
        );
        assert_eq!(
            ros_name("rr/add_two_intsReply"),
            Some(("/add_two_ints".into(), Role::Reply))
        );
        assert_eq!(ros_name("ros_discovery_info"), None);
        assert_eq!(ros_name("rq/xReply"), None);
        assert_eq!(ros_name("rt/"), None);
        assert_eq!(dds_name("/chatter", Role::Topic), "rt/chatter");
        assert_eq!(dds_name("/a/b", Role::Request), "rq/a/bRequest");
        assert_eq!(dds_name("/a/b", Role::Reply), "rr/a/bReply");
        assert_eq!(ros_name("rt//a"), Some(("//a".into(), Role::Topic)));
        assert_eq!(
            dds_name("//a", Role::Topic),
            "rt//a",
            "the inverse, whatever the name"
        );
        assert_eq!(
            service_types("example_interfaces/srv/AddTwoInts"),
            Some((
                "example_interfaces::srv::dds_::AddTwoInts_Request_".into(),
                "example_interfaces::srv::dds_::AddTwoInts_Response_".into()
            ))
        );
    }

    #[test]
    fn type_hashes_come_from_user_data() {
        let h = "RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18";
        assert_eq!(type_hash(format!("typehash={h};").as_bytes()), h);
        assert_eq!(type_hash(&user_data(h)), h);
        assert_eq!(type_hash(b"other=1;"), "");
        // As the parameter's value whole: its length first, padding after.
        let mut whole = 72u32.to_le_bytes().to_vec();
        whole.extend_from_slice(format!("typehash={h};").as_bytes());
        whole.extend_from_slice(&[0, 0]);
        assert_eq!(type_hash(&whole), h);
        assert_eq!(type_hash(&[0xff, 0xfe]), "");
    }

    #[test]
    fn a_captured_info_decodes_and_encodes_back_to_the_same_bytes() {
        let bytes = captured();
        let info = decode_info(&bytes).expect("decodes");
        assert_eq!(info.nodes.len(), 1);
        assert_eq!(info.nodes[0].fqn(), "/talker");
        assert_eq!(
            (info.nodes[0].readers.len(), info.nodes[0].writers.len()),
            (7, 11)
        );
        assert!(!info.nodes[0].writers.is_empty());
        assert_eq!(info.gid[..12], info.nodes[0].writers[0][..12]);
        let again = encode_info(&info);
        assert_eq!(again, bytes, "as rmw_dds_common's typesupport writes it");
        assert_eq!(decode_info(&again), Some(info));
    }

    #[test]
    fn truncated_or_hostile_infos_do_not_decode() {
        let bytes = captured();
        for n in 0..bytes.len() {
            let _ = decode_info(&bytes[..n]);
        }
        // A node count far beyond the bytes: refused before allocating.
        let mut huge = vec![0, 1, 0, 0];
        huge.extend_from_slice(&[0; 16]);
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_info(&huge), None);
        assert_eq!(decode_info(&[9, 9, 0, 0]), None);
    }

    fn ep(guid: Gid, writer: bool, topic: &str, ty: &str) -> Endpoint {
        Endpoint {
            guid,
            writer,
            topic: topic.into(),
            dds_type: ty.into(),
            qos: Qos::keep_last(10),
            hash: String::new(),
        }
    }

    #[test]
    fn an_entity_appears_once_its_endpoint_and_its_node_are_known_and_goes_with_either() {
        let mut g = Graph::new(7);
        let mut out = Vec::new();
        let mut w = [1u8; 16];
        w[15] = 3;
        g.found(
            ep(w, true, "rt/chatter", "std_msgs::msg::dds_::String_"),
            &mut out,
        );
        assert!(out.is_empty(), "no node lists it yet");
        let mut pgid = [1u8; 16];
        pgid[12..].copy_from_slice(&[0, 0, 1, 0xc1]);
        let info = ParticipantInfo {
            gid: pgid,
            nodes: vec![NodeInfo {
                namespace: "/".into(),
                name: "talker".into(),
                readers: vec![],
                writers: vec![w],
            }],
        };
        g.info(info.clone(), &mut out);
        let appeared: Vec<_> = out
            .iter()
            .filter_map(|e| match e {
                Event::Appeared(e) => Some((e.kind, e.node.clone(), e.name.clone(), e.ty.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(appeared.len(), 2);
        assert!(appeared.contains(&(
            EntityKind::Publisher,
            "/talker".into(),
            "/chatter".into(),
            "std_msgs/msg/String".into()
        )));
        assert!(appeared.iter().any(|a| a.0 == EntityKind::Node));
        out.clear();
        g.info(info, &mut out);
        assert!(out.is_empty(), "the same list again changes nothing");
        g.lost(&w, &mut out);
        assert_eq!(out, vec![Event::Gone(w)]);
        out.clear();
        assert!(g.bytes() > 0);
        g.participant_lost(&[1; 12], &mut out);
        assert_eq!(out.len(), 1, "the node goes");
        assert_eq!(g.bytes(), 0, "what it held is given back");
    }

    #[test]
    fn services_are_their_request_topics_endpoints() {
        let e = ep(
            [2; 16],
            false,
            "rq/add_two_intsRequest",
            "example_interfaces::srv::dds_::AddTwoInts_Request_",
        );
        assert_eq!(
            e.ros(),
            Some((
                EntityKind::ServiceServer,
                "/add_two_ints".into(),
                "example_interfaces/srv/AddTwoInts".into()
            ))
        );
        let r = ep(
            [2; 16],
            true,
            "rr/add_two_intsReply",
            "example_interfaces::srv::dds_::AddTwoInts_Response_",
        );
        assert_eq!(r.ros(), None);
    }
}
