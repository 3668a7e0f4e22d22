//! QoS both ways between RustDDS's policies and the link's [`Qos`]
//! (reliability, durability, history and depth; deadline, lifespan and
//! liveliness are not mapped yet), and the QoS of what this gateway
//! declares: reliable writers never block the loop (`max_blocking_time`
//! 0: a full history sheds), readers take what the writers offer.

use std::time::Duration;

use rosgate_ros2::rmw::{Durability, History, Qos, Reliability};
use rustdds::policy;
use rustdds::{QosPolicies, QosPolicyBuilder};

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
        ..Qos::default()
    }
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

/// This gateway's reader of a topic whose writers offer `offered`: it
/// asks no more than they offer (best effort when one is, transient local
/// only when all are), so it matches every writer.
pub fn reader(offered: &[Qos]) -> QosPolicies {
    let transient = !offered.is_empty()
        && offered
            .iter()
            .all(|q| q.durability == Durability::TransientLocal);
    let best_effort = offered
        .iter()
        .any(|q| q.reliability == Reliability::BestEffort);
    let depth = offered.iter().map(|q| q.depth).max().unwrap_or(10).max(10);
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
