//! One `cbor-raw` message frame from the gateway, read without copying:
//! `{"op":"publish","topic":T,"msg":{"secs":S,"nsecs":N,"bytes":CDR}}`
//! (docs/protocol.md, "Outgoing encodings"). Sans-io: bytes in, a view out.
//!
//! Accepted: definite-length maps with text keys, unsigned integers, text
//! and byte strings, a byte string under RFC 8746 tag 64 (uint8 typed
//! array). Anything else, or a missing member, is `None` (the recorder
//! counts it as unreadable rather than guessing).

/// A message as the recorder keeps it.
#[derive(Debug, PartialEq, Eq)]
pub struct RawMsg<'a> {
    pub topic: &'a str,
    /// The gateway's wall clock when it encoded the message, ns since the epoch.
    pub stamp_ns: u64,
    /// The CDR payload with its 4-byte encapsulation header.
    pub cdr: &'a [u8],
}

/// Reads one frame; `None` when it is not a `cbor-raw` publish.
pub fn parse(b: &[u8]) -> Option<RawMsg<'_>> {
    let mut r = Reader { b, i: 0 };
    let n = r.map_len()?;
    let (mut op, mut topic, mut msg) = (None, None, None);
    for _ in 0..n {
        match r.text()? {
            "op" => op = Some(r.text()?),
            "topic" => topic = Some(r.text()?),
            "msg" => msg = Some(r.msg()?),
            _ => r.skip(0)?,
        }
    }
    let (secs, nsecs, cdr) = msg?;
    if op? != "publish" || r.i != b.len() {
        return None;
    }
    Some(RawMsg {
        topic: topic?,
        stamp_ns: secs.checked_mul(1_000_000_000)?.checked_add(nsecs)?,
        cdr,
    })
}

/// Nesting the skipper follows before it gives up.
const MAX_FRAME_NESTING: usize = 16;

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64) -> Option<&'a [u8]> {
        let n = usize::try_from(n).ok()?;
        let s = self.b.get(self.i..self.i.checked_add(n)?)?;
        self.i += n;
        Some(s)
    }

    fn head(&mut self) -> Option<(u8, u64)> {
        let ib = *self.take(1)?.first()?;
        let (major, info) = (ib >> 5, ib & 31);
        let arg = match info {
            0..=23 => u64::from(info),
            24 => u64::from(*self.take(1)?.first()?),
            25 => u64::from(u16::from_be_bytes(self.take(2)?.try_into().ok()?)),
            26 => u64::from(u32::from_be_bytes(self.take(4)?.try_into().ok()?)),
            27 => u64::from_be_bytes(self.take(8)?.try_into().ok()?),
            _ => return None,
        };
        Some((major, arg))
    }

    fn map_len(&mut self) -> Option<u64> {
        match self.head()? {
            (5, n) => Some(n),
            _ => None,
        }
    }

    fn text(&mut self) -> Option<&'a str> {
        match self.head()? {
            (3, n) => std::str::from_utf8(self.take(n)?).ok(),
            _ => None,
        }
    }

    fn uint(&mut self) -> Option<u64> {
        match self.head()? {
            (0, n) => Some(n),
            _ => None,
        }
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        match self.head()? {
            (2, n) => self.take(n),
            (6, 64) => match self.head()? {
                (2, n) => self.take(n),
                _ => None,
            },
            _ => None,
        }
    }

    fn msg(&mut self) -> Option<(u64, u64, &'a [u8])> {
        let n = self.map_len()?;
        let (mut secs, mut nsecs, mut bytes) = (None, None, None);
        for _ in 0..n {
            match self.text()? {
                "secs" => secs = Some(self.uint()?),
                "nsecs" => nsecs = Some(self.uint()?),
                "bytes" => bytes = Some(self.bytes()?),
                _ => self.skip(0)?,
            }
        }
        Some((secs?, nsecs?, bytes?))
    }

    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_FRAME_NESTING {
            return None;
        }
        let (major, arg) = self.head()?;
        match major {
            0 | 1 | 7 => {}
            2 | 3 => {
                self.take(arg)?;
            }
            4 => {
                for _ in 0..arg {
                    self.skip(depth + 1)?;
                }
            }
            5 => {
                for _ in 0..arg.checked_mul(2)? {
                    self.skip(depth + 1)?;
                }
            }
            6 => self.skip(depth + 1)?,
            _ => return None,
        }
        Some(())
    }
}

/// `header.stamp` of a CDR message whose type starts with a
/// `std_msgs/Header` (`builtin_interfaces/Time`: int32 sec, uint32
/// nanosec, right after the 4-byte encapsulation header), in ns since the
/// epoch; `None` for a short payload or a negative time.
pub fn header_stamp(cdr: &[u8]) -> Option<u64> {
    let little = match cdr.get(..2)? {
        [0, 1] | [0, 3] => true,
        [0, 0] | [0, 2] => false,
        _ => return None,
    };
    let sec: [u8; 4] = cdr.get(4..8)?.try_into().ok()?;
    let nsec: [u8; 4] = cdr.get(8..12)?.try_into().ok()?;
    let (sec, nsec) = if little {
        (i32::from_le_bytes(sec), u32::from_le_bytes(nsec))
    } else {
        (i32::from_be_bytes(sec), u32::from_be_bytes(nsec))
    };
    let sec = u64::try_from(sec).ok()?;
    sec.checked_mul(1_000_000_000)?.checked_add(u64::from(nsec))
}

/// Whether a ros2msg definition's first field is a `std_msgs/Header`.
pub fn starts_with_header(definition: &str) -> bool {
    for line in definition.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let ty = line.split_whitespace().next().unwrap_or("");
        return matches!(ty, "std_msgs/Header" | "std_msgs/msg/Header" | "Header");
    }
    false
}

/// A definition as `.msg` files and rosbag2 write it: field types and
/// `MSG:` lines name nested types `pkg/Type`, not `pkg/msg/Type` (the
/// gateway's rosapi text). mcap-ros2-support's parser refuses the longer
/// form (`InvalidResourceName`); Foxglove's takes both.
pub fn msg_definition(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (lead, rest) = match line.strip_prefix("MSG: ") {
            Some(r) => ("MSG: ", r),
            None => ("", line),
        };
        out.push_str(lead);
        let end = rest
            .find(|c: char| c.is_whitespace() || c == '[')
            .unwrap_or(rest.len());
        let (ty, tail) = rest.split_at(end);
        let mut parts = ty.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(pkg), Some("msg"), Some(name), None)
                if !pkg.is_empty() && !pkg.starts_with('#') =>
            {
                out.push_str(pkg);
                out.push('/');
                out.push_str(name);
            }
            _ => out.push_str(ty),
        }
        out.push_str(tail);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(out: &mut Vec<u8>, s: &str) {
        out.push(0x60 | s.len() as u8);
        out.extend_from_slice(s.as_bytes());
    }

    fn frame(topic: &str, cdr: &[u8]) -> Vec<u8> {
        let mut b = vec![0xa3];
        text(&mut b, "op");
        text(&mut b, "publish");
        text(&mut b, "topic");
        text(&mut b, topic);
        text(&mut b, "msg");
        b.push(0xa3);
        text(&mut b, "secs");
        b.extend_from_slice(&[0x1a, 0x00, 0x00, 0x00, 0x02]);
        text(&mut b, "nsecs");
        b.push(0x05);
        text(&mut b, "bytes");
        b.push(0x40 | cdr.len() as u8);
        b.extend_from_slice(cdr);
        b
    }

    #[test]
    fn reads_a_frame() {
        let b = frame("/chatter", &[0, 1, 0, 0, 9]);
        let m = parse(&b).unwrap();
        assert_eq!(m.topic, "/chatter");
        assert_eq!(m.stamp_ns, 2_000_000_005);
        assert_eq!(m.cdr, &[0, 1, 0, 0, 9]);
    }

    #[test]
    fn refuses_truncated_and_trailing() {
        let b = frame("/chatter", &[0, 1, 0, 0, 9]);
        for n in 0..b.len() {
            assert!(parse(&b[..n]).is_none(), "{n}");
        }
        let mut long = b.clone();
        long.push(0);
        assert!(parse(&long).is_none());
    }

    #[test]
    fn definitions_in_msg_form() {
        let t = "std_msgs/msg/Header header\ngeometry_msgs/msg/Point[] p # a/msg/b\n\n===\nMSG: geometry_msgs/msg/Point\nfloat64 x 0.0\n";
        assert_eq!(
            msg_definition(t),
            "std_msgs/Header header\ngeometry_msgs/Point[] p # a/msg/b\n\n===\nMSG: geometry_msgs/Point\nfloat64 x 0.0\n"
        );
    }

    #[test]
    fn header_stamp_le_and_be() {
        let le = [0, 1, 0, 0, 7, 0, 0, 0, 9, 0, 0, 0];
        assert_eq!(header_stamp(&le), Some(7_000_000_009));
        let be = [0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 9];
        assert_eq!(header_stamp(&be), Some(7_000_000_009));
        assert_eq!(header_stamp(&le[..10]), None);
        assert!(starts_with_header("# c\nstd_msgs/Header header\nint32 x\n"));
        assert!(!starts_with_header("string data\n"));
    }
}
