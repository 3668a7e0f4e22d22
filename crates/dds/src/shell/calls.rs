//! Services both ways over DDS, as rmw_fastrtps makes them (see the
//! shell's module docs): this gateway as a client of the services ROS 2
//! serves (a request writer and a reply reader each, made when a server is
//! discovered, so both are matched by the time a client calls), requests
//! written with the reply reader's GUID as their related sample identity
//! and replies matched by the request's sequence number; local services
//! (and actions' goal services, `goals.rs`) offered with a request reader
//! and a reply writer, each reply carrying its request's identity.
//!
//! Invariants: every call the link asks ends in exactly one reply to the
//! link (the server's, or a refusal when it cannot be sent); a call whose
//! reply never comes is forgotten after the link's own deadline
//! (`rosgate_ros2::link::CALL_TIMEOUT`); a ROS 2 client's request is given
//! to the link once and answered at most once (DDS has no error reply).

use std::rc::Rc;
use std::time::Instant;

use mio::Token;
use rosgate_core::nodes::Domain;
use rosgate_peers::ros2::asks::Shell;
use rosgate_ros2::cdr;
use rosgate_ros2::link::rmw_dds::{self, Role};
use rosgate_ros2::link::{self, Event, Gid, InQuery, Reply as LinkReply};
use serde_json::Value;

use super::{DdsPeer, Sub, Writer};
use crate::pump::{self, Kind};
use crate::qos;

/// This gateway as a client of a ROS 2 service: its request writer and
/// reply reader (made when a server is discovered). A request is written
/// only once both have matched the server's (a volatile writer's sample
/// reaches only the readers matched when it is written, and rmw_fastrtps's
/// servers answer only clients whose reply reader they have matched):
/// until then it waits here.
pub(super) struct Client {
    pub(super) writer: Writer,
    pub(super) writer_gid: Gid,
    pub(super) token: Token,
    pub(super) reader: Gid,
    /// Requests waiting for the match (CDR, query, response type, expect).
    pub(super) waiting: Vec<(Vec<u8>, link::QueryId, String, Expect)>,
}

/// Calls to one service waiting for this gateway's request writer and
/// reply reader to match the server's; more fail at once.
pub const MAX_DDS_WAITING_CALLS: usize = 64;

/// A local service (or an action's goal service) offered to ROS 2: its
/// request reader and reply writer.
pub(super) struct Server {
    pub(super) token: Token,
    pub(super) reader: Gid,
    pub(super) writer: Writer,
    pub(super) writer_gid: Gid,
    /// The request's and response's ROS types.
    pub(super) request: String,
    pub(super) response: String,
    /// For an action's goal service: which (`action::SEND_GOAL` ...), and
    /// the action's name (what the link knows it by).
    pub(super) goal_part: Option<(&'static str, Rc<str>)>,
}

/// What the link expects of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// A service's response (JSON).
    Service,
    /// `send_goal`'s: accepted or not.
    Accepted,
    /// `get_result`'s: status and result.
    Result,
    /// `cancel_goal`'s: the goal ends through its result; nothing to tell.
    Nothing,
    /// `~/get_type_description`'s: the description, if the node gave one.
    Described,
}

/// A call this gateway sent, waiting for its reply.
pub(super) struct Pending {
    pub(super) query: link::QueryId,
    /// The response's ROS type.
    pub(super) response: String,
    pub(super) expect: Expect,
    pub(super) at: Instant,
}

/// A ROS 2 client's request given to the link, until its one reply.
pub(super) struct Replying {
    pub(super) domain: Domain,
    /// The service (or goal service) it came to.
    pub(super) service: Rc<str>,
    pub(super) id: pump::SampleId,
    /// The response's ROS type.
    pub(super) response: String,
    /// When it came (a goal's acceptance stamp).
    pub(super) stamp: link::Stamp,
}

/// Services this gateway is a client of, all domains; servers of further
/// ones are not called (the call fails at once).
pub const MAX_DDS_CLIENTS: usize = 1024;

impl DdsPeer {
    /// Joins service `name` (of ROS type `ty`) as a client, when ROS 2
    /// serves it; leaves it when it no longer does (`None`).
    pub(super) fn client_of(&mut self, domain: Domain, name: &str, ty: Option<&str>) {
        let key = (domain, Rc::<str>::from(name));
        let Some(ty) = ty else {
            if let Some(c) = self.clients.remove(&key) {
                if let Some(sh) = self.shared() {
                    sh.remove(c.token);
                }
                self.info_changed(domain);
            }
            return;
        };
        if self.clients.contains_key(&key) || self.clients.len() >= MAX_DDS_CLIENTS {
            return;
        }
        let Some((req, rep)) = rmw_dds::service_types(ty) else {
            return;
        };
        let q = qos::writer(None);
        let what = format!("cannot join {name} as a client");
        let request = rmw_dds::dds_name(name, Role::Request);
        let Some((writer, writer_gid)) = self.writer(domain, request, req, &q, &what) else {
            return;
        };
        let reply = rmw_dds::dds_name(name, Role::Reply);
        let kind = Kind::Reply { domain };
        let Some(Sub {
            token,
            gid: reader_gid,
        }) = self.reader_to_pump(domain, reply, rep, &q, kind, &what)
        else {
            return;
        };
        self.clients.insert(
            key,
            Client {
                writer,
                writer_gid,
                token,
                reader: reader_gid,
                waiting: Vec::new(),
            },
        );
        self.info_changed(domain);
    }

    /// A local client's call of `service` (the link's query `query`) of
    /// ROS type `ty`, with the client's JSON arguments.
    pub(super) fn exec_call(
        &mut self,
        domain: Domain,
        service: &str,
        ty: &str,
        query: link::QueryId,
        args: &[u8],
    ) -> Result<(), String> {
        let types = self.link.types().clone();
        if types.srv(ty).is_none() {
            return Err(format!(
                "the ROS 2 service's type {ty} is unknown here (--interfaces)"
            ));
        }
        let v = rosgate_ros2::json::from_slice(args).unwrap_or_default();
        self.send_request(domain, service, ty, &v, query, Expect::Service)
    }

    /// Sends request `v` to `service` (of service type `srv`, `pkg/srv/X`
    /// or an action's goal service type) as CDR of its request type,
    /// written with this gateway's reply reader as its related sample
    /// identity (as rmw_fastrtps's clients do, so the server's reply names
    /// it); the reply goes to the link's query `query` as `expect` says.
    pub(super) fn send_request(
        &mut self,
        domain: Domain,
        service: &str,
        srv: &str,
        v: &Value,
        query: link::QueryId,
        expect: Expect,
    ) -> Result<(), String> {
        let types = self.link.types().clone();
        let Some(def) = types.srv(srv) else {
            return Err(format!("{srv} is unknown here (--interfaces)"));
        };
        let bytes = cdr::encode(&*types, &def.request, v)
            .map_err(|e| format!("the request is not {}: {e}", def.request))?;
        let key = (domain, Rc::<str>::from(service));
        let ready = self
            .clients
            .get(&key)
            .map(|c| self.matched.contains(&c.writer_gid) && self.matched.contains(&c.reader));
        match ready {
            None => Err(format!(
                "the gateway is not a client of {service} (its server is not known, or too many services)"
            )),
            Some(true) => self.write_request(&key, bytes, query, def.response.clone(), expect),
            Some(false) => {
                let Some(c) = self.clients.get_mut(&key) else {
                    return Ok(());
                };
                if c.waiting.len() >= MAX_DDS_WAITING_CALLS {
                    return Err(format!(
                        "too many calls of {service} waiting for the server to match"
                    ));
                }
                c.waiting.push((bytes, query, def.response.clone(), expect));
                Ok(())
            }
        }
    }

    /// One of this gateway's readers or writers matched: the calls waiting
    /// for a client that is now ready are written, in order.
    pub(super) fn on_matched(&mut self, gid: Gid) {
        if !self.matched.insert(gid) {
            return;
        }
        let ready: Vec<(Domain, Rc<str>)> = self
            .clients
            .iter()
            .filter(|(_, c)| {
                !c.waiting.is_empty()
                    && self.matched.contains(&c.writer_gid)
                    && self.matched.contains(&c.reader)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in ready {
            let waiting = self
                .clients
                .get_mut(&key)
                .map(|c| std::mem::take(&mut c.waiting))
                .unwrap_or_default();
            for (bytes, query, response, expect) in waiting {
                if let Err(why) = self.write_request(&key, bytes, query, response, expect) {
                    if expect != Expect::Nothing {
                        self.link.handle(Event::Reply {
                            query,
                            reply: LinkReply::Refused(why),
                        });
                    }
                }
            }
        }
        self.run();
    }

    /// Writes a request (CDR) with this gateway's reply reader as its
    /// related sample identity, and keeps the call for its reply.
    fn write_request(
        &mut self,
        key: &(Domain, Rc<str>),
        bytes: Vec<u8>,
        query: link::QueryId,
        response: String,
        expect: Expect,
    ) -> Result<(), String> {
        let Some(c) = self.clients.get(key) else {
            return Err("the service's server went".into());
        };
        let related = rustdds::rpc::SampleIdentity {
            writer_guid: rustdds::GUID::from_bytes(c.reader),
            sequence_number: rustdds::SequenceNumber::UNKNOWN,
        };
        let options = rustdds::with_key::WriteOptionsBuilder::new()
            .related_sample_identity(related)
            .build();
        let sent = c
            .writer
            .write_with_options(bytes, options)
            .map_err(|e| format!("the request was not sent: {e}"))?;
        let key = (c.reader, i64::from(sent.sequence_number));
        let now = Instant::now();
        // Calls the link forgot (its own deadline) go after theirs; goals
        // may run for long, their result waits as long as the link's.
        self.pending.retain(|_, p| {
            let limit = if p.expect == Expect::Result {
                link::GOAL_TIMEOUT
            } else {
                link::CALL_TIMEOUT
            };
            now.saturating_duration_since(p.at) < limit
        });
        self.pending.insert(
            key,
            Pending {
                query,
                response,
                expect,
                at: now,
            },
        );
        Ok(())
    }

    /// The link asks node `node` to describe type `ty` (hash `hash`): a
    /// call of its `~/get_type_description` (every Jazzy node serves it),
    /// whose answer the link checks against the hash.
    pub(super) fn exec_describe(
        &mut self,
        domain: Domain,
        node: &str,
        ty: &str,
        hash: &str,
        query: link::QueryId,
    ) -> Result<(), String> {
        let service = format!("{}/get_type_description", node.trim_end_matches('/'));
        let v = rosgate_ros2::describe::request(ty, hash);
        let srv = rosgate_ros2::describe::SERVICE_TYPE;
        self.send_request(domain, &service, srv, &v, query, Expect::Described)
    }

    /// A reply to one of this gateway's calls: decoded by its response
    /// type for the link (a reply matching no call is counted, dropped).
    pub(super) fn on_reply(
        &mut self,
        reader: Gid,
        related: Option<pump::SampleId>,
        payload: &[u8],
    ) {
        let key = related.map(|(_, seq)| (reader, seq));
        let Some(p) = key.and_then(|k| self.pending.remove(&k)) else {
            self.stray += 1;
            return;
        };
        if p.expect == Expect::Nothing {
            return;
        }
        let mut json = Vec::new();
        let decoded = cdr::decode_json(&**self.link.types(), &p.response, payload, &mut json)
            .map_err(|e| format!("the ROS 2 server's reply is not {}: {e}", p.response))
            .and_then(|()| rosgate_ros2::json::from_slice(&json).map_err(|e| e.to_string()));
        let reply = match (decoded, p.expect) {
            (Err(why), _) => LinkReply::Refused(why),
            (Ok(_), Expect::Service) => LinkReply::Service(json),
            (Ok(v), Expect::Accepted) => LinkReply::Accepted(v["accepted"] == true),
            (Ok(v), Expect::Described) => {
                rosgate_peers::ros2::answer::described("a node", "a type", v)
            }
            (Ok(v), _) => LinkReply::Result {
                status: i8::try_from(v["status"].as_i64().unwrap_or(0)).unwrap_or(0),
                payload: v["result"].to_string().into_bytes(),
            },
        };
        self.link.handle(Event::Reply {
            query: p.query,
            reply,
        });
    }

    /// The link offers a local service to ROS 2 (`on`), or withdraws it.
    pub(super) fn exec_offer(&mut self, domain: Domain, name: &str, ty: &str, on: bool) {
        self.drop_server(domain, name);
        if !on {
            return;
        }
        let types = self.link.types().clone();
        let Some(srv) = types.srv(ty).map(|d| d.name.clone()) else {
            rosgate_core::log!(
                Info,
                "dds: service {name} not offered to ROS 2: its type {ty:?} is unknown (--interfaces)"
            );
            return;
        };
        self.make_server(domain, name, &srv, None);
    }

    /// Withdraws what this gateway offers as service `name`, if anything.
    pub(super) fn drop_server(&mut self, domain: Domain, name: &str) {
        if let Some(s) = self.servers.remove(&(domain, Rc::from(name))) {
            if let Some(sh) = self.shared() {
                sh.remove(s.token);
            }
            self.info_changed(domain);
        }
    }

    /// A request reader and a reply writer for service `name` of service
    /// type `srv` (a service's, or an action's goal service's: `goal_part`),
    /// listed on `ros_discovery_info` under this gateway's node.
    pub(super) fn make_server(
        &mut self,
        domain: Domain,
        name: &str,
        srv: &str,
        goal_part: Option<(&'static str, Rc<str>)>,
    ) {
        let types = self.link.types().clone();
        let (Some(def), Some((req, rep))) = (types.srv(srv), rmw_dds::service_types(srv)) else {
            return;
        };
        let q = qos::writer(None);
        let what = format!("cannot offer {name} to ROS 2");
        let reply = rmw_dds::dds_name(name, Role::Reply);
        let Some((writer, writer_gid)) = self.writer(domain, reply, rep, &q, &what) else {
            return;
        };
        let request = rmw_dds::dds_name(name, Role::Request);
        let kind = Kind::Request {
            domain,
            service: name.to_string(),
        };
        let Some(Sub {
            token,
            gid: reader_gid,
        }) = self.reader_to_pump(domain, request, req, &q, kind, &what)
        else {
            return;
        };
        self.servers.insert(
            (domain, Rc::from(name)),
            Server {
                token,
                reader: reader_gid,
                writer,
                writer_gid,
                request: def.request.clone(),
                response: def.response.clone(),
                goal_part,
            },
        );
        self.info_changed(domain);
    }

    /// A ROS 2 client's request to a service (or goal service) offered
    /// here: decoded by its request type on the loop thread and given to
    /// the link (which answers it exactly once); one that does not decode
    /// is dropped (DDS has no error reply) and counted.
    pub(super) fn on_request(
        &mut self,
        domain: Domain,
        service: &str,
        id: pump::SampleId,
        payload: &[u8],
        now: Instant,
    ) {
        let Some(s) = self.servers.get(&(domain, Rc::from(service))) else {
            self.stray += 1;
            return;
        };
        let types = self.link.types().clone();
        let mut json = Vec::new();
        let v = cdr::decode_json(&*types, &s.request, payload, &mut json)
            .map_err(|e| e.to_string())
            .and_then(|()| rosgate_ros2::json::from_slice(&json).map_err(|e| e.to_string()));
        let stamp = rosgate_peers::ros2::goals::stamp_now();
        let (name, request) = match (&s.goal_part, v) {
            (_, Err(_)) => {
                self.stray += 1;
                return;
            }
            (None, Ok(_)) => (service.to_string(), link::Request::Service(json)),
            (Some((part, action)), Ok(v)) => {
                match rosgate_peers::ros2::goals::goal_request(part, &v, stamp) {
                    Ok(r) => (action.to_string(), r),
                    Err(_) => {
                        self.stray += 1;
                        return;
                    }
                }
            }
        };
        self.next_in_query += 1;
        let query = InQuery(self.next_in_query);
        self.replying.insert(
            query,
            Replying {
                domain,
                service: Rc::from(service),
                id,
                response: s.response.clone(),
                stamp,
            },
        );
        self.link.handle(Event::Request {
            now,
            query,
            domain: u32::from(domain),
            name,
            request,
        });
    }

    /// The link's one answer to a ROS 2 client's request: CDR of the
    /// response type, written with the request's identity as the related
    /// sample identity (what rmw_fastrtps's clients match replies by). An
    /// error has no reply in DDS: the client's own wait ends it.
    pub(super) fn exec_reply(&mut self, query: InQuery, answer: link::Answer) {
        let Some(r) = self.replying.remove(&query) else {
            return;
        };
        let types = self.link.types().clone();
        let v = match rosgate_peers::ros2::answer::answer_json(&types, &r.response, r.stamp, answer)
        {
            Ok(v) => v,
            Err(why) => {
                rosgate_core::log!(Debug, "dds: a call of {} failed: {why}", r.service);
                return;
            }
        };
        let Some(s) = self.servers.get(&(r.domain, r.service.clone())) else {
            return;
        };
        let bytes = match cdr::encode(&*types, &r.response, &v) {
            Ok(b) => b,
            Err(e) => {
                rosgate_core::log!(Warn, "dds: the answer is not {}: {e}", r.response);
                return;
            }
        };
        let related = rustdds::rpc::SampleIdentity {
            writer_guid: rustdds::GUID::from_bytes(r.id.0),
            sequence_number: rustdds::SequenceNumber::new(r.id.1),
        };
        let options = rustdds::with_key::WriteOptionsBuilder::new()
            .related_sample_identity(related)
            .build();
        if let Err(e) = s.writer.write_with_options(bytes, options) {
            rosgate_core::log!(Debug, "dds: a reply to {} shed: {e}", r.service);
            self.shed += 1;
        }
    }
}
