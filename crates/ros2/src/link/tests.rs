//! The link's rules (docs/ros2.md), each driven with a fake clock: a base
//! `Instant` plus `Duration`s, passed in as the shell would.

use std::time::{Duration, Instant};

use super::*;
use crate::action::{self as a, cancel_code, status};
use crate::rmw::Durability;

#[path = "tests_data.rs"]
mod data;

const D: Domain = 0;

fn gid(n: u8) -> Gid {
    let mut g = [0; 16];
    g[0] = n;
    g
}

fn entity(n: u8, kind: EntityKind, name: &str, ty: &str) -> Entity {
    Entity {
        gid: gid(n),
        kind,
        domain: D,
        participant: "ros".into(),
        node: "/node".into(),
        name: name.into(),
        ty: ty.into(),
        hash: format!("RIHS01_{n:064}"),
        qos: Qos::keep_last(10),
    }
}

/// A link whose types are all known (so nothing is asked of nodes).
fn link_knowing(types: &[&str]) -> Link {
    let mut l = Link::new();
    for t in types {
        l.handle(Event::KnownType((*t).into()));
    }
    l
}

fn drain(l: &mut Link) -> Vec<Action> {
    std::iter::from_fn(|| l.poll()).collect()
}

fn to_hub(actions: &[Action]) -> Vec<&ToHub> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Deliver(t) => Some(t),
            _ => None,
        })
        .collect()
}

fn goal_ends<'a>(actions: &'a [Action], id: &str) -> Vec<(i8, &'a Result<Vec<u8>, String>)> {
    to_hub(actions)
        .into_iter()
        .filter_map(|t| match t {
            ToHub::GoalEnd {
                id: i,
                status,
                result,
                ..
            } if i == id => Some((*status, result)),
            _ => None,
        })
        .collect()
}

fn responses<'a>(actions: &'a [Action], id: &str) -> Vec<&'a Result<Vec<u8>, String>> {
    to_hub(actions)
        .into_iter()
        .filter_map(|t| match t {
            ToHub::ServiceResponse { id: i, result, .. } if i == id => Some(result),
            _ => None,
        })
        .collect()
}

fn replies(actions: &[Action], q: InQuery) -> Vec<&Answer> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reply { query, reply } if *query == q => Some(reply),
            _ => None,
        })
        .collect()
}

// ------------------------------------------------------------------ graph

#[test]
fn a_ros_subscription_is_interest_once_per_topic_until_the_last_goes() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    l.handle(Event::Appeared(entity(
        1,
        EntityKind::Subscription,
        "/chatter",
        "std_msgs/msg/String",
    )));
    l.handle(Event::Appeared(entity(
        2,
        EntityKind::Subscription,
        "/chatter",
        "std_msgs/msg/String",
    )));
    let out = drain(&mut l);
    assert_eq!(
        to_hub(&out),
        vec![&ToHub::Interest {
            domain: D,
            topic: "/chatter".into(),
            ty: Some("std_msgs/msg/String".into())
        }]
    );
    l.handle(Event::Gone(gid(1)));
    assert!(drain(&mut l).is_empty(), "one subscription is left");
    l.handle(Event::Gone(gid(2)));
    assert_eq!(
        to_hub(&drain(&mut l)),
        vec![&ToHub::Interest {
            domain: D,
            topic: "/chatter".into(),
            ty: None
        }]
    );
    // Gone twice, or never seen: nothing.
    l.handle(Event::Gone(gid(2)));
    l.handle(Event::Gone(gid(9)));
    assert!(drain(&mut l).is_empty());
}

#[test]
fn the_entity_table_is_bounded_and_counts_what_it_ignores() {
    let mut l = link_knowing(&["t/msg/T"]);
    // Spread over nodes, so the bound met is the total's, not a node's.
    for i in 0..MAX_ENTITIES as u32 + 3 {
        let mut e = entity(0, EntityKind::Node, "", "");
        e.gid[..4].copy_from_slice(&i.to_le_bytes());
        e.node = format!("/n{}", i as usize / admit::MAX_ENTITIES_PER_NODE);
        l.handle(Event::Appeared(e));
    }
    let s = l.stats();
    assert_eq!(s.entities, MAX_ENTITIES);
    assert_eq!(s.ignored, 3);
    assert_eq!(s.refused, 3);
}

fn numbered(i: u32, node: &str, name: &str) -> Entity {
    let mut e = entity(0, EntityKind::Subscription, name, "t/msg/T");
    e.gid[..4].copy_from_slice(&i.to_le_bytes());
    e.gid[15] = 0xaa;
    e.node = node.into();
    e
}

#[test]
fn entities_whose_names_break_rmws_rules_are_refused_counted_and_never_bridged() {
    let mut l = link_knowing(&["t/msg/T"]);
    let bad = [
        ("/node", "/a/../b"),
        ("/node", "/sp ace"),
        ("/node", "/zero\u{200b}width"),
        ("/node", "relative"),
        ("/ns/9node", "/ok"),
        ("/bad ns/node", "/ok"),
        ("node", "/ok"),
    ];
    for (i, (node, name)) in bad.iter().enumerate() {
        l.handle(Event::Appeared(numbered(i as u32, node, name)));
    }
    let long = format!("/{}", "a".repeat(crate::names::MAX_ROS_NAME_CHARS));
    l.handle(Event::Appeared(numbered(99, "/node", &long)));
    assert!(drain(&mut l).is_empty(), "no interest for refused entities");
    let s = l.stats();
    assert_eq!((s.entities, s.names_rejected, s.refused), (0, 8, 0));
    // Real names pass: `__` inside, a namespace, a node entity (no name).
    l.handle(Event::Appeared(numbered(
        100,
        "/robot_1/talker",
        "/a__b/_c",
    )));
    l.handle(Event::Appeared(entity(7, EntityKind::Node, "", "")));
    assert_eq!(l.stats().entities, 2);
    assert_eq!(l.stats().names_rejected, 8);
}

#[test]
fn one_node_cannot_take_more_than_its_share_and_nodes_are_bounded() {
    let mut l = link_knowing(&["t/msg/T"]);
    for i in 0..admit::MAX_ENTITIES_PER_NODE as u32 + 5 {
        l.handle(Event::Appeared(numbered(i, "/flood", &format!("/t{i}"))));
    }
    drain(&mut l);
    let s = l.stats();
    assert_eq!(s.entities, admit::MAX_ENTITIES_PER_NODE);
    assert_eq!((s.refused, s.nodes), (5, 1));
    // Another node still gets in.
    l.handle(Event::Appeared(numbered(1 << 20, "/other", "/t")));
    assert_eq!(l.stats().entities, admit::MAX_ENTITIES_PER_NODE + 1);
    // The flood's entities go: its room (and its bytes) come back.
    let before = l.stats().bytes;
    for i in 0..admit::MAX_ENTITIES_PER_NODE as u32 {
        l.handle(Event::Gone(numbered(i, "/flood", "").gid));
    }
    drain(&mut l);
    let s = l.stats();
    assert_eq!((s.entities, s.nodes), (1, 1));
    assert!(s.bytes < before && s.bytes >= admit::ENTITY_COST, "{s:?}");
    l.handle(Event::Gone(numbered(1 << 20, "", "").gid));
    assert_eq!((l.stats().bytes, l.stats().nodes), (0, 0));
    // Nodes past MAX_NODES: their entities are refused.
    for i in 0..admit::MAX_NODES as u32 + 2 {
        l.handle(Event::Appeared(numbered(i, &format!("/n{i}"), "")));
    }
    let s = l.stats();
    assert_eq!((s.nodes, s.entities), (admit::MAX_NODES, admit::MAX_NODES));
    assert_eq!(s.refused, 5 + 2);
    // A second entity of a node already counted is no new node.
    l.handle(Event::Appeared(numbered(1 << 21, "/n0", "/x")));
    assert_eq!(l.stats().entities, admit::MAX_NODES + 1);
}

#[test]
fn a_local_publish_reaches_ros_only_while_it_subscribes_typed_as_it_declared() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    l.handle(publish("/chatter", None));
    assert!(drain(&mut l).is_empty(), "nobody subscribes in ROS 2");
    let sub = entity(
        1,
        EntityKind::Subscription,
        "/chatter",
        "std_msgs/msg/String",
    );
    let hash = sub.hash.clone();
    l.handle(Event::Appeared(sub));
    drain(&mut l);
    l.handle(publish("/chatter", None));
    l.handle(publish("/chatter", None));
    let put = Action::Put {
        domain: D,
        topic: "/chatter".into(),
        ty: "std_msgs/msg/String".into(),
        hash: hash.clone(),
        payload: b"x".to_vec(),
        cdr: None,
    };
    let declared = Action::Publisher {
        domain: D,
        topic: "/chatter".into(),
        ty: "std_msgs/msg/String".into(),
        hash,
        latched: None,
        on: true,
    };
    assert_eq!(
        drain(&mut l),
        vec![declared.clone(), put.clone(), put],
        "the publisher is declared once, on the first publish"
    );
    l.handle(Event::Gone(gid(1)));
    let withdrawn = match declared {
        Action::Publisher {
            domain,
            topic,
            ty,
            hash,
            latched,
            ..
        } => Action::Publisher {
            domain,
            topic,
            ty,
            hash,
            latched,
            on: false,
        },
        other => other,
    };
    assert!(
        drain(&mut l).contains(&withdrawn),
        "withdrawn with the last subscription"
    );
    l.handle(publish("/chatter", None));
    assert!(drain(&mut l).is_empty());
}

fn publish(topic: &str, latched: Option<u32>) -> Event {
    Event::Publish {
        domain: D,
        topic: topic.into(),
        latched,
        payload: b"x".to_vec(),
        cdr: None,
    }
}

fn publishers(out: &[Action]) -> Vec<(Option<u32>, bool)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Publisher { latched, on, .. } => Some((*latched, *on)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_latched_topic_is_a_transient_local_publisher_declared_again_when_its_depth_changes() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    l.handle(Event::Appeared(entity(
        1,
        EntityKind::Subscription,
        "/map",
        "std_msgs/msg/String",
    )));
    drain(&mut l);
    l.handle(publish("/map", Some(1)));
    assert_eq!(publishers(&drain(&mut l)), vec![(Some(1), true)]);
    l.handle(publish("/map", Some(1)));
    assert_eq!(publishers(&drain(&mut l)), vec![]);
    l.handle(publish("/map", Some(5)));
    assert_eq!(
        publishers(&drain(&mut l)),
        vec![(Some(1), false), (Some(5), true)],
        "a deeper cache is a new publisher"
    );
    l.handle(publish("/map", None));
    assert_eq!(
        publishers(&drain(&mut l)),
        vec![(Some(5), false), (None, true)],
        "no longer latched: a volatile publisher"
    );
}

#[test]
fn a_publisher_follows_the_type_of_the_subscription_that_serves_it() {
    let mut l = link_knowing(&["a/msg/A", "b/msg/B"]);
    l.handle(Event::Appeared(entity(
        2,
        EntityKind::Subscription,
        "/t",
        "b/msg/B",
    )));
    l.handle(publish("/t", None));
    let first: Vec<String> = drain(&mut l)
        .into_iter()
        .filter_map(|a| match a {
            Action::Publisher { ty, on: true, .. } => Some(ty),
            _ => None,
        })
        .collect();
    assert_eq!(first, vec!["b/msg/B".to_string()]);
    // A subscription with a lower GID (declared as another type) now
    // decides the type: the publisher is declared again.
    l.handle(Event::Appeared(entity(
        1,
        EntityKind::Subscription,
        "/t",
        "a/msg/A",
    )));
    l.handle(publish("/t", None));
    let out = drain(&mut l);
    assert_eq!(publishers(&out), vec![(None, false), (None, true)]);
    assert!(out
        .iter()
        .any(|a| matches!(a, Action::Put { ty, .. } if ty == "a/msg/A")));
}

#[test]
fn samples_are_delivered_while_wanted_and_not_from_another_topics_publisher() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    l.handle(Event::Want {
        domain: D,
        topic: "/chatter".into(),
        ty: None,
        on: true,
    });
    l.handle(Event::Want {
        domain: D,
        topic: "/chatter".into(),
        ty: None,
        on: true,
    });
    assert_eq!(
        drain(&mut l),
        vec![Action::Subscribe {
            domain: D,
            topic: "/chatter".into(),
            ty: None,
            on: true
        }],
        "subscribed once however many times wanted"
    );
    let sample = |p: u8| Event::Sample {
        domain: D,
        topic: "/chatter".into(),
        publisher: Some(gid(p)),
        ty: "std_msgs/msg/String".into(),
        hash: String::new(),
        payload: vec![p],
    };
    // A publisher whose token is not known (yet), or a sample naming
    // none: taken, volatile, as an rmw_zenoh subscription takes any sample
    // on its key.
    l.handle(sample(1));
    let mut unknown = sample(2);
    if let Event::Sample { publisher, .. } = &mut unknown {
        *publisher = None;
    }
    l.handle(unknown);
    assert_eq!(
        to_hub(&drain(&mut l))
            .iter()
            .map(|m| match m {
                ToHub::Sample {
                    latched, payload, ..
                } => (*latched, payload.clone()),
                _ => (Some(0), vec![]),
            })
            .collect::<Vec<_>>(),
        vec![(None, vec![1]), (None, vec![2])]
    );
    assert_eq!(l.stats().ignored, 0);
    l.handle(Event::Appeared(entity(
        1,
        EntityKind::Publisher,
        "/chatter",
        "std_msgs/msg/String",
    )));
    l.handle(sample(1));
    assert_eq!(
        to_hub(&drain(&mut l)),
        vec![&ToHub::Sample {
            domain: D,
            topic: "/chatter".into(),
            ty: "std_msgs/msg/String".into(),
            hash: String::new(),
            latched: None,
            payload: vec![1]
        }]
    );
    // A publisher's sample claiming another topic is not believed.
    l.handle(Event::Sample {
        domain: D,
        topic: "/other".into(),
        publisher: Some(gid(1)),
        ty: "std_msgs/msg/String".into(),
        hash: String::new(),
        payload: vec![],
    });
    assert!(drain(&mut l).is_empty());
    l.handle(Event::Want {
        domain: D,
        topic: "/chatter".into(),
        ty: None,
        on: false,
    });
    assert_eq!(
        drain(&mut l),
        vec![Action::Subscribe {
            domain: D,
            topic: "/chatter".into(),
            ty: None,
            on: false
        }]
    );
    l.handle(sample(1));
    assert!(drain(&mut l).is_empty(), "nobody wants it any more");
}

#[test]
fn a_rosgate_gateways_publisher_is_recognised_and_not_echoed() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    l.handle(Event::Want {
        domain: D,
        topic: "/chatter".into(),
        ty: None,
        on: true,
    });
    let mut p = entity(1, EntityKind::Publisher, "/chatter", "std_msgs/msg/String");
    p.participant = "gateway-b".into();
    l.handle(Event::Appeared(p));
    l.handle(Event::Rosgate {
        participant: "gateway-b".into(),
        present: true,
    });
    drain(&mut l);
    let sample = Event::Sample {
        domain: D,
        topic: "/chatter".into(),
        publisher: Some(gid(1)),
        ty: "std_msgs/msg/String".into(),
        hash: String::new(),
        payload: vec![1],
    };
    l.handle(sample.clone());
    assert!(
        to_hub(&drain(&mut l)).is_empty(),
        "it crossed the federation already"
    );
    assert_eq!(l.stats().echoes, 1);
    l.handle(Event::Rosgate {
        participant: "gateway-b".into(),
        present: false,
    });
    l.handle(sample);
    assert_eq!(
        to_hub(&drain(&mut l)).len(),
        1,
        "no longer a gateway: a ROS 2 node's sample"
    );
}

#[test]
fn transient_local_publishers_samples_are_delivered_latched() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    l.handle(Event::Want {
        domain: D,
        topic: "/map".into(),
        ty: None,
        on: true,
    });
    let mut p = entity(1, EntityKind::Publisher, "/map", "std_msgs/msg/String");
    p.qos.durability = Durability::TransientLocal;
    l.handle(Event::Appeared(p));
    l.handle(Event::Appeared(entity(
        2,
        EntityKind::Publisher,
        "/map",
        "std_msgs/msg/String",
    )));
    drain(&mut l);
    for p in [1, 2] {
        l.handle(Event::Sample {
            domain: D,
            topic: "/map".into(),
            publisher: Some(gid(p)),
            ty: "std_msgs/msg/String".into(),
            hash: String::new(),
            payload: vec![p],
        });
    }
    let latched: Vec<Option<u32>> = to_hub(&drain(&mut l))
        .into_iter()
        .filter_map(|t| match t {
            ToHub::Sample { latched, .. } => Some(*latched),
            _ => None,
        })
        .collect();
    assert_eq!(latched, vec![Some(10), None], "its depth, for the hub");
}

// ------------------------------------------------------------------ types

/// The definition `blip()` describes (the type is not bundled).
const BLIP: &str = "int32 a\nstring<=8 tag\ngeometry_msgs/Point[] pts\nfloat64[9] m\n";

/// A node's description of `custom_msgs/msg/Blip`, as rosidl writes it.
fn blip() -> serde_json::Value {
    crate::describe::tests::blip()
}

/// The RIHS01 a node advertises for `custom_msgs/msg/Blip`.
fn blip_hash() -> String {
    let mut r = Registry::bundled();
    r.add("custom_msgs", crate::model::Kind::Msg, "Blip", BLIP)
        .expect("Blip parses");
    r.hash("custom_msgs/msg/Blip").expect("a hash")
}

/// An entity of type Blip, advertising `hash`.
fn blip_entity(n: u8, kind: EntityKind, name: &str, hash: &str) -> Entity {
    let mut e = entity(n, kind, name, "custom_msgs/msg/Blip");
    e.hash = hash.to_string();
    e
}

/// The queries of the Describe actions in `out` for `ty`.
fn describes(out: &[Action], ty: &str) -> Vec<QueryId> {
    out.iter()
        .filter_map(|a| match a {
            Action::Describe { query, ty: t, .. } if t == ty => Some(*query),
            _ => None,
        })
        .collect()
}

#[test]
fn an_unknown_type_is_asked_once_and_learned_when_its_hash_matches() {
    let mut l = Link::with_types(Registry::bundled());
    let before = l.types().clone();
    let hash = blip_hash();
    l.handle(Event::Appeared(blip_entity(
        1,
        EntityKind::Publisher,
        "/x",
        &hash,
    )));
    l.handle(Event::Appeared(blip_entity(
        2,
        EntityKind::Subscription,
        "/x",
        &hash,
    )));
    let out = drain(&mut l);
    let asks = describes(&out, "custom_msgs/msg/Blip");
    assert_eq!(asks.len(), 1, "asked once for two entities: {out:?}");
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Describe { node, hash: h, .. } if node == "/node" && *h == hash
    )));
    assert_eq!(l.stats().types_asked, 1);
    l.handle(Event::Reply {
        query: asks[0],
        reply: Reply::Described(Some(blip())),
    });
    assert_eq!(
        to_hub(&drain(&mut l)),
        vec![&ToHub::LearnType {
            query: asks[0],
            ty: "custom_msgs/msg/Blip".into()
        }]
    );
    assert_eq!(l.stats().types_learned, 1);
    assert!(!Arc::ptr_eq(&before, l.types()), "a new snapshot");
    assert!(
        before.msg("custom_msgs/msg/Blip").is_none(),
        "the old one unchanged"
    );
    assert_eq!(
        l.types().hash("custom_msgs/msg/Blip").as_deref(),
        Some(hash.as_str())
    );
    // Known now: a later entity of it asks nothing.
    l.handle(Event::Appeared(blip_entity(
        3,
        EntityKind::Publisher,
        "/y",
        &hash,
    )));
    assert!(describes(&drain(&mut l), "custom_msgs/msg/Blip").is_empty());
}

#[test]
fn a_description_that_hashes_otherwise_is_not_used_nor_asked_again() {
    let mut l = Link::with_types(Registry::bundled());
    let odd = format!("RIHS01_{}", "0".repeat(64));
    l.handle(Event::Appeared(blip_entity(
        1,
        EntityKind::Publisher,
        "/x",
        &odd,
    )));
    let q = match drain(&mut l).as_slice() {
        [Action::Describe { query, .. }] => *query,
        other => panic!("{other:?}"),
    };
    // The real description, but the node advertised another hash.
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Described(Some(blip())),
    });
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Described(None),
    });
    assert!(drain(&mut l).is_empty());
    assert_eq!(l.stats().types_learned, 0);
    assert_eq!(l.stats().types_refused, 1);
    assert!(l.types().msg("custom_msgs/msg/Blip").is_none());
    l.handle(Event::Appeared(blip_entity(
        2,
        EntityKind::Publisher,
        "/z",
        &odd,
    )));
    assert!(drain(&mut l).is_empty(), "each type is asked once, ever");
}

#[test]
fn a_description_that_does_not_describe_is_refused() {
    let mut l = Link::with_types(Registry::bundled());
    l.handle(Event::Appeared(blip_entity(
        1,
        EntityKind::Publisher,
        "/x",
        &blip_hash(),
    )));
    let q = describes(&drain(&mut l), "custom_msgs/msg/Blip")[0];
    let mut bad = blip();
    bad["type_description"]["fields"][0]["type"]["type_id"] = 200.into();
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Described(Some(bad)),
    });
    assert!(drain(&mut l).is_empty());
    assert_eq!(l.stats().types_refused, 1);
    assert!(l.types().msg("custom_msgs/msg/Blip").is_none());
}

#[test]
fn a_node_that_does_not_describe_in_time_is_given_up_on() {
    let t0 = Instant::now();
    let mut l = Link::with_types(Registry::bundled());
    l.handle(Event::Appeared(blip_entity(
        1,
        EntityKind::Publisher,
        "/x",
        &blip_hash(),
    )));
    let q = match drain(&mut l).as_slice() {
        [Action::Describe { query, .. }] => *query,
        other => panic!("{other:?}"),
    };
    l.handle(Event::Tick(t0));
    l.handle(Event::Tick(t0 + FETCH_TIMEOUT - Duration::from_millis(1)));
    l.handle(Event::Tick(t0 + FETCH_TIMEOUT));
    // The answer after the deadline is not used.
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Described(Some(blip())),
    });
    assert!(drain(&mut l).is_empty());
    assert!(l.types().msg("custom_msgs/msg/Blip").is_none());
    assert_eq!(l.stats().types_learned, 0);
}

#[test]
fn a_node_that_answers_just_before_its_deadline_is_heard() {
    let t0 = Instant::now();
    let mut l = Link::with_types(Registry::bundled());
    l.handle(Event::Appeared(blip_entity(
        1,
        EntityKind::Publisher,
        "/x",
        &blip_hash(),
    )));
    let q = describes(&drain(&mut l), "custom_msgs/msg/Blip")[0];
    l.handle(Event::Tick(t0));
    l.handle(Event::Tick(t0 + FETCH_TIMEOUT - Duration::from_millis(1)));
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Described(Some(blip())),
    });
    assert_eq!(l.stats().types_learned, 1);
}

#[test]
fn at_most_max_fetches_types_are_asked_fetches_per_turn_at_a_time() {
    let t0 = Instant::now();
    let mut l = Link::new();
    for i in 0..MAX_FETCHES as u32 + 2 {
        let mut e = entity(0, EntityKind::Publisher, "/t", &format!("pkg/msg/T{i}"));
        e.gid[..4].copy_from_slice(&i.to_le_bytes());
        // Spread over nodes, so the per-node bound is not the one met.
        e.node = format!("/n{}", i as usize / MAX_FETCHES_PER_NODE);
        l.handle(Event::Appeared(e));
    }
    let first = drain(&mut l)
        .iter()
        .filter(|a| matches!(a, Action::Describe { .. }))
        .count();
    assert_eq!(first, FETCHES_PER_TURN, "the rest wait for later turns");
    assert!(l.wants_turn());
    let mut asked = first;
    let mut turns = 0;
    while l.wants_turn() {
        turns += 1;
        l.handle(Event::Tick(t0 + Duration::from_millis(turns)));
        let n = drain(&mut l)
            .iter()
            .filter(|a| matches!(a, Action::Describe { .. }))
            .count();
        assert!(n <= FETCHES_PER_TURN);
        asked += n;
    }
    assert_eq!(asked, MAX_FETCHES);
    assert_eq!(l.stats().types_asked, MAX_FETCHES);
    assert_eq!(l.stats().ignored, 2);
    assert_eq!(turns as usize, MAX_FETCHES.div_ceil(FETCHES_PER_TURN) - 1);
}

#[test]
fn one_node_is_asked_for_at_most_max_fetches_per_node_types() {
    let mut l = Link::new();
    let t0 = Instant::now();
    for i in 0..MAX_FETCHES_PER_NODE as u32 + 3 {
        let mut e = entity(0, EntityKind::Publisher, "/t", &format!("pkg/msg/T{i}"));
        e.gid[..4].copy_from_slice(&i.to_le_bytes());
        l.handle(Event::Appeared(e));
    }
    // Another node's type is still asked.
    let mut other = entity(0, EntityKind::Publisher, "/t", "pkg/msg/Other");
    other.gid[..4].copy_from_slice(&u32::MAX.to_le_bytes());
    other.node = "/other".into();
    l.handle(Event::Appeared(other));
    let mut asked = Vec::new();
    for turn in 0..100 {
        l.handle(Event::Tick(t0 + Duration::from_millis(turn)));
        asked.extend(drain(&mut l).into_iter().filter_map(|a| match a {
            Action::Describe { node, .. } => Some(node),
            _ => None,
        }));
    }
    assert_eq!(
        asked.iter().filter(|n| *n == "/node").count(),
        MAX_FETCHES_PER_NODE
    );
    assert_eq!(asked.iter().filter(|n| *n == "/other").count(), 1);
    assert_eq!(l.stats().ignored, 3);
}

// ------------------------------------------------------------ calls out

fn with_server() -> Link {
    let mut l = link_knowing(&["std_srvs/srv/Trigger"]);
    l.handle(Event::Appeared(entity(
        5,
        EntityKind::ServiceServer,
        "/reset",
        "std_srvs/srv/Trigger",
    )));
    let out = drain(&mut l);
    assert_eq!(
        to_hub(&out),
        vec![&ToHub::Provider {
            domain: D,
            name: "/reset".into(),
            action: false,
            ty: Some("std_srvs/srv/Trigger".into())
        }]
    );
    l
}

fn call(l: &mut Link, now: Instant, id: &str) -> Option<QueryId> {
    l.handle(Event::Call {
        now,
        id: id.into(),
        domain: D,
        service: "/reset".into(),
        payload: vec![1],
    });
    l.out.iter().find_map(|a| match a {
        Action::Query { query, server, .. } if *server == gid(5) => Some(*query),
        _ => None,
    })
}

#[test]
fn a_call_to_ros_ends_in_exactly_one_response_reply_then_end() {
    let t0 = Instant::now();
    let mut l = with_server();
    let q = call(&mut l, t0, "c1").unwrap();
    drain(&mut l);
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Service(vec![7]),
    });
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Service(vec![8]),
    });
    l.handle(Event::QueryEnd { query: q });
    l.handle(Event::Tick(t0 + CALL_TIMEOUT));
    let out = drain(&mut l);
    assert_eq!(responses(&out, "c1"), vec![&Ok(vec![7])]);
    assert_eq!(l.stats().calls_out, 0);
}

#[test]
fn a_call_to_ros_whose_query_ends_without_a_reply_fails_once() {
    let t0 = Instant::now();
    let mut l = with_server();
    let q = call(&mut l, t0, "c1").unwrap();
    l.handle(Event::QueryEnd { query: q });
    l.handle(Event::QueryEnd { query: q });
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Service(vec![7]),
    });
    let out = drain(&mut l);
    let r = responses(&out, "c1");
    assert_eq!(r.len(), 1);
    assert!(
        r[0].as_ref().unwrap_err().contains("did not answer"),
        "{r:?}"
    );
}

#[test]
fn a_call_to_ros_times_out_once_on_the_fake_clock() {
    let t0 = Instant::now();
    let mut l = with_server();
    let q = call(&mut l, t0, "c1").unwrap();
    l.handle(Event::Tick(t0 + CALL_TIMEOUT - Duration::from_millis(1)));
    assert!(responses(&drain(&mut l), "c1").is_empty(), "not yet");
    l.handle(Event::Tick(t0 + CALL_TIMEOUT));
    l.handle(Event::Tick(t0 + CALL_TIMEOUT * 2));
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Service(vec![7]),
    });
    let out = drain(&mut l);
    let r = responses(&out, "c1");
    assert_eq!(r.len(), 1);
    assert!(r[0].as_ref().unwrap_err().contains("timed out"));
}

#[test]
fn a_call_fails_at_once_without_a_server_and_when_the_server_leaves() {
    let t0 = Instant::now();
    let mut l = link_knowing(&[]);
    assert_eq!(call(&mut l, t0, "c0"), None);
    let out = drain(&mut l);
    assert!(responses(&out, "c0")[0]
        .as_ref()
        .unwrap_err()
        .contains("no ROS 2 server"));
    assert!(!l.serves_service(D, "/reset"));
    assert!(with_server().serves_service(D, "/reset"));
    let mut l = with_server();
    let q = call(&mut l, t0, "c1").unwrap();
    drain(&mut l);
    l.handle(Event::Gone(gid(5)));
    l.handle(Event::QueryEnd { query: q });
    let out = drain(&mut l);
    let r = responses(&out, "c1");
    assert_eq!(r.len(), 1, "{out:?}");
    assert!(r[0].as_ref().unwrap_err().contains("left"));
    assert!(to_hub(&out).contains(&&ToHub::Provider {
        domain: D,
        name: "/reset".into(),
        action: false,
        ty: None
    }));
}

#[test]
fn a_refused_call_says_why() {
    let t0 = Instant::now();
    let mut l = with_server();
    let q = call(&mut l, t0, "c1").unwrap();
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Refused("bad request".into()),
    });
    let out = drain(&mut l);
    assert_eq!(responses(&out, "c1"), vec![&Err("bad request".to_string())]);
}

#[test]
fn calls_to_ros_are_bounded() {
    let t0 = Instant::now();
    let mut l = with_server();
    for i in 0..MAX_CALLS_OUT {
        l.handle(Event::Call {
            now: t0,
            id: format!("c{i}"),
            domain: D,
            service: "/reset".into(),
            payload: vec![],
        });
    }
    drain(&mut l);
    l.handle(Event::Call {
        now: t0,
        id: "over".into(),
        domain: D,
        service: "/reset".into(),
        payload: vec![],
    });
    let out = drain(&mut l);
    assert!(responses(&out, "over")[0]
        .as_ref()
        .unwrap_err()
        .contains("too many"));
    assert_eq!(l.stats().calls_out, MAX_CALLS_OUT);
}

// ------------------------------------------------------------- calls in

fn providing() -> Link {
    let mut l = link_knowing(&[]);
    l.handle(Event::Provide {
        domain: D,
        name: "/add".into(),
        ty: Some("pkg/srv/Add".into()),
    });
    assert_eq!(
        drain(&mut l),
        vec![Action::Offer {
            domain: D,
            name: "/add".into(),
            ty: "pkg/srv/Add".into(),
            action: false,
            on: true
        }]
    );
    l
}

fn ros_calls(l: &mut Link, now: Instant, q: u64) -> Option<u64> {
    l.handle(Event::Request {
        now,
        query: InQuery(q),
        domain: D,
        name: "/add".into(),
        request: Request::Service(vec![q as u8]),
    });
    l.out.iter().find_map(|a| match a {
        Action::Deliver(ToHub::Call { call, payload, .. }) if payload == &vec![q as u8] => {
            Some(*call)
        }
        _ => None,
    })
}

#[test]
fn a_call_from_ros_gets_exactly_one_reply() {
    let t0 = Instant::now();
    let mut l = providing();
    let c = ros_calls(&mut l, t0, 1).unwrap();
    drain(&mut l);
    l.handle(Event::Answer {
        call: c,
        result: Ok(vec![3]),
    });
    l.handle(Event::Answer {
        call: c,
        result: Ok(vec![4]),
    });
    l.handle(Event::Tick(t0 + CALL_TIMEOUT));
    let out = drain(&mut l);
    assert_eq!(replies(&out, InQuery(1)), vec![&Answer::Service(vec![3])]);
    assert_eq!(l.stats().calls_in, 0);
}

#[test]
fn a_call_from_ros_for_nothing_provided_is_refused_at_once() {
    let t0 = Instant::now();
    let mut l = link_knowing(&[]);
    assert_eq!(ros_calls(&mut l, t0, 1), None);
    let out = drain(&mut l);
    assert!(
        matches!(replies(&out, InQuery(1)).as_slice(), [Answer::Error(e)] if e.contains("not provided"))
    );
}

#[test]
fn a_call_from_ros_times_out_once_and_a_late_answer_is_dropped() {
    let t0 = Instant::now();
    let mut l = providing();
    let c = ros_calls(&mut l, t0, 1).unwrap();
    l.handle(Event::Tick(t0 + CALL_TIMEOUT - Duration::from_millis(1)));
    assert!(replies(&drain(&mut l), InQuery(1)).is_empty());
    l.handle(Event::Tick(t0 + CALL_TIMEOUT));
    l.handle(Event::Answer {
        call: c,
        result: Ok(vec![3]),
    });
    let out = drain(&mut l);
    assert!(
        matches!(replies(&out, InQuery(1)).as_slice(), [Answer::Error(e)] if e.contains("timed out"))
    );
}

#[test]
fn when_the_provider_leaves_its_calls_from_ros_get_an_error_once() {
    let t0 = Instant::now();
    let mut l = providing();
    let c = ros_calls(&mut l, t0, 1).unwrap();
    ros_calls(&mut l, t0, 2).unwrap();
    drain(&mut l);
    l.handle(Event::Provide {
        domain: D,
        name: "/add".into(),
        ty: None,
    });
    l.handle(Event::Answer {
        call: c,
        result: Ok(vec![3]),
    });
    let out = drain(&mut l);
    for q in [1, 2] {
        assert!(
            matches!(replies(&out, InQuery(q)).as_slice(), [Answer::Error(e)] if e.contains("left"))
        );
    }
    assert!(out.contains(&Action::Offer {
        domain: D,
        name: "/add".into(),
        ty: "pkg/srv/Add".into(),
        action: false,
        on: false
    }));
}

#[test]
fn calls_from_ros_are_bounded() {
    let t0 = Instant::now();
    let mut l = providing();
    for q in 0..MAX_CALLS_IN as u64 {
        l.handle(Event::Request {
            now: t0,
            query: InQuery(q),
            domain: D,
            name: "/add".into(),
            request: Request::Service(vec![]),
        });
    }
    drain(&mut l);
    l.handle(Event::Request {
        now: t0,
        query: InQuery(u64::MAX),
        domain: D,
        name: "/add".into(),
        request: Request::Service(vec![]),
    });
    let out = drain(&mut l);
    assert!(
        matches!(replies(&out, InQuery(u64::MAX)).as_slice(), [Answer::Error(e)] if e.contains("too many"))
    );
}

// ------------------------------------------------------------ goals out

const ACTION: &str = "/fib";
const SEND_TY: &str = "example_interfaces/action/Fibonacci_SendGoal";

/// The five entities of an action server, `base` their first GID.
fn action_server(l: &mut Link, base: u8) {
    let parts = [
        (EntityKind::ServiceServer, a::SEND_GOAL, SEND_TY),
        (EntityKind::ServiceServer, a::CANCEL_GOAL, a::CANCEL_TYPE),
        (
            EntityKind::ServiceServer,
            a::GET_RESULT,
            "example_interfaces/action/Fibonacci_GetResult",
        ),
        (
            EntityKind::Publisher,
            a::FEEDBACK,
            "example_interfaces/action/Fibonacci_FeedbackMessage",
        ),
        (EntityKind::Publisher, a::STATUS, a::STATUS_TYPE),
    ];
    for (i, (kind, part, ty)) in parts.into_iter().enumerate() {
        l.handle(Event::Appeared(entity(
            base + i as u8,
            kind,
            &format!("{ACTION}{part}"),
            ty,
        )));
    }
}

fn goal_link() -> Link {
    let mut l = Link::new();
    for t in [
        SEND_TY,
        a::CANCEL_TYPE,
        "example_interfaces/action/Fibonacci_GetResult",
        "example_interfaces/action/Fibonacci_FeedbackMessage",
        a::STATUS_TYPE,
    ] {
        l.handle(Event::KnownType(t.into()));
    }
    action_server(&mut l, 10);
    drain(&mut l);
    l
}

fn send(l: &mut Link, now: Instant, id: &str, u: u8) -> Option<QueryId> {
    l.handle(Event::SendGoal {
        now,
        id: id.into(),
        domain: D,
        action: ACTION.into(),
        uuid: [u; 16],
        payload: vec![u],
    });
    l.out.iter().find_map(|a| match a {
        Action::SendGoal { query, uuid, .. } if *uuid == [u; 16] => Some(*query),
        _ => None,
    })
}

fn accept(l: &mut Link, q: QueryId, accepted: bool) -> Vec<Action> {
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Accepted(accepted),
    });
    drain(l)
}

fn result_query(out: &[Action]) -> Option<QueryId> {
    out.iter().find_map(|a| match a {
        Action::GetResult { query, .. } => Some(*query),
        _ => None,
    })
}

#[test]
fn an_action_is_offered_only_once_its_five_entities_are_known() {
    let mut l = Link::new();
    let parts = [a::SEND_GOAL, a::CANCEL_GOAL, a::GET_RESULT];
    for (i, p) in parts.iter().enumerate() {
        let ty = if i == 0 { SEND_TY } else { "x/srv/Y" };
        l.handle(Event::Appeared(entity(
            i as u8 + 1,
            EntityKind::ServiceServer,
            &format!("{ACTION}{p}"),
            ty,
        )));
    }
    l.handle(Event::Appeared(entity(
        4,
        EntityKind::Publisher,
        &format!("{ACTION}{}", a::FEEDBACK),
        "x/msg/F",
    )));
    let offered = |out: &[Action]| {
        to_hub(out).into_iter().any(|t| {
            matches!(
                t,
                ToHub::Provider {
                    action: true,
                    ty: Some(_),
                    ..
                }
            )
        })
    };
    assert!(!offered(&drain(&mut l)), "four of five");
    l.handle(Event::Appeared(entity(
        5,
        EntityKind::Publisher,
        &format!("{ACTION}{}", a::STATUS),
        a::STATUS_TYPE,
    )));
    let out = drain(&mut l);
    assert!(
        to_hub(&out).contains(&&ToHub::Provider {
            domain: D,
            name: ACTION.into(),
            action: true,
            ty: Some("example_interfaces/action/Fibonacci".into())
        }),
        "{out:?}"
    );
    // An action's services are not offered as plain services.
    assert!(!to_hub(&out)
        .iter()
        .any(|t| matches!(t, ToHub::Provider { action: false, .. })));
    l.handle(Event::Gone(gid(4)));
    assert!(to_hub(&drain(&mut l)).contains(&&ToHub::Provider {
        domain: D,
        name: ACTION.into(),
        action: true,
        ty: None
    }));
}

#[test]
fn a_goal_accepted_then_finished_ends_once_with_its_result() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    let out = drain(&mut l);
    assert!(out.contains(&Action::WatchFeedback {
        domain: D,
        action: ACTION.into(),
        on: true
    }));
    let out = accept(&mut l, q, true);
    let r = result_query(&out).unwrap();
    l.handle(Event::QueryEnd { query: q }); // send_goal's query ends after its reply
    l.handle(Event::Feedback {
        domain: D,
        action: ACTION.into(),
        uuid: [1; 16],
        payload: vec![9],
    });
    l.handle(Event::Feedback {
        domain: D,
        action: ACTION.into(),
        uuid: [2; 16],
        payload: vec![8],
    });
    l.handle(Event::Reply {
        query: r,
        reply: Reply::Result {
            status: status::SUCCEEDED as i8,
            payload: vec![5],
        },
    });
    l.handle(Event::QueryEnd { query: r });
    l.handle(Event::Reply {
        query: r,
        reply: Reply::Result {
            status: status::ABORTED as i8,
            payload: vec![],
        },
    });
    l.handle(Event::Tick(t0 + GOAL_TIMEOUT));
    let out = drain(&mut l);
    assert_eq!(
        to_hub(&out)
            .into_iter()
            .filter(|t| matches!(t, ToHub::GoalFeedback { .. }))
            .collect::<Vec<_>>(),
        vec![&ToHub::GoalFeedback {
            domain: D,
            action: ACTION.into(),
            id: "g1".into(),
            payload: vec![9]
        }],
        "only the goal's own feedback"
    );
    assert_eq!(
        goal_ends(&out, "g1"),
        vec![(status::SUCCEEDED as i8, &Ok(vec![5]))]
    );
    assert!(out.contains(&Action::WatchFeedback {
        domain: D,
        action: ACTION.into(),
        on: false
    }));
    assert_eq!(l.stats().goals_out, 0);
}

#[test]
fn a_rejected_goal_ends_once_with_status_unknown() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    drain(&mut l);
    let mut out = accept(&mut l, q, false);
    l.handle(Event::QueryEnd { query: q });
    out.extend(drain(&mut l));
    assert!(result_query(&out).is_none());
    let ends = goal_ends(&out, "g1");
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0].0, status::UNKNOWN as i8);
}

#[test]
fn a_cancel_before_acceptance_is_sent_when_the_server_accepts() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    drain(&mut l);
    l.handle(Event::CancelGoal {
        domain: D,
        id: "g1".into(),
    });
    assert!(
        !drain(&mut l)
            .iter()
            .any(|a| matches!(a, Action::CancelGoal { .. })),
        "the server does not know the goal yet"
    );
    let out = accept(&mut l, q, true);
    let kinds: Vec<&str> = out
        .iter()
        .map(|a| match a {
            Action::GetResult { .. } => "get_result",
            Action::CancelGoal { uuid, .. } if *uuid == [1; 16] => "cancel",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, vec!["get_result", "cancel"]);
    // After acceptance a cancel goes at once.
    l.handle(Event::CancelGoal {
        domain: D,
        id: "g1".into(),
    });
    assert!(matches!(
        drain(&mut l).as_slice(),
        [Action::CancelGoal { .. }]
    ));
    // Cancelling a goal nobody knows does nothing.
    l.handle(Event::CancelGoal {
        domain: D,
        id: "nope".into(),
    });
    assert!(drain(&mut l).is_empty());
}

#[test]
fn a_rejected_goal_cancelled_early_still_ends_once() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    l.handle(Event::CancelGoal {
        domain: D,
        id: "g1".into(),
    });
    drain(&mut l);
    let out = accept(&mut l, q, false);
    assert!(!out.iter().any(|a| matches!(a, Action::CancelGoal { .. })));
    assert_eq!(goal_ends(&out, "g1").len(), 1);
}

#[test]
fn when_the_server_leaves_its_goals_are_aborted_once() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q1 = send(&mut l, t0, "g1", 1).unwrap();
    let _q2 = send(&mut l, t0, "g2", 2).unwrap();
    drain(&mut l);
    let r1 = result_query(&accept(&mut l, q1, true)).unwrap();
    l.handle(Event::Gone(gid(12))); // get_result's server
    l.handle(Event::QueryEnd { query: r1 });
    l.handle(Event::Reply {
        query: r1,
        reply: Reply::Result {
            status: 4,
            payload: vec![],
        },
    });
    let out = drain(&mut l);
    for id in ["g1", "g2"] {
        let ends = goal_ends(&out, id);
        assert_eq!(ends.len(), 1, "{id}: {out:?}");
        assert_eq!(ends[0].0, status::ABORTED as i8);
        assert!(ends[0].1.as_ref().unwrap_err().contains("left"));
    }
    // And a new goal is refused at once while the server is incomplete.
    assert_eq!(send(&mut l, t0, "g3", 3), None);
    assert_eq!(goal_ends(&drain(&mut l), "g3").len(), 1);
}

#[test]
fn a_goal_whose_queries_end_without_replies_is_aborted_once() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    l.handle(Event::QueryEnd { query: q });
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Accepted(true),
    });
    let mut all = drain(&mut l);
    let q2 = send(&mut l, t0, "g2", 2).unwrap();
    all.extend(drain(&mut l));
    let out = accept(&mut l, q2, true);
    let r2 = result_query(&out).unwrap();
    all.extend(out);
    l.handle(Event::QueryEnd { query: r2 });
    l.handle(Event::QueryEnd { query: r2 });
    all.extend(drain(&mut l));
    assert!(!all
        .iter()
        .any(|a| matches!(a, Action::GetResult { uuid, .. } if *uuid == [1; 16])));
    for id in ["g1", "g2"] {
        let ends = goal_ends(&all, id);
        assert_eq!(ends.len(), 1, "{id}");
        assert!(ends[0].1.as_ref().unwrap_err().contains("did not answer"));
    }
    assert_eq!(l.stats().goals_out, 0);
}

#[test]
fn a_goal_in_flight_past_its_timeout_is_aborted_once() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    let r = result_query(&accept(&mut l, q, true)).unwrap();
    l.handle(Event::Tick(t0 + GOAL_TIMEOUT - Duration::from_secs(1)));
    assert!(goal_ends(&drain(&mut l), "g1").is_empty());
    l.handle(Event::Tick(t0 + GOAL_TIMEOUT));
    l.handle(Event::Reply {
        query: r,
        reply: Reply::Result {
            status: 4,
            payload: vec![],
        },
    });
    let out = drain(&mut l);
    assert_eq!(goal_ends(&out, "g1").len(), 1);
    assert_eq!(goal_ends(&out, "g1")[0].0, status::ABORTED as i8);
}

#[test]
fn goals_to_ros_are_bounded_and_a_duplicate_is_not_a_second_goal() {
    let t0 = Instant::now();
    let mut l = goal_link();
    for i in 0..MAX_GOALS_OUT as u32 {
        let mut uuid = [0; 16];
        uuid[..4].copy_from_slice(&i.to_le_bytes());
        l.handle(Event::SendGoal {
            now: t0,
            id: format!("g{i}"),
            domain: D,
            action: ACTION.into(),
            uuid,
            payload: vec![],
        });
    }
    drain(&mut l);
    assert_eq!(l.stats().goals_out, MAX_GOALS_OUT);
    assert_eq!(send(&mut l, t0, "over", 0xff), None);
    let out = drain(&mut l);
    assert!(goal_ends(&out, "over")[0]
        .1
        .as_ref()
        .unwrap_err()
        .contains("too many"));
    // The same id again is the same goal: nothing new, and it ends once.
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    drain(&mut l);
    assert_eq!(send(&mut l, t0, "g1", 2), None);
    assert!(drain(&mut l).is_empty());
    assert_eq!(l.stats().goals_out, 1);
    assert_eq!(goal_ends(&accept(&mut l, q, false), "g1").len(), 1);
    // Another goal with a UUID in flight is refused, once.
    let mut l = goal_link();
    send(&mut l, t0, "g1", 1).unwrap();
    drain(&mut l);
    assert_eq!(send(&mut l, t0, "g2", 1), None);
    let out = drain(&mut l);
    assert!(goal_ends(&out, "g2")[0]
        .1
        .as_ref()
        .unwrap_err()
        .contains("UUID"));
    assert!(goal_ends(&out, "g1").is_empty(), "the first goes on");
}

// ------------------------------------------------------------- goals in

fn serving() -> Link {
    let mut l = Link::new();
    l.handle(Event::Serve {
        domain: D,
        name: ACTION.into(),
        ty: Some("example_interfaces/action/Fibonacci".into()),
    });
    drain(&mut l);
    l
}

/// The acceptance stamp the tests give goal `[u; 16]`: in UUID order.
fn stamp_of(u: u8) -> Stamp {
    (i64::from(u), 0)
}

fn ros_goal(l: &mut Link, q: u64, u: u8) -> (Vec<Action>, Option<u64>) {
    l.handle(Event::Request {
        now: Instant::now(),
        query: InQuery(q),
        domain: D,
        name: ACTION.into(),
        request: Request::SendGoal {
            uuid: [u; 16],
            stamp: stamp_of(u),
            payload: vec![u],
        },
    });
    let out = drain(l);
    let n = to_hub(&out).into_iter().find_map(|t| match t {
        ToHub::Goal { goal, .. } => Some(*goal),
        _ => None,
    });
    (out, n)
}

fn get_result(l: &mut Link, q: u64, u: u8) {
    l.handle(Event::Request {
        now: Instant::now(),
        query: InQuery(q),
        domain: D,
        name: ACTION.into(),
        request: Request::GetResult { uuid: [u; 16] },
    });
}

#[test]
fn a_goal_from_ros_is_accepted_at_once_and_its_result_answers_get_result_once() {
    let mut l = serving();
    let (out, n) = ros_goal(&mut l, 1, 7);
    let n = n.unwrap();
    assert_eq!(replies(&out, InQuery(1)), vec![&Answer::Accepted(true)]);
    assert!(out.contains(&Action::PutStatus {
        domain: D,
        action: ACTION.into(),
        goals: vec![([7; 16], stamp_of(7), status::EXECUTING as i8)]
    }));
    get_result(&mut l, 2, 7);
    get_result(&mut l, 3, 7);
    l.handle(Event::GoalUpdate {
        goal: n,
        update: GoalUpdate::Feedback(vec![1]),
    });
    assert_eq!(
        drain(&mut l),
        vec![Action::PutFeedback {
            domain: D,
            action: ACTION.into(),
            uuid: [7; 16],
            payload: vec![1]
        }],
        "get_result waits"
    );
    l.handle(Event::GoalUpdate {
        goal: n,
        update: GoalUpdate::End {
            status: status::SUCCEEDED as i8,
            payload: vec![42],
        },
    });
    l.handle(Event::GoalUpdate {
        goal: n,
        update: GoalUpdate::End {
            status: status::ABORTED as i8,
            payload: vec![],
        },
    });
    l.handle(Event::GoalUpdate {
        goal: n,
        update: GoalUpdate::Feedback(vec![2]),
    });
    let out = drain(&mut l);
    let done = Answer::Result {
        status: status::SUCCEEDED as i8,
        payload: vec![42],
    };
    assert_eq!(replies(&out, InQuery(2)), vec![&done]);
    assert_eq!(replies(&out, InQuery(3)), vec![&done]);
    assert!(
        !out.iter().any(|a| matches!(a, Action::PutFeedback { .. })),
        "nothing after the end"
    );
    // A late get_result gets the kept result at once.
    get_result(&mut l, 4, 7);
    assert_eq!(replies(&drain(&mut l), InQuery(4)), vec![&done]);
}

#[test]
fn get_result_for_an_unknown_goal_is_answered_at_once_with_status_unknown() {
    let mut l = serving();
    get_result(&mut l, 1, 9);
    assert_eq!(
        replies(&drain(&mut l), InQuery(1)),
        vec![&Answer::Result {
            status: status::UNKNOWN as i8,
            payload: vec![]
        }]
    );
}

#[test]
fn a_goal_from_ros_for_an_action_not_served_or_a_duplicate_is_rejected() {
    let mut l = Link::new();
    let (out, n) = ros_goal(&mut l, 1, 1);
    assert_eq!(
        (replies(&out, InQuery(1)), n),
        (vec![&Answer::Accepted(false)], None)
    );
    let mut l = serving();
    ros_goal(&mut l, 1, 1).1.unwrap();
    let (out, n) = ros_goal(&mut l, 2, 1);
    assert_eq!(
        (replies(&out, InQuery(2)), n),
        (vec![&Answer::Accepted(false)], None)
    );
}

#[test]
fn cancels_from_ros_reach_the_server_for_running_goals_only() {
    let mut l = serving();
    let n = ros_goal(&mut l, 1, 1).1.unwrap();
    let cancel = |l: &mut Link, q: u64, u: u8| {
        l.handle(Event::Request {
            now: Instant::now(),
            query: InQuery(q),
            domain: D,
            name: ACTION.into(),
            request: Request::CancelGoal {
                uuid: [u; 16],
                before: (0, 0),
            },
        });
        drain(l)
    };
    let out = cancel(&mut l, 2, 1);
    assert!(to_hub(&out).contains(&&ToHub::CancelGoal { goal: n }));
    assert_eq!(
        replies(&out, InQuery(2)),
        vec![&Answer::Cancel {
            code: cancel_code::NONE as i8,
            goals: vec![([1; 16], stamp_of(1))]
        }]
    );
    let out = cancel(&mut l, 3, 9);
    assert_eq!(
        replies(&out, InQuery(3)),
        vec![&Answer::Cancel {
            code: cancel_code::UNKNOWN_GOAL_ID as i8,
            goals: vec![]
        }]
    );
    l.handle(Event::GoalUpdate {
        goal: n,
        update: GoalUpdate::End {
            status: status::CANCELED as i8,
            payload: vec![],
        },
    });
    drain(&mut l);
    let out = cancel(&mut l, 4, 1);
    assert_eq!(
        replies(&out, InQuery(4)),
        vec![&Answer::Cancel {
            code: cancel_code::GOAL_TERMINATED as i8,
            goals: vec![]
        }]
    );
    assert!(to_hub(&out).is_empty());
}

#[test]
fn when_the_local_server_leaves_waiting_get_results_get_an_abort_once() {
    let mut l = serving();
    ros_goal(&mut l, 1, 1).1.unwrap();
    get_result(&mut l, 2, 1);
    drain(&mut l);
    l.handle(Event::Serve {
        domain: D,
        name: ACTION.into(),
        ty: None,
    });
    let out = drain(&mut l);
    assert_eq!(
        replies(&out, InQuery(2)),
        vec![&Answer::Result {
            status: status::ABORTED as i8,
            payload: vec![]
        }]
    );
    assert!(out.iter().any(|a| matches!(
        a,
        Action::Offer {
            on: false,
            action: true,
            ..
        }
    )));
    assert_eq!(l.stats().goals_in, 0);
}

#[test]
fn get_result_waiters_and_ended_goals_are_bounded() {
    let mut l = serving();
    let n = ros_goal(&mut l, 1, 1).1.unwrap();
    for q in 0..MAX_RESULT_WAITERS as u64 + 1 {
        get_result(&mut l, 100 + q, 1);
    }
    let out = drain(&mut l);
    let over = InQuery(100 + MAX_RESULT_WAITERS as u64);
    assert!(matches!(replies(&out, over).as_slice(), [Answer::Error(_)]));
    l.handle(Event::GoalUpdate {
        goal: n,
        update: GoalUpdate::End {
            status: 4,
            payload: vec![],
        },
    });
    assert_eq!(
        drain(&mut l)
            .iter()
            .filter(|a| matches!(a, Action::Reply { .. }))
            .count(),
        MAX_RESULT_WAITERS
    );
    // Ended goals past MAX_ENDED_GOALS: the oldest is forgotten (status 0).
    for i in 0..MAX_ENDED_GOALS as u32 {
        let mut uuid = [0xee; 16];
        uuid[..4].copy_from_slice(&i.to_le_bytes());
        l.handle(Event::Request {
            now: Instant::now(),
            query: InQuery(0),
            domain: D,
            name: ACTION.into(),
            request: Request::SendGoal {
                uuid,
                stamp: (0, 0),
                payload: vec![],
            },
        });
        let g = to_hub(&drain(&mut l)).into_iter().find_map(|t| match t {
            ToHub::Goal { goal, .. } => Some(*goal),
            _ => None,
        });
        l.handle(Event::GoalUpdate {
            goal: g.unwrap(),
            update: GoalUpdate::End {
                status: 4,
                payload: vec![],
            },
        });
    }
    drain(&mut l);
    get_result(&mut l, 9, 1);
    assert_eq!(
        replies(&drain(&mut l), InQuery(9)),
        vec![&Answer::Result {
            status: status::UNKNOWN as i8,
            payload: vec![]
        }]
    );
    assert_eq!(l.stats().goals_in, MAX_ENDED_GOALS);
}

#[test]
fn goals_from_ros_are_bounded() {
    let mut l = serving();
    for i in 0..MAX_GOALS_IN as u32 {
        let mut uuid = [0; 16];
        uuid[..4].copy_from_slice(&i.to_le_bytes());
        l.handle(Event::Request {
            now: Instant::now(),
            query: InQuery(0),
            domain: D,
            name: ACTION.into(),
            request: Request::SendGoal {
                uuid,
                stamp: (0, 0),
                payload: vec![],
            },
        });
    }
    drain(&mut l);
    let (out, n) = ros_goal(&mut l, 1, 0xff);
    assert_eq!(
        (replies(&out, InQuery(1)), n),
        (vec![&Answer::Accepted(false)], None)
    );
    assert_eq!(l.stats().goals_in, MAX_GOALS_IN);
}

// ---------------------------------------------------------- the adapter

#[test]
fn the_rmw_zenoh_adapter_maps_a_token_to_an_entity_with_its_gid() {
    let key = "@ros2_lv/0/aac3178e146ba6f1fc6e6a4085e77f21/0/11/MP/%/%/talker/%chatter/std_msgs::msg::dds_::String_/RIHS01_df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18/::,7:,:,:,,";
    let Some(token) = crate::rmw::Token::parse(key) else {
        panic!("the design document's token parses")
    };
    let e = rmw_zenoh::entity(&token);
    assert_eq!(e.kind, EntityKind::Publisher);
    assert_eq!(
        (e.name.as_str(), e.ty.as_str(), e.node.as_str()),
        ("/chatter", "std_msgs/msg/String", "/talker")
    );
    assert_eq!(e.gid, crate::rmw::gid(key));
    assert_eq!(e.participant, "aac3178e146ba6f1fc6e6a4085e77f21");
    assert!(!rmw_zenoh::is_node(&token));
}

// ------------------------------------------------------- more of the graph

#[test]
fn a_service_stays_offered_while_one_of_its_servers_remains_and_calls_go_to_it() {
    let t0 = Instant::now();
    let mut l = with_server();
    l.handle(Event::Appeared(entity(
        3,
        EntityKind::ServiceServer,
        "/reset",
        "std_srvs/srv/Trigger",
    )));
    assert!(
        to_hub(&drain(&mut l)).is_empty(),
        "a second server changes nothing"
    );
    // The lowest GID serves: 3.
    l.handle(Event::Call {
        now: t0,
        id: "c1".into(),
        domain: D,
        service: "/reset".into(),
        payload: vec![],
    });
    let server = drain(&mut l).iter().find_map(|a| match a {
        Action::Query { server, .. } => Some(*server),
        _ => None,
    });
    assert_eq!(server, Some(gid(3)));
    l.handle(Event::Gone(gid(5)));
    let out = drain(&mut l);
    assert!(
        to_hub(&out).is_empty(),
        "one server is left: no provider change, no failed call: {out:?}"
    );
    assert_eq!(l.stats().calls_out, 1);
}

#[test]
fn an_entity_announced_twice_counts_once() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    let s = entity(
        1,
        EntityKind::Subscription,
        "/chatter",
        "std_msgs/msg/String",
    );
    l.handle(Event::Appeared(s.clone()));
    l.handle(Event::Appeared(s));
    assert_eq!(to_hub(&drain(&mut l)).len(), 1);
    assert_eq!(l.stats().entities, 1);
    l.handle(Event::Gone(gid(1)));
    assert_eq!(to_hub(&drain(&mut l)).len(), 1, "and goes once");
    assert_eq!(l.stats().entities, 0);
}

#[test]
fn a_sample_claiming_a_subscription_or_another_domain_is_not_believed() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    l.handle(Event::Want {
        domain: D,
        topic: "/chatter".into(),
        ty: None,
        on: true,
    });
    l.handle(Event::Appeared(entity(
        1,
        EntityKind::Subscription,
        "/chatter",
        "std_msgs/msg/String",
    )));
    l.handle(Event::Appeared(entity(
        2,
        EntityKind::Publisher,
        "/chatter",
        "std_msgs/msg/String",
    )));
    drain(&mut l);
    l.handle(Event::Sample {
        domain: D,
        topic: "/chatter".into(),
        publisher: Some(gid(1)),
        ty: "std_msgs/msg/String".into(),
        hash: String::new(),
        payload: vec![],
    });
    l.handle(Event::Sample {
        domain: 7,
        topic: "/chatter".into(),
        publisher: Some(gid(2)),
        ty: "std_msgs/msg/String".into(),
        hash: String::new(),
        payload: vec![],
    });
    assert!(to_hub(&drain(&mut l)).is_empty());
    assert_eq!(l.stats().ignored, 2);
}

#[test]
fn wanting_nothing_new_or_unwanting_what_was_not_wanted_does_nothing() {
    let mut l = Link::new();
    l.handle(Event::Want {
        domain: D,
        topic: "/a".into(),
        ty: None,
        on: false,
    });
    assert!(drain(&mut l).is_empty());
    l.handle(Event::Want {
        domain: D,
        topic: "/a".into(),
        ty: None,
        on: true,
    });
    l.handle(Event::Want {
        domain: 1,
        topic: "/a".into(),
        ty: None,
        on: true,
    });
    assert_eq!(drain(&mut l).len(), 2, "per domain");
}

#[test]
fn the_rosgate_participants_are_bounded() {
    let mut l = Link::new();
    for i in 0..MAX_ROSGATE_PARTICIPANTS + 2 {
        l.handle(Event::Rosgate {
            participant: format!("gw{i}"),
            present: true,
        });
    }
    assert_eq!(l.stats().ignored, 2);
}

// ----------------------------------------------------------- more of types

#[test]
fn a_known_type_is_never_asked_and_a_node_is_never_asked_for() {
    let mut l = link_knowing(&["pkg/msg/Known"]);
    l.handle(Event::Appeared(entity(
        1,
        EntityKind::Publisher,
        "/k",
        "pkg/msg/Known",
    )));
    l.handle(Event::Appeared(entity(2, EntityKind::Node, "", "")));
    let mut no_hash = entity(3, EntityKind::Publisher, "/h", "pkg/msg/NoHash");
    no_hash.hash.clear();
    l.handle(Event::Appeared(no_hash));
    assert!(drain(&mut l).is_empty());
    assert_eq!(l.stats().types_asked, 0);
}

#[test]
fn a_description_query_that_ends_unanswered_is_not_asked_again() {
    let mut l = Link::with_types(Registry::bundled());
    let hash = blip_hash();
    l.handle(Event::Appeared(blip_entity(
        1,
        EntityKind::Publisher,
        "/x",
        &hash,
    )));
    let q = match drain(&mut l).as_slice() {
        [Action::Describe { query, .. }] => *query,
        other => panic!("{other:?}"),
    };
    l.handle(Event::QueryEnd { query: q });
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Described(Some(blip())),
    });
    l.handle(Event::Appeared(blip_entity(
        2,
        EntityKind::Publisher,
        "/y",
        &hash,
    )));
    assert!(drain(&mut l).is_empty());
    assert_eq!(l.stats().types_learned, 0);
}

#[test]
fn replies_to_queries_the_link_never_sent_are_ignored() {
    let mut l = with_server();
    for reply in [
        Reply::Service(vec![]),
        Reply::Accepted(true),
        Reply::Result {
            status: 4,
            payload: vec![],
        },
        Reply::Cancel(0),
        Reply::Described(None),
        Reply::Refused("x".into()),
    ] {
        l.handle(Event::Reply {
            query: QueryId(999),
            reply,
        });
    }
    l.handle(Event::QueryEnd {
        query: QueryId(999),
    });
    assert!(drain(&mut l).is_empty());
}

// ------------------------------------------------- more of offers and goals

#[test]
fn a_local_service_is_offered_once_and_again_when_its_type_changes() {
    let mut l = providing();
    l.handle(Event::Provide {
        domain: D,
        name: "/add".into(),
        ty: Some("pkg/srv/Add".into()),
    });
    assert!(drain(&mut l).is_empty(), "same type: nothing");
    l.handle(Event::Provide {
        domain: D,
        name: "/add".into(),
        ty: Some("pkg/srv/Add2".into()),
    });
    assert_eq!(
        drain(&mut l),
        vec![Action::Offer {
            domain: D,
            name: "/add".into(),
            ty: "pkg/srv/Add2".into(),
            action: false,
            on: true
        }]
    );
    l.handle(Event::Provide {
        domain: D,
        name: "/never".into(),
        ty: None,
    });
    assert!(drain(&mut l).is_empty(), "withdrawing what was not offered");
}

#[test]
fn a_reply_of_the_wrong_kind_ends_a_call_or_goal_once_with_a_reason() {
    let t0 = Instant::now();
    let mut l = with_server();
    let q = call(&mut l, t0, "c1").unwrap();
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Accepted(true),
    });
    let out = drain(&mut l);
    assert!(responses(&out, "c1")[0]
        .as_ref()
        .unwrap_err()
        .contains("not a service's reply"));
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Service(vec![]),
    });
    let out = drain(&mut l);
    assert_eq!(goal_ends(&out, "g1").len(), 1);
    assert_eq!(goal_ends(&out, "g1")[0].0, status::ABORTED as i8);
}

#[test]
fn feedback_for_another_action_or_an_ended_goal_is_dropped() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    let r = result_query(&accept(&mut l, q, true)).unwrap();
    l.handle(Event::Feedback {
        domain: D,
        action: "/other".into(),
        uuid: [1; 16],
        payload: vec![],
    });
    l.handle(Event::Feedback {
        domain: 3,
        action: ACTION.into(),
        uuid: [1; 16],
        payload: vec![],
    });
    assert!(drain(&mut l).is_empty());
    l.handle(Event::Reply {
        query: r,
        reply: Reply::Result {
            status: 5,
            payload: vec![],
        },
    });
    l.handle(Event::Feedback {
        domain: D,
        action: ACTION.into(),
        uuid: [1; 16],
        payload: vec![],
    });
    let out = drain(&mut l);
    assert!(!to_hub(&out)
        .iter()
        .any(|t| matches!(t, ToHub::GoalFeedback { .. })));
    assert_eq!(goal_ends(&out, "g1"), vec![(5, &Ok(vec![]))]);
}

#[test]
fn the_feedback_topic_is_watched_once_per_action_while_goals_are_in_flight() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q1 = send(&mut l, t0, "g1", 1).unwrap();
    let q2 = send(&mut l, t0, "g2", 2).unwrap();
    let watch = |out: &[Action]| {
        out.iter()
            .filter_map(|a| match a {
                Action::WatchFeedback { on, .. } => Some(*on),
                _ => None,
            })
            .collect::<Vec<bool>>()
    };
    assert_eq!(watch(&drain(&mut l)), vec![true]);
    assert_eq!(watch(&accept(&mut l, q1, false)), Vec::<bool>::new());
    assert_eq!(watch(&accept(&mut l, q2, false)), vec![false]);
}

#[test]
fn a_cancel_from_the_hub_for_an_accepted_goal_leaves_its_end_to_the_server() {
    let t0 = Instant::now();
    let mut l = goal_link();
    let q = send(&mut l, t0, "g1", 1).unwrap();
    let r = result_query(&accept(&mut l, q, true)).unwrap();
    l.handle(Event::CancelGoal {
        domain: D,
        id: "g1".into(),
    });
    let c = match drain(&mut l).as_slice() {
        [Action::CancelGoal { query, .. }] => *query,
        other => panic!("{other:?}"),
    };
    l.handle(Event::Reply {
        query: c,
        reply: Reply::Cancel(0),
    });
    l.handle(Event::QueryEnd { query: c });
    assert!(
        goal_ends(&drain(&mut l), "g1").is_empty(),
        "not ended by the cancel"
    );
    l.handle(Event::Reply {
        query: r,
        reply: Reply::Result {
            status: status::CANCELED as i8,
            payload: vec![],
        },
    });
    assert_eq!(
        goal_ends(&drain(&mut l), "g1"),
        vec![(status::CANCELED as i8, &Ok(vec![]))]
    );
}

#[test]
fn goals_from_ros_for_an_action_served_again_start_afresh() {
    let mut l = serving();
    ros_goal(&mut l, 1, 1).1.unwrap();
    l.handle(Event::Serve {
        domain: D,
        name: ACTION.into(),
        ty: None,
    });
    drain(&mut l);
    l.handle(Event::Serve {
        domain: D,
        name: ACTION.into(),
        ty: Some("example_interfaces/action/Fibonacci".into()),
    });
    drain(&mut l);
    get_result(&mut l, 2, 1);
    assert_eq!(
        replies(&drain(&mut l), InQuery(2)),
        vec![&Answer::Result {
            status: status::UNKNOWN as i8,
            payload: vec![]
        }],
        "the old goal was forgotten with its server"
    );
    let (out, n) = ros_goal(&mut l, 3, 1);
    assert!(n.is_some(), "its UUID may be used again: {out:?}");
}

#[test]
fn the_rmw_zenoh_adapter_names_a_service_by_its_service_type_and_a_node_by_its_name() {
    let zid = "aac3178e146ba6f1fc6e6a4085e77f21";
    let server = format!(
        "@ros2_lv/0/{zid}/0/12/SS/%/%/adder/%add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/RIHS01_{}/::,10:,:,:,,",
        "e".repeat(64)
    );
    let client = server
        .replace("/SS/", "/SC/")
        .replace("AddTwoInts_/", "AddTwoInts_Request_/");
    for key in [&server, &client] {
        let Some(token) = crate::rmw::Token::parse(key) else {
            panic!("{key} parses")
        };
        let e = rmw_zenoh::entity(&token);
        assert_eq!(e.ty, "example_interfaces/srv/AddTwoInts", "{key}");
        assert_eq!(e.name, "/add_two_ints");
        assert_eq!(e.qos.depth, 10);
    }
    let node = format!("@ros2_lv/0/{zid}/0/0/NN/%/%robot1/talker");
    let Some(token) = crate::rmw::Token::parse(&node) else {
        panic!("{node} parses")
    };
    let e = rmw_zenoh::entity(&token);
    assert!(rmw_zenoh::is_node(&token));
    assert_eq!(
        (e.kind, e.node.as_str(), e.name.as_str()),
        (EntityKind::Node, "/robot1/talker", "")
    );
}

#[test]
fn the_rmw_zenoh_adapter_reads_a_sample_and_names_the_keys_of_puts_and_queries() {
    let hash = format!("RIHS01_{}", "d".repeat(64));
    let key = format!("0/robot1/chatter/std_msgs::msg::dds_::String_/{hash}");
    let att = crate::rmw::Attachment {
        seq: 1,
        timestamp_ns: 2,
        gid: gid(7),
    };
    assert_eq!(
        rmw_zenoh::sample(&key, Some(&att.encode()), vec![1]),
        Some(Event::Sample {
            domain: 0,
            topic: "/robot1/chatter".into(),
            publisher: Some(gid(7)),
            ty: "std_msgs/msg/String".into(),
            hash: hash.clone(),
            payload: vec![1]
        })
    );
    for att in [None, Some(&[1u8, 2, 3][..])] {
        assert!(
            matches!(
                rmw_zenoh::sample(&key, att, vec![]),
                Some(Event::Sample {
                    publisher: None,
                    ..
                })
            ),
            "no attachment, or a bad one: a sample of no known publisher"
        );
    }
    assert_eq!(
        rmw_zenoh::sample("0/@adv/x/y", Some(&att.encode()), vec![]),
        None
    );
    assert_eq!(
        rmw_zenoh::put_key(0, "/robot1/chatter", "std_msgs/msg/String", &hash),
        Some(key)
    );
    assert_eq!(
        rmw_zenoh::query_key(
            3,
            "/add_two_ints",
            "example_interfaces/srv/AddTwoInts",
            &hash
        ),
        Some(format!(
            "3/add_two_ints/example_interfaces::srv::dds_::AddTwoInts_/{hash}"
        ))
    );
    assert_eq!(rmw_zenoh::put_key(0, "/x", "not a type", &hash), None);
}

#[test]
fn the_shell_can_ask_whether_an_action_or_a_goal_is_the_links() {
    let t0 = Instant::now();
    let mut l = goal_link();
    assert!(l.serves_action(D, ACTION));
    assert!(!l.serves_action(D, "/other") && !l.serves_action(1, ACTION));
    let q = send(&mut l, t0, "g1", 1).unwrap();
    assert!(l.has_goal_out(D, "g1") && !l.has_goal_out(1, "g1"));
    accept(&mut l, q, false);
    assert!(!l.has_goal_out(D, "g1"), "ended: no longer the link's");
    l.handle(Event::Gone(gid(10)));
    assert!(!l.serves_action(D, ACTION));
}

#[test]
fn a_cancel_from_ros_with_a_zero_uuid_picks_the_goals_accepted_up_to_its_stamp() {
    let mut l = serving();
    let n1 = ros_goal(&mut l, 1, 1).1.unwrap();
    let n2 = ros_goal(&mut l, 2, 2).1.unwrap();
    let n3 = ros_goal(&mut l, 3, 3).1.unwrap();
    l.handle(Event::GoalUpdate {
        goal: n1,
        update: GoalUpdate::End {
            status: status::SUCCEEDED as i8,
            payload: vec![],
        },
    });
    drain(&mut l);
    let cancel = |l: &mut Link, q: u64, before: Stamp| {
        l.handle(Event::Request {
            now: Instant::now(),
            query: InQuery(q),
            domain: D,
            name: ACTION.into(),
            request: Request::CancelGoal {
                uuid: [0; 16],
                before,
            },
        });
        drain(l)
    };
    // Up to goal 2's stamp: goal 1 ended, goal 2 canceling, goal 3 not picked.
    let out = cancel(&mut l, 4, stamp_of(2));
    assert_eq!(
        replies(&out, InQuery(4)),
        vec![&Answer::Cancel {
            code: cancel_code::NONE as i8,
            goals: vec![([2; 16], stamp_of(2))]
        }]
    );
    assert_eq!(to_hub(&out), vec![&ToHub::CancelGoal { goal: n2 }]);
    assert!(out.contains(&Action::PutStatus {
        domain: D,
        action: ACTION.into(),
        goals: vec![
            ([1; 16], stamp_of(1), status::SUCCEEDED as i8),
            ([2; 16], stamp_of(2), status::CANCELING as i8),
            ([3; 16], stamp_of(3), status::EXECUTING as i8),
        ]
    }));
    // A zero stamp: every goal still running.
    let out = cancel(&mut l, 5, (0, 0));
    assert_eq!(
        to_hub(&out),
        vec![
            &ToHub::CancelGoal { goal: n2 },
            &ToHub::CancelGoal { goal: n3 }
        ]
    );
    // Before any goal: nothing picked, and that is no error.
    let out = cancel(&mut l, 6, (0, 1));
    assert_eq!(
        replies(&out, InQuery(6)),
        vec![&Answer::Cancel {
            code: cancel_code::NONE as i8,
            goals: vec![]
        }]
    );
    assert!(to_hub(&out).is_empty());
    // Only ended goals picked: terminated.
    let out = cancel(&mut l, 7, stamp_of(1));
    assert_eq!(
        replies(&out, InQuery(7)),
        vec![&Answer::Cancel {
            code: cancel_code::GOAL_TERMINATED as i8,
            goals: vec![]
        }]
    );
    assert_eq!(l.goal_in(n2), Some((D, ACTION)));
}

#[test]
fn a_goal_is_known_only_under_its_own_action() {
    let mut l = serving();
    l.handle(Event::Serve {
        domain: D,
        name: "/other".into(),
        ty: Some("example_interfaces/action/Fibonacci".into()),
    });
    drain(&mut l);
    let n = ros_goal(&mut l, 1, 5).1.unwrap();
    l.handle(Event::Request {
        now: Instant::now(),
        query: InQuery(2),
        domain: D,
        name: "/other".into(),
        request: Request::GetResult { uuid: [5; 16] },
    });
    l.handle(Event::Request {
        now: Instant::now(),
        query: InQuery(3),
        domain: D,
        name: "/other".into(),
        request: Request::CancelGoal {
            uuid: [5; 16],
            before: (0, 0),
        },
    });
    let out = drain(&mut l);
    assert_eq!(
        replies(&out, InQuery(2)),
        vec![&Answer::Result {
            status: status::UNKNOWN as i8,
            payload: vec![]
        }]
    );
    assert_eq!(
        replies(&out, InQuery(3)),
        vec![&Answer::Cancel {
            code: cancel_code::UNKNOWN_GOAL_ID as i8,
            goals: vec![]
        }]
    );
    assert!(to_hub(&out).is_empty());
    assert_eq!(l.goal_in(n), Some((D, ACTION)));
    assert_eq!(l.goal_in(n + 1), None);
}

#[test]
fn the_graph_lists_nodes_and_topics_of_a_domain_while_their_entities_live() {
    let mut l = link_knowing(&["std_msgs/msg/String"]);
    let g0 = l.graph_generation();
    let mut p = entity(1, EntityKind::Publisher, "/chatter", "std_msgs/msg/String");
    p.node = "/talker".into();
    let mut s1 = entity(
        2,
        EntityKind::Subscription,
        "/chatter",
        "std_msgs/msg/String",
    );
    s1.node = "/listener".into();
    let mut s2 = entity(
        3,
        EntityKind::Subscription,
        "/chatter",
        "std_msgs/msg/String",
    );
    s2.node = "/listener".into();
    let mut other = entity(4, EntityKind::Node, "", "");
    other.domain = D + 1;
    other.node = "/elsewhere".into();
    let mut server = entity(5, EntityKind::ServiceServer, "/add", "t/srv/Add");
    server.node = "/adder".into();
    for e in [&p, &s1, &s2, &other, &server] {
        l.handle(Event::Appeared(e.clone()));
    }
    assert_ne!(l.graph_generation(), g0);
    let chatter = ("/chatter".to_string(), "std_msgs/msg/String".to_string());
    assert_eq!(
        l.graph(D),
        (
            vec!["/adder".into(), "/listener".into(), "/talker".into()],
            vec![(chatter.0.clone(), chatter.1.clone(), 2)]
        )
    );
    assert_eq!(l.graph(D + 1), (vec!["/elsewhere".into()], vec![]));
    // A refused entity is not listed.
    let mut bad = entity(6, EntityKind::Publisher, "/sp ace", "std_msgs/msg/String");
    bad.node = "/bad".into();
    let g1 = l.graph_generation();
    l.handle(Event::Appeared(bad));
    assert_eq!(l.graph_generation(), g1);
    // As entities go, so do their counts, topics and nodes.
    l.handle(Event::Gone(s1.gid));
    assert_eq!(
        l.graph(D).1,
        vec![(chatter.0.clone(), chatter.1.clone(), 1)]
    );
    for e in [&p, &s2, &server] {
        l.handle(Event::Gone(e.gid));
    }
    assert_eq!(l.graph(D), (vec![], vec![]));
    // A publisher alone still lists its topic, with no subscriptions.
    l.handle(Event::Appeared(p.clone()));
    assert_eq!(l.graph(D).1, vec![(chatter.0, chatter.1, 0)]);
}
