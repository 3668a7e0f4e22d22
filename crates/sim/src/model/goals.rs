//! The model's data for actions and waiting requests (the behaviour is in
//! `driver/goals.rs`): a goal as the model knows it ([`GoalModel`], its
//! [`Fate`]), what a caller expects for a goal id ([`GoalResp`]), a call
//! or goal waiting for a provider ([`WaitModel`]), a goal request as
//! written ([`GoalOp`]) and as applied ([`GoalSend`]), and the bytes each
//! counts for in the ledger (`docs/limits.md`).

use std::time::Duration;

use serde_json::Value;

use rosgate_core::ConnRef;

use super::{json_name, Id};

/// ROS 2's cancel service of an action (`docs/protocol.md`: a call to it
/// with no client providing it cancels the caller's goals of the action).
pub(crate) const CANCEL_GOAL_SUFFIX: &str = "/_action/cancel_goal";

/// Bytes counted per goal and per call beyond its names
/// (`docs/limits.md`, calls: "160 bytes of table overhead").
const CALL_BYTES: usize = 160;

/// Bytes counted per waiting request beyond its id, name, arguments and
/// action type (`docs/limits.md` counts waiting requests as calls).
const WAITING_BYTES: usize = 160;

/// What becomes of a goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// In flight: its caller waits for its result.
    Alive,
    /// Its caller left or it timed out: its server may still answer.
    Orphan,
    Ended,
}

/// One goal the model knows of, from the moment it was sent to a server.
#[derive(Debug)]
pub(crate) struct GoalModel {
    pub caller: ConnRef,
    pub caller_slot: usize,
    pub id: Id,
    /// The action as resolved.
    pub action: String,
    /// The `action_type` the server is sent ("" when the caller gave none).
    pub action_type: &'static str,
    /// The args as the server must receive them.
    pub args: Value,
    pub feedback: bool,
    pub server: ConnRef,
    /// Timer tick at which it times out (alive) or is forgotten (orphan).
    pub due_tick: Option<u64>,
    pub fate: Fate,
}

impl GoalModel {
    /// Bytes it counts for while in the table (orphans too).
    pub fn bytes(&self) -> usize {
        CALL_BYTES + json_name(&self.action).len() + self.id.raw.len()
    }

    /// In the gateway's goal table (alive or orphaned).
    pub fn in_table(&self) -> bool {
        self.fate != Fate::Ended
    }
}

/// What a caller expects for one goal id.
#[derive(Debug, Clone)]
pub(crate) enum GoalResp {
    /// In flight (model goal index): receiving a result now is a bug.
    Pending(usize),
    /// Waiting for a server (model waiting index).
    Waiting(usize),
    /// Ended by the gateway: `values` a reason string, `result:false`.
    Failure {
        action: String,
        status: u64,
        /// Text the reason must contain, if fixed.
        why: Option<&'static str>,
    },
    /// The server's result, as forwarded.
    Result {
        action: String,
        /// `None`: a reason string (a failing server sent no `values`).
        values: Option<Value>,
        status: Value,
        result: Value,
    },
}

/// A call or goal waiting for a provider to appear.
#[derive(Debug)]
pub(crate) struct WaitModel {
    pub caller: ConnRef,
    pub caller_slot: usize,
    pub domain: u8,
    /// A goal (else a service call).
    pub goal: bool,
    /// As resolved.
    pub name: String,
    pub id: Option<Id>,
    /// The args as the gateway keeps them ("{}" when none were sent).
    pub args_text: String,
    pub action_type: Option<&'static str>,
    pub feedback: bool,
    /// A goal's own `timeout` field (it keeps it once sent).
    pub timeout: Option<&'static str>,
    /// When its wait ends (clock offset) and the tick it fails at.
    pub deadline: Duration,
    pub due_tick: u64,
    pub alive: bool,
}

impl WaitModel {
    pub fn bytes(&self) -> usize {
        WAITING_BYTES
            + self.name.len()
            + self.args_text.len()
            + self.id.as_ref().map_or(0, |i| i.raw.len())
            + self.action_type.map_or(0, str::len)
    }
}

/// A goal request as written, for the model to apply.
#[derive(Debug)]
pub(crate) enum GoalOp {
    Advertise {
        name: String,
        ty: &'static str,
        id: Option<Id>,
    },
    Unadvertise {
        name: String,
        id: Option<Id>,
    },
    Send {
        name: String,
        action_type: Option<&'static str>,
        /// The args as forwarded ("{}" when left out), blanked.
        args_text: String,
        feedback: bool,
        timeout: Option<&'static str>,
        wait: bool,
        id: Id,
    },
    Cancel {
        id: Id,
    },
    Feedback {
        id: Id,
        values: String,
    },
    Result {
        id: Id,
        values: Option<String>,
        status: &'static str,
        result: &'static str,
    },
}

/// A goal request as the model applies it (resolved name).
#[derive(Debug)]
pub(crate) struct GoalSend {
    pub name: String,
    pub action_type: Option<&'static str>,
    pub args_text: String,
    pub feedback: bool,
    pub timeout: Option<&'static str>,
    pub wait: bool,
    /// Always present for a goal (a call may have none).
    pub id: Option<Id>,
}

/// A `timeout` field's seconds, when it names a usable one (finite and
/// positive); `null`, `0` and negative ones mean the default.
pub(crate) fn timeout_secs(t: Option<&str>) -> Option<f64> {
    let secs = t.filter(|t| *t != "null")?.parse::<f64>().ok()?;
    (secs.is_finite() && secs > 0.0).then_some(secs)
}
