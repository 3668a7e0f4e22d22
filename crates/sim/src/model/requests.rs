//! The model [`Effect`] of a request line: what an accepted request does to
//! the model, with the names as written (resolved when it is applied, in
//! `driver/effects.rs`). The line's text is made in `driver/requests.rs`.

use serde_json::Value;

use rosgate_core::counters::ErrorCode;

use super::goals::GoalOp;
use super::params::ParamOp;
use super::qos::Asked;
use super::Id;
use crate::names::NodeModel;

/// A `call_service` as written (its name is resolved when applied).
#[derive(Debug)]
pub(crate) struct CallSend {
    pub name: String,
    /// The args as the gateway keeps and forwards them (raw CR/LF
    /// blanked; `{}` when left out).
    pub args: String,
    pub timeout: Option<&'static str>,
    /// Always present on TCP.
    pub id: Option<Id>,
    pub node: Option<String>,
    /// `"wait": true`: wait for a provider within the timeout.
    pub wait: bool,
}

/// The model effect of a request line that fits the line limit.
#[derive(Debug)]
pub(crate) enum Effect {
    Nothing,
    /// An error status (with `id`), counted under `code` when the model
    /// keeps that count.
    Error {
        id: Option<Id>,
        code: Option<ErrorCode>,
    },
    /// The `node` field of the next four, when sent: the name of one of
    /// the client's nodes, or of one it never declared.
    Topic {
        op: &'static str,
        /// As written (resolved when applied).
        name: String,
        id: Option<Id>,
        node: Option<String>,
        /// The QoS a subscribe or advertise states (nothing, for most).
        asked: Asked,
    },
    Publish {
        name: String,
        /// The message as subscribers must receive it.
        msg: String,
        id: Option<Id>,
        node: Option<String>,
    },
    Service {
        adv: bool,
        name: String,
        /// The `type` as the hub stores it ("" when left out).
        ty: &'static str,
        id: Option<Id>,
        node: Option<String>,
    },
    Call(CallSend),
    /// `declare_node` as written; `domain`: the field's text.
    DeclareNode {
        name: &'static str,
        namespace: Option<&'static str>,
        remap: &'static [&'static str],
        domain: Option<&'static str>,
        id: Option<Id>,
    },
    DestroyNode {
        name: String,
        id: Option<Id>,
    },
    /// A WebSocket URL the hub accepts: the domain it names and the node
    /// it declares (applied as the handshake completes).
    Opening {
        domain: Option<u8>,
        node: Option<NodeModel>,
    },
    /// A Foxglove session's `subscribe` of the typed topic's channel with
    /// this subscription id (`driver/foxglove.rs`).
    FxSubscribe {
        sub: u32,
    },
    /// A Foxglove session's `unsubscribe` of one of its subscriptions.
    FxUnsubscribe {
        sub: u32,
    },
    /// A Foxglove session's client `advertise` of channel `chan` (`cdr`, or
    /// `json`) on the typed topic, and its `unadvertise`.
    FxAdvertise {
        chan: u32,
        cdr: bool,
    },
    FxUnadvertise,
    /// An action request (see `goals.rs`).
    Goal(GoalOp),
    /// A parameter operation of a node's owner (see `params.rs`).
    Param(ParamOp),
    Respond {
        id: Option<Id>,
        /// `None`: the response has no `values` member.
        values: Option<Value>,
        /// The `result` member as sent.
        result: &'static str,
        status: Option<Value>,
    },
}
