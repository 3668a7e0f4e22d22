//! Goals ROS 2 clients send to actions local clients serve. A goal is
//! accepted at once (a rosbridge action server has no accept step) and
//! handed to the hub as goal `n`; the local server's feedback is put on
//! the feedback topic, its end answers `get_result` (now or when it
//! comes), and every change of status is put on the status topic.
//!
//! Invariants:
//! - every `get_result` is answered exactly once: with the goal's result,
//!   at once for an unknown goal (status 0, as rclcpp answers), or with
//!   an abort when the local server goes;
//! - every goal ends once: a second end (or feedback after the end) from
//!   the hub is ignored;
//! - a cancel reaches the hub once per running goal it picks (by UUID, or
//!   a zero UUID: every goal of the action accepted at or before its
//!   stamp), and the goal is then canceling until its end;
//! - at most [`MAX_GOALS_IN`] goals are kept (past that a goal is
//!   rejected); ended goals are forgotten oldest first beyond
//!   [`MAX_ENDED_GOALS`]; each goal keeps at most [`MAX_RESULT_WAITERS`]
//!   `get_result` requests (past that one gets an error).

use std::collections::{HashMap, VecDeque};

use super::{
    Action, Answer, Domain, InQuery, Link, Request, Stamp, ToHub, MAX_ENDED_GOALS, MAX_GOALS_IN,
    MAX_RESULT_WAITERS,
};
use crate::action::{cancel_code, status};

#[derive(Debug)]
struct Goal {
    domain: Domain,
    action: String,
    uuid: [u8; 16],
    stamp: Stamp,
    status: i8,
    /// The result, once ended.
    result: Option<Vec<u8>>,
    waiting: Vec<InQuery>,
}

/// Goals from ROS 2, by the number the hub knows them by.
#[derive(Debug, Default)]
pub struct GoalsIn {
    goals: HashMap<u64, Goal>,
    by_uuid: HashMap<[u8; 16], u64>,
    ended: VecDeque<u64>,
    next: u64,
}

impl GoalsIn {
    pub fn len(&self) -> usize {
        self.goals.len()
    }

    pub fn is_empty(&self) -> bool {
        self.goals.is_empty()
    }

    /// `get_result` requests waiting, over all goals.
    pub fn waiting(&self) -> usize {
        self.goals.values().map(|g| g.waiting.len()).sum()
    }

    pub(super) fn action_of(&self, n: u64) -> Option<(Domain, &str)> {
        self.goals.get(&n).map(|g| (g.domain, g.action.as_str()))
    }
}

fn put_status(link: &mut Link, domain: Domain, action: &str) {
    let mut goals: Vec<(u64, [u8; 16], Stamp, i8)> = link
        .goals_in
        .goals
        .iter()
        .filter(|(_, g)| g.domain == domain && g.action == action)
        .map(|(n, g)| (*n, g.uuid, g.stamp, g.status))
        .collect();
    goals.sort_unstable();
    let goals = goals.into_iter().map(|(_, u, t, s)| (u, t, s)).collect();
    link.push(Action::PutStatus {
        domain,
        action: action.to_string(),
        goals,
    });
}

pub(super) fn request(link: &mut Link, query: InQuery, domain: Domain, action: String, r: Request) {
    let served = link.served.contains_key(&(domain, action.clone()));
    match r {
        Request::Service(_) => {}
        Request::SendGoal {
            uuid,
            stamp,
            payload,
        } => {
            let g = &mut link.goals_in;
            if !served || g.goals.len() >= MAX_GOALS_IN || g.by_uuid.contains_key(&uuid) {
                if served {
                    link.ignored += 1;
                }
                return link.push(Action::Reply {
                    query,
                    reply: Answer::Accepted(false),
                });
            }
            g.next += 1;
            let n = g.next;
            g.by_uuid.insert(uuid, n);
            g.goals.insert(
                n,
                Goal {
                    domain,
                    action: action.clone(),
                    uuid,
                    stamp,
                    status: status::EXECUTING as i8,
                    result: None,
                    waiting: Vec::new(),
                },
            );
            link.push(Action::Reply {
                query,
                reply: Answer::Accepted(true),
            });
            link.deliver(ToHub::Goal {
                goal: n,
                domain,
                action: action.clone(),
                payload,
            });
            put_status(link, domain, &action);
        }
        Request::GetResult { uuid } => {
            let Some(&n) = link.goals_in.by_uuid.get(&uuid) else {
                let reply = Answer::Result {
                    status: status::UNKNOWN as i8,
                    payload: Vec::new(),
                };
                return link.push(Action::Reply { query, reply });
            };
            let goal = link.goals_in.goals.get_mut(&n);
            let Some(goal) = goal.filter(|g| g.domain == domain && g.action == action) else {
                let reply = Answer::Result {
                    status: status::UNKNOWN as i8,
                    payload: Vec::new(),
                };
                return link.push(Action::Reply { query, reply });
            };
            if let Some(result) = &goal.result {
                let reply = Answer::Result {
                    status: goal.status,
                    payload: result.clone(),
                };
                return link.push(Action::Reply { query, reply });
            }
            if goal.waiting.len() >= MAX_RESULT_WAITERS {
                let reply = Answer::Error("too many get_result requests for this goal".into());
                return link.push(Action::Reply { query, reply });
            }
            goal.waiting.push(query);
        }
        Request::CancelGoal { uuid, before } => cancel(link, query, domain, &action, uuid, before),
    }
}

/// A ROS 2 client's `cancel_goal` (see the module's invariants): the
/// return code is rclcpp's (none picked: unknown goal for a UUID, none for
/// a stamp; only ended ones picked: terminated).
fn cancel(
    link: &mut Link,
    query: InQuery,
    domain: Domain,
    action: &str,
    uuid: [u8; 16],
    before: Stamp,
) {
    let mut canceling: Vec<(u64, [u8; 16], Stamp)> = Vec::new();
    let mut terminated = false;
    for (&n, g) in &link.goals_in.goals {
        let picked = if uuid != [0; 16] {
            g.uuid == uuid
        } else {
            before == (0, 0) || g.stamp <= before
        };
        if !picked || g.domain != domain || g.action != action {
            continue;
        }
        if g.result.is_some() {
            terminated = true;
        } else {
            canceling.push((n, g.uuid, g.stamp));
        }
    }
    canceling.sort_unstable();
    let code = match (canceling.is_empty(), terminated) {
        (false, _) => cancel_code::NONE,
        (true, true) => cancel_code::GOAL_TERMINATED,
        (true, false) if uuid == [0; 16] => cancel_code::NONE,
        (true, false) => cancel_code::UNKNOWN_GOAL_ID,
    };
    for &(n, ..) in &canceling {
        if let Some(g) = link.goals_in.goals.get_mut(&n) {
            g.status = status::CANCELING as i8;
        }
        link.deliver(ToHub::CancelGoal { goal: n });
    }
    let reply = Answer::Cancel {
        code: code as i8,
        goals: canceling.iter().map(|&(_, u, t)| (u, t)).collect(),
    };
    link.push(Action::Reply { query, reply });
    if !canceling.is_empty() {
        put_status(link, domain, action);
    }
}

pub(super) fn update(link: &mut Link, n: u64, update: super::GoalUpdate) {
    let Some(goal) = link.goals_in.goals.get_mut(&n) else {
        return;
    };
    if goal.result.is_some() {
        return;
    }
    let (domain, action, uuid) = (goal.domain, goal.action.clone(), goal.uuid);
    match update {
        super::GoalUpdate::Feedback(payload) => {
            link.push(Action::PutFeedback {
                domain,
                action,
                uuid,
                payload,
            });
        }
        super::GoalUpdate::End { status, payload } => end(link, n, status, payload),
    }
}

/// Ends goal `n`: answers its waiting `get_result`s, puts the status, and
/// keeps the result for late requests (forgetting the oldest ended goal
/// past [`MAX_ENDED_GOALS`]).
fn end(link: &mut Link, n: u64, st: i8, payload: Vec<u8>) {
    let Some(goal) = link.goals_in.goals.get_mut(&n) else {
        return;
    };
    goal.status = st;
    goal.result = Some(payload.clone());
    let waiting = std::mem::take(&mut goal.waiting);
    let (domain, action) = (goal.domain, goal.action.clone());
    for query in waiting {
        let reply = Answer::Result {
            status: st,
            payload: payload.clone(),
        };
        link.push(Action::Reply { query, reply });
    }
    put_status(link, domain, &action);
    let g = &mut link.goals_in;
    g.ended.push_back(n);
    while g.ended.len() > MAX_ENDED_GOALS {
        if let Some(old) = g.ended.pop_front() {
            if let Some(o) = g.goals.remove(&old) {
                g.by_uuid.remove(&o.uuid);
            }
        }
    }
}

/// The local server of `action` went: its running goals are aborted, and
/// every goal of it is forgotten.
pub(super) fn unserve(link: &mut Link, domain: Domain, action: &str) {
    let mut running: Vec<u64> = link
        .goals_in
        .goals
        .iter()
        .filter(|(_, g)| g.domain == domain && g.action == action && g.result.is_none())
        .map(|(n, _)| *n)
        .collect();
    running.sort_unstable();
    for n in running {
        end(link, n, status::ABORTED as i8, Vec::new());
    }
    let g = &mut link.goals_in;
    let gone: Vec<u64> = g
        .goals
        .iter()
        .filter(|(_, x)| x.domain == domain && x.action == action)
        .map(|(n, _)| *n)
        .collect();
    for n in gone {
        if let Some(o) = g.goals.remove(&n) {
            g.by_uuid.remove(&o.uuid);
        }
    }
    g.ended.retain(|n| g.goals.contains_key(n));
}
