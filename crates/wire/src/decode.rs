//! One line -> [`Request`]: op, names and raw payload spans.
//!
//! Invariants:
//! - never panics, whatever the bytes (fuzzed by `fuzz/fuzz_targets/decode.rs`);
//! - on error the request's `id` is returned whenever the line was a JSON
//!   object with an `id` member (before or after a refused value), so the
//!   error status can carry it; an `id` the gateway refuses (too long, or
//!   holding a refused number or escape) is never returned;
//! - names are decoded with escapes; they borrow from the line unless they
//!   contain an escape;
//! - payload spans borrow from the line and re-parse as the same JSON value;
//! - nesting deeper than [`MAX_JSON_DEPTH`] is refused (P3): we never recurse,
//!   but the clients we forward to might.
//!
//! The line is validated once as UTF-8 (a word-at-a-time ASCII test, which
//! also notes control bytes for [`decode_blanked`]; `from_utf8` only when a
//! byte is not ASCII) and once as JSON by [`scan`], which accepts exactly
//! what serde_json accepts and reports the top-level member spans and
//! whether any string has an escape (if none, `op` and `topic` are their
//! spans without quotes); only names containing escapes go through
//! serde_json to be decoded.
//! Measurements against serde_json and simd-json: `benches/decode.rs` and
//! docs/ARCHITECTURE.md.

use std::borrow::Cow;
use std::fmt;

use crate::qos::Qos;
use crate::scan::{self, Member, ScanError};
use crate::Raw;
use crate::MAX_JSON_DEPTH;

/// Which rules a connection's requests follow.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The base protocol (`docs/protocol.md`), strictly: `type` on
    /// subscribe/advertise and
    /// advertise_service, `args` and `id` on call_service are required.
    #[default]
    Strict,
    /// rosbridge v2 as real clients speak it (WebSocket listener): `type`,
    /// `args`, a call's `id` and a response's `values` are optional;
    /// `set_level` and `auth` are accepted and ignored.
    Rosbridge,
}

/// A decoded request. Names are unescaped; payloads are raw JSON.
#[derive(Debug)]
pub struct Request<'a> {
    /// The request's `id`, exactly as sent.
    pub id: Option<Raw<'a>>,
    pub op: Op<'a>,
    /// The `node` a registration, publish or call is made for (one of the
    /// connection's declared nodes, by name or full name).
    pub node: Option<Cow<'a, str>>,
    /// rosbridge's `compression` and `fragment_size`, when the request
    /// gave either: the hub reads them on `subscribe` (both) and
    /// `call_service` (`fragment_size`). Here and boxed, not in [`Op`]:
    /// the decoding of a publish, the hot path, should not pay for them.
    pub encoding: Option<Box<EncodingAsked<'a>>>,
}

/// What a request asks its answers or messages to be sent as (rosbridge
/// v2): see [`Request::encoding`].
#[derive(Debug, Default)]
pub struct EncodingAsked<'a> {
    /// `compression` (`none`, `cbor`, `cbor-raw`, `png`), as sent: the hub
    /// decides what it accepts.
    pub compression: Option<Cow<'a, str>>,
    /// `fragment_size`, characters: longer text frames go out as
    /// `fragment` frames.
    pub fragment_size: Option<u32>,
}

/// The operations of the protocol with their required fields.
#[derive(Debug)]
pub enum Op<'a> {
    Advertise {
        topic: Cow<'a, str>,
        /// Always present in the strict dialect.
        ty: Option<Cow<'a, str>>,
        /// What the publisher offers (`qos`, and rosbridge's `latch`, which
        /// is transient local with depth 1 unless `qos` says more).
        qos: Qos,
        /// Wants `peers` notifications (subscriber counts).
        peers: bool,
    },
    Unadvertise {
        topic: Cow<'a, str>,
    },
    Publish {
        topic: Cow<'a, str>,
        msg: Raw<'a>,
    },
    Subscribe {
        topic: Cow<'a, str>,
        /// Always present in the strict dialect.
        ty: Option<Cow<'a, str>>,
        /// What the subscriber requests (`qos`; rosbridge's `queue_length`
        /// is its depth unless `qos` says one).
        qos: Qos,
        /// rosbridge's `throttle_rate`, milliseconds; 0: none.
        throttle_ms: u64,
    },
    Unsubscribe {
        topic: Cow<'a, str>,
    },
    AdvertiseService {
        service: Cow<'a, str>,
        /// Always present in the strict dialect.
        ty: Option<Cow<'a, str>>,
    },
    UnadvertiseService {
        service: Cow<'a, str>,
    },
    /// In the strict dialect `id` and `args` are always present.
    CallService {
        service: Cow<'a, str>,
        args: Option<Raw<'a>>,
        /// rosbridge's per-call `timeout`, in seconds.
        timeout: Option<f64>,
        /// Wait (within the timeout) for a provider to appear instead of
        /// failing at once (ROS 2's `wait_for_service`).
        wait: bool,
    },
    /// `id` is required, as for `CallService`; `values` is always present in
    /// the strict dialect.
    ServiceResponse {
        service: Cow<'a, str>,
        values: Option<Raw<'a>>,
        result: Raw<'a>,
        status: Option<Raw<'a>>,
    },
    /// Declares a node on this connection (boxed: rare, and the biggest
    /// op, it would make every request bigger).
    DeclareNode(Box<NodeDeclaration<'a>>),
    /// Withdraws a declared node and everything it registered.
    DestroyNode {
        name: Cow<'a, str>,
    },
    /// rosbridge's `set_level`: which statuses this connection receives
    /// (`none`, `error`, `warning`, `info`).
    SetLevel {
        level: Cow<'a, str>,
    },
    /// Serve an action (rosbridge v2's `advertise_action`).
    AdvertiseAction {
        action: Cow<'a, str>,
        /// Always present in the strict dialect.
        ty: Option<Cow<'a, str>>,
    },
    UnadvertiseAction {
        action: Cow<'a, str>,
    },
    /// A goal for an action; the request's `id` (required) names it
    /// (boxed, as [`Op::DeclareNode`]).
    SendActionGoal(Box<GoalRequest<'a>>),
    /// A cancel: from a caller, for its goal `id`.
    CancelActionGoal {
        action: Cow<'a, str>,
    },
    /// Feedback from an action server for the goal `id` it was sent.
    ActionFeedback {
        action: Cow<'a, str>,
        values: Raw<'a>,
    },
    /// A result from an action server for the goal `id` it was sent.
    ActionResult {
        action: Cow<'a, str>,
        values: Option<Raw<'a>>,
        status: Raw<'a>,
        result: Raw<'a>,
    },
    /// A node's owner declares one of its parameters.
    DeclareParameter {
        name: Cow<'a, str>,
        value: Raw<'a>,
        descriptor: Option<Raw<'a>>,
        /// Changes by others go to the owner for validation first.
        validate: bool,
    },
    /// A node's owner withdraws one of its parameters.
    UndeclareParameter {
        name: Cow<'a, str>,
    },
    /// A node's owner changes one of its own parameters.
    SetParameter {
        name: Cow<'a, str>,
        value: Raw<'a>,
    },
    /// Authentication: `token` (rosgate's), or rosbridge's `auth` op whose
    /// `mac` carries the token (roslibjs' `Ros.authenticate`). `None` when
    /// neither is given. The value is a secret: never echoed.
    Auth {
        token: Option<Cow<'a, str>>,
    },
    /// One piece of a fragmented message (ROSBRIDGE_PROTOCOL.md §3.1.1):
    /// the request's `id` (required) names the message; the `data` of its
    /// pieces, joined in `num` order, are the message's text. The core
    /// reassembles them (`crates/wire/src/fragment.rs`).
    Fragment {
        data: Cow<'a, str>,
        num: u64,
        total: u64,
    },
    /// A rosbridge op we accept and ignore.
    Ignored(&'static str),
}

/// What `declare_node` asks for: the node's name (one token), namespace,
/// remap rules (`from:=to`) and domain.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDeclaration<'a> {
    pub name: Cow<'a, str>,
    pub namespace: Option<Cow<'a, str>>,
    pub remap: Vec<String>,
    pub domain: Option<u64>,
}

/// What `send_action_goal` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalRequest<'a> {
    pub action: Cow<'a, str>,
    /// Always present in the strict dialect.
    pub action_type: Option<Cow<'a, str>>,
    /// In the strict dialect always present.
    pub args: Option<Raw<'a>>,
    /// Whether the caller wants feedback.
    pub feedback: bool,
    /// Seconds; absent or `null`: the gateway's default.
    pub timeout: Option<f64>,
    /// Wait (within the timeout) for a server to appear.
    pub wait: bool,
}

impl Op<'_> {
    /// Whether the op adds or withdraws a registration or a node (the
    /// costly kind of request, see the core's `REGISTRATION_WORK`).
    pub fn changes_registrations(&self) -> bool {
        matches!(
            self,
            Op::Advertise { .. }
                | Op::Unadvertise { .. }
                | Op::Subscribe { .. }
                | Op::Unsubscribe { .. }
                | Op::AdvertiseService { .. }
                | Op::UnadvertiseService { .. }
                | Op::DeclareNode(_)
                | Op::DestroyNode { .. }
                | Op::AdvertiseAction { .. }
                | Op::UnadvertiseAction { .. }
                | Op::DeclareParameter { .. }
                | Op::UndeclareParameter { .. }
        )
    }

    /// The op's wire name.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Advertise { .. } => "advertise",
            Op::Unadvertise { .. } => "unadvertise",
            Op::Publish { .. } => "publish",
            Op::Subscribe { .. } => "subscribe",
            Op::Unsubscribe { .. } => "unsubscribe",
            Op::AdvertiseService { .. } => "advertise_service",
            Op::UnadvertiseService { .. } => "unadvertise_service",
            Op::CallService { .. } => "call_service",
            Op::ServiceResponse { .. } => "service_response",
            Op::DeclareNode(_) => "declare_node",
            Op::DestroyNode { .. } => "destroy_node",
            Op::SetLevel { .. } => "set_level",
            Op::AdvertiseAction { .. } => "advertise_action",
            Op::UnadvertiseAction { .. } => "unadvertise_action",
            Op::SendActionGoal(_) => "send_action_goal",
            Op::CancelActionGoal { .. } => "cancel_action_goal",
            Op::ActionFeedback { .. } => "action_feedback",
            Op::ActionResult { .. } => "action_result",
            Op::DeclareParameter { .. } => "declare_parameter",
            Op::UndeclareParameter { .. } => "undeclare_parameter",
            Op::SetParameter { .. } => "set_parameter",
            Op::Auth { .. } => "auth",
            Op::Fragment { .. } => "fragment",
            Op::Ignored(name) => name,
        }
    }
}

/// Why a line was refused. Small and `Copy`: built on the hot path, turned
/// into text only when an error status is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    BadUtf8,
    BadJson,
    NotObject,
    TooDeep,
    MissingOp,
    UnknownOp,
    MissingField(&'static str),
    WrongType(&'static str),
    MissingId,
    /// A number that is not a finite f64 for every standard parser (see
    /// [`crate::scan::portable_number`]).
    NumberOutOfRange,
    /// A `\uXXXX` escape of an unpaired surrogate.
    LoneSurrogate,
    /// An `id` longer than [`MAX_ID_BYTES`].
    IdTooLong,
    /// A name (`topic`, `service`, `type`, ...) longer than [`MAX_NAME_BYTES`].
    NameTooLong(&'static str),
}

impl ErrorKind {
    /// Stable label used for counters and logs.
    pub fn label(self) -> &'static str {
        match self {
            ErrorKind::BadUtf8 => "bad_utf8",
            ErrorKind::BadJson => "bad_json",
            ErrorKind::NotObject => "not_object",
            ErrorKind::TooDeep => "too_deep",
            ErrorKind::MissingOp => "missing_op",
            ErrorKind::UnknownOp => "unknown_op",
            ErrorKind::MissingField(_) => "missing_field",
            ErrorKind::WrongType(_) => "wrong_type",
            ErrorKind::MissingId => "missing_id",
            ErrorKind::NumberOutOfRange => "number_out_of_range",
            ErrorKind::LoneSurrogate => "lone_surrogate",
            ErrorKind::IdTooLong => "id_too_long",
            ErrorKind::NameTooLong(_) => "name_too_long",
        }
    }
}

/// A refused line: what was wrong, plus what could still be read of it.
#[derive(Debug)]
pub struct DecodeError<'a> {
    pub kind: ErrorKind,
    pub id: Option<Raw<'a>>,
    /// The `op` value when it was a string (for unknown-op messages).
    pub op: Option<Cow<'a, str>>,
}

impl fmt::Display for DecodeError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.op.as_deref().unwrap_or("request");
        match self.kind {
            ErrorKind::BadUtf8 => f.write_str("invalid UTF-8 in request line"),
            ErrorKind::BadJson => f.write_str("invalid JSON in request line"),
            ErrorKind::NotObject => f.write_str("request must be a JSON object"),
            ErrorKind::TooDeep => {
                write!(f, "JSON nesting deeper than {MAX_JSON_DEPTH} levels")
            }
            ErrorKind::MissingOp => f.write_str("request has no \"op\" field"),
            ErrorKind::UnknownOp => write!(f, "unknown op {op:?}"),
            ErrorKind::MissingField(name) => write!(f, "{op}: missing field {name:?}"),
            ErrorKind::WrongType(name) => write!(f, "{op}: field {name:?} has the wrong type"),
            ErrorKind::MissingId => write!(f, "{op}: an \"id\" is required"),
            ErrorKind::NumberOutOfRange => f.write_str(
                "a number is out of range: JSON numbers must fit a 64-bit float \
                 (larger ones break Python, JavaScript and serde_json clients)",
            ),
            ErrorKind::LoneSurrogate => f.write_str(
                "a string escapes an unpaired UTF-16 surrogate (\\ud800-\\udfff), \
                 which standard JSON parsers refuse",
            ),
            ErrorKind::IdTooLong => {
                write!(
                    f,
                    "{op}: \"id\" is longer than {MAX_ID_BYTES} bytes; request refused"
                )
            }
            ErrorKind::NameTooLong(name) => {
                write!(
                    f,
                    "{op}: field {name:?} is longer than {MAX_NAME_BYTES} bytes"
                )
            }
        }
    }
}

/// Bytes. Longest `id` accepted: ids are echoed in replies and held while a
/// call is in flight, so a client must not be able to make them big (P18).
/// rosbridge clients' ids are like `call_service:/ns/name:17`.
pub const MAX_ID_BYTES: usize = 1024;

/// Bytes. Longest name (`topic`, `service`, `type`) accepted, as written
/// on the wire (P18). ROS 2 names are at most 256 characters.
pub const MAX_NAME_BYTES: usize = 1024;

/// Decodes one line (terminator already removed) under the strict dialect.
pub fn decode(line: &[u8]) -> Result<Request<'_>, DecodeError<'_>> {
    decode_as(line, Dialect::Strict)
}

/// Decodes one line or WebSocket message under `dialect`.
pub fn decode_as(line: &[u8], dialect: Dialect) -> Result<Request<'_>, DecodeError<'_>> {
    decode_classified(line, classify(line).ascii, dialect)
}

/// Decodes `line` as [`decode_as`] does, but as if every raw CR and LF in
/// it were a space, and hands the result to `f`. A raw CR or LF can only
/// be JSON whitespace (inside strings it is refused), but forwarded inside
/// a payload span it would split the frame for NDJSON readers and let one
/// client forge lines for another: no span of the result holds one.
///
/// The pass that tests the line for ASCII also tests it for control
/// bytes, so a line with no CR, LF or tab (nearly all) is neither searched
/// again nor copied: one pass over its bytes before the scan instead of
/// two (`memchr2` cost a publish ~70 instructions, scripts/callgrind.sh).
pub fn decode_blanked<R>(
    line: &[u8],
    dialect: Dialect,
    f: impl FnOnce(Result<Request<'_>, DecodeError<'_>>) -> R,
) -> R {
    let bytes = classify(line);
    if bytes.controls && memchr::memchr2(b'\n', b'\r', line).is_some() {
        let blanked: Vec<u8> = line
            .iter()
            .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
            .collect();
        return f(decode_as(&blanked, dialect));
    }
    f(decode_classified(line, bytes.ascii, dialect))
}

/// [`decode_as`] of a line whose ASCII test is done (`ascii`).
#[inline(always)]
fn decode_classified(
    line: &[u8],
    ascii: bool,
    dialect: Dialect,
) -> Result<Request<'_>, DecodeError<'_>> {
    // One UTF-8 pass over the whole line (an ASCII test, `from_utf8` only
    // when it fails); the scanner then works on `str` and never re-checks
    // a span.
    let Some(text) = utf8(line, ascii) else {
        return Err(DecodeError {
            kind: ErrorKind::BadUtf8,
            id: None,
            op: None,
        });
    };
    let mut fields = Fields::default();
    let scanned = scan::scan_object_escapes(text, MAX_JSON_DEPTH, |m| fields.set(m));
    match scanned {
        Ok(escapes) => fields.escapes = escapes,
        Err(ScanError::TooDeep) => return Err(fields.checked_error(ErrorKind::TooDeep)),
        // Grammatical JSON: every member that does not hold the refused
        // value has been read, wherever it lies, so the id is echoed.
        Err(ScanError::NumberOutOfRange) => {
            return Err(fields.checked_error(ErrorKind::NumberOutOfRange))
        }
        Err(ScanError::LoneSurrogate) => return Err(fields.checked_error(ErrorKind::LoneSurrogate)),
        Err(e) => {
            let kind = match e {
                ScanError::NotObject => ErrorKind::NotObject,
                _ => ErrorKind::BadJson,
            };
            // Members seen before a syntax error are not trustworthy.
            return Err(DecodeError {
                kind,
                id: None,
                op: None,
            });
        }
    }
    if fields.id.is_some_and(|id| id.0.len() > MAX_ID_BYTES) {
        // Never echoed: we would refuse it ourselves.
        fields.id = None;
        let op = fields.op.and_then(json_str);
        return Err(fields.error(ErrorKind::IdTooLong, op));
    }
    let op_name = match fields.op {
        None => return Err(fields.error(ErrorKind::MissingOp, None)),
        Some(raw) => match fields.string(raw) {
            Some(s) => s,
            None => return Err(fields.error(ErrorKind::WrongType("op"), None)),
        },
    };
    let op = match fields.build(&op_name, dialect) {
        Ok(op) => op,
        Err(kind) => return Err(fields.error(kind, Some(op_name))),
    };
    let needs_id = match op {
        Op::ServiceResponse { .. }
        | Op::SendActionGoal(_)
        | Op::CancelActionGoal { .. }
        | Op::ActionFeedback { .. }
        | Op::ActionResult { .. }
        | Op::Fragment { .. } => true,
        Op::CallService { .. } => dialect == Dialect::Strict,
        _ => false,
    };
    if needs_id && fields.id.is_none() {
        return Err(fields.error(ErrorKind::MissingId, Some(op_name)));
    }
    let encoding = if fields.rare.is_some() {
        fields
            .encoding_asked()
            .map_err(|kind| fields.error(kind, Some(op_name.clone())))?
    } else {
        None
    };
    let node = match fields.node {
        None => None,
        raw => Some(name(raw, "node").map_err(|kind| fields.error(kind, Some(op_name)))?),
    };
    Ok(Request {
        id: fields.id,
        op,
        node,
        encoding,
    })
}

/// `line` as text if it is UTF-8, given whether it is all ASCII (see
/// [`classify`]). Request lines nearly always are; `from_utf8`'s ASCII path
/// goes byte by byte up to its first aligned word and after its last
/// double word (~140 instructions on a 110-byte publish line,
/// scripts/callgrind.sh).
#[inline(always)]
fn utf8(line: &[u8], ascii: bool) -> Option<&str> {
    if ascii {
        // SAFETY: `classify` saw no byte over 0x7f, and ASCII is UTF-8.
        return Some(unsafe { std::str::from_utf8_unchecked(line) });
    }
    std::str::from_utf8(line).ok()
}

/// What one pass over a line's bytes tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bytes {
    /// Every byte is ASCII.
    ascii: bool,
    /// Some byte is a control character (below 0x20).
    controls: bool,
}

/// [`Bytes`] of `b`, a word at a time with no per-byte work at the ends
/// (the last word overlaps the one before it): the high bits ORed, and
/// the classic test for a byte below n (`(w - n * 0x01..) & !w & 0x80..`,
/// exact as to whether there is one; its `!w` leaves out bytes over 0x7f).
#[inline(always)]
fn classify(b: &[u8]) -> Bytes {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let Some(last) = b.last_chunk::<8>() else {
        return Bytes {
            ascii: b.iter().all(|&c| c < 0x80),
            controls: b.iter().any(|&c| c < 0x20),
        };
    };
    let below = |w: u64| w.wrapping_sub(LO * 0x20) & !w;
    let last = u64::from_le_bytes(*last);
    let (mut all, mut low) = (last, below(last));
    let mut words = b.chunks_exact(8);
    for w in &mut words {
        if let Some(w) = w.first_chunk::<8>() {
            let w = u64::from_le_bytes(*w);
            all |= w;
            low |= below(w);
        }
    }
    Bytes {
        ascii: all & HI == 0,
        controls: low & HI != 0,
    }
}

/// The members we look at, as raw spans. Unknown members are skipped; when a
/// key repeats, the last one wins (as in serde_json's `Value`).
#[derive(Default)]
struct Fields<'a> {
    op: Option<Raw<'a>>,
    id: Option<Raw<'a>>,
    topic: Option<Raw<'a>>,
    service: Option<Raw<'a>>,
    ty: Option<Raw<'a>>,
    msg: Option<Raw<'a>>,
    args: Option<Raw<'a>>,
    values: Option<Raw<'a>>,
    result: Option<Raw<'a>>,
    status: Option<Raw<'a>>,
    timeout: Option<Raw<'a>>,
    node: Option<Raw<'a>>,
    name: Option<Raw<'a>>,
    namespace: Option<Raw<'a>>,
    remap: Option<Raw<'a>>,
    domain: Option<Raw<'a>>,
    level: Option<Raw<'a>>,
    action: Option<Raw<'a>>,
    action_type: Option<Raw<'a>>,
    feedback: Option<Raw<'a>>,
    value: Option<Raw<'a>>,
    descriptor: Option<Raw<'a>>,
    validate: Option<Raw<'a>>,
    qos: Option<Raw<'a>>,
    latch: Option<Raw<'a>>,
    peers: Option<Raw<'a>>,
    throttle_rate: Option<Raw<'a>>,
    queue_length: Option<Raw<'a>>,
    wait: Option<Raw<'a>>,
    token: Option<Raw<'a>>,
    mac: Option<Raw<'a>>,
    /// Whether the line has an escape in any string (after a clean scan):
    /// if not, a string value is its span without the quotes.
    escapes: bool,
    /// Members of the binary encodings and of `fragment` pieces, boxed on
    /// first sight: every publish (the hot path) initialises and checks
    /// one pointer for them instead of five members
    /// (scripts/callgrind.sh).
    rare: Option<Box<RareFields<'a>>>,
}

/// The [`Fields`] that few requests carry.
#[derive(Default)]
struct RareFields<'a> {
    compression: Option<Raw<'a>>,
    fragment_size: Option<Raw<'a>>,
    data: Option<Raw<'a>>,
    num: Option<Raw<'a>>,
    total: Option<Raw<'a>>,
}

impl<'a> Fields<'a> {
    /// Records one top-level member; the last of a repeated key wins.
    #[inline(always)]
    fn set(&mut self, m: Member<'a>) {
        if m.key_escaped {
            return self.set_escaped(m);
        }
        if let Some(slot) = self.slot(m.key) {
            *slot = Some(Raw(m.value));
        }
    }

    /// [`Fields::set`] of a member whose key has an escape: rare, decoded
    /// to be compared (allocates). Out of line, so that `set` inlines into
    /// the scan (a call per member cost a publish ~60 instructions,
    /// scripts/callgrind.sh).
    #[cold]
    #[inline(never)]
    fn set_escaped(&mut self, m: Member<'a>) {
        let decoded = serde_json::from_str::<String>(&format!("\"{}\"", m.key));
        if let Some(slot) = decoded.ok().and_then(|k| self.slot(&k)) {
            *slot = Some(Raw(m.value));
        }
    }

    #[inline(always)]
    fn slot(&mut self, key: &str) -> Option<&mut Option<Raw<'a>>> {
        Some(match key {
            "op" => &mut self.op,
            "id" => &mut self.id,
            "topic" => &mut self.topic,
            "service" => &mut self.service,
            "type" => &mut self.ty,
            "msg" => &mut self.msg,
            "args" => &mut self.args,
            "values" => &mut self.values,
            "result" => &mut self.result,
            "status" => &mut self.status,
            "timeout" => &mut self.timeout,
            "node" => &mut self.node,
            "name" => &mut self.name,
            "namespace" => &mut self.namespace,
            "remap" => &mut self.remap,
            "domain" => &mut self.domain,
            "level" => &mut self.level,
            "action" => &mut self.action,
            "action_type" => &mut self.action_type,
            "feedback" => &mut self.feedback,
            "value" => &mut self.value,
            "descriptor" => &mut self.descriptor,
            "validate" => &mut self.validate,
            "qos" => &mut self.qos,
            "latch" => &mut self.latch,
            "peers" => &mut self.peers,
            "throttle_rate" => &mut self.throttle_rate,
            "queue_length" => &mut self.queue_length,
            "wait" => &mut self.wait,
            "token" => &mut self.token,
            "mac" => &mut self.mac,
            // Out of line: the match above is what a publish's members
            // go through (scripts/callgrind.sh).
            _ => return self.rare_slot(key),
        })
    }

    /// [`Fields::slot`] of the rare members, boxed on first sight.
    #[cold]
    #[inline(never)]
    fn rare_slot(&mut self, key: &str) -> Option<&mut Option<Raw<'a>>> {
        if !matches!(
            key,
            "compression" | "fragment_size" | "data" | "num" | "total"
        ) {
            return None;
        }
        let rare = self.rare.get_or_insert_with(Box::default);
        Some(match key {
            "compression" => &mut rare.compression,
            "fragment_size" => &mut rare.fragment_size,
            "data" => &mut rare.data,
            "num" => &mut rare.num,
            _ => &mut rare.total,
        })
    }

    /// The rare members as given (none: all absent).
    fn rare_ref(&self) -> &RareFields<'a> {
        const NONE: &RareFields<'static> = &RareFields {
            compression: None,
            fragment_size: None,
            data: None,
            num: None,
            total: None,
        };
        self.rare.as_deref().unwrap_or(NONE)
    }

    /// A subscribe's `compression` and `fragment_size`, if it gave either
    /// (JSON `null` is none, as Python clients send it). Out of line: the
    /// decoding of a publish (the hot path) should not carry its code.
    #[cold]
    #[inline(never)]
    fn encoding_asked(&self) -> Result<Option<Box<EncodingAsked<'a>>>, ErrorKind> {
        let rare = self.rare_ref();
        let compression = match rare.compression {
            Some(Raw("null")) | None => None,
            raw => Some(name(raw, "compression")?),
        };
        let fragment_size = fragment_size(rare.fragment_size)?;
        if compression.is_none() && fragment_size.is_none() {
            return Ok(None);
        }
        Ok(Some(Box::new(EncodingAsked {
            compression,
            fragment_size,
        })))
    }

    /// An error for a grammatical line: carries the id unless it is too
    /// long to echo, and the op when it is readable.
    fn checked_error(&mut self, kind: ErrorKind) -> DecodeError<'a> {
        if self.id.is_some_and(|id| id.0.len() > MAX_ID_BYTES) {
            self.id = None;
        }
        let op = self.op.and_then(json_str);
        self.error(kind, op)
    }

    fn error(&self, kind: ErrorKind, op: Option<Cow<'a, str>>) -> DecodeError<'a> {
        DecodeError {
            kind,
            id: self.id,
            op,
        }
    }

    /// [`json_str`] of a member of a cleanly scanned line, without looking
    /// for escapes again when the scan saw none.
    #[inline(always)]
    fn string(&self, raw: Raw<'a>) -> Option<Cow<'a, str>> {
        if self.escapes {
            return json_str(raw);
        }
        let inner = raw.get().strip_prefix('"')?.strip_suffix('"')?;
        Some(Cow::Borrowed(inner))
    }

    /// [`name`] of a member of a cleanly scanned line (see [`Fields::string`]).
    #[inline(always)]
    fn name(&self, raw: Option<Raw<'a>>, field: &'static str) -> Result<Cow<'a, str>, ErrorKind> {
        let raw = raw.ok_or(ErrorKind::MissingField(field))?;
        if raw.0.len() > MAX_NAME_BYTES + 2 {
            return Err(ErrorKind::NameTooLong(field));
        }
        self.string(raw).ok_or(ErrorKind::WrongType(field))
    }

    fn build(&self, op: &str, dialect: Dialect) -> Result<Op<'a>, ErrorKind> {
        let strict = dialect == Dialect::Strict;
        // `type` is required by the strict dialect, optional otherwise; when
        // present it must be a string either way.
        let ty = || -> Result<Option<Cow<'a, str>>, ErrorKind> {
            match self.ty {
                None if strict => Err(ErrorKind::MissingField("type")),
                None => Ok(None),
                raw => name(raw, "type").map(Some),
            }
        };
        // The hot path first, on its own: the match below compares `op`
        // against every name of its length.
        if op == "publish" {
            return Ok(Op::Publish {
                topic: self.name(self.topic, "topic")?,
                msg: self.msg.ok_or(ErrorKind::MissingField("msg"))?,
            });
        }
        Ok(match op {
            "subscribe" => {
                let mut qos = qos(self.qos)?;
                if qos.depth.is_none() {
                    // rosbridge's queue_length: 0 (roslib's default) is none.
                    qos.depth = count(self.queue_length, "queue_length")?
                        .filter(|&n| n > 0)
                        .map(|n| n.min(u64::from(crate::qos::MAX_QOS_DEPTH)) as u32);
                }
                Op::Subscribe {
                    topic: name(self.topic, "topic")?,
                    ty: ty()?,
                    qos,
                    throttle_ms: count(self.throttle_rate, "throttle_rate")?.unwrap_or(0),
                }
            }
            "unsubscribe" => Op::Unsubscribe {
                topic: name(self.topic, "topic")?,
            },
            "advertise" => {
                let mut qos = qos(self.qos)?;
                if flag(self.latch, "latch")? && qos.durability.is_none() {
                    qos.durability = Some(crate::qos::Durability::TransientLocal);
                }
                Op::Advertise {
                    topic: name(self.topic, "topic")?,
                    ty: ty()?,
                    qos,
                    peers: flag(self.peers, "peers")?,
                }
            }
            "unadvertise" => Op::Unadvertise {
                topic: name(self.topic, "topic")?,
            },
            "call_service" => Op::CallService {
                service: name(self.service, "service")?,
                args: match self.args {
                    None if strict => return Err(ErrorKind::MissingField("args")),
                    args => args,
                },
                timeout: timeout(self.timeout)?,
                wait: flag(self.wait, "wait")?,
            },
            "service_response" => Op::ServiceResponse {
                service: name(self.service, "service")?,
                values: match self.values {
                    None if strict => return Err(ErrorKind::MissingField("values")),
                    values => values,
                },
                result: self.result.ok_or(ErrorKind::MissingField("result"))?,
                status: self.status,
            },
            "advertise_service" => Op::AdvertiseService {
                service: name(self.service, "service")?,
                ty: ty()?,
            },
            "unadvertise_service" => Op::UnadvertiseService {
                service: name(self.service, "service")?,
            },
            "declare_node" => Op::DeclareNode(Box::new(NodeDeclaration {
                name: name(self.name, "name")?,
                namespace: match self.namespace {
                    None => None,
                    raw => Some(name(raw, "namespace")?),
                },
                remap: remap_rules(self.remap)?,
                domain: match self.domain {
                    None => None,
                    Some(raw) => Some(
                        raw.get()
                            .parse()
                            .map_err(|_| ErrorKind::WrongType("domain"))?,
                    ),
                },
            })),
            "destroy_node" => Op::DestroyNode {
                name: name(self.name, "name")?,
            },
            "set_level" => Op::SetLevel {
                level: name(self.level, "level")?,
            },
            "advertise_action" => Op::AdvertiseAction {
                action: name(self.action, "action")?,
                ty: ty()?,
            },
            "unadvertise_action" => Op::UnadvertiseAction {
                action: name(self.action, "action")?,
            },
            "send_action_goal" => Op::SendActionGoal(Box::new(GoalRequest {
                action: name(self.action, "action")?,
                action_type: match self.action_type {
                    None if strict => return Err(ErrorKind::MissingField("action_type")),
                    None => None,
                    raw => Some(name(raw, "action_type")?),
                },
                args: match self.args {
                    None if strict => return Err(ErrorKind::MissingField("args")),
                    args => args,
                },
                feedback: match self.feedback.map(|r| r.get()) {
                    None | Some("false") | Some("null") => false,
                    Some("true") => true,
                    Some(_) => return Err(ErrorKind::WrongType("feedback")),
                },
                timeout: timeout(self.timeout)?,
                wait: flag(self.wait, "wait")?,
            })),
            "cancel_action_goal" => Op::CancelActionGoal {
                action: name(self.action, "action")?,
            },
            "action_feedback" => Op::ActionFeedback {
                action: name(self.action, "action")?,
                values: self.values.ok_or(ErrorKind::MissingField("values"))?,
            },
            "action_result" => Op::ActionResult {
                action: name(self.action, "action")?,
                // Optional on both transports: a failing server may have
                // nothing to say (roslib's `setFailed` sends none), and a
                // goal must not hang for want of a field.
                values: self.values,
                status: self.status.ok_or(ErrorKind::MissingField("status"))?,
                result: self.result.ok_or(ErrorKind::MissingField("result"))?,
            },
            "declare_parameter" => Op::DeclareParameter {
                name: name(self.name, "name")?,
                value: self.value.ok_or(ErrorKind::MissingField("value"))?,
                descriptor: self.descriptor,
                validate: match self.validate.map(|r| r.get()) {
                    None | Some("false") | Some("null") => false,
                    Some("true") => true,
                    Some(_) => return Err(ErrorKind::WrongType("validate")),
                },
            },
            "undeclare_parameter" => Op::UndeclareParameter {
                name: name(self.name, "name")?,
            },
            "set_parameter" => Op::SetParameter {
                name: name(self.name, "name")?,
                value: self.value.ok_or(ErrorKind::MissingField("value"))?,
            },
            "auth" => Op::Auth {
                token: match self.token.or(self.mac) {
                    None => None,
                    raw => Some(name(raw, "token")?),
                },
            },
            "fragment" => Op::Fragment {
                data: json_str(
                    self.rare_ref()
                        .data
                        .ok_or(ErrorKind::MissingField("data"))?,
                )
                .ok_or(ErrorKind::WrongType("data"))?,
                num: index(self.rare_ref().num, "num")?,
                total: index(self.rare_ref().total, "total")?,
            },
            _ => return Err(ErrorKind::UnknownOp),
        })
    }
}

/// A required whole number written as one (`3`, not `3.0` or `"3"`): a
/// fragment's `num` and `total`.
fn index(raw: Option<Raw<'_>>, field: &'static str) -> Result<u64, ErrorKind> {
    let raw = raw.ok_or(ErrorKind::MissingField(field))?;
    raw.get().parse().map_err(|_| ErrorKind::WrongType(field))
}

fn name<'a>(raw: Option<Raw<'a>>, field: &'static str) -> Result<Cow<'a, str>, ErrorKind> {
    let raw = raw.ok_or(ErrorKind::MissingField(field))?;
    if raw.0.len() > MAX_NAME_BYTES + 2 {
        return Err(ErrorKind::NameTooLong(field));
    }
    json_str(raw).ok_or(ErrorKind::WrongType(field))
}

/// Remap rules given in `declare_node`: an array of strings (`from:=to`),
/// at most [`MAX_REMAP_RULES`].
fn remap_rules(raw: Option<Raw<'_>>) -> Result<Vec<String>, ErrorKind> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let rules: Vec<String> =
        serde_json::from_str(raw.get()).map_err(|_| ErrorKind::WrongType("remap"))?;
    if rules.len() > MAX_REMAP_RULES || rules.iter().any(|r| r.len() > MAX_NAME_BYTES) {
        return Err(ErrorKind::NameTooLong("remap"));
    }
    Ok(rules)
}

/// Remap rules one `declare_node` may carry (each is matched against every
/// name the node resolves).
pub const MAX_REMAP_RULES: usize = 64;

/// A boolean field; absent or `null` is false.
fn flag(raw: Option<Raw<'_>>, field: &'static str) -> Result<bool, ErrorKind> {
    match raw.map(|r| r.get()) {
        None | Some("false") | Some("null") => Ok(false),
        Some("true") => Ok(true),
        Some(_) => Err(ErrorKind::WrongType(field)),
    }
}

/// A non-negative whole number field (rosbridge sends `0` for none);
/// absent or `null` is `None`; a fractional one is cut.
fn count(raw: Option<Raw<'_>>, field: &'static str) -> Result<Option<u64>, ErrorKind> {
    let Some(raw) = raw else { return Ok(None) };
    let text = raw.get();
    if text == "null" {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 0.0 => Ok(Some(f.min(u64::MAX as f64) as u64)),
        _ => Err(ErrorKind::WrongType(field)),
    }
}

/// rosbridge's `fragment_size`: a count, saturating at `u32::MAX`.
fn fragment_size(raw: Option<Raw<'_>>) -> Result<Option<u32>, ErrorKind> {
    Ok(count(raw, "fragment_size")?.map(|n| n.min(u64::from(u32::MAX)) as u32))
}

/// The `qos` object, or the default (nothing stated).
fn qos(raw: Option<Raw<'_>>) -> Result<Qos, ErrorKind> {
    match raw {
        None => Ok(Qos::default()),
        Some(r) if r.get() == "null" => Ok(Qos::default()),
        Some(r) => Qos::from_raw(r).map_err(ErrorKind::WrongType),
    }
}

/// `timeout` in seconds; `null` counts as absent.
fn timeout(raw: Option<Raw<'_>>) -> Result<Option<f64>, ErrorKind> {
    let Some(raw) = raw else { return Ok(None) };
    let text = raw.get();
    if text == "null" {
        return Ok(None);
    }
    match text.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => text
            .parse::<f64>()
            .map(Some)
            .map_err(|_| ErrorKind::WrongType("timeout")),
        _ => Err(ErrorKind::WrongType("timeout")),
    }
}

/// The string a raw JSON value holds, or `None` if it is not a string.
/// Borrows when the string has no escapes, which is the common case.
pub fn json_str(raw: Raw<'_>) -> Option<Cow<'_, str>> {
    let text = raw.get();
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    if !inner.contains('\\') {
        return Some(Cow::Borrowed(inner));
    }
    serde_json::from_str::<String>(text).ok().map(Cow::Owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(line: &str) -> Request<'_> {
        decode(line.as_bytes()).unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn err(line: &[u8]) -> (ErrorKind, Option<String>) {
        match decode(line) {
            Ok(r) => panic!("accepted: {r:?}"),
            Err(e) => (e.kind, e.id.map(|r| r.get().to_string())),
        }
    }

    #[test]
    fn compression_and_fragment_size_ride_beside_the_op() {
        let r = ok(
            r#"{"op":"subscribe","topic":"/t","type":"T","compression":"cbor","fragment_size":300.5}"#,
        );
        let e = r.encoding.expect("encoding");
        assert_eq!(
            (e.compression.as_deref(), e.fragment_size),
            (Some("cbor"), Some(300))
        );
        let r = ok(r#"{"op":"call_service","service":"/s","id":1,"args":{},"fragment_size":1e12}"#);
        let e = r.encoding.expect("encoding");
        assert_eq!((e.compression, e.fragment_size), (None, Some(u32::MAX)));
        // null is none, and none at all is no box.
        assert!(
            ok(r#"{"op":"subscribe","topic":"/t","type":"T","compression":null}"#)
                .encoding
                .is_none()
        );
        assert!(ok(r#"{"op":"publish","topic":"/t","msg":{}}"#)
            .encoding
            .is_none());
        let (kind, id) =
            err(br#"{"op":"subscribe","topic":"/t","type":"T","compression":5,"id":"x"}"#);
        assert_eq!(
            (kind, id.as_deref()),
            (ErrorKind::WrongType("compression"), Some("\"x\""))
        );
        let (kind, _) = err(br#"{"op":"subscribe","topic":"/t","type":"T","fragment_size":-1}"#);
        assert_eq!(kind, ErrorKind::WrongType("fragment_size"));
    }

    #[test]
    fn blanked_decoding_forwards_no_raw_cr_or_lf() {
        let line = b"{\"op\":\"publish\",\r\n\"topic\":\"/t\",\"msg\":{\"a\":\n[1,\r2]}}";
        let msg = decode_blanked(line, Dialect::Strict, |r| match r {
            Ok(Request {
                op: Op::Publish { msg, .. },
                ..
            }) => msg.get().to_string(),
            other => panic!("{other:?}"),
        });
        assert_eq!(msg, r#"{"a": [1, 2]}"#);
        // A refused line's echoed id is blanked too.
        let line = b"{\"op\":\"publish\",\"id\":[1,\n2],\"msg\":1e999}";
        let id = decode_blanked(line, Dialect::Strict, |r| match r {
            Err(e) => e.id.map(|i| i.get().to_string()),
            Ok(r) => panic!("{r:?}"),
        });
        assert_eq!(id.as_deref(), Some("[1, 2]"));
        // Without either (a tab is no reason), the line is decoded as it is.
        let line = b"{\"op\":\"publish\",\t\"topic\":\"/t\",\"msg\":{\"a\":[1,2]}}";
        let same = decode_blanked(line, Dialect::Strict, |r| {
            matches!(r, Ok(Request { op: Op::Publish { msg, .. }, .. })
                if line.as_ptr_range().contains(&msg.get().as_ptr()))
        });
        assert!(same, "spans borrow from the line");
    }

    #[test]
    fn classify_sees_every_byte() {
        let clean = Bytes {
            ascii: true,
            controls: false,
        };
        for len in 0..40 {
            let mut b = vec![b' '; len];
            assert_eq!(classify(&b), clean);
            for at in 0..len {
                for (c, want) in [
                    (0x80, (false, false)),
                    (0xff, (false, false)),
                    (0x1f, (true, true)),
                    (0x00, (true, true)),
                    (b'\n', (true, true)),
                    (b'~', (true, false)),
                    (0x7f, (true, false)),
                ] {
                    b[at] = c;
                    let got = classify(&b);
                    assert_eq!((got.ascii, got.controls), want, "len {len}, {c:#x} at {at}");
                }
                // A non-ASCII byte just below a control one hides nothing.
                if at > 0 {
                    b[at - 1] = 0xc3;
                    b[at] = b'\r';
                    assert!(classify(&b).controls, "len {len}, CR at {at}");
                    b[at - 1] = b' ';
                }
                b[at] = b' ';
            }
        }
        let (kind, _) = err(b"{\"op\":\"publish\",\"topic\":\"/t\xff\",\"msg\":{}}");
        assert_eq!(kind, ErrorKind::BadUtf8);
        let r = ok(r#"{"op":"publish","topic":"/t\u00e9","msg":{"s":"\u00e9"}}"#);
        assert!(matches!(r.op, Op::Publish { topic, .. } if topic == "/t\u{e9}"));
    }

    #[test]
    fn publish_keeps_payload_bytes() {
        let r = ok(
            r#"{ "msg" : {"n":12345678901234567890, "f":1e-300} ,"topic":"/a\u002fb","op":"publish","x":[1]}"#,
        );
        match r.op {
            Op::Publish { topic, msg } => {
                assert_eq!(topic, "/a/b");
                assert_eq!(msg.get(), r#"{"n":12345678901234567890, "f":1e-300}"#);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn fragments_need_an_id_and_whole_numbers() {
        let r = ok(r#"{"op":"fragment","id":"m","data":"{\"op\"","num":0,"total":2}"#);
        match r.op {
            Op::Fragment { data, num, total } => {
                assert_eq!((&*data, num, total), ("{\"op\"", 0, 2));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(r.id.map(|i| i.get()), Some("\"m\""));
        let base = r#""op":"fragment","data":"x","num":0,"total":1"#;
        assert_eq!(
            err(format!("{{{base}}}").as_bytes()).0,
            ErrorKind::MissingId
        );
        for (bad, kind) in [
            (r#""num":-1"#, ErrorKind::WrongType("num")),
            (r#""num":1.5"#, ErrorKind::WrongType("num")),
            (r#""total":"2""#, ErrorKind::WrongType("total")),
            (r#""data":7"#, ErrorKind::WrongType("data")),
        ] {
            let line = format!(r#"{{{base},"id":1,{bad}}}"#);
            assert_eq!(err(line.as_bytes()), (kind, Some("1".into())), "{bad}");
        }
        let line = r#"{"op":"fragment","id":1,"num":0,"total":1}"#;
        assert_eq!(err(line.as_bytes()).0, ErrorKind::MissingField("data"));
    }

    #[test]
    fn names_borrow_without_escapes() {
        match ok(r#"{"op":"subscribe","topic":"/t","type":"x/Y"}"#).op {
            Op::Subscribe { topic, .. } => assert!(matches!(topic, Cow::Borrowed("/t"))),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_keep_the_id() {
        assert_eq!(
            err(br#"{"op":"subscribe","id":"s1"}"#),
            (ErrorKind::MissingField("topic"), Some("\"s1\"".into()))
        );
        assert_eq!(
            err(br#"{"op":"nope","id":7}"#),
            (ErrorKind::UnknownOp, Some("7".into()))
        );
        assert_eq!(
            err(br#"{"id":[1]}"#),
            (ErrorKind::MissingOp, Some("[1]".into()))
        );
        assert_eq!(
            err(br#"{"op":5,"id":1}"#),
            (ErrorKind::WrongType("op"), Some("1".into()))
        );
        assert_eq!(
            err(br#"{"op":"publish","topic":5,"msg":1,"id":2}"#),
            (ErrorKind::WrongType("topic"), Some("2".into()))
        );
        assert_eq!(
            err(br#"{"op":"call_service","service":"/s","args":{}}"#),
            (ErrorKind::MissingId, None)
        );
    }

    #[test]
    fn malformed_lines() {
        assert_eq!(err(b"[1,2]").0, ErrorKind::NotObject);
        assert_eq!(err(b"42").0, ErrorKind::NotObject);
        assert_eq!(err(b"\"x\"").0, ErrorKind::NotObject);
        assert_eq!(err(b"{\"op\":").0, ErrorKind::BadJson);
        assert_eq!(err(b"{} x").0, ErrorKind::BadJson);
        assert_eq!(err(b"{\"op\":\"\xff\"}").0, ErrorKind::BadUtf8);
    }

    #[test]
    fn refusals_of_grammatical_lines_keep_the_id_wherever_it_is() {
        let deep = format!("{}{}", "[".repeat(127), "]".repeat(127));
        let cases = [
            ("[1e400]", ErrorKind::NumberOutOfRange),
            ("-1e309", ErrorKind::NumberOutOfRange),
            (r#""\udc00""#, ErrorKind::LoneSurrogate),
            (r#"{"\ud800":1}"#, ErrorKind::LoneSurrogate),
            (deep.as_str(), ErrorKind::TooDeep),
        ];
        for (bad, kind) in cases {
            let before = format!(r#"{{"id":7,"op":"publish","topic":"/t","msg":{bad}}}"#);
            let after = format!(r#"{{"op":"publish","topic":"/t","msg":{bad},"id":"a"}}"#);
            assert_eq!(err(before.as_bytes()), (kind, Some("7".into())), "{bad}");
            assert_eq!(err(after.as_bytes()), (kind, Some("\"a\"".into())), "{bad}");
            // The op after the refused value is read too.
            let op_after = format!(r#"{{"msg":{bad},"topic":"/t","op":"publish","id":1}}"#);
            let e = decode(op_after.as_bytes()).map(|r| r.op.name());
            assert!(
                matches!(&e, Err(DecodeError { kind: k, op: Some(op), .. }) if *k == kind && op == "publish"),
                "{bad}: {e:?}"
            );
            // A line that is not grammatical keeps no id.
            let broken = format!(r#"{{"op":"publish","topic":"/t","msg":{bad},"id":2,}}"#);
            assert_eq!(err(broken.as_bytes()), (ErrorKind::BadJson, None), "{bad}");
        }
        // The first refusal names the error.
        let both = br#"{"msg":["\ud800",1e999],"op":"publish","topic":"/t","id":3}"#;
        assert_eq!(err(both), (ErrorKind::LoneSurrogate, Some("3".into())));
    }

    #[test]
    fn an_id_that_is_itself_refused_is_never_echoed() {
        for line in [
            &br#"{"op":"publish","id":"\ud800","topic":"/t","msg":1}"#[..],
            br#"{"op":"publish","topic":"/t","msg":1,"id":"\ud800"}"#,
            br#"{"op":"publish","topic":"/t","msg":1,"id":[1e400]}"#,
            br#"{"op":"publish","topic":"/t","msg":1,"\udfff":2,"id":[1e400]}"#,
            br#"{"op":"publish","topic":"/t","msg":1,"\udfff":2,"i\u0064":{"a":1e400}}"#,
        ] {
            let (_, id) = err(line);
            assert_eq!(id, None, "{}", String::from_utf8_lossy(line));
        }
        // A member whose key is refused is not read, even if it is `id`.
        let (kind, id) = err(br#"{"op":"publish","topic":"/t","msg":1,"id":5,"\ud800":6}"#);
        assert_eq!((kind, id.as_deref()), (ErrorKind::LoneSurrogate, Some("5")));
    }

    /// Python's `json.loads`, JavaScript's `JSON.parse` and serde_json all
    /// read these as finite f64s: forwarded byte for byte.
    #[test]
    fn numbers_up_to_the_largest_finite_f64_are_accepted() {
        let max_309_digits = format!("17976931348623157{}", "0".repeat(292));
        for n in [
            "1.7976931348623157e308",
            "1.7976931348623157e+308",
            "1.7976931348623157E+308",
            "-1.7976931348623157e308",
            "1.79769313486231580e308",
            "179.76931348623157e306",
            "0.00017976931348623157e312",
            "5e-324",
            "4.9406564584124654e-324",
            "-5e-324",
            "1e-400",
            "-1e-99999999999999999999",
            "0e99999999999999999999",
            "1e308",
            max_309_digits.as_str(),
        ] {
            let line = format!(r#"{{"op":"publish","topic":"/t","msg":[{n}]}}"#);
            // The 309-digit spelling rounds to f64::MAX, but serde_json's
            // default parser reads it as out of range (see below).
            if n.len() > 300 {
                assert_eq!(err(line.as_bytes()).0, ErrorKind::NumberOutOfRange);
                continue;
            }
            match decode(line.as_bytes()).map(|r| r.op) {
                Ok(Op::Publish { msg, .. }) => assert_eq!(msg.get(), format!("[{n}]")),
                other => panic!("{n}: {other:?}"),
            }
        }
    }

    /// Each of these is infinite for one of those parsers: refused.
    #[test]
    fn numbers_past_the_largest_finite_f64_are_refused() {
        let max_309_digits = format!("17976931348623157{}", "0".repeat(292));
        let ten_309 = format!("1{}", "0".repeat(309));
        for n in [
            // Rounds to infinity everywhere.
            "1.7976931348623159e308",
            "1e309",
            "-1e309",
            "1.8e308",
            ten_309.as_str(),
            "1e99999999999999999999",
            // serde_json (default features) computes these as infinity,
            // although they round to f64::MAX ...
            "1.7976931348623158e308",
            "1.797693134862315807e308",
            max_309_digits.as_str(),
            // ... and reads this as f64::MAX, though it rounds to infinity
            // (Python and JavaScript read inf and Infinity).
            "1.79769313486231589e308",
        ] {
            let line = format!(r#"{{"op":"publish","id":1,"topic":"/t","msg":{{"v":{n}}}}}"#);
            assert_eq!(
                err(line.as_bytes()),
                (ErrorKind::NumberOutOfRange, Some("1".into())),
                "{:.40}",
                n
            );
        }
    }

    #[test]
    fn long_ids_and_names_are_refused_and_long_ids_not_echoed() {
        let id = format!("\"{}\"", "i".repeat(MAX_ID_BYTES - 2));
        let line = format!(r#"{{"op":"subscribe","topic":"/t","type":"T","id":{id}}}"#);
        assert!(decode(line.as_bytes()).is_ok(), "exactly the limit");
        let id = format!("\"{}\"", "i".repeat(MAX_ID_BYTES - 1));
        let line = format!(r#"{{"op":"subscribe","topic":"/t","type":"T","id":{id}}}"#);
        assert_eq!(err(line.as_bytes()), (ErrorKind::IdTooLong, None));
        let name = "n".repeat(MAX_NAME_BYTES + 1);
        let line = format!(r#"{{"op":"subscribe","topic":"{name}","type":"T","id":1}}"#);
        assert_eq!(
            err(line.as_bytes()),
            (ErrorKind::NameTooLong("topic"), Some("1".to_string()))
        );
        let line = format!(r#"{{"op":"advertise","topic":"/t","type":"{name}"}}"#);
        assert_eq!(err(line.as_bytes()).0, ErrorKind::NameTooLong("type"));
    }

    #[test]
    fn depth_is_bounded() {
        let deep = |n: usize| {
            format!(
                r#"{{"op":"publish","topic":"/t","msg":{}{}}}"#,
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        assert!(decode(deep(126).as_bytes()).is_ok());
        assert_eq!(err(deep(127).as_bytes()).0, ErrorKind::TooDeep);
        assert_eq!(err(deep(100_000).as_bytes()).0, ErrorKind::TooDeep);
        // Brackets inside strings do not count.
        let s = format!(
            r#"{{"op":"publish","topic":"/t","msg":"{}"}}"#,
            "[".repeat(1000)
        );
        assert!(decode(s.as_bytes()).is_ok());
    }

    #[test]
    fn rosbridge_dialect_relaxes_optional_fields() {
        let line = br#"{"op":"call_service","service":"/s"}"#;
        assert_eq!(err(line).0, ErrorKind::MissingField("args"));
        let r = decode_as(line, Dialect::Rosbridge).expect("accepted");
        assert!(r.id.is_none());
        assert!(matches!(r.op, Op::CallService { args: None, .. }));
        let sub = br#"{"op":"subscribe","topic":"/t"}"#;
        assert_eq!(err(sub).0, ErrorKind::MissingField("type"));
        assert!(decode_as(sub, Dialect::Rosbridge).is_ok());
        let bad_type = br#"{"op":"subscribe","topic":"/t","type":5}"#;
        assert!(decode_as(bad_type, Dialect::Rosbridge).is_err());
        assert!(matches!(
            decode_as(br#"{"op":"set_level","level":"info"}"#, Dialect::Rosbridge).map(|r| r.op),
            Ok(Op::SetLevel { .. })
        ));
        // `auth` is understood on both transports (the hub decides).
        assert!(matches!(
            ok(r#"{"op":"auth"}"#).op,
            Op::Auth { token: None }
        ));
        match decode_as(
            br#"{"op":"auth","mac":"s3cret","client":"c"}"#,
            Dialect::Rosbridge,
        )
        .map(|r| r.op)
        {
            Ok(Op::Auth { token: Some(t) }) => assert_eq!(t, "s3cret"),
            other => panic!("{other:?}"),
        }
        match ok(r#"{"op":"auth","token":"tok","mac":"other"}"#).op {
            Op::Auth { token: Some(t) } => assert_eq!(t, "tok"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            err(br#"{"op":"auth","token":5}"#).0,
            ErrorKind::WrongType("token")
        );
    }

    #[test]
    fn timeout_field() {
        match ok(r#"{"op":"call_service","service":"/s","id":1,"args":[],"timeout":0.5}"#).op {
            Op::CallService { timeout, .. } => assert_eq!(timeout, Some(0.5)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            err(br#"{"op":"call_service","service":"/s","id":1,"args":[],"timeout":"x"}"#).0,
            ErrorKind::WrongType("timeout")
        );
    }
}
