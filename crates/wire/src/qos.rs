//! Quality of service as clients ask for it (ROS 2's QoS policies,
//! design.ros2.org/articles/qos.html; `docs/protocol.md`, "QoS"): rosbridge's
//! `latch` on advertise and `throttle_rate`/`queue_length` on subscribe,
//! or a ROS 2-like `qos` object on either, and the compatibility rule
//! "a subscriber's request must be met by the publisher's offer".
//!
//! A policy a registration does not state is unset and matches anything,
//! so clients that state nothing (the base protocol's, roslib's) see no
//! change.

use std::fmt;

use serde_json::Value;

use crate::Raw;

/// Reliable (never silently dropped) or best effort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reliability {
    Reliable,
    BestEffort,
}

/// Volatile (no history) or transient local (late subscribers get the
/// publisher's last messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Volatile,
    TransientLocal,
}

/// The policies one registration states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Qos {
    pub reliability: Option<Reliability>,
    pub durability: Option<Durability>,
    /// History depth (keep last N): for a publisher, the messages kept for
    /// late subscribers; for a subscriber, the messages that may wait for it.
    pub depth: Option<u32>,
}

/// The deepest history a registration may ask for.
pub const MAX_QOS_DEPTH: u32 = 1000;

impl Qos {
    /// Whether any policy is stated.
    pub fn is_stated(&self) -> bool {
        self.reliability.is_some() || self.durability.is_some() || self.depth.is_some()
    }

    /// Reads a `qos` object: `{"reliability":"reliable"|"best_effort",
    /// "durability":"volatile"|"transient_local","depth":N}` (ROS 2's
    /// names; `history` is keep-last, the only one kept). Unknown members
    /// are ignored, wrong values refused with the member's name.
    pub fn from_raw(raw: Raw<'_>) -> Result<Qos, &'static str> {
        let v: Value = serde_json::from_str(raw.get()).map_err(|_| "qos")?;
        let Value::Object(o) = v else {
            return Err("qos");
        };
        let reliability = match o.get("reliability").map(|v| v.as_str()) {
            None | Some(Some("system_default")) => None,
            Some(Some("reliable")) => Some(Reliability::Reliable),
            Some(Some("best_effort")) => Some(Reliability::BestEffort),
            Some(_) => return Err("qos.reliability"),
        };
        let durability = match o.get("durability").map(|v| v.as_str()) {
            None | Some(Some("system_default")) => None,
            Some(Some("volatile")) => Some(Durability::Volatile),
            Some(Some("transient_local")) => Some(Durability::TransientLocal),
            Some(_) => return Err("qos.durability"),
        };
        let depth = match o.get("depth") {
            None | Some(Value::Null) => None,
            Some(d) => match d.as_u64() {
                Some(n) if n >= 1 && n <= u64::from(MAX_QOS_DEPTH) => Some(n as u32),
                _ => return Err("qos.depth"),
            },
        };
        Ok(Qos {
            reliability,
            durability,
            depth,
        })
    }
}

impl fmt::Display for Qos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = match self.reliability {
            Some(Reliability::Reliable) => "reliable",
            Some(Reliability::BestEffort) => "best_effort",
            None => "any",
        };
        let d = match self.durability {
            Some(Durability::Volatile) => "volatile",
            Some(Durability::TransientLocal) => "transient_local",
            None => "any",
        };
        write!(f, "{r}/{d}")?;
        if let Some(n) = self.depth {
            write!(f, "/depth {n}")?;
        }
        Ok(())
    }
}

/// Why a publisher's offer does not meet a subscriber's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Incompatible {
    /// Best-effort offer, reliable request.
    Reliability,
    /// Volatile offer, transient-local request.
    Durability,
}

impl Incompatible {
    pub fn label(self) -> &'static str {
        match self {
            Incompatible::Reliability => "reliability (best_effort offered, reliable requested)",
            Incompatible::Durability => "durability (volatile offered, transient_local requested)",
        }
    }
}

/// ROS 2's compatibility rule (docs.ros.org, "Quality of Service
/// settings", "QoS compatibilities"): a subscriber's request must be met
/// by the publisher's offer. Unset policies match anything.
pub fn check(offer: &Qos, request: &Qos) -> Result<(), Incompatible> {
    if offer.reliability == Some(Reliability::BestEffort)
        && request.reliability == Some(Reliability::Reliable)
    {
        return Err(Incompatible::Reliability);
    }
    if offer.durability == Some(Durability::Volatile)
        && request.durability == Some(Durability::TransientLocal)
    {
        return Err(Incompatible::Durability);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Qos {
        Qos::from_raw(Raw::from_valid_json(text)).expect(text)
    }

    #[test]
    fn the_ros2_compatibility_matrix() {
        let be = q(r#"{"reliability":"best_effort"}"#);
        let rel = q(r#"{"reliability":"reliable"}"#);
        let vol = q(r#"{"durability":"volatile"}"#);
        let tl = q(r#"{"durability":"transient_local"}"#);
        let none = Qos::default();
        assert_eq!(check(&be, &rel), Err(Incompatible::Reliability));
        assert_eq!(check(&rel, &be), Ok(()));
        assert_eq!(check(&vol, &tl), Err(Incompatible::Durability));
        assert_eq!(check(&tl, &vol), Ok(()));
        assert_eq!(check(&q(r#"{"depth":10}"#), &q(r#"{"depth":5}"#)), Ok(()));
        for a in [be, rel, vol, tl, none] {
            assert_eq!(check(&none, &a), Ok(()), "unset offers match");
            assert_eq!(check(&a, &none), Ok(()), "unset requests match");
        }
    }

    #[test]
    fn bad_values_name_the_member() {
        for (text, err) in [
            (r#"{"reliability":"sometimes"}"#, "qos.reliability"),
            (r#"{"durability":1}"#, "qos.durability"),
            (r#"{"depth":0}"#, "qos.depth"),
            (r#"{"depth":100000}"#, "qos.depth"),
            ("[1]", "qos"),
        ] {
            assert_eq!(
                Qos::from_raw(Raw::from_valid_json(text)),
                Err(err),
                "{text}"
            );
        }
        assert_eq!(q(r#"{"history":"keep_last","depth":3}"#).depth, Some(3));
        assert!(!q("{}").is_stated());
    }
}
