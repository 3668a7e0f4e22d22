//! A subscription's encoding at the hub: whether a `subscribe` may have
//! the `compression` it asks for ([`Hub::check_encoding`]), and the bytes
//! one message becomes for it ([`Hub::frames_for`]), made once per
//! (message, encoding, framing) and shared by every subscriber that asked
//! for the same, with their counters.
//!
//! Subscriptions in an encoding other than plain JSON take the QoS path
//! (`hub/qos.rs`; their membership states something), one message at a
//! time: the fast path (`hub/topics.rs` `fan_out`, `deliver`) never sees
//! them and pays nothing for them. What each encoding is: `encoding.rs`.
//!
//! Invariants:
//! - a message nobody wants in an encoding is never made in it, and one
//!   that cannot be made in it is tried once (an empty copy marks it);
//! - the bytes are one queue entry (a fragmented message's frames
//!   together), so depth, shedding and the memory ledger treat them as
//!   one message, never a partial set;
//! - binary compressions are refused on a transport without binary
//!   messages (NDJSON), and `cbor-raw` for a type the gateway does not
//!   know, at subscribe, with the request's id;
//! - the core reads no clock: `cbor-raw`'s stamp is the wall clock at the
//!   turn's `now` (`Hub::wall`, anchored by the shell's `GraphSettings`),
//!   and the encode time counters (`encoded_*_micros`) are read from the
//!   clock the shell hands in ([`Hub::set_cost_clock`]); without one (the
//!   simulator, tests) they stay 0, and nothing is decided on them;
//! - a message's `msg` is parsed to a value at most once for all its
//!   encodings (`encoding::Parsed`, held by its `Framed`);
//! - a message's CDR is made at most once for all the subscriptions that
//!   take CDR (`cbor-raw`, Foxglove sessions): kept beside the message
//!   (`Framed::keep_cdr`), counted as made;
//! - a ROS 2 sample routed with its CDR ([`Hub::remote_needs_json`] said
//!   nobody needs its JSON) reaches only `cbor-raw` subscribers, which
//!   send those bytes as they came; so does a Foxglove client's CDR
//!   publish when [`Hub::client_cdr_needs_json`] said so (only subscribers
//!   that take CDR, no bridge, no cache, no type check, not the clock).

use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use super::Hub;
use crate::counters::{Counter, ErrorCode};
use crate::encoding::{self, Compression, Encoded, Encoding};
use crate::nodes::{Domain, DOMAINS};
use crate::registry::{Role, TopicId};
use crate::transport::{Framed, Framing, Transport};
use crate::ConnRef;

/// Bytes. The largest encoders' scratch buffer kept from one message to
/// the next (`Hub::frames_for`): a binary encoding is made in it, then
/// copied once into the shared frame. Kept, a 1280x720 image's 2.8 MB of
/// CDR does not fault fresh pages in for every message (glibc maps
/// allocations above `MMAP_THRESHOLD` anew each time); a larger one is
/// freed after use. Freed as well when the shell trims an idle gateway
/// (`Hub::shrink_tables`).
pub const MAX_ENCODE_SCRATCH_BYTES: usize = 16 * 1024 * 1024;

impl Hub {
    /// Gives the shell's monotonic clock, read around each encode for the
    /// `encoded_*_micros` counters only (a cost, measured where it is
    /// spent; the hub decides nothing on it). Without it they stay 0.
    pub fn set_cost_clock(&mut self, clock: fn() -> Instant) {
        self.cost_clock = Some(clock);
    }

    /// Whether `me` may subscribe to `topic` (of type `ty`, as the request
    /// or the topic has it; empty when neither does) in `enc`; if not, says
    /// why with the request's `id` and returns false.
    pub(super) fn check_encoding(
        &mut self,
        me: ConnRef,
        enc: Encoding,
        topic: &str,
        ty: &str,
        id: Option<&[u8]>,
        now: Instant,
    ) -> bool {
        let c = enc.compression;
        if c == Compression::None {
            return true;
        }
        let tcp = self
            .conn(me.key)
            .is_some_and(|conn| conn.transport() == Transport::Tcp);
        let why = if tcp {
            format!(
                "{topic}: compression {:?} is for the WebSocket transport (rosbridge v2); this transport sends JSON lines only (compression none); not subscribed",
                c.label()
            )
        } else if c.needs_type() && (ty.is_empty() || self.types().msg(ty).is_none()) {
            if ty.is_empty() {
                format!(
                    "{topic}: compression {:?} needs the message type: give \"type\" (no publisher or subscriber named one); not subscribed",
                    c.label()
                )
            } else {
                format!(
                    "{topic}: compression {:?} needs the definition of {ty}, which this gateway does not know (--interfaces adds definitions); not subscribed",
                    c.label()
                )
            }
        } else {
            return true;
        };
        self.error_with_id(me, ErrorCode::BadCompression, &why, id, now);
        false
    }

    /// Whether a message from the ROS 2 graph on `topic` of `domain`
    /// (`latched`: from a transient local publisher) must be decoded to
    /// JSON before it is routed: false only when every local subscriber
    /// of the topic takes `cbor-raw` unthrottled (it sends the sample's
    /// CDR as it came), and the message is not latched (the cache keeps
    /// JSON for later subscribers in any encoding) nor the simulated
    /// clock (read as JSON). Bridges do not count: a remote message never
    /// goes to one (`hub/topics.rs`). A topic nobody subscribes to needs
    /// nothing.
    pub(crate) fn remote_needs_json(
        &self,
        domain: Domain,
        topic: &str,
        latched: Option<u32>,
    ) -> bool {
        if !self.federation_enabled() || (domain as usize) >= DOMAINS {
            return false;
        }
        // The gateway's own readers: /clock under sim time, TF (`tf.rs`).
        if latched.is_some() || self.sim_time_watch(domain, topic) || self.tf_wants(domain, topic) {
            return true;
        }
        self.subscribers_need_json(domain, topic, false)
    }

    /// Whether a live subscriber of `topic` of `domain` needs a message's
    /// JSON: one that does not take CDR unthrottled (a throttled one holds
    /// the message's frames, `hub/qos.rs`), or (`bridges`) a bridge.
    fn subscribers_need_json(&self, domain: Domain, topic: &str, bridges: bool) -> bool {
        let reg = &self.registries[domain as usize];
        let Some((t, e)) = reg
            .topic_id(topic)
            .and_then(|t| reg.topic(t).map(|e| (t, e)))
        else {
            return false;
        };
        e.subscribers().iter().any(|&sub| {
            if !self.live(sub) {
                return false;
            }
            if self.is_bridge(sub) {
                return bridges;
            }
            !reg.member_qos(sub, Role::Subscriber, t)
                .is_some_and(|q| q.encoding.compression.takes_cdr() && q.throttle.is_none())
        })
    }

    /// Whether a Foxglove client's (`from`'s) CDR publish on `topic` of
    /// `domain` must be decoded to JSON before it is routed: false only
    /// when nothing would read the JSON, the way [`Hub::remote_needs_json`]
    /// decides for a ROS 2 sample, and besides no bridge subscribes (a
    /// client's message goes to the bridges as JSON beside its CDR), the
    /// publisher does not latch (the cache keeps JSON) and no type check
    /// covers the topic (it reads JSON). Either way the caller checks that
    /// the CDR is of the channel's type (decoding it, or
    /// `rosgate_ros2::cdr::validate`).
    pub(super) fn client_cdr_needs_json(&self, from: ConnRef, domain: Domain, topic: &str) -> bool {
        if (domain as usize) >= DOMAINS
            || self.sim_time_watch(domain, topic)
            || self.checks.covers(domain, topic)
        {
            return true;
        }
        let reg = &self.registries[domain as usize];
        let latched = reg
            .topic_id(topic)
            .and_then(|t| reg.member_qos(from, Role::Publisher, t))
            .is_some_and(|q| q.latched());
        latched || self.subscribers_need_json(domain, topic, true)
    }

    /// The bytes of the one message of `framed` (a publish of topic `t`)
    /// for a queue with `framing`, in `enc`; `None` when it cannot be made
    /// so (counted). `now` is the turn's time: `cbor-raw`'s stamp is the
    /// wall clock at `now` (`Hub::wall`), never a clock read here.
    pub(super) fn frames_for(
        &mut self,
        domain: Domain,
        t: TopicId,
        framed: &mut Framed,
        framing: Framing,
        enc: Encoding,
        now: Instant,
    ) -> Option<Rc<[u8]>> {
        if enc.is_plain() {
            return Some(framed.get(framing));
        }
        if let Some(rc) = framed.encoded(enc, framing) {
            // Empty: it could not be made, tried once for every subscriber.
            return (!rc.is_empty()).then_some(rc);
        }
        let (ty, name) = self.registries[domain as usize]
            .topic(t)
            .map_or((String::new(), String::new()), |e| {
                (e.ty().to_owned(), e.name().to_owned())
            });
        let types = Arc::clone(self.types());
        let (secs, nanos) = self.wall(now);
        let wall = UNIX_EPOCH + Duration::new(secs, nanos);
        // The encode's cost, read from the shell's clock when it gave one
        // (`Hub::set_cost_clock`): only a counter, nothing decided on it.
        let started = self.cost_clock.map(|clock| clock());
        // A binary encoding of a publish given as its pieces takes the
        // topic and `msg` as they are: its line is never joined for it.
        let publish = match framed.msg() {
            Some(msg) if enc.compression.binary() => Some((name.as_str(), msg)),
            _ => None,
        };
        let line = match publish {
            Some(_) => None,
            None => Some(framed.lines()),
        };
        if enc.compression.takes_cdr() && framed.cdr().is_none() {
            // Encoded once for every subscription that takes CDR (a
            // Foxglove session's id is in its frame, not in its CDR).
            let made = {
                let m = encoding::Message {
                    line: line.as_deref().unwrap_or(&[]),
                    publish: framed.msg().map(|msg| (name.as_str(), msg)),
                    cdr: None,
                    fragment_id: 0,
                    parsed: framed.parsed(),
                };
                encoding::cdr_for(m, &*types, &ty)
            };
            match made {
                Ok(cdr) => framed.keep_cdr(Rc::from(cdr)),
                Err(_) => {
                    self.counters.inc(Counter::EncodeFailed);
                    framed.keep_encoded(enc, framing, Vec::new());
                    return None;
                }
            }
        }
        let msg = encoding::Message {
            line: line.as_deref().unwrap_or(&[]),
            publish,
            cdr: framed.cdr(),
            fragment_id: self.fragment_ids + 1,
            parsed: framed.parsed(),
        };
        let mut scratch = std::mem::take(&mut self.encode_scratch);
        let made = encoding::encode(msg, enc, &*types, &ty, wall, &mut scratch);
        let mut text = Vec::new();
        let kept = match made {
            Encoded::Text(lines) => {
                if enc.fragment.is_some() && lines.starts_with(br#"{"op":"fragment""#) {
                    self.fragment_ids += 1;
                    self.counters.inc(Counter::FragmentedOut);
                    let n = lines.iter().filter(|&&b| b == b'\n').count();
                    self.counters.add(Counter::FragmentFrames, n as u64);
                }
                framing.push_lines(&mut text, &lines);
                None
            }
            Encoded::Binary {
                bytes,
                tail,
                untyped,
            } => {
                if untyped {
                    self.counters.inc(Counter::CborUntyped);
                }
                // Header, head and payload straight into the shared frame.
                match framing.binary_shared([&bytes, tail]) {
                    Some(rc) => Some(rc),
                    None => {
                        self.counters.inc(Counter::EncodeFailed);
                        self.keep_scratch(scratch);
                        framed.keep_encoded(enc, framing, Vec::new());
                        return None;
                    }
                }
            }
            Encoded::Failed(_) => {
                self.counters.inc(Counter::EncodeFailed);
                self.keep_scratch(scratch);
                framed.keep_encoded(enc, framing, Vec::new());
                return None;
            }
        };
        self.keep_scratch(scratch);
        let out = match kept {
            Some(rc) => framed.keep_shared(enc, framing, rc),
            None => framed.keep_encoded(enc, framing, text),
        };
        let micros = match (started, self.cost_clock) {
            (Some(t0), Some(clock)) => clock().saturating_duration_since(t0).as_micros() as u64,
            _ => 0,
        };
        let counters = match enc.compression {
            Compression::None => None,
            Compression::Foxglove { .. } => Some((
                Counter::EncodedFoxgloveFrames,
                Counter::EncodedFoxgloveBytes,
                Counter::EncodedFoxgloveMicros,
            )),
            Compression::Cbor => Some((
                Counter::EncodedCborFrames,
                Counter::EncodedCborBytes,
                Counter::EncodedCborMicros,
            )),
            Compression::CborRaw => Some((
                Counter::EncodedCborRawFrames,
                Counter::EncodedCborRawBytes,
                Counter::EncodedCborRawMicros,
            )),
            Compression::Png => Some((
                Counter::EncodedPngFrames,
                Counter::EncodedPngBytes,
                Counter::EncodedPngMicros,
            )),
        };
        if let Some((frames, bytes, time)) = counters {
            self.counters.inc(frames);
            self.counters.add(bytes, out.len() as u64);
            self.counters.add(time, micros);
        }
        Some(out)
    }

    /// Puts the encoders' scratch buffer back for the next message, unless
    /// it grew past [`MAX_ENCODE_SCRATCH_BYTES`] (one huge message does
    /// not pin its size for good).
    fn keep_scratch(&mut self, scratch: Vec<u8>) {
        if scratch.capacity() <= MAX_ENCODE_SCRATCH_BYTES {
            self.encode_scratch = scratch;
        }
    }

    /// Frees the encoders' scratch buffer (an idle gateway's trim).
    pub(super) fn release_encode_scratch(&mut self) {
        self.encode_scratch = Vec::new();
    }
}
