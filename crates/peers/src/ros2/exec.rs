//! [`Exec`] and [`run_link`]: the link's actions dispatched to a shell, the
//! same way for every transport. A shell implements one method per kind
//! of action with its transport (rmw_zenoh: Zenoh declarations, queries
//! and puts; DDS: RustDDS readers, writers and samples); `run_link` drains
//! the link, turns its domain ids into the hub's, and hands a request the
//! shell could not send back to the link as the peer's refusal, so every
//! query the link made still ends exactly once.

use rosgate_core::nodes::Domain;
use rosgate_ros2::link::{self, Action, Answer, Event, Link, QueryId, Reply, Stamp, ToHub};

/// What a shell does for each of the link's actions (see the module
/// docs). A method returning `Err` could not send the link's query: the
/// reason goes back to the link as the peer's refusal.
pub trait Exec {
    /// The link the actions come from.
    fn link(&mut self) -> &mut Link;
    /// Subscribe to a topic's samples (`ty`: the full type and hash local
    /// clients named), or stop.
    fn subscribe(&mut self, domain: Domain, topic: &str, ty: Option<(String, String)>, on: bool);
    /// Declare this gateway's publisher of a topic typed `ty`/`hash`
    /// (transient local keeping `latched`), or withdraw it.
    fn publisher(
        &mut self,
        domain: Domain,
        topic: &str,
        ty: &str,
        hash: &str,
        latched: Option<u32>,
        on: bool,
    );
    /// Put a message on a topic as CDR of `ty`: `cdr` as it is when the
    /// link gave it (the message came as CDR of `ty`), else `payload`
    /// (JSON) encoded; false when it could not go out (not `ty`, no
    /// publisher, the transport refused).
    fn put(
        &mut self,
        domain: Domain,
        topic: &str,
        ty: &str,
        payload: &[u8],
        cdr: Option<&[u8]>,
    ) -> bool;
    /// Call a ROS 2 service of type `ty` (hash `hash`) with JSON arguments.
    fn call(
        &mut self,
        domain: Domain,
        service: &str,
        ty: &str,
        hash: &str,
        query: QueryId,
        payload: &[u8],
    ) -> Result<(), String>;
    /// `send_goal` of goal `uuid` (the goal as JSON).
    fn send_goal(
        &mut self,
        domain: Domain,
        action: &str,
        uuid: [u8; 16],
        query: QueryId,
        goal: &[u8],
    ) -> Result<(), String>;
    /// `get_result` of accepted goal `uuid`.
    fn get_result(
        &mut self,
        domain: Domain,
        action: &str,
        uuid: [u8; 16],
        query: QueryId,
    ) -> Result<(), String>;
    /// `cancel_goal` of goal `uuid` (the goal ends through its result).
    fn cancel_goal(&mut self, domain: Domain, action: &str, uuid: [u8; 16], query: QueryId);
    /// Watch an action's feedback topic, or stop.
    fn watch_feedback(&mut self, domain: Domain, action: &str, on: bool);
    /// Ask `node` to describe type `ty` (`~/get_type_description`).
    fn describe(
        &mut self,
        domain: Domain,
        node: &str,
        ty: &str,
        hash: &str,
        query: QueryId,
    ) -> Result<(), String>;
    /// Offer a local service (or `action`) of type `ty` to ROS 2, or
    /// withdraw it.
    fn offer(&mut self, domain: Domain, name: &str, ty: &str, action: bool, on: bool);
    /// Put an action's feedback for goal `uuid` (feedback JSON).
    fn put_feedback(&mut self, domain: Domain, action: &str, uuid: [u8; 16], payload: &[u8]);
    /// Put an action's status array.
    fn put_status(&mut self, domain: Domain, action: &str, goals: &[([u8; 16], Stamp, i8)]);
    /// The one answer to a ROS 2 client's request.
    fn reply(&mut self, query: link::InQuery, answer: Answer);
    /// A delivery for the hub.
    fn deliver(&mut self, t: ToHub);
}

/// Executes what the link asks until it has nothing more (see the module
/// docs). An action naming a domain beyond the hub's is dropped (the link
/// knows only the domains the shell bridges). False when a put could not
/// go out (the hub counts the message dropped).
pub fn run_link(x: &mut (impl Exec + ?Sized)) -> bool {
    let mut put_ok = true;
    while let Some(a) = x.link().poll() {
        let refused = match a {
            Action::Query {
                query,
                domain,
                service,
                ty,
                hash,
                payload,
                ..
            } => in_domain(domain)
                .and_then(|d| x.call(d, &service, &ty, &hash, query, &payload))
                .err()
                .map(|why| (query, why)),
            Action::SendGoal {
                query,
                domain,
                action,
                uuid,
                payload,
            } => in_domain(domain)
                .and_then(|d| x.send_goal(d, &action, uuid, query, &payload))
                .err()
                .map(|why| (query, why)),
            Action::GetResult {
                query,
                domain,
                action,
                uuid,
            } => in_domain(domain)
                .and_then(|d| x.get_result(d, &action, uuid, query))
                .err()
                .map(|why| (query, why)),
            Action::Describe {
                query,
                domain,
                node,
                ty,
                hash,
            } => in_domain(domain)
                .and_then(|d| x.describe(d, &node, &ty, &hash, query))
                .err()
                .map(|why| (query, why)),
            Action::CancelGoal {
                query,
                domain,
                action,
                uuid,
            } => {
                if let Ok(d) = in_domain(domain) {
                    x.cancel_goal(d, &action, uuid, query);
                }
                None
            }
            Action::WatchFeedback { domain, action, on } => {
                if let Ok(d) = in_domain(domain) {
                    x.watch_feedback(d, &action, on);
                }
                None
            }
            Action::Subscribe {
                domain,
                topic,
                ty,
                on,
            } => {
                if let Ok(d) = in_domain(domain) {
                    x.subscribe(d, &topic, ty, on);
                }
                None
            }
            Action::Publisher {
                domain,
                topic,
                ty,
                hash,
                latched,
                on,
            } => {
                if let Ok(d) = in_domain(domain) {
                    x.publisher(d, &topic, &ty, &hash, latched, on);
                }
                None
            }
            Action::Put {
                domain,
                topic,
                ty,
                payload,
                cdr,
                ..
            } => {
                if let Ok(d) = in_domain(domain) {
                    put_ok &= x.put(d, &topic, &ty, &payload, cdr.as_deref());
                }
                None
            }
            Action::Offer {
                domain,
                name,
                ty,
                action,
                on,
            } => {
                if let Ok(d) = in_domain(domain) {
                    x.offer(d, &name, &ty, action, on);
                }
                None
            }
            Action::PutFeedback {
                domain,
                action,
                uuid,
                payload,
            } => {
                if let Ok(d) = in_domain(domain) {
                    x.put_feedback(d, &action, uuid, &payload);
                }
                None
            }
            Action::PutStatus {
                domain,
                action,
                goals,
            } => {
                if let Ok(d) = in_domain(domain) {
                    x.put_status(d, &action, &goals);
                }
                None
            }
            Action::Reply { query, reply } => {
                x.reply(query, reply);
                None
            }
            Action::Deliver(t) => {
                x.deliver(t);
                None
            }
        };
        // What could not be sent is the peer's refusal, to the link.
        if let Some((query, why)) = refused {
            x.link().handle(Event::Reply {
                query,
                reply: Reply::Refused(why),
            });
        }
    }
    put_ok
}

fn in_domain(domain: link::Domain) -> Result<Domain, String> {
    Domain::try_from(domain).map_err(|e| e.to_string())
}
