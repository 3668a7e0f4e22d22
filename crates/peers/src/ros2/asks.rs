//! [`Shell`] and what the hub asks a ROS 2 shell (subscriptions wanted,
//! messages to publish, calls and goals to ROS 2 servers, what local
//! clients provide and serve), turned into the link's events the same way
//! for every transport: only in a domain the shell bridges, each event
//! followed by the shell executing what the link then asks ([`Shell::run`]).
//! The link decides; these only spell its events, so both shells (rmw_zenoh
//! and DDS) feed it the same.

use std::time::Instant;

use rosgate_core::nodes::Domain;
use rosgate_ros2::link::Event;

use super::exec::{run_link, Exec};
use crate::{Cdr, Put};

/// A ROS 2 shell as the hub's asks see it: its link (through [`Exec`]),
/// the domains it bridges, and how it executes the link's actions.
pub trait Shell: Exec {
    /// Whether this shell bridges `domain` (the link knows no other).
    fn bridged(&self, domain: Domain) -> bool;
    /// Executes what the link asks now; false when a put it asked could
    /// not go out. A shell with more to do after the link's actions (DDS:
    /// its `ros_discovery_info`) says so here.
    fn run(&mut self) -> bool {
        run_link(self)
    }
}

/// One event of the hub's for `domain`, if the shell bridges it, and what
/// the link then asks, executed. False when `domain` is not bridged.
pub fn ask(x: &mut impl Shell, domain: Domain, event: impl FnOnce(u32) -> Event) -> bool {
    if !x.bridged(domain) {
        return false;
    }
    x.link().handle(event(u32::from(domain)));
    x.run();
    true
}

/// Local clients subscribe to `topic` (`ty`: the type they named), or stop.
pub fn want(x: &mut impl Shell, domain: Domain, topic: &str, ty: Option<&str>, on: bool) {
    ask(x, domain, |domain| Event::Want {
        domain,
        topic: topic.to_string(),
        ty: ty.map(str::to_string),
        on,
    });
}

/// A message (`msg`, JSON; `cdr`, its own CDR when it came as CDR) the
/// bridge of `domain` drained for `topic`, or a sample of the other ROS 2
/// side: the link puts it to ROS 2 when ROS 2 subscribes to it (the CDR
/// untouched when the subscription's type is its type). What reaches ROS 2
/// is not counted as sent (the gateways' puts are); a put that could not
/// go out (it does not fit the subscription's type, or the transport
/// refused it) is counted as dropped.
pub fn publish(
    x: &mut impl Shell,
    domain: Domain,
    topic: &str,
    msg: &str,
    cdr: Option<Cdr<'_>>,
    latched: Option<u32>,
) -> Put {
    if !x.bridged(domain) {
        return Put::Skipped;
    }
    x.link().handle(Event::Publish {
        domain: u32::from(domain),
        topic: topic.to_string(),
        latched,
        payload: msg.as_bytes().to_vec(),
        cdr: cdr.map(|c| (c.ty.to_string(), c.bytes.to_vec())),
    });
    if x.run() {
        Put::Skipped
    } else {
        Put::Dropped
    }
}

/// A call the bridge of `domain` received for `service`: the link's if a
/// ROS 2 server serves it (false otherwise: not this shell's).
pub fn call(
    x: &mut impl Shell,
    domain: Domain,
    service: &str,
    id: &str,
    args: &str,
    now: Instant,
) -> bool {
    if !x.bridged(domain) || !x.link().serves_service(u32::from(domain), service) {
        return false;
    }
    ask(x, domain, |domain| Event::Call {
        now,
        id: id.to_string(),
        domain,
        service: service.to_string(),
        payload: args.as_bytes().to_vec(),
    })
}

/// A goal the bridge of `domain` received for `action`: the link's if a
/// ROS 2 server serves the action (false otherwise), sent with the UUID
/// `uuid` makes (the shell's, so it can route the goal's replies). The
/// same goal again is the link's to ignore: it ends once.
pub fn send_goal<X: Shell>(
    x: &mut X,
    domain: Domain,
    action: &str,
    id: &str,
    args: &str,
    now: Instant,
    uuid: impl FnOnce(&mut X) -> [u8; 16],
) -> bool {
    let d = u32::from(domain);
    if !x.bridged(domain) || !x.link().serves_action(d, action) {
        return false;
    }
    if x.link().has_goal_out(d, id) {
        return true;
    }
    let uuid = uuid(x);
    ask(x, domain, |domain| Event::SendGoal {
        now,
        id: id.to_string(),
        domain,
        action: action.to_string(),
        uuid,
        payload: args.as_bytes().to_vec(),
    })
}

/// A cancel the bridge of `domain` received for goal `id`: the link's if
/// the goal went to ROS 2 (false otherwise). The link sends it now if the
/// server accepted the goal, else once it does; the goal ends when the
/// server says so, through its result.
pub fn cancel_goal(x: &mut impl Shell, domain: Domain, id: &str) -> bool {
    if !x.link().has_goal_out(u32::from(domain), id) {
        return false;
    }
    x.link().handle(Event::CancelGoal {
        domain: u32::from(domain),
        id: id.to_string(),
    });
    x.run();
    true
}

/// Local clients provide service `name` typed `ty` in `domain` (`None`:
/// the provider went; the link answers its calls waiting with an error and
/// withdraws the offer).
pub fn provide(x: &mut impl Shell, domain: Domain, name: &str, ty: Option<&str>) {
    ask(x, domain, |domain| Event::Provide {
        domain,
        name: name.to_string(),
        ty: ty.map(str::to_string),
    });
}

/// Local clients serve action `name` typed `ty` in `domain` (`None`: the
/// server went; the link ends its running goals and withdraws the offer).
pub fn serve(x: &mut impl Shell, domain: Domain, name: &str, ty: Option<&str>) {
    ask(x, domain, |domain| Event::Serve {
        domain,
        name: name.to_string(),
        ty: ty.map(str::to_string),
    });
}

/// A local provider's answer the bridge drained: true when it answers a
/// call from ROS 2 (`rq<n>`), which the link then replies to.
pub fn answer(x: &mut impl Shell, id: &str, values: &str, ok: bool) -> bool {
    let Some(e) = super::edge::answer_event(id, values, ok) else {
        return false;
    };
    x.link().handle(e);
    x.run();
    true
}
