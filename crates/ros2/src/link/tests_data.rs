//! Topics' data through the link (docs/ros2.md "Topics"): which samples
//! reach the hub (own, a gateway's and unknown types dropped and counted;
//! publishers whose tokens are not known taken, volatile), transient local depth, the type a local
//! subscription is announced as, and the type what is put to ROS 2 is
//! encoded as. Fake clock as in the parent module.

use super::*;

/// A link that wants `topic` (nothing drained yet).
fn wanting(types: Registry, topic: &str) -> Link {
    let mut l = Link::with_types(types);
    l.handle(Event::Want {
        domain: D,
        topic: topic.into(),
        ty: None,
        on: true,
    });
    l
}

/// A sample of `ty` on `topic` from publisher `p`.
fn sample_of(topic: &str, p: u8, ty: &str) -> Event {
    Event::Sample {
        domain: D,
        topic: topic.into(),
        publisher: Some(gid(p)),
        ty: ty.into(),
        hash: format!("RIHS01_{p:064}"),
        payload: vec![p],
    }
}

/// The samples handed to the hub: (publisher's byte, latched depth).
fn samples(out: &[Action]) -> Vec<(u8, Option<u32>)> {
    to_hub(out)
        .into_iter()
        .filter_map(|t| match t {
            ToHub::Sample {
                payload, latched, ..
            } => Some((payload[0], *latched)),
            _ => None,
        })
        .collect()
}

const STRING: &str = "std_msgs/msg/String";

#[test]
fn this_gateways_own_samples_are_dropped_and_counted() {
    let mut l = wanting(Registry::bundled(), "/chatter");
    l.handle(Event::Appeared(entity(
        1,
        EntityKind::Publisher,
        "/chatter",
        STRING,
    )));
    l.handle(Event::OwnPublisher {
        gid: gid(9),
        on: true,
    });
    drain(&mut l);
    // Read back from this gateway's own cache by a history query.
    l.handle(sample_of("/chatter", 9, STRING));
    l.handle(sample_of("/chatter", 1, STRING));
    assert_eq!(samples(&drain(&mut l)), vec![(1, None)]);
    assert_eq!(l.stats().own, 1);
    assert_eq!(l.stats().ignored, 0, "not counted as unknown");
    l.handle(Event::OwnPublisher {
        gid: gid(9),
        on: false,
    });
    // Withdrawn (its cache with it), the GID is any unknown publisher's:
    // taken, volatile.
    l.handle(sample_of("/chatter", 9, STRING));
    assert_eq!(samples(&drain(&mut l)), vec![(9, None)]);
    assert_eq!(l.stats().own, 1);
}

#[test]
fn own_publishers_are_bounded() {
    let mut l = Link::new();
    for i in 0..=MAX_ENTITIES as u32 {
        let mut g = [0; 16];
        g[..4].copy_from_slice(&i.to_le_bytes());
        l.handle(Event::OwnPublisher { gid: g, on: true });
    }
    assert_eq!(l.own.len(), MAX_ENTITIES);
    assert_eq!(l.stats().ignored, 1);
}

#[test]
fn a_sample_of_a_type_not_known_is_dropped_and_counted() {
    let mut l = wanting(Registry::bundled(), "/x");
    l.handle(Event::Appeared(entity(
        1,
        EntityKind::Publisher,
        "/x",
        "pkg/msg/Nope",
    )));
    drain(&mut l);
    l.handle(sample_of("/x", 1, "pkg/msg/Nope"));
    assert!(samples(&drain(&mut l)).is_empty());
    assert_eq!(l.stats().unknown_type, 1);
    // The type the sample names is what its CDR is, whatever the token
    // said: a known one is delivered.
    l.handle(sample_of("/x", 1, STRING));
    let out = drain(&mut l);
    assert_eq!(samples(&out), vec![(1, None)]);
    assert!(matches!(
        to_hub(&out)[..],
        [ToHub::Sample { ty, hash, .. }] if ty == STRING && *hash == format!("RIHS01_{:064}", 1)
    ));
}

#[test]
fn a_learned_type_is_then_used_for_a_later_sample() {
    let mut l = wanting(Registry::bundled(), "/blips");
    let hash = super::blip_hash();
    l.handle(Event::Appeared(super::blip_entity(
        1,
        EntityKind::Publisher,
        "/blips",
        &hash,
    )));
    let q = super::describes(&drain(&mut l), "custom_msgs/msg/Blip")[0];
    let blip = |l: &mut Link| {
        l.handle(Event::Sample {
            domain: D,
            topic: "/blips".into(),
            publisher: Some(gid(1)),
            ty: "custom_msgs/msg/Blip".into(),
            hash: hash.clone(),
            payload: vec![7],
        });
        samples(&drain(l))
    };
    assert!(blip(&mut l).is_empty(), "not known yet");
    assert_eq!(l.stats().unknown_type, 1);
    l.handle(Event::Reply {
        query: q,
        reply: Reply::Described(Some(super::blip())),
    });
    drain(&mut l);
    assert_eq!(blip(&mut l), vec![(7, None)]);
    assert_eq!(l.stats().unknown_type, 1);
}

#[test]
fn a_late_local_subscriber_gets_a_transient_local_publishers_latched_samples() {
    let mut l = Link::with_types(Registry::bundled());
    let mut p = entity(1, EntityKind::Publisher, "/map", STRING);
    p.qos = Qos {
        durability: crate::rmw::Durability::TransientLocal,
        ..Qos::keep_last(3)
    };
    l.handle(Event::Appeared(p));
    let mut zero = entity(2, EntityKind::Publisher, "/map", STRING);
    zero.qos = Qos {
        durability: crate::rmw::Durability::TransientLocal,
        ..Qos::keep_last(1)
    };
    zero.qos.depth = 0;
    l.handle(Event::Appeared(zero));
    drain(&mut l);
    // Published before anyone here wanted it: not delivered (nobody asked).
    l.handle(sample_of("/map", 1, STRING));
    assert!(samples(&drain(&mut l)).is_empty());
    // A local client subscribes later: the shell subscribes, whose history
    // query reads the publishers' caches; those samples come as any other
    // and are latched at the publisher's depth (at least one).
    l.handle(Event::Want {
        domain: D,
        topic: "/map".into(),
        ty: Some("std_msgs/String".into()),
        on: true,
    });
    let out = drain(&mut l);
    let hash = Registry::bundled().hash(STRING).expect("a hash");
    assert_eq!(
        out,
        vec![Action::Subscribe {
            domain: D,
            topic: "/map".into(),
            ty: Some((STRING.into(), hash)),
            on: true
        }],
        "subscribed as the full type the client named"
    );
    l.handle(sample_of("/map", 1, STRING));
    l.handle(sample_of("/map", 1, STRING));
    l.handle(sample_of("/map", 2, STRING));
    assert_eq!(
        samples(&drain(&mut l)),
        vec![(1, Some(3)), (1, Some(3)), (2, Some(1))],
        "the hub keeps the publisher's depth of them for later subscribers"
    );
}

#[test]
fn a_subscription_of_a_type_not_known_is_not_announced_typed() {
    let mut l = Link::with_types(Registry::bundled());
    l.handle(Event::Want {
        domain: D,
        topic: "/x".into(),
        ty: Some("pkg/msg/Nope".into()),
        on: true,
    });
    l.handle(Event::Want {
        domain: D,
        topic: "/x".into(),
        ty: Some(STRING.into()),
        on: false,
    });
    let tys: Vec<_> = drain(&mut l)
        .into_iter()
        .map(|a| match a {
            Action::Subscribe { ty, on, .. } => (ty, on),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(tys, vec![(None, true), (None, false)]);
}

#[test]
fn the_ros_subscriptions_type_decides_what_is_put() {
    let mut l = Link::with_types(Registry::bundled());
    // Two ROS 2 subscriptions of one topic with different types: the
    // lowest GID's type is what this gateway declares and puts.
    let mut a = entity(4, EntityKind::Subscription, "/t", "std_msgs/msg/Int32");
    a.hash = "RIHS01_a".into();
    let mut b = entity(7, EntityKind::Subscription, "/t", STRING);
    b.hash = "RIHS01_b".into();
    l.handle(Event::Appeared(b));
    l.handle(Event::Appeared(a));
    drain(&mut l);
    l.handle(Event::Publish {
        domain: D,
        topic: "/t".into(),
        latched: Some(2),
        payload: b"{\"data\":1}".to_vec(),
        cdr: None,
    });
    let out = drain(&mut l);
    assert_eq!(
        out,
        vec![
            Action::Publisher {
                domain: D,
                topic: "/t".into(),
                ty: "std_msgs/msg/Int32".into(),
                hash: "RIHS01_a".into(),
                latched: Some(2),
                on: true,
            },
            Action::Put {
                domain: D,
                topic: "/t".into(),
                ty: "std_msgs/msg/Int32".into(),
                hash: "RIHS01_a".into(),
                payload: b"{\"data\":1}".to_vec(),
                cdr: None,
            }
        ]
    );
    // That subscription goes: the other's type is put from then on, by a
    // publisher declared again.
    l.handle(Event::Gone(gid(4)));
    drain(&mut l);
    l.handle(Event::Publish {
        domain: D,
        topic: "/t".into(),
        latched: Some(2),
        payload: b"{\"data\":\"x\"}".to_vec(),
        cdr: None,
    });
    let put: Vec<_> = drain(&mut l)
        .into_iter()
        .filter_map(|a| match a {
            Action::Put { ty, hash, .. } => Some((ty, hash)),
            Action::Publisher { ty, on: true, .. } => {
                Some((format!("declared {ty}"), String::new()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        put,
        vec![
            (format!("declared {STRING}"), String::new()),
            (STRING.to_string(), "RIHS01_b".to_string())
        ]
    );
}

#[test]
fn the_registry_is_the_one_the_link_was_made_with_until_it_learns() {
    let l = Link::with_types(Registry::bundled());
    assert!(l.types().msg(STRING).is_some());
    assert!(Link::new().types().msg(STRING).is_none());
    assert!(!Link::new().wants_turn());
}

#[test]
fn the_hub_is_told_again_when_the_subscription_that_types_a_topic_changes() {
    let mut l = Link::with_types(Registry::bundled());
    let interest = |out: &[Action]| -> Vec<Option<String>> {
        to_hub(out)
            .into_iter()
            .filter_map(|t| match t {
                ToHub::Interest { ty, .. } => Some(ty.clone()),
                _ => None,
            })
            .collect()
    };
    let int32 = "std_msgs/msg/Int32";
    l.handle(Event::Appeared(entity(
        7,
        EntityKind::Subscription,
        "/t",
        STRING,
    )));
    assert_eq!(interest(&drain(&mut l)), vec![Some(STRING.into())]);
    // A higher GID of another type: the topic's type stays.
    l.handle(Event::Appeared(entity(
        9,
        EntityKind::Subscription,
        "/t",
        int32,
    )));
    assert!(interest(&drain(&mut l)).is_empty());
    // A lower GID of the same type: nothing changes either.
    l.handle(Event::Appeared(entity(
        5,
        EntityKind::Subscription,
        "/t",
        STRING,
    )));
    assert!(interest(&drain(&mut l)).is_empty());
    // The lowest now, of another type: the hub checks that type.
    l.handle(Event::Appeared(entity(
        4,
        EntityKind::Subscription,
        "/t",
        int32,
    )));
    assert_eq!(interest(&drain(&mut l)), vec![Some(int32.into())]);
    // It goes: the next lowest (5, String) types the topic again.
    l.handle(Event::Gone(gid(4)));
    assert_eq!(interest(&drain(&mut l)), vec![Some(STRING.into())]);
    // A higher one goes: nothing.
    l.handle(Event::Gone(gid(9)));
    assert!(interest(&drain(&mut l)).is_empty());
    // The lowest goes, the next is of the same type: nothing.
    l.handle(Event::Gone(gid(5)));
    assert!(interest(&drain(&mut l)).is_empty());
    l.handle(Event::Gone(gid(7)));
    assert_eq!(interest(&drain(&mut l)), vec![None], "the last one");
}

#[test]
fn a_messages_own_cdr_is_put_untouched_only_when_it_is_of_the_subscriptions_type() {
    let mut l = Link::with_types(Registry::bundled());
    l.handle(Event::Appeared(entity(
        4,
        EntityKind::Subscription,
        "/t",
        STRING,
    )));
    drain(&mut l);
    // Trailing padding an encoder would not write: the bytes are the
    // publisher's, not made again.
    let own = vec![0, 1, 0, 0, 2, 0, 0, 0, b'a', 0, 0, 0];
    let put = |l: &mut Link, ty: &str| {
        l.handle(Event::Publish {
            domain: D,
            topic: "/t".into(),
            latched: None,
            payload: b"{\"data\":\"a\"}".to_vec(),
            cdr: Some((ty.into(), own.clone())),
        });
        drain(l).into_iter().find_map(|a| match a {
            Action::Put { cdr, .. } => Some(cdr),
            _ => None,
        })
    };
    assert_eq!(put(&mut l, STRING), Some(Some(own.clone())));
    assert_eq!(
        put(&mut l, "std_msgs/String"),
        Some(Some(own.clone())),
        "the type named short"
    );
    assert_eq!(
        put(&mut l, "std_msgs/msg/Int32"),
        Some(None),
        "another type's CDR: the shell encodes the JSON"
    );
}
