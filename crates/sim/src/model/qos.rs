//! The model's data for QoS (the behaviour is in `driver/qos.rs`): what a
//! registration states ([`QosM`], [`Asked`]) and ROS 2's compatibility
//! rule ([`compatible`], `docs/protocol.md` "QoS"), a subscription's and an advertisement's QoS
//! state ([`SubState`], [`ThrottleM`], [`PubState`]) and the throttle
//! timers ([`ThrottleTimer`]). A subscription's outgoing encoding is
//! stated with its QoS and kept in its state (`model/encodings.rs`).

use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use rosgate_core::ConnRef;

use super::encodings::EncM;

/// What a registration states, as the model reads it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct QosM {
    /// `Some(true)`: reliable; `Some(false)`: best effort.
    pub reliable: Option<bool>,
    /// `Some(true)`: transient local; `Some(false)`: volatile.
    pub transient: Option<bool>,
    pub depth: Option<u32>,
}

impl QosM {
    pub fn stated(&self) -> bool {
        self.reliable.is_some() || self.transient.is_some() || self.depth.is_some()
    }
}

/// ROS 2's rule (`docs/protocol.md`, "QoS"): a best-effort offer does not
/// meet a reliable request, a volatile offer does not meet a
/// transient-local request; anything unstated matches.
pub(crate) fn compatible(offer: &QosM, request: &QosM) -> bool {
    let unreliable = offer.reliable == Some(false) && request.reliable == Some(true);
    let volatile = offer.transient == Some(false) && request.transient == Some(true);
    !unreliable && !volatile
}

/// What a subscribe or advertise asks for beside its name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Asked {
    pub qos: QosM,
    /// `throttle_rate`, ms (0: none).
    pub throttle_ms: u64,
    pub peers: bool,
    /// `compression` and `fragment_size` (subscriptions on WebSocket).
    pub enc: EncM,
}

impl Asked {
    pub fn anything(&self) -> bool {
        self.qos.stated() || self.throttle_ms > 0 || self.peers || !self.enc.is_plain()
    }
}

/// A subscription's QoS state (present while it stated something).
#[derive(Debug, Clone)]
pub(crate) struct SubState {
    pub qos: QosM,
    pub throttle: Option<ThrottleM>,
    /// The encoding its messages are made in.
    pub enc: EncM,
}

/// A throttled subscription.
#[derive(Debug, Clone)]
pub(crate) struct ThrottleM {
    pub interval: Duration,
    /// When it was last sent a message (clock offset).
    pub last: Option<Duration>,
    /// The newest message of the interval, held (a TCP line with its
    /// newline: the bytes counted in the registrations).
    pub pending: Option<Rc<[u8]>>,
    /// A flush is scheduled.
    pub scheduled: bool,
}

/// An advertisement's QoS state (present while it stated something).
#[derive(Debug, Clone)]
pub(crate) struct PubState {
    pub qos: QosM,
    /// Asked for peer counts: the count it was last told.
    pub peers: Option<Option<u64>>,
    /// Transient local: its last messages (publish sequence, line with
    /// newline).
    pub cache: VecDeque<(u64, Rc<[u8]>)>,
}

impl PubState {
    pub fn latched(&self) -> bool {
        self.qos.transient == Some(true)
    }
}

/// A throttle flush scheduled on the QoS timer wheel: (domain, topic,
/// subscriber, tick). Timers are never cancelled: one of an earlier
/// subscription fires on the current one, which then waits for its own
/// interval's end.
pub(crate) type ThrottleTimer = (u8, String, ConnRef, u64);
