//! A client's `publish` of raw CDR: `"msg": {"bytes": <CDR>}`, decoded
//! once to rosbridge's JSON by the topic's declared type, then routed as
//! if the client had sent that JSON (`Hub::route`: type check, batch,
//! bridges).
//!
//! rosbridge's `publish` takes only JSON (rosbridge_library's
//! `capabilities/publish.py` hands `msg` to `message_conversion`, which
//! refuses a key the type does not have); its raw form exists only the
//! other way, a `cbor-raw` subscription's `{"bytes", "secs", "nsecs"}`
//! (`capabilities/subscribe.py`). This is its mirror, a rosgate
//! extension chosen so that every publish rosbridge accepts means the same
//! here:
//! - `msg` is raw only when its one member is `bytes` and the topic's type
//!   has no field of that name (a message of a type with a `bytes` field
//!   is an ordinary message, as rosbridge reads it);
//! - the bytes are base64 text or a list of integers 0-255, as rosbridge
//!   writes `uint8[]` (`rosgate_ros2::cdr::octets`); a whole CDR payload,
//!   its 4-byte encapsulation header included (docs/rmw_zenoh.md);
//! - the type is the topic's, as advertised or subscribed
//!   (`Registry`'s topic type), looked up in the types the hub knows
//!   (`hub/types.rs`); bytes that are not CDR of the type: an error
//!   status with the request's id naming the topic and type
//!   (`bad_cdr`), nothing delivered;
//! - a topic without a type, or of a type the gateway does not know,
//!   cannot say whether `bytes` is one of its fields: its message is
//!   relayed as the JSON it is, as it always was (untyped topics carry
//!   any JSON; docs/protocol.md, "Raw CDR publish").
//!
//! Invariants: the check on the publish hot path is a prefix test of the
//! message's text (`maybe_cdr`); everything else runs only for messages
//! that start `{"bytes"`; decoding is bounded by the line limit and
//! `rosgate_ros2::cdr`'s own bounds.

use std::time::Instant;

use rosgate_wire::Raw;
use serde_json::{Map, Value};

use super::topics::Origin;
use super::Hub;
use crate::counters::{Counter, ErrorCode};
use crate::nodes::Domain;

/// The one member that makes a message raw CDR.
const BYTES: &str = "bytes";

/// Whether `msg` may be raw CDR: an object whose first member is `bytes`
/// (on every publish: one 8-byte comparison for nearly every message,
/// `{"bytes"` being 8 bytes; whitespace after the brace is looked at out
/// of line).
#[inline(always)]
pub(super) fn maybe_cdr(msg: Raw<'_>) -> bool {
    let b = msg.get().as_bytes();
    let Some(head) = b.first_chunk::<8>() else {
        return false;
    };
    // Nearly every message: `{"` and its first key.
    if head[1] == b'"' {
        return head == b"{\"bytes\"";
    }
    head[0] == b'{' && spaced_cdr(b)
}

/// [`maybe_cdr`] of `{` and whitespace.
#[cold]
#[inline(never)]
fn spaced_cdr(b: &[u8]) -> bool {
    let rest = &b[1..];
    let i = rest
        .iter()
        .position(|c| !matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        .unwrap_or(rest.len());
    rest[i..].starts_with(b"\"bytes\"")
}

impl Hub {
    /// Routes a client's publish, decoding it first when it is raw CDR.
    pub(super) fn route_publish(
        &mut self,
        origin: Origin<'_>,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        now: Instant,
    ) {
        if maybe_cdr(msg) {
            return self.route_cdr(origin, domain, topic, msg, now);
        }
        self.route(origin, domain, topic, msg, now)
    }

    /// [`Hub::route_publish`] of a message that starts `{"bytes"`.
    #[cold]
    #[inline(never)]
    pub(super) fn route_cdr(
        &mut self,
        origin: Origin<'_>,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
        now: Instant,
    ) {
        match self.cdr_to_json(domain, topic, msg) {
            Ok(None) => self.route(origin, domain, topic, msg, now),
            Ok(Some((json, cdr))) => {
                self.counters.inc(Counter::CdrPublished);
                // The client's CDR goes with its JSON: a bridge carries it
                // to ROS 2, `cbor-raw` and Foxglove subscribers get it,
                // all untouched (`route_with_cdr`).
                let cdr: std::rc::Rc<[u8]> = std::rc::Rc::from(cdr);
                let json = Raw::from_valid_json(&json);
                self.route_with_cdr(origin, domain, topic, json, Some(&cdr), now)
            }
            Err(why) => {
                if let Origin::Client { conn, id } = origin {
                    self.error_with_id(conn, ErrorCode::BadCdr, &why, id, now);
                }
            }
        }
    }

    /// The JSON of a raw CDR message, with its bytes; `Ok(None)` when `msg`
    /// is an ordinary message after all; `Err` with the error status's
    /// text.
    fn cdr_to_json(
        &self,
        domain: Domain,
        topic: &str,
        msg: Raw<'_>,
    ) -> Result<Option<(String, Vec<u8>)>, String> {
        let Ok(mut members) = serde_json::from_str::<Map<String, Value>>(msg.get()) else {
            return Ok(None);
        };
        if members.len() != 1 {
            return Ok(None);
        }
        let Some(bytes) = members.remove(BYTES) else {
            return Ok(None);
        };
        let reg = &self.registries[domain as usize];
        let ty = reg
            .topic_id(topic)
            .and_then(|t| reg.topic(t))
            .map(|e| e.ty())
            .unwrap_or_default();
        // Without a type the gateway knows, `bytes` may be one of the
        // type's fields: the message is relayed as the JSON it is, as
        // before raw CDR existed (a topic of no type, or of a type known
        // only to its peers, is untyped JSON to rosgate).
        let types = self.types();
        let Some(def) = types.msg(ty) else {
            return Ok(None);
        };
        if def.fields.iter().any(|f| f.name == BYTES) {
            return Ok(None);
        }
        // Named in full from here (`std_msgs/String` is
        // `std_msgs/msg/String`).
        let ty = def.name.as_str();
        let Some(cdr) = rosgate_ros2::cdr::octets(&bytes) else {
            return Err(format!(
                "publish on {topic}: \"bytes\" must be base64 text or a list of integers \
                 0-255 (CDR of {ty})"
            ));
        };
        let mut out = Vec::with_capacity(cdr.len() * 2 + 16);
        rosgate_ros2::cdr::decode_json(&**types, ty, &cdr, &mut out)
            .map_err(|e| format!("publish on {topic}: the bytes are not CDR of {ty}: {e}"))?;
        String::from_utf8(out)
            .map(|json| Some((json, cdr)))
            .map_err(|_| format!("publish on {topic}: the bytes are not CDR of {ty}"))
    }
}

#[cfg(test)]
mod tests {
    use super::maybe_cdr;
    use rosgate_wire::Raw;

    #[test]
    fn raw_cdr_is_told_by_its_first_key_whitespace_or_not() {
        for (msg, cdr) in [
            (r#"{"bytes":"AAE="}"#, true),
            ("{ \n\t\"bytes\" : \"AAE=\"}", true),
            (r#"{"bytesx":1}"#, false),
            (r#"{"data":"bytes"}"#, false),
            ("{ \"byte\":1}", false),
            ("{}", false),
            ("{ ", false),
            ("[1]", false),
        ] {
            assert_eq!(maybe_cdr(Raw::from_valid_json(msg)), cdr, "{msg}");
        }
    }
}
