//! The adapter seam: everything protocol-specific the scenarios need, behind
//! the [`Codec`] trait.
//!
//! Scenarios speak in topics, tokens, calls and opaque payload bytes; a
//! codec turns those into request bytes and turns received bytes back into
//! [`Event`]s. One codec value lives on each connection, so per-connection
//! protocol state (a NATS-style `PING`/`PONG` acknowledgement queue, a
//! partial-frame scan offset) has a home. The runner is generic over the
//! codec, so a new peer (`redis`, `nats`) is one module implementing
//! `Codec` and one arm in `main.rs`; the event loop, verification, and
//! reporting stay as they are.
//!
//! Contract for implementors:
//! - framing belongs to the codec ([`Codec::decode`] is handed the unread
//!   bytes and says how many it used), because not every protocol is
//!   newline-delimited (RESP bulk strings, NATS `MSG ... <len>`);
//! - a payload handed to [`Codec::publish`], [`Codec::call`],
//!   [`Codec::respond`], [`Codec::send_goal`], [`Codec::feedback`] or
//!   [`Codec::goal_result`] must come back unmodified in the matching
//!   [`Event`] (`Delivery`, `Call`, `Reply`, `Goal`, `Feedback`,
//!   `GoalResult`); the runner verifies it byte for byte and counts
//!   anything else as corrupt;
//! - a request carrying a `token` must eventually produce `Ack` or
//!   `Refused` with that token, so setup can wait for the server to be
//!   ready before the clock starts.

use std::fmt;

/// Something the server sent us, borrowed from the read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// A message delivered to one of our subscriptions. `topic` is the name
    /// as it appears on the wire (escaped form for JSON transports).
    Delivery { topic: &'a [u8], payload: &'a [u8] },
    /// The request sent with `token` succeeded.
    Ack { token: u64 },
    /// The request sent with `token` was refused.
    Refused { token: u64, reason: &'a [u8] },
    /// A call forwarded to us as a provider; `id` is opaque and goes back
    /// verbatim in [`Codec::respond`].
    Call { id: &'a [u8], args: &'a [u8] },
    /// The answer to our call `id`. `ok` is false for a failed call (no
    /// provider, timeout...), in which case `values` is the reason.
    Reply { id: u64, values: &'a [u8], ok: bool },
    /// A goal forwarded to us as an action server; `id` is opaque and goes
    /// back verbatim in [`Codec::feedback`] and [`Codec::goal_result`].
    Goal { id: &'a [u8], args: &'a [u8] },
    /// Feedback on our goal `id`.
    Feedback { id: u64, values: &'a [u8] },
    /// The result of our goal `id`. `ok` is false unless the goal succeeded
    /// (a failure, an abort or a cancel), in which case `values` is the
    /// reason.
    GoalResult { id: u64, values: &'a [u8], ok: bool },
    /// The answer to [`Codec::stats_request`].
    Stats { values: &'a [u8] },
    /// Anything else: an unsolicited diagnostic or an unknown operation.
    Notice { error: bool, text: &'a [u8] },
}

/// A frame the codec cannot make sense of; the run stops, because every
/// later byte on that connection is suspect.
#[derive(Debug)]
pub struct DecodeError(pub String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Server counters the report quotes when the transport exposes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounters {
    pub connections_open: u64,
    pub published: u64,
    pub delivered: u64,
    /// Topic messages the server shed (best-effort delivery).
    pub dropped: u64,
}

/// One connection's view of a wire protocol. See the module docs.
pub trait Codec {
    /// Name used in reports and on the command line.
    const NAME: &'static str;

    /// The server is a raw source (`rosgate-load --raw-source`) that
    /// streams publisher 0's messages to each connection as fast as TCP
    /// takes them: the runner connects subscribers only, publishes nothing,
    /// and judges the run by the per-delivery checks alone (sequence,
    /// integrity). Subscriptions are not acknowledged: the stream is the
    /// subscription.
    const REMOTE_SOURCE: bool = false;

    /// The protocol travels inside another framing (a WebSocket, `ws`):
    /// the runner hands each read's raw bytes to [`Codec::unframe`], and
    /// [`Codec::decode`] sees only the bytes it passes on.
    const FRAMED: bool = false;

    /// `max_frame`: longest frame to accept, bytes.
    fn new(max_frame: usize) -> Self;

    /// Bytes to send as soon as the connection is up (handshakes).
    fn hello(&mut self, _out: &mut Vec<u8>) {}

    /// What a publisher of `topic` sends as soon as its connection is up;
    /// [`Codec::hello`] unless the transport's publishers speak another
    /// protocol than its subscribers (`foxglove`).
    fn publisher_hello(&mut self, out: &mut Vec<u8>, _topic: &str) {
        self.hello(out);
    }

    /// Subscribe to `topic`; acknowledged with `token`.
    fn subscribe(&mut self, out: &mut Vec<u8>, topic: &str, token: u64);

    /// Publish `payload` on `topic`.
    fn publish(&mut self, out: &mut Vec<u8>, topic: &str, payload: &[u8]);

    /// Become the provider of `service`; acknowledged with `token`.
    /// `false` when the transport has no request/response services.
    fn advertise_service(&mut self, out: &mut Vec<u8>, service: &str, token: u64) -> bool;

    /// Call `service` with `args`; answered by a `Reply` with `id`.
    fn call(&mut self, out: &mut Vec<u8>, service: &str, id: u64, args: &[u8]);

    /// Answer the forwarded call `id` with `values`.
    fn respond(&mut self, out: &mut Vec<u8>, service: &str, id: &[u8], values: &[u8]);

    /// Become the server of `action`; acknowledged with `token`. `false`
    /// when the transport has no actions (the default); the other action
    /// methods are only called after this returned `true`.
    fn advertise_action(&mut self, _out: &mut Vec<u8>, _action: &str, _token: u64) -> bool {
        false
    }

    /// Send a goal with `args` to `action`, asking for feedback; answered by
    /// any number of `Feedback` events and one `GoalResult` with `id`.
    fn send_goal(&mut self, _out: &mut Vec<u8>, _action: &str, _id: u64, _args: &[u8]) {}

    /// Feedback `values` on the forwarded goal `id`.
    fn feedback(&mut self, _out: &mut Vec<u8>, _action: &str, _id: &[u8], _values: &[u8]) {}

    /// End the forwarded goal `id`: succeeded, with `values`.
    fn goal_result(&mut self, _out: &mut Vec<u8>, _action: &str, _id: &[u8], _values: &[u8]) {}

    /// Ask for server counters; `false` when the server has none.
    fn stats_request(&mut self, _out: &mut Vec<u8>) -> bool {
        false
    }

    /// Asks the server to acknowledge with `token` once it has processed
    /// everything sent so far on this connection (a NATS `PING`). The
    /// runner uses it to pace idle connections on servers without
    /// counters. `false` when the transport has no such barrier.
    fn barrier(&mut self, _out: &mut Vec<u8>, _token: u64) -> bool {
        false
    }

    /// Protocol-level answers the codec owes the server after decoding
    /// (a `PONG` for the server's keep-alive `PING`); `true` when it
    /// appended any.
    fn take_output(&mut self, _out: &mut Vec<u8>) -> bool {
        false
    }

    /// [`Codec::FRAMED`] transports: takes the raw bytes of one read and
    /// hands the protocol bytes inside them, in order, to `out` (any
    /// answers the framing owes, such as a pong, come out of
    /// [`Codec::take_output`]). An error ends the run like a decode error.
    fn unframe(&mut self, _raw: &[u8], _out: &mut dyn FnMut(&[u8])) -> Result<(), DecodeError> {
        Ok(())
    }

    /// Parses the values of a `Stats` event.
    fn parse_stats(_values: &[u8]) -> Option<ServerCounters> {
        None
    }

    /// Decodes the first frame of `buf` (the unread bytes). `Ok(None)` when
    /// the frame is incomplete; otherwise the event and the bytes it used.
    fn decode<'a>(&mut self, buf: &'a [u8]) -> Result<Option<(Event<'a>, usize)>, DecodeError>;
}
