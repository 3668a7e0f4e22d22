//! The decoder's hot path in a loop, to count its instructions with
//! callgrind (docs/performance.md, "A publish's path trimmed"):
//!
//! ```text
//! cargo build --release -p rosgate-wire --example decode_loop
//! valgrind --tool=callgrind target/release/examples/decode_loop 100000 MODE
//! ```
//!
//! MODE: `blanked` (default; what the hub does with a line), `as` (the
//! hub's former path: `memchr2` for CR/LF, then `decode_as`), `ws` (the
//! line as a masked client text frame through `WsReader`), `scan-line`,
//! `scan-array`, `scan-string` (the scanner alone). Divide the total by
//! the count (100000 here).
use std::hint::black_box;

use rosgate_wire::decode::{self, Dialect, Op, Request};

fn len(r: Result<Request<'_>, decode::DecodeError<'_>>) -> usize {
    match r {
        Ok(r) => match r.op {
            Op::Publish { topic, msg } => topic.len() + msg.get().len(),
            _ => 0,
        },
        Err(_) => 1,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let mode = args.next();
    let blanked = mode.as_deref() != Some("as");
    let line = br#"{"op":"publish","topic":"/bench/0","msg":{"p":0,"s":12345,"t":1733000000123456789,"d":"abcdefghijklmnopqrstuvwxyzA"}}"#;
    let mut acc = 0usize;
    if let Some(which) = mode.as_deref().and_then(|m| m.strip_prefix("scan-")) {
        // The scanner alone, on the publish line, a numeric array, a long string.
        let nums: Vec<String> = (0..100)
            .map(|i| format!("{}.{}", i * 7919 % 1000, i * 31 % 97))
            .collect();
        let text = match which {
            "array" => format!(
                r#"{{"op":"publish","topic":"/t","msg":{{"data":[{}]}}}}"#,
                nums.join(",")
            ),
            "string" => format!(
                r#"{{"op":"publish","topic":"/t","msg":{{"data":"{}"}}}}"#,
                "x".repeat(4096)
            ),
            _ => String::from_utf8(line.to_vec()).unwrap_or_default(),
        };
        for _ in 0..n {
            let _ =
                rosgate_wire::scan::scan_object(black_box(&text), 127, |m| acc += m.value.len());
        }
        println!("{} {}", text.len(), acc);
        return;
    }
    if mode.as_deref() == Some("ws") {
        // Masked client text frames of the line, read by the gateway's reader.
        let hs = b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
        let mask = [1u8, 2, 3, 4];
        let mut frame = vec![0x81, 0x80 | line.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(line.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        let mut r = rosgate_wire::ws::frame::WsReader::new();
        r.feed(hs, 1 << 20, |_| {});
        for _ in 0..n {
            r.feed(black_box(&frame), 1 << 20, |e| {
                if let rosgate_wire::ws::frame::WsEvent::Text(t) = e {
                    acc += t.len();
                }
            });
        }
        println!("{acc}");
        return;
    }
    for _ in 0..n {
        let line = black_box(&line[..]);
        if blanked {
            acc += decode::decode_blanked(line, Dialect::Strict, len);
        } else {
            acc += usize::from(memchr::memchr2(b'\n', b'\r', line).is_some());
            acc += len(decode::decode_as(line, Dialect::Strict));
        }
    }
    println!("{} {}", line.len(), acc);
}
