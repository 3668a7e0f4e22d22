//! Service calls across the link, both ways.
//!
//! Out (a local client calls a ROS 2 server): one query to the server;
//! the hub gets exactly one [`ToHub::ServiceResponse`]: the reply, the
//! peer's refusal, an error when no server serves the service, when the
//! query ends without a reply, when the server leaves, or at
//! [`CALL_TIMEOUT`]. At most [`MAX_CALLS_OUT`] wait; past that a call
//! fails at once.
//!
//! In (a ROS 2 client calls a service a local client provides): the hub
//! gets the call numbered, and the ROS 2 client gets exactly one
//! [`Action::Reply`]: the provider's answer, or an error when nobody here
//! provides the service, when [`MAX_CALLS_IN`] calls wait already, when
//! the provider leaves, or at [`CALL_TIMEOUT`].

use std::collections::HashMap;
use std::time::Instant;

use super::{
    Action, Answer, Domain, InQuery, Link, QueryId, Reply, ToHub, CALL_TIMEOUT, MAX_CALLS_IN,
    MAX_CALLS_OUT,
};

#[derive(Debug)]
struct Out {
    id: String,
    domain: Domain,
    service: String,
    deadline: Instant,
}

#[derive(Debug)]
struct In {
    query: InQuery,
    domain: Domain,
    service: String,
    deadline: Instant,
}

/// Calls waiting, both ways.
#[derive(Debug, Default)]
pub struct Calls {
    out: HashMap<QueryId, Out>,
    inbound: HashMap<u64, In>,
    next_in: u64,
}

impl Calls {
    pub fn outbound(&self) -> usize {
        self.out.len()
    }

    pub fn inbound(&self) -> usize {
        self.inbound.len()
    }
}

fn fail_out(link: &mut Link, domain: Domain, service: String, id: String, why: String) {
    link.deliver(ToHub::ServiceResponse {
        domain,
        service,
        id,
        result: Err(why),
    });
}

pub(super) fn call(
    link: &mut Link,
    now: Instant,
    id: String,
    domain: Domain,
    service: String,
    payload: Vec<u8>,
) {
    let Some(server) = link.server(domain, &service) else {
        let why = "no ROS 2 server serves it".to_string();
        return fail_out(link, domain, service, id, why);
    };
    if link.calls.out.len() >= MAX_CALLS_OUT {
        let why = format!("too many calls to ROS 2 waiting ({MAX_CALLS_OUT})");
        return fail_out(link, domain, service, id, why);
    }
    let (ty, hash, gid) = (server.ty.clone(), server.hash.clone(), server.gid);
    let query = link.next_query();
    link.calls.out.insert(
        query,
        Out {
            id,
            domain,
            service: service.clone(),
            deadline: now + CALL_TIMEOUT,
        },
    );
    link.push(Action::Query {
        query,
        domain,
        service,
        ty,
        hash,
        server: gid,
        payload,
    });
}

/// Whether `query` was a call's (then it is settled).
pub(super) fn reply(link: &mut Link, query: QueryId, reply: &Reply) -> bool {
    let Some(out) = link.calls.out.remove(&query) else {
        return false;
    };
    let result = match reply {
        Reply::Service(b) => Ok(b.clone()),
        Reply::Refused(why) => Err(why.clone()),
        other => Err(format!("not a service's reply: {other:?}")),
    };
    link.deliver(ToHub::ServiceResponse {
        domain: out.domain,
        service: out.service,
        id: out.id,
        result,
    });
    true
}

pub(super) fn query_end(link: &mut Link, query: QueryId) {
    if let Some(out) = link.calls.out.remove(&query) {
        let why = "the ROS 2 server did not answer (it left, or the call timed out)";
        fail_out(link, out.domain, out.service, out.id, why.to_string());
    }
}

/// The last server of `service` left: its calls fail now (a transport
/// without query ends, DDS, would otherwise leave them to the timeout).
pub(super) fn server_gone(link: &mut Link, domain: Domain, service: &str) {
    let mut gone: Vec<QueryId> = link
        .calls
        .out
        .iter()
        .filter(|(_, o)| o.domain == domain && o.service == service)
        .map(|(q, _)| *q)
        .collect();
    gone.sort();
    for q in gone {
        if let Some(out) = link.calls.out.remove(&q) {
            let why = "the ROS 2 server left".to_string();
            fail_out(link, out.domain, out.service, out.id, why);
        }
    }
}

pub(super) fn request(
    link: &mut Link,
    now: Instant,
    query: InQuery,
    domain: Domain,
    service: String,
    payload: Vec<u8>,
) {
    let refuse = |why: String| Action::Reply {
        query,
        reply: Answer::Error(why),
    };
    if !link.provided.contains_key(&(domain, service.clone())) {
        let a = refuse(format!("{service}: not provided here"));
        return link.push(a);
    }
    if link.calls.inbound.len() >= MAX_CALLS_IN {
        link.ignored += 1;
        let a = refuse(format!("{service}: too many calls waiting"));
        return link.push(a);
    }
    link.calls.next_in += 1;
    let call = link.calls.next_in;
    link.calls.inbound.insert(
        call,
        In {
            query,
            domain,
            service: service.clone(),
            deadline: now + CALL_TIMEOUT,
        },
    );
    link.deliver(ToHub::Call {
        call,
        domain,
        service,
        payload,
    });
}

pub(super) fn answer(link: &mut Link, call: u64, result: Result<Vec<u8>, String>) {
    // Answered already (timed out, provider gone): the late answer is
    // dropped, so the ROS 2 client still gets one.
    let Some(c) = link.calls.inbound.remove(&call) else {
        return;
    };
    let reply = match result {
        Ok(b) => Answer::Service(b),
        Err(e) => Answer::Error(e),
    };
    link.push(Action::Reply {
        query: c.query,
        reply,
    });
}

pub(super) fn unprovide(link: &mut Link, domain: Domain, service: &str) {
    let mut gone: Vec<u64> = link
        .calls
        .inbound
        .iter()
        .filter(|(_, c)| c.domain == domain && c.service == service)
        .map(|(n, _)| *n)
        .collect();
    gone.sort_unstable();
    for n in gone {
        if let Some(c) = link.calls.inbound.remove(&n) {
            let reply = Answer::Error(format!("{service}: the provider left"));
            link.push(Action::Reply {
                query: c.query,
                reply,
            });
        }
    }
}

pub(super) fn tick(link: &mut Link, now: Instant) {
    let mut late: Vec<QueryId> = link
        .calls
        .out
        .iter()
        .filter(|(_, o)| o.deadline <= now)
        .map(|(q, _)| *q)
        .collect();
    late.sort();
    for q in late {
        if let Some(out) = link.calls.out.remove(&q) {
            let why = "timed out".to_string();
            fail_out(link, out.domain, out.service, out.id, why);
        }
    }
    let mut late_in: Vec<u64> = link
        .calls
        .inbound
        .iter()
        .filter(|(_, c)| c.deadline <= now)
        .map(|(n, _)| *n)
        .collect();
    late_in.sort_unstable();
    for n in late_in {
        if let Some(c) = link.calls.inbound.remove(&n) {
            let reply = Answer::Error(format!("{}: timed out", c.service));
            link.push(Action::Reply {
                query: c.query,
                reply,
            });
        }
    }
}
