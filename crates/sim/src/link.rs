//! The ROS 2 link ([`rosgate_ros2::link`]) driven by a seeded schedule on
//! a fake clock: a ROS 2 graph whose service and action servers come and
//! go, a transport that replies to the link's queries late, twice, with
//! refusals or never, ROS 2 clients calling what local clients provide,
//! and a hub that calls, sends goals, cancels, answers and ends goals.
//!
//! Checked after every step: no call, goal or request is answered twice,
//! this gateway's publisher of a topic is declared and withdrawn in turn
//! and every put goes through a declared one,
//! nothing is delivered for an id the hub never used, feedback never
//! follows a goal's end, a sample reaches the hub only while its topic is
//! wanted and its (transient local) publisher is present, latched at its
//! depth, never this gateway's own, and the link's tables stay within
//! their bounds.
//! At the end, when the servers have gone, the transport's queries have
//! ended and the clock has passed every deadline: every call to ROS 2 got
//! exactly one response, every goal exactly one end, and every ROS 2
//! client's request exactly one reply.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use rosgate_ros2::action as a;
use rosgate_ros2::link::{
    Action, EntityKind, Event, GoalUpdate, InQuery, Link, Qos, QueryId, Reply, Request, ToHub,
    CALL_TIMEOUT, GOAL_TIMEOUT, MAX_CALLS_IN, MAX_CALLS_OUT, MAX_GOALS_IN, MAX_GOALS_OUT,
};
use rosgate_ros2::link::{Entity, Gid};

use crate::{Bytes, Rng, Violation};

const SERVICE: &str = "/reset";
const SERVICE_TY: &str = "std_srvs/srv/Trigger";
const PROVIDED: &str = "/add";
const ACTION: &str = "/fib";
const SERVED: &str = "/served";
const TOPIC: &str = "/map";
const SEND_TY: &str = "example_interfaces/action/Fibonacci_SendGoal";

/// What one run did, for the test's report.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinkCounts {
    pub calls: u64,
    pub goals: u64,
    pub requests: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Call,
    SendGoal,
    GetResult,
    Other,
}

struct World {
    link: Link,
    now: Instant,
    step: u64,
    /// The transport's queries not ended yet.
    queries: BTreeMap<QueryId, Pending>,
    /// Hub ids used, and how often each was answered.
    calls: BTreeMap<String, u32>,
    goals: BTreeMap<String, u32>,
    goal_ids: u64,
    /// ROS 2 clients' requests, and how often each was answered.
    requests: BTreeMap<InQuery, u32>,
    next_request: u64,
    /// What the hub was handed: ROS 2 calls and goals to answer.
    hub_calls: BTreeSet<u64>,
    hub_goals: BTreeSet<u64>,
    /// Goals from ROS 2 by UUID byte, as the ROS 2 client knows them.
    ros_goals: Vec<u8>,
    present: HashMap<Gid, bool>,
    /// Topics this gateway has a publisher of, as declared.
    publishers: BTreeSet<String>,
    /// Whether the hub wants `TOPIC`, and the samples delivered.
    wanted: bool,
    samples: Vec<Option<u32>>,
}

/// A ROS 2 publisher of `TOPIC`, transient local with this depth.
const PUB_DEPTH: u32 = 3;

/// The GID of this gateway's own publisher (its samples read back).
const OWN: Gid = [0xee; 16];

fn entity(n: u8, kind: EntityKind, name: &str, ty: &str) -> Entity {
    let mut gid = [0; 16];
    gid[0] = n;
    Entity {
        gid,
        kind,
        domain: 0,
        participant: "ros".into(),
        node: "/node".into(),
        name: name.into(),
        ty: ty.into(),
        hash: "RIHS01_x".into(),
        qos: Qos::keep_last(10),
    }
}

/// The graph's entities the schedule toggles: the service's two servers
/// and the action server's five entities.
fn graph() -> Vec<Entity> {
    let mut v = vec![
        entity(1, EntityKind::ServiceServer, SERVICE, SERVICE_TY),
        entity(2, EntityKind::ServiceServer, SERVICE, SERVICE_TY),
        entity(3, EntityKind::Subscription, TOPIC, "std_msgs/msg/String"),
        {
            let mut p = entity(20, EntityKind::Publisher, TOPIC, "std_msgs/msg/String");
            p.qos = Qos {
                durability: rosgate_ros2::rmw::Durability::TransientLocal,
                ..Qos::keep_last(PUB_DEPTH)
            };
            p
        },
        entity(4, EntityKind::Subscription, TOPIC, "std_msgs/msg/String"),
    ];
    let parts = [
        (EntityKind::ServiceServer, a::SEND_GOAL, SEND_TY),
        (EntityKind::ServiceServer, a::CANCEL_GOAL, a::CANCEL_TYPE),
        (EntityKind::ServiceServer, a::GET_RESULT, "x/srv/R"),
        (EntityKind::Publisher, a::FEEDBACK, "x/msg/F"),
        (EntityKind::Publisher, a::STATUS, a::STATUS_TYPE),
    ];
    for (i, (kind, part, ty)) in parts.into_iter().enumerate() {
        v.push(entity(10 + i as u8, kind, &format!("{ACTION}{part}"), ty));
    }
    v
}

impl World {
    fn violation(&self, what: String) -> Violation {
        Violation {
            step: self.step,
            what,
        }
    }

    fn handle(&mut self, e: Event) -> Result<(), Violation> {
        self.link.handle(e);
        while let Some(action) = self.link.poll() {
            self.apply(action)?;
        }
        self.bounds()
    }

    fn apply(&mut self, action: Action) -> Result<(), Violation> {
        let pending = match &action {
            Action::Query { query, .. } => Some((*query, Pending::Call)),
            Action::SendGoal { query, .. } => Some((*query, Pending::SendGoal)),
            Action::GetResult { query, .. } => Some((*query, Pending::GetResult)),
            Action::CancelGoal { query, .. } | Action::Describe { query, .. } => {
                Some((*query, Pending::Other))
            }
            _ => None,
        };
        if let Some((q, p)) = pending {
            if self.queries.insert(q, p).is_some() {
                return Err(self.violation(format!("query {q:?} sent twice")));
            }
        }
        match action {
            Action::Reply { query, .. } => {
                let Some(n) = self.requests.get_mut(&query) else {
                    return Err(self.violation(format!("reply to unknown request {query:?}")));
                };
                *n += 1;
                if *n > 1 {
                    return Err(self.violation(format!("request {query:?} answered twice")));
                }
            }
            Action::Deliver(ToHub::ServiceResponse { id, .. }) => {
                let Some(n) = self.calls.get_mut(&id) else {
                    return Err(self.violation(format!("response for unknown call {id}")));
                };
                *n += 1;
                if *n > 1 {
                    return Err(self.violation(format!("call {id} answered twice")));
                }
            }
            Action::Deliver(ToHub::GoalEnd { id, .. }) => {
                let Some(n) = self.goals.get_mut(&id) else {
                    return Err(self.violation(format!("end of unknown goal {id}")));
                };
                *n += 1;
                if *n > 1 {
                    return Err(self.violation(format!("goal {id} ended twice")));
                }
            }
            Action::Deliver(ToHub::GoalFeedback { id, .. }) if self.goals.get(&id) != Some(&0) => {
                return Err(self.violation(format!("feedback for goal {id}, not running")));
            }
            Action::Publisher { topic, on, .. } => {
                let was = !self.publishers.insert(topic.clone());
                if on == was {
                    return Err(self.violation(format!(
                        "publisher of {topic} {} twice",
                        if on { "declared" } else { "withdrawn" }
                    )));
                }
                if !on {
                    self.publishers.remove(&topic);
                }
            }
            Action::Put { topic, .. } if !self.publishers.contains(&topic) => {
                return Err(self.violation(format!("a put on {topic} without its publisher")));
            }
            Action::Deliver(ToHub::Call { call, .. }) => {
                self.hub_calls.insert(call);
            }
            Action::Deliver(ToHub::Sample { latched, .. }) => self.samples.push(latched),
            Action::Deliver(ToHub::Goal { goal, .. }) => {
                self.hub_goals.insert(goal);
            }
            _ => {}
        }
        Ok(())
    }

    fn bounds(&self) -> Result<(), Violation> {
        let s = self.link.stats();
        if s.calls_in > MAX_CALLS_IN
            || s.calls_out > MAX_CALLS_OUT
            || s.goals_out > MAX_GOALS_OUT
            || s.goals_in > MAX_GOALS_IN
        {
            return Err(self.violation(format!("a table past its bound: {s:?}")));
        }
        Ok(())
    }

    fn pick<T: Copy>(rng: &mut impl Choose, set: impl Iterator<Item = T>) -> Option<T> {
        let v: Vec<T> = set.collect();
        (!v.is_empty()).then(|| v[rng.below(v.len() as u64) as usize])
    }

    fn step(&mut self, rng: &mut impl Choose, graph: &[Entity]) -> Result<(), Violation> {
        self.step += 1;
        let now = self.now;
        match rng.below(17) {
            0 => {
                let e = &graph[rng.below(graph.len() as u64) as usize];
                let on = self.present.get(&e.gid).copied().unwrap_or(false);
                self.present.insert(e.gid, !on);
                if on {
                    self.handle(Event::Gone(e.gid))
                } else {
                    self.handle(Event::Appeared(e.clone()))
                }
            }
            1 | 2 => {
                let id = format!("c{}", self.calls.len());
                self.calls.insert(id.clone(), 0);
                let service = SERVICE.into();
                self.handle(Event::Call {
                    now,
                    id,
                    domain: 0,
                    service,
                    payload: vec![],
                })
            }
            3 | 4 => {
                self.goal_ids += 1;
                let id = format!("g{}", self.goal_ids);
                self.goals.insert(id.clone(), 0);
                let mut uuid = [0; 16];
                uuid[..8].copy_from_slice(&self.goal_ids.to_le_bytes());
                let action = ACTION.into();
                self.handle(Event::SendGoal {
                    now,
                    id,
                    domain: 0,
                    action,
                    uuid,
                    payload: vec![],
                })
            }
            5 => match Self::pick(rng, self.goals.keys().map(String::as_str)) {
                Some(id) => {
                    let id = id.to_string();
                    self.handle(Event::CancelGoal { domain: 0, id })
                }
                None => Ok(()),
            },
            6..=8 => {
                let Some((&q, &p)) = Self::pick(rng, self.queries.iter()) else {
                    return Ok(());
                };
                let reply = match (p, rng.below(5)) {
                    (_, 0) => Reply::Refused("no".into()),
                    (Pending::Call, _) => Reply::Service(vec![1]),
                    (Pending::SendGoal, r) => Reply::Accepted(r != 1),
                    (Pending::GetResult, _) => Reply::Result {
                        status: 4,
                        payload: vec![],
                    },
                    (Pending::Other, _) => Reply::Cancel(0),
                };
                self.handle(Event::Reply { query: q, reply })?;
                // The transport may end the query now, or later.
                if rng.below(2) == 0 {
                    self.queries.remove(&q);
                    self.handle(Event::QueryEnd { query: q })?;
                }
                Ok(())
            }
            9 => {
                let Some(&q) = Self::pick(rng, self.queries.keys()) else {
                    return Ok(());
                };
                self.queries.remove(&q);
                self.handle(Event::QueryEnd { query: q })
            }
            10 => {
                let on = rng.below(3) != 0;
                let ty = on.then(|| "pkg/srv/Add".to_string());
                self.handle(Event::Provide {
                    domain: 0,
                    name: PROVIDED.into(),
                    ty,
                })?;
                let ty = on.then(|| "example_interfaces/action/Fibonacci".to_string());
                self.handle(Event::Serve {
                    domain: 0,
                    name: SERVED.into(),
                    ty,
                })
            }
            11 => {
                self.next_request += 1;
                let query = InQuery(self.next_request);
                self.requests.insert(query, 0);
                let (name, request) = match rng.below(4) {
                    0 => (PROVIDED, Request::Service(vec![])),
                    1 => {
                        let u = rng.u8();
                        self.ros_goals.push(u);
                        (
                            SERVED,
                            Request::SendGoal {
                                uuid: [u; 16],
                                stamp: (i64::from(u), 0),
                                payload: vec![],
                            },
                        )
                    }
                    r => {
                        let u = Self::pick(rng, self.ros_goals.iter().copied()).unwrap_or(0);
                        let uuid = [u; 16];
                        let req = if r == 2 {
                            Request::GetResult { uuid }
                        } else {
                            Request::CancelGoal {
                                uuid,
                                before: (i64::from(u), 0),
                            }
                        };
                        (SERVED, req)
                    }
                };
                let name = name.into();
                self.handle(Event::Request {
                    now,
                    query,
                    domain: 0,
                    name,
                    request,
                })
            }
            12 => {
                if let Some(call) = Self::pick(rng, self.hub_calls.iter().copied()) {
                    self.hub_calls.remove(&call);
                    self.handle(Event::Answer {
                        call,
                        result: Ok(vec![]),
                    })?;
                }
                if let Some(goal) = Self::pick(rng, self.hub_goals.iter().copied()) {
                    let update = if rng.below(2) == 0 {
                        GoalUpdate::Feedback(vec![])
                    } else {
                        GoalUpdate::End {
                            status: 4,
                            payload: vec![],
                        }
                    };
                    self.handle(Event::GoalUpdate { goal, update })?;
                }
                Ok(())
            }
            15 => {
                self.wanted = !self.wanted;
                self.handle(Event::Want {
                    domain: 0,
                    topic: TOPIC.into(),
                    ty: None,
                    on: self.wanted,
                })
            }
            16 => {
                // A sample of a ROS 2 publisher, of this gateway's own, or
                // one claiming a subscription's GID.
                let mut ros = [0; 16];
                ros[0] = 20;
                let mut sub = [0; 16];
                sub[0] = 3;
                let from = [ros, OWN, sub][rng.below(3) as usize];
                // A GID of no entity present is a publisher whose token
                // is not known: taken, volatile.
                let known = self.present.get(&from).copied().unwrap_or(false);
                let expected: &[Option<u32>] = if !self.wanted || from == OWN {
                    &[]
                } else if !known {
                    &[None]
                } else if from == ros {
                    &[Some(PUB_DEPTH)]
                } else {
                    &[]
                };
                self.samples.clear();
                self.handle(Event::Sample {
                    domain: 0,
                    topic: TOPIC.into(),
                    publisher: Some(from),
                    ty: "std_msgs/msg/String".into(),
                    hash: "RIHS01_x".into(),
                    payload: vec![1],
                })?;
                let want = expected;
                if self.samples != want {
                    return Err(self.violation(format!(
                        "a sample from {:?} delivered as {:?}, expected {want:?}",
                        from[0], self.samples
                    )));
                }
                Ok(())
            }
            13 => {
                let latched = match rng.below(3) {
                    0 => None,
                    n => Some(n as u32),
                };
                self.handle(Event::Publish {
                    domain: 0,
                    topic: TOPIC.into(),
                    latched,
                    payload: vec![],
                    cdr: None,
                })
            }
            _ => {
                let jump = match rng.below(10) {
                    0 => CALL_TIMEOUT,
                    _ => Duration::from_millis(rng.below(2000)),
                };
                self.now += jump;
                self.handle(Event::Tick(self.now))
            }
        }
    }

    /// Servers gone, queries ended, every deadline passed: everything
    /// owed has been answered exactly once.
    fn finish(&mut self, graph: &[Entity]) -> Result<(), Violation> {
        self.step += 1;
        for e in graph {
            if self.present.get(&e.gid) == Some(&true) {
                self.handle(Event::Gone(e.gid))?;
            }
        }
        let queries: Vec<QueryId> = self.queries.keys().copied().collect();
        for q in queries {
            self.handle(Event::QueryEnd { query: q })?;
        }
        self.queries.clear();
        self.handle(Event::Provide {
            domain: 0,
            name: PROVIDED.into(),
            ty: None,
        })?;
        self.handle(Event::Serve {
            domain: 0,
            name: SERVED.into(),
            ty: None,
        })?;
        self.now += GOAL_TIMEOUT + CALL_TIMEOUT;
        self.handle(Event::Tick(self.now))?;
        let owed = |m: &BTreeMap<String, u32>| {
            m.iter()
                .find(|(_, n)| **n != 1)
                .map(|(k, n)| format!("{k} answered {n} times"))
        };
        if let Some(w) = owed(&self.calls).or_else(|| owed(&self.goals)) {
            return Err(self.violation(w));
        }
        if let Some(t) = self.publishers.iter().next() {
            return Err(self.violation(format!("publisher of {t} outlived its subscriptions")));
        }
        if let Some((q, n)) = self.requests.iter().find(|(_, n)| **n != 1) {
            return Err(self.violation(format!("request {q:?} answered {n} times")));
        }
        Ok(())
    }
}

/// Where a schedule's choices come from: a seeded RNG, or fuzzer bytes.
trait Choose {
    /// A number below `n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64;
    fn u8(&mut self) -> u8;
}

impl Choose for Rng {
    fn below(&mut self, n: u64) -> u64 {
        Rng::below(self, n)
    }

    fn u8(&mut self) -> u8 {
        Rng::u8(self)
    }
}

impl Choose for Bytes<'_> {
    fn below(&mut self, n: u64) -> u64 {
        u64::from(Bytes::u16(self)) % n.max(1)
    }

    fn u8(&mut self) -> u8 {
        Bytes::u8(self)
    }
}

/// One seeded run of `steps` steps; the first broken invariant, if any.
pub fn run_link_seed(seed: u64, steps: usize) -> Result<LinkCounts, Violation> {
    run(&mut Rng::new(seed), |_| true, steps)
}

/// Steps the fuzz target `link` takes at most, whatever the input's length.
pub const MAX_FUZZ_STEPS: usize = 4096;

/// A run whose choices are `data` (the fuzz target `link`): as many steps
/// as the bytes last, at most `MAX_FUZZ_STEPS`.
pub fn run_link_bytes(data: &[u8]) -> Result<LinkCounts, Violation> {
    run(&mut Bytes::new(data), |b| !b.is_empty(), MAX_FUZZ_STEPS)
}

fn run<C: Choose>(
    rng: &mut C,
    more: impl Fn(&C) -> bool,
    steps: usize,
) -> Result<LinkCounts, Violation> {
    let graph = graph();
    let mut w = World {
        link: Link::new(),
        now: Instant::now(),
        step: 0,
        queries: BTreeMap::new(),
        calls: BTreeMap::new(),
        goals: BTreeMap::new(),
        goal_ids: 0,
        requests: BTreeMap::new(),
        next_request: 0,
        hub_calls: BTreeSet::new(),
        hub_goals: BTreeSet::new(),
        ros_goals: Vec::new(),
        present: HashMap::new(),
        publishers: BTreeSet::new(),
        wanted: false,
        samples: Vec::new(),
    };
    w.handle(Event::OwnPublisher { gid: OWN, on: true })?;
    for t in [
        "std_msgs/msg/String",
        SERVICE_TY,
        SEND_TY,
        a::CANCEL_TYPE,
        "x/srv/R",
        "x/msg/F",
        a::STATUS_TYPE,
    ] {
        w.handle(Event::KnownType(t.into()))?;
    }
    for _ in 0..steps {
        if !more(rng) {
            break;
        }
        w.step(rng, &graph)?;
    }
    w.finish(&graph)?;
    Ok(LinkCounts {
        calls: w.calls.len() as u64,
        goals: w.goals.len() as u64,
        requests: w.requests.len() as u64,
    })
}
