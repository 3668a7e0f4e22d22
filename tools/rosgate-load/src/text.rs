//! The `strings` scenario's message: a `std_msgs/msg/String` whose `data`
//! carries its own send stamp and sequence number, as the tool's publisher
//! writes it and as a WebSocket subscriber receives it back (rosbridge
//! JSON).
//!
//! What it owns: the layout of `data` and its decoder.
//!
//! Invariants:
//! - `data` is `"<send ns> <seq> "` followed by padding: two decimal
//!   numbers, each followed by one space; the send time is ns on the run's
//!   clock (the wall clock, `CLOCK_REALTIME`, for an outside publisher:
//!   Python's `time.time_ns()`), the sequence number counts from any start
//!   by one per message. The padding is printable ASCII without `"` or `\`
//!   (the tool writes `x`); it is not checked, only the two numbers are,
//!   so any publisher can produce the message with one format string;
//! - a decoder never panics on what the gateway sends: anything off is a
//!   [`Bad`] with the reason.

use serde::Deserialize;

use crate::image::{leading_u64, Bad, Encoding, Seen};
use crate::payload::push_u64;

/// The ROS type the publisher advertises and subscribers name.
pub const STRING_TYPE: &str = "std_msgs/msg/String";

/// A string message of one topic, `size` bytes of `data` (or the bare
/// stamp and sequence number, if longer).
#[derive(Debug, Clone)]
pub struct Text {
    pub topic: String,
    pub size: usize,
}

impl Text {
    pub fn new(topic: &str, size: usize) -> Self {
        Text {
            topic: topic.to_string(),
            size,
        }
    }

    /// Appends the publisher's TCP line: a rosbridge `publish` of
    /// `{"data":"<stamp_ns> <seq> xxx..."}`.
    pub fn publish_line(&self, out: &mut Vec<u8>, seq: u64, stamp_ns: u64) {
        out.extend_from_slice(b"{\"op\":\"publish\",\"topic\":\"");
        out.extend_from_slice(self.topic.as_bytes());
        out.extend_from_slice(b"\",\"msg\":{\"data\":\"");
        let at = out.len();
        push_u64(out, stamp_ns);
        out.push(b' ');
        push_u64(out, seq);
        out.push(b' ');
        let used = out.len() - at;
        out.resize(out.len() + self.size.saturating_sub(used), b'x');
        out.extend_from_slice(b"\"}}\n");
    }

    /// Bytes of one publish line.
    pub fn line_len_hint(&self) -> usize {
        self.size + 96 + self.topic.len()
    }

    /// Decodes a text frame (rosbridge JSON).
    pub fn decode_text(&self, frame: &[u8]) -> Result<Seen, Bad> {
        let (stamp_ns, seq) = match self.fast_json(frame) {
            Some(v) => v,
            None => self.slow_json(frame)?,
        };
        Ok(Seen {
            seq,
            stamp_ns,
            encoding: Encoding::Json,
        })
    }

    /// The frame as the gateway writes a String publish
    /// (`{"op":"publish","topic":..,"msg":{"data":..}}`,
    /// crates/wire/src/encode.rs): the two numbers found by position.
    fn fast_json(&self, f: &[u8]) -> Option<(u64, u64)> {
        let rest = f.strip_prefix(b"{\"op\":\"publish\",\"topic\":\"")?;
        let rest = rest.strip_prefix(self.topic.as_bytes())?;
        let rest = rest.strip_prefix(b"\",\"msg\":{\"data\":\"")?;
        let (stamp, seq, rest) = numbers(rest)?;
        // The padding must end the string and the frame.
        rest.strip_suffix(b"\"}}")?;
        Some((stamp, seq))
    }

    /// The frame parsed properly: any key order or whitespace.
    fn slow_json(&self, frame: &[u8]) -> Result<(u64, u64), Bad> {
        #[derive(Deserialize)]
        struct Frame {
            op: String,
            topic: String,
            msg: Msg,
        }
        #[derive(Deserialize)]
        struct Msg {
            data: String,
        }
        let f: Frame = serde_json::from_slice(frame)
            .map_err(|e| Bad(format!("text frame is not a String publish: {e}")))?;
        if f.op != "publish" || f.topic != self.topic {
            return Err(Bad(format!("text frame: op {} on {}", f.op, f.topic)));
        }
        match numbers(f.msg.data.as_bytes()) {
            Some((stamp, seq, _)) => Ok((stamp, seq)),
            None => Err(Bad(format!(
                "data {:?} does not start with \"<send ns> <seq> \"",
                f.msg.data.chars().take(48).collect::<String>()
            ))),
        }
    }
}

/// `"<stamp> <seq> "` at the start of `b`, and what follows.
fn numbers(b: &[u8]) -> Option<(u64, u64, &[u8])> {
    let (stamp, rest) = leading_u64(b)?;
    let rest = rest.strip_prefix(b" ")?;
    let (seq, rest) = leading_u64(rest)?;
    let rest = rest.strip_prefix(b" ")?;
    Some((stamp, seq, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(t: &Text, seq: u64, stamp: u64) -> Vec<u8> {
        let mut line = Vec::new();
        t.publish_line(&mut line, seq, stamp);
        // The gateway frames the message verbatim: the publish line
        // without its newline is the frame.
        line.pop();
        line
    }

    #[test]
    fn the_publish_line_decodes_and_has_its_size() {
        let t = Text::new("/bench/str", 64);
        let f = frame(&t, 7, 1_700_000_000_123_456_789);
        let v: serde_json::Value = serde_json::from_slice(&f).expect("json");
        assert_eq!(v["msg"]["data"].as_str().map(str::len), Some(64));
        assert_eq!(
            t.decode_text(&f),
            Ok(Seen {
                seq: 7,
                stamp_ns: 1_700_000_000_123_456_789,
                encoding: Encoding::Json
            })
        );
        assert_eq!(t.fast_json(&f), Some((1_700_000_000_123_456_789, 7)));
    }

    #[test]
    fn other_layouts_take_the_slow_path_and_bad_ones_fail() {
        let t = Text::new("/s", 8);
        let f = br#"{"topic":"/s","op":"publish","msg":{"data":"12 3 pad"}}"#;
        assert_eq!(t.fast_json(f), None);
        assert_eq!(t.decode_text(f).map(|s| (s.seq, s.stamp_ns)), Ok((3, 12)));
        for bad in [
            &br#"{"op":"publish","topic":"/s","msg":{"data":"12 x "}}"#[..],
            br#"{"op":"publish","topic":"/other","msg":{"data":"12 3 "}}"#,
            br#"{"op":"publish","topic":"/s","msg":{"data":"12 3"}}"#,
            br#"{"op":"publish","topic":"/s","msg":{}}"#,
            b"not json",
            b"",
        ] {
            assert!(
                t.decode_text(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
