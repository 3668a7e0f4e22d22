//! QoS both ways between RustDDS's policies and the link's [`Qos`]
//! (reliability, durability, history and depth, deadline, lifespan,
//! liveliness kind and lease, as rmw_zenoh's QoS text carries them:
//! `crates/ros2/src/rmw.rs`), and the QoS of what this gateway declares:
//! reliable writers never block the loop (`max_blocking_time` 0: a full
//! history sheds), readers take what the writers offer (they request no
//! deadline and automatic liveliness with an infinite lease: the least,
//! which every writer meets), writers offer what the readers of their
//! topic request (the shortest deadline and lease, the strictest
//! liveliness kind), and what they still cannot meet (a reliable or
//! transient local request of a writer that offers less) is reported by
//! [`mismatch`], rosgate's compatibility rule (`rosgate_wire::qos::check`)
//! with ROS 2's deadline and liveliness rules beside it.
//!
//! Not set: USER_DATA. RustDDS 0.15 has no USER_DATA policy in its
//! `QosPolicies` and announces its own endpoints with an empty one, so
//! this gateway's endpoints carry no `typehash=` (`ros2 topic info -v`
//! shows the hash as INVALID); the hash other endpoints announce is read
//! (`rmw_dds::type_hash`).

use std::time::Duration;

use rosgate_ros2::rmw::{Durability, History, Qos, Reliability};
use rosgate_wire::qos as wire;
use rustdds::policy;
use rustdds::{QosPolicies, QosPolicyBuilder};

/// A DDS duration as rmw's (sec, nsec); `None` when infinite (rmw's
/// default, as rmw_zenoh's QoS text leaves it empty).
fn time(d: rustdds::Duration) -> Option<(u64, u64)> {
    if d == rustdds::Duration::INFINITE {
        return None;
    }
    let ns = u64::try_from(d.to_nanoseconds()).unwrap_or(0);
    Some((ns / 1_000_000_000, ns % 1_000_000_000))
}

/// rmw's (sec, nsec) as a DDS duration; `None` (infinite) stays infinite.
fn dds_time(t: Option<(u64, u64)>) -> rustdds::Duration {
    match t {
        None => rustdds::Duration::INFINITE,
        Some(t) if t == Qos::INFINITE => rustdds::Duration::INFINITE,
        Some((s, ns)) => {
            let nanos = s.saturating_mul(1_000_000_000).saturating_add(ns);
            // Past i32 seconds (68 years): as good as infinite.
            i64::try_from(nanos)
                .ok()
                .filter(|&n| n / 1_000_000_000 < i64::from(i32::MAX))
                .map_or(rustdds::Duration::INFINITE, rustdds::Duration::from_nanos)
        }
    }
}

/// The rmw liveliness kind of a DDS policy (rmw_fastrtps maps rmw's
/// `MANUAL_BY_NODE` to DDS's `MANUAL_BY_PARTICIPANT`), with its lease.
fn liveliness(l: Option<policy::Liveliness>) -> (u8, Option<(u64, u64)>) {
    match l {
        None => (Qos::LIVELINESS_AUTOMATIC, None),
        Some(policy::Liveliness::Automatic { lease_duration }) => {
            (Qos::LIVELINESS_AUTOMATIC, time(lease_duration))
        }
        Some(policy::Liveliness::ManualByParticipant { lease_duration }) => {
            (Qos::LIVELINESS_MANUAL_BY_NODE, time(lease_duration))
        }
        Some(policy::Liveliness::ManualByTopic { lease_duration }) => {
            (Qos::LIVELINESS_MANUAL_BY_TOPIC, time(lease_duration))
        }
    }
}

/// The DDS liveliness policy of an rmw kind and lease (the system default
/// and unknown kinds as automatic).
fn dds_liveliness(kind: u8, lease: Option<(u64, u64)>) -> policy::Liveliness {
    let lease_duration = dds_time(lease);
    match kind {
        Qos::LIVELINESS_MANUAL_BY_NODE => {
            policy::Liveliness::ManualByParticipant { lease_duration }
        }
        Qos::LIVELINESS_MANUAL_BY_TOPIC => policy::Liveliness::ManualByTopic { lease_duration },
        _ => policy::Liveliness::Automatic { lease_duration },
    }
}

/// How strict a liveliness kind is (DDS: automatic < manual by
/// participant < manual by topic; an offer must be at least as strict).
fn strictness(kind: u8) -> u8 {
    match kind {
        Qos::LIVELINESS_MANUAL_BY_NODE => 1,
        Qos::LIVELINESS_MANUAL_BY_TOPIC => 2,
        _ => 0,
    }
}

/// A duration's order, infinite last.
fn order(t: Option<(u64, u64)>) -> (u64, u64) {
    t.unwrap_or(Qos::INFINITE)
}

/// A discovered endpoint's policies as the link's QoS.
pub fn of(q: &QosPolicies) -> Qos {
    let (history, depth) = match q.history() {
        Some(policy::History::KeepAll) => (History::KeepAll, 0),
        Some(policy::History::KeepLast { depth }) => {
            (History::KeepLast, u32::try_from(depth).unwrap_or(1))
        }
        None => (History::KeepLast, 1),
    };
    Qos {
        reliability: if q.is_reliable() {
            Reliability::Reliable
        } else {
            Reliability::BestEffort
        },
        durability: match q.durability() {
            Some(policy::Durability::TransientLocal)
            | Some(policy::Durability::Transient)
            | Some(policy::Durability::Persistent) => Durability::TransientLocal,
            _ => Durability::Volatile,
        },
        history,
        depth,
        deadline: q.deadline().and_then(|policy::Deadline(d)| time(d)),
        lifespan: q.lifespan().and_then(|l| time(l.duration)),
        liveliness: liveliness(q.liveliness()).0,
        lease: liveliness(q.liveliness()).1,
    }
}

/// What this gateway's writer offers to readers requesting `requested`:
/// the shortest deadline and lease they ask, the strictest liveliness
/// kind (so it matches them all; a deadline this gateway misses is then
/// the reader's missed-deadline event, as with any late writer).
pub fn offer(requested: &[Qos]) -> Qos {
    let mut q = Qos {
        deadline: None,
        lifespan: None,
        liveliness: Qos::LIVELINESS_AUTOMATIC,
        lease: None,
        ..Qos::default()
    };
    for r in requested {
        if order(r.deadline) < order(q.deadline) {
            q.deadline = r.deadline;
        }
        if order(r.lease) < order(q.lease) {
            q.lease = r.lease;
        }
        if strictness(r.liveliness) > strictness(q.liveliness) {
            q.liveliness = r.liveliness;
        }
    }
    q
}

/// Why a writer offering `offer` does not meet a reader requesting
/// `request`, or `None` when it does: rosgate's rule for reliability and
/// durability (`rosgate_wire::qos::check`), then ROS 2's for deadline
/// (offered no longer than requested) and liveliness (kind at least as
/// strict, lease no longer).
pub fn mismatch(offer: &Qos, request: &Qos) -> Option<String> {
    let as_wire = |q: &Qos| wire::Qos {
        // The system default, best available and unknown match anything,
        // as an unset policy does in rosgate's rule.
        reliability: match q.reliability {
            Reliability::Reliable => Some(wire::Reliability::Reliable),
            Reliability::BestEffort => Some(wire::Reliability::BestEffort),
            _ => None,
        },
        durability: match q.durability {
            Durability::TransientLocal => Some(wire::Durability::TransientLocal),
            Durability::Volatile => Some(wire::Durability::Volatile),
            _ => None,
        },
        depth: None,
    };
    if let Err(why) = wire::check(&as_wire(offer), &as_wire(request)) {
        return Some(why.label().to_string());
    }
    if order(offer.deadline) > order(request.deadline) {
        return Some("deadline (a longer one offered than requested)".into());
    }
    if strictness(offer.liveliness) < strictness(request.liveliness)
        || order(offer.lease) > order(request.lease)
    {
        return Some("liveliness (a laxer kind or a longer lease offered than requested)".into());
    }
    None
}

/// `builder` with `q`'s deadline, lifespan and liveliness, where set.
fn timed(mut builder: QosPolicyBuilder, q: &Qos) -> QosPolicyBuilder {
    if q.deadline.is_some() {
        builder = builder.deadline(policy::Deadline(dds_time(q.deadline)));
    }
    if q.lifespan.is_some() {
        builder = builder.lifespan(policy::Lifespan {
            duration: dds_time(q.lifespan),
        });
    }
    if q.lease.is_some() || q.liveliness != Qos::LIVELINESS_AUTOMATIC {
        builder = builder.liveliness(dds_liveliness(q.liveliness, q.lease));
    }
    builder
}

/// [`writer`] offering `offered`'s deadline, lifespan and liveliness too
/// (see [`offer`]).
pub fn writer_offering(latched: Option<u32>, offered: &Qos) -> QosPolicies {
    let base = writer(latched);
    let builder = QosPolicyBuilder::new()
        .reliability(policy::Reliability::Reliable {
            max_blocking_time: Duration::ZERO.into(),
        })
        .durability(if latched.is_some() {
            policy::Durability::TransientLocal
        } else {
            policy::Durability::Volatile
        });
    let builder = match base.history() {
        Some(h) => builder.history(h),
        None => builder,
    };
    timed(builder, offered).build()
}

/// This gateway's writer: reliable without ever blocking, transient
/// local keeping `latched` samples when the topic is latched.
pub fn writer(latched: Option<u32>) -> QosPolicies {
    let depth = latched.map_or(10, |d| d.max(1));
    QosPolicyBuilder::new()
        .reliability(policy::Reliability::Reliable {
            max_blocking_time: Duration::ZERO.into(),
        })
        .durability(if latched.is_some() {
            policy::Durability::TransientLocal
        } else {
            policy::Durability::Volatile
        })
        .history(policy::History::KeepLast {
            depth: i32::try_from(depth).unwrap_or(i32::MAX),
        })
        .build()
}

/// Samples. The least history this gateway's reader keeps (whatever the
/// writers offer): the slack between RustDDS's receive thread and the pump
/// (`pump.rs`) taking each sample. At rclpy's top String rate over Fast
/// DDS (about 50 000/s) a history of 10 gave the pump 200 us before a
/// sample was overwritten, and 9-48 % were lost there (docs/performance.md,
/// "ROS 2 over DDS (issue 26)").
pub const MIN_DDS_READER_DEPTH: u32 = 256;

/// Samples. The most history this gateway's reader keeps, whatever depth a
/// writer offers (a writer offering keep-last 2^31 would otherwise make
/// RustDDS keep that many samples while the pump lags).
pub const MAX_DDS_READER_DEPTH: u32 = 1000;

/// This gateway's reader of a topic whose writers offer `offered`: it
/// asks no more than they offer (best effort when one is, transient local
/// only when all are), so it matches every writer; its history is the
/// deepest offered, within [`MIN_DDS_READER_DEPTH`] and
/// [`MAX_DDS_READER_DEPTH`].
pub fn reader(offered: &[Qos]) -> QosPolicies {
    let transient = !offered.is_empty()
        && offered
            .iter()
            .all(|q| q.durability == Durability::TransientLocal);
    let best_effort = offered
        .iter()
        .any(|q| q.reliability == Reliability::BestEffort);
    let depth = offered
        .iter()
        .map(|q| q.depth)
        .max()
        .unwrap_or(0)
        .clamp(MIN_DDS_READER_DEPTH, MAX_DDS_READER_DEPTH);
    QosPolicyBuilder::new()
        .reliability(if best_effort {
            policy::Reliability::BestEffort
        } else {
            policy::Reliability::Reliable {
                max_blocking_time: Duration::ZERO.into(),
            }
        })
        .durability(if transient {
            policy::Durability::TransientLocal
        } else {
            policy::Durability::Volatile
        })
        .history(policy::History::KeepLast {
            depth: i32::try_from(depth).unwrap_or(i32::MAX),
        })
        .build()
}

/// `ros_discovery_info`'s, as rmw_dds_common declares it: reliable,
/// transient local, keep last 1 (a reader keeps one per writer).
pub fn discovery(reader: bool) -> QosPolicies {
    QosPolicyBuilder::new()
        .reliability(policy::Reliability::Reliable {
            max_blocking_time: Duration::ZERO.into(),
        })
        .durability(policy::Durability::TransientLocal)
        .history(if reader {
            policy::History::KeepLast { depth: 100 }
        } else {
            policy::History::KeepLast { depth: 1 }
        })
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Option<(u64, u64)> {
        Some((s, 0))
    }

    #[test]
    fn deadline_lifespan_and_liveliness_cross_both_ways() {
        let q = Qos {
            deadline: Some((1, 500_000_000)),
            lifespan: secs(3),
            liveliness: Qos::LIVELINESS_MANUAL_BY_TOPIC,
            lease: secs(2),
            ..Qos::default()
        };
        let dds = timed(QosPolicyBuilder::new(), &q).build();
        let back = of(&dds);
        assert_eq!(back.deadline, q.deadline);
        assert_eq!(back.lifespan, q.lifespan);
        assert_eq!(back.liveliness, Qos::LIVELINESS_MANUAL_BY_TOPIC);
        assert_eq!(back.lease, q.lease);
        // MANUAL_BY_NODE is DDS's MANUAL_BY_PARTICIPANT, as rmw_fastrtps has it.
        let node = Qos {
            liveliness: Qos::LIVELINESS_MANUAL_BY_NODE,
            ..Qos::default()
        };
        let dds = timed(QosPolicyBuilder::new(), &node).build();
        assert!(matches!(
            dds.liveliness(),
            Some(policy::Liveliness::ManualByParticipant { .. })
        ));
        assert_eq!(of(&dds).liveliness, Qos::LIVELINESS_MANUAL_BY_NODE);
    }

    #[test]
    fn the_readers_history_is_the_deepest_offered_within_its_bounds() {
        let depth = |offered: &[Qos]| match reader(offered).history() {
            Some(policy::History::KeepLast { depth }) => depth,
            other => panic!("{other:?}"),
        };
        let of_depth = |d: u32| Qos {
            depth: d,
            ..Qos::default()
        };
        assert_eq!(depth(&[]), MIN_DDS_READER_DEPTH as i32);
        assert_eq!(depth(&[of_depth(10)]), MIN_DDS_READER_DEPTH as i32);
        assert_eq!(depth(&[of_depth(10), of_depth(500)]), 500);
        assert_eq!(depth(&[of_depth(u32::MAX)]), MAX_DDS_READER_DEPTH as i32);
    }

    #[test]
    fn unset_and_infinite_are_none_and_set_nothing() {
        let dds = timed(QosPolicyBuilder::new(), &Qos::default()).build();
        assert!(dds.deadline().is_none() && dds.lifespan().is_none());
        assert!(dds.liveliness().is_none());
        let q = of(&dds);
        assert_eq!((q.deadline, q.lifespan, q.lease), (None, None, None));
        assert_eq!(q.liveliness, Qos::LIVELINESS_AUTOMATIC);
        let inf = QosPolicyBuilder::new()
            .deadline(policy::Deadline(rustdds::Duration::INFINITE))
            .liveliness(policy::Liveliness::Automatic {
                lease_duration: rustdds::Duration::INFINITE,
            })
            .build();
        let q = of(&inf);
        assert_eq!((q.deadline, q.lease), (None, None));
        assert_eq!(dds_time(Some(Qos::INFINITE)), rustdds::Duration::INFINITE);
    }

    #[test]
    fn the_offer_meets_every_reader_it_was_made_for() {
        let readers = [
            Qos {
                deadline: secs(2),
                ..Qos::default()
            },
            Qos {
                deadline: secs(1),
                liveliness: Qos::LIVELINESS_MANUAL_BY_TOPIC,
                lease: secs(5),
                ..Qos::default()
            },
            Qos::default(),
        ];
        let o = offer(&readers);
        assert_eq!(o.deadline, secs(1));
        assert_eq!(o.lease, secs(5));
        assert_eq!(o.liveliness, Qos::LIVELINESS_MANUAL_BY_TOPIC);
        for r in &readers {
            assert_eq!(mismatch(&o, r), None, "{r:?}");
        }
        let w = writer_offering(None, &o);
        assert!(w.deadline().is_some() && w.liveliness().is_some());
        assert!(w.is_reliable());
    }

    #[test]
    fn mismatches_are_named() {
        let best_effort = Qos {
            reliability: Reliability::BestEffort,
            ..Qos::default()
        };
        let reliable = Qos::default();
        assert!(mismatch(&best_effort, &reliable).is_some_and(|w| w.contains("reliab")));
        let transient = Qos {
            durability: Durability::TransientLocal,
            ..Qos::default()
        };
        assert!(mismatch(&reliable, &transient).is_some_and(|w| w.contains("durab")));
        let tight = Qos {
            deadline: secs(1),
            ..Qos::default()
        };
        assert_eq!(
            mismatch(&reliable, &tight).as_deref(),
            Some("deadline (a longer one offered than requested)")
        );
        assert_eq!(mismatch(&tight, &reliable), None);
        let manual = Qos {
            liveliness: Qos::LIVELINESS_MANUAL_BY_TOPIC,
            ..Qos::default()
        };
        assert_eq!(
            mismatch(&reliable, &manual).as_deref(),
            Some("liveliness (a laxer kind or a longer lease offered than requested)")
        );
        let leased = Qos {
            lease: secs(1),
            ..Qos::default()
        };
        assert_eq!(
            mismatch(&reliable, &leased).as_deref(),
            Some("liveliness (a laxer kind or a longer lease offered than requested)")
        );
        assert_eq!(mismatch(&leased, &reliable), None);
    }
}
