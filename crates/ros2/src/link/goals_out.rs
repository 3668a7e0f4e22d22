//! Goals local clients send to ROS 2 action servers: `send_goal`, then
//! once accepted `get_result`, which ends the goal; feedback matched by
//! goal UUID; `cancel_goal` for accepted goals.
//!
//! Invariants:
//! - every goal sent ends in exactly one [`ToHub::GoalEnd`]: the server's
//!   result, a rejection (status 0), or an abort (status 6) with a reason
//!   when no server serves the action, the server refuses, leaves or
//!   never answers, or at [`GOAL_TIMEOUT`];
//! - a cancel the hub sends before the server accepted the goal is sent
//!   when it does (sent earlier, the server would not know the UUID);
//! - at most [`MAX_GOALS_OUT`] goals are in flight; past that a goal is
//!   aborted at once;
//! - an action's feedback topic is watched only while goals to it are in
//!   flight.

use std::collections::HashMap;
use std::time::Instant;

use super::{Action, Domain, Link, QueryId, Reply, ToHub, GOAL_TIMEOUT, MAX_GOALS_OUT};
use crate::action::status;

#[derive(Debug)]
struct Goal {
    id: String,
    domain: Domain,
    action: String,
    accepted: bool,
    cancel_requested: bool,
    deadline: Instant,
}

/// Goals in flight, by UUID, with the queries that speak for them.
#[derive(Debug, Default)]
pub struct GoalsOut {
    goals: HashMap<[u8; 16], Goal>,
    by_id: HashMap<(Domain, String), [u8; 16]>,
    /// `send_goal` and `get_result` queries: which goal, and whether it is
    /// the result's.
    queries: HashMap<QueryId, ([u8; 16], bool)>,
    per_action: HashMap<(Domain, String), usize>,
}

impl GoalsOut {
    pub fn len(&self) -> usize {
        self.goals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.goals.is_empty()
    }

    pub(super) fn has(&self, domain: Domain, id: &str) -> bool {
        self.by_id.contains_key(&(domain, id.to_string()))
    }
}

fn abort(link: &mut Link, domain: Domain, action: &str, id: String, why: String) {
    link.deliver(ToHub::GoalEnd {
        domain,
        action: action.to_string(),
        id,
        status: status::ABORTED as i8,
        result: Err(why),
    });
}

/// Ends goal `uuid` (once: it leaves every table here).
fn end(link: &mut Link, uuid: [u8; 16], status: i8, result: Result<Vec<u8>, String>) {
    let g = &mut link.goals_out;
    let Some(goal) = g.goals.remove(&uuid) else {
        return;
    };
    g.by_id.remove(&(goal.domain, goal.id.clone()));
    g.queries.retain(|_, (u, _)| *u != uuid);
    let key = (goal.domain, goal.action.clone());
    let left = match g.per_action.get_mut(&key) {
        Some(n) => {
            *n -= 1;
            *n
        }
        None => 0,
    };
    if left == 0 {
        g.per_action.remove(&key);
        link.push(Action::WatchFeedback {
            domain: goal.domain,
            action: goal.action.clone(),
            on: false,
        });
    }
    link.deliver(ToHub::GoalEnd {
        domain: goal.domain,
        action: goal.action,
        id: goal.id,
        status,
        result,
    });
}

pub(super) fn send(
    link: &mut Link,
    now: Instant,
    id: String,
    domain: Domain,
    action: String,
    uuid: [u8; 16],
    payload: Vec<u8>,
) {
    if !link.actions.contains(&(domain, action.clone())) {
        return abort(
            link,
            domain,
            &action,
            id,
            format!("{action}: no ROS 2 action server"),
        );
    }
    let g = &mut link.goals_out;
    if g.goals.len() >= MAX_GOALS_OUT {
        return abort(
            link,
            domain,
            &action,
            id,
            format!("{action}: too many goals to ROS 2 in flight"),
        );
    }
    // The same id again is the same goal (it ends once, with the first);
    // a UUID already in flight is another goal's: this one is refused.
    if g.by_id.contains_key(&(domain, id.clone())) {
        link.ignored += 1;
        return;
    }
    if g.goals.contains_key(&uuid) {
        return abort(
            link,
            domain,
            &action,
            id,
            format!("{action}: goal UUID already in flight"),
        );
    }
    g.by_id.insert((domain, id.clone()), uuid);
    let n = g.per_action.entry((domain, action.clone())).or_default();
    *n += 1;
    let first = *n == 1;
    g.goals.insert(
        uuid,
        Goal {
            id,
            domain,
            action: action.clone(),
            accepted: false,
            cancel_requested: false,
            deadline: now + GOAL_TIMEOUT,
        },
    );
    if first {
        link.push(Action::WatchFeedback {
            domain,
            action: action.clone(),
            on: true,
        });
    }
    let query = link.next_query();
    link.goals_out.queries.insert(query, (uuid, false));
    link.push(Action::SendGoal {
        query,
        domain,
        action,
        uuid,
        payload,
    });
}

pub(super) fn cancel(link: &mut Link, domain: Domain, id: &str) {
    let Some(uuid) = link.goals_out.by_id.get(&(domain, id.to_string())).copied() else {
        return;
    };
    let Some(goal) = link.goals_out.goals.get_mut(&uuid) else {
        return;
    };
    if !goal.accepted {
        goal.cancel_requested = true;
        return;
    }
    let action = goal.action.clone();
    let query = link.next_query();
    link.push(Action::CancelGoal {
        query,
        domain,
        action,
        uuid,
    });
}

pub(super) fn reply(link: &mut Link, query: QueryId, reply: &Reply) -> bool {
    let Some(&(uuid, is_result)) = link.goals_out.queries.get(&query) else {
        return false;
    };
    link.goals_out.queries.remove(&query);
    if is_result {
        match reply {
            Reply::Result { status, payload } => end(link, uuid, *status, Ok(payload.clone())),
            Reply::Refused(why) => end(link, uuid, status::ABORTED as i8, Err(why.clone())),
            other => {
                let why = format!("get_result: unexpected reply {other:?}");
                end(link, uuid, status::ABORTED as i8, Err(why))
            }
        }
        return true;
    }
    match reply {
        Reply::Accepted(true) => {
            let Some(goal) = link.goals_out.goals.get_mut(&uuid) else {
                return true;
            };
            goal.accepted = true;
            let (domain, action, cancel) =
                (goal.domain, goal.action.clone(), goal.cancel_requested);
            let q = link.next_query();
            link.goals_out.queries.insert(q, (uuid, true));
            link.push(Action::GetResult {
                query: q,
                domain,
                action: action.clone(),
                uuid,
            });
            if cancel {
                let q = link.next_query();
                link.push(Action::CancelGoal {
                    query: q,
                    domain,
                    action,
                    uuid,
                });
            }
        }
        Reply::Accepted(false) => end(
            link,
            uuid,
            status::UNKNOWN as i8,
            Err("rejected by the ROS 2 action server".into()),
        ),
        Reply::Refused(why) => end(link, uuid, status::ABORTED as i8, Err(why.clone())),
        other => {
            let why = format!("send_goal: unexpected reply {other:?}");
            end(link, uuid, status::ABORTED as i8, Err(why))
        }
    }
    true
}

/// A goal's query ended: if it still speaks for the goal (no reply came),
/// the goal is aborted.
pub(super) fn query_end(link: &mut Link, query: QueryId) {
    if let Some((uuid, is_result)) = link.goals_out.queries.remove(&query) {
        let which = if is_result { "get_result" } else { "send_goal" };
        let why = format!("the ROS 2 action server did not answer {which}");
        end(link, uuid, status::ABORTED as i8, Err(why));
    }
}

pub(super) fn feedback(
    link: &mut Link,
    domain: Domain,
    action: &str,
    uuid: [u8; 16],
    payload: Vec<u8>,
) {
    let Some(goal) = link.goals_out.goals.get(&uuid) else {
        return;
    };
    if goal.domain != domain || goal.action != action {
        return;
    }
    let id = goal.id.clone();
    link.deliver(ToHub::GoalFeedback {
        domain,
        action: action.to_string(),
        id,
        payload,
    });
}

/// The action's server is no longer complete: its goals are aborted.
pub(super) fn server_gone(link: &mut Link, domain: Domain, action: &str) {
    let mut gone: Vec<[u8; 16]> = link
        .goals_out
        .goals
        .iter()
        .filter(|(_, g)| g.domain == domain && g.action == action)
        .map(|(u, _)| *u)
        .collect();
    gone.sort_unstable();
    for uuid in gone {
        let why = format!("{action}: the ROS 2 action server left");
        end(link, uuid, status::ABORTED as i8, Err(why));
    }
}

pub(super) fn tick(link: &mut Link, now: Instant) {
    let mut late: Vec<[u8; 16]> = link
        .goals_out
        .goals
        .iter()
        .filter(|(_, g)| g.deadline <= now)
        .map(|(u, _)| *u)
        .collect();
    late.sort_unstable();
    for uuid in late {
        end(
            link,
            uuid,
            status::ABORTED as i8,
            Err("timed out waiting for ROS 2".into()),
        );
    }
}
