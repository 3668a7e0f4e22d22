//! Request-line decoding on realistic lines: the shipped decoder
//! (`rosgate_wire::decode`, the scanner in crates/wire/src/scan.rs with borrowed spans)
//! against simd-json, plus the cost of encoding the outgoing frame.
//!
//! Plain harness, no criterion: each case warms up (which also calibrates the
//! iteration count), then runs 5 timed rounds; the median is reported, with
//! the spread (max - min) / median of the rounds as a noise indicator.
//!
//! ```text
//! cargo bench --bench decode               # ~0.6 s per case, ~25 s in all
//! cargo bench --bench decode -- --quick    # ~60 ms per case, CI smoke run
//! cargo bench --bench decode -- cloud      # only cases whose name contains "cloud"
//! ```
//!
//! Decoders:
//! - `rosgate`: `rosgate_wire::decode::decode(line)`; yields op, names and
//!   the payload as a byte span of the line (what the hub forwards).
//! - `simd tape`: `simd_json::to_tape_with_buffers` with reused `Buffers`,
//!   including the copy of the line into a reused `Vec` (simd-json rewrites
//!   its input) and the look-up of op/name/payload in the tape. The tape
//!   gives no byte span for the payload: forwarding it would need a
//!   re-serialisation that is *not* counted here.
//! - `simd tape reuse`: simd-json's cheapest path, `fill_tape_padded` into a
//!   reused tape from a reused padded copy (skips simd-json's internal copy).
//! - `simd borrowed`: `simd_json::to_borrowed_value` on a copy of the line.
//! - `encode`: the outgoing frame, `encode::publish` (or
//!   `encode::call_service`) into a reused `Vec`; bytes are frame bytes.

use std::hint::black_box;
use std::io::Write as _;
use std::time::Duration;

use rosgate_wire::decode::{decode, Op, Request};
use rosgate_wire::encode;
use rosgate_wire::Raw;
use simd_json::prelude::*;
use simd_json::{Buffers, Tape};

mod harness;

use harness::{mb_per_s, Sample, Timer};

// ----- realistic lines -------------------------------------------------------

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [lo, hi).
    fn f64(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() >> 11) as f64 / (1u64 << 53) as f64 * (hi - lo)
    }
}

const HEADER: &str = r#"{"stamp":{"sec":1718031234,"nanosec":512345678},"frame_id":"base_link"}"#;

fn publish_line(topic: &str, msg: &str) -> Vec<u8> {
    format!(r#"{{"op":"publish","topic":"{topic}","msg":{msg}}}"#).into_bytes()
}

fn small_status() -> Vec<u8> {
    publish_line("/chatter", r#"{"data":"hello world #42"}"#)
}

fn call_service() -> Vec<u8> {
    br#"{"op":"call_service","id":"set_pose_call:1742","service":"/arm/set_pose","args":{"pose":{"position":{"x":0.4125,"y":-0.1875,"z":0.3},"orientation":{"x":0.0,"y":0.7071068,"z":0.0,"w":0.7071068}}},"timeout":2.5}"#.to_vec()
}

/// geometry_msgs/PoseArray (an AMCL particle cloud), full f64 precision as
/// rosbridge prints it; as many poses as keep the line closest to 1 KiB.
fn pose_array(target: usize) -> Vec<u8> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut poses: Vec<String> = Vec::new();
    let mut best = Vec::new();
    loop {
        let yaw = rng.f64(-std::f64::consts::PI, std::f64::consts::PI);
        poses.push(format!(
            r#"{{"position":{{"x":{},"y":{},"z":0.0}},"orientation":{{"x":0.0,"y":0.0,"z":{},"w":{}}}}}"#,
            rng.f64(-5.0, 5.0),
            rng.f64(-5.0, 5.0),
            (yaw / 2.0).sin(),
            (yaw / 2.0).cos()
        ));
        let line = publish_line(
            "/particlecloud",
            &format!(r#"{{"header":{HEADER},"poses":[{}]}}"#, poses.join(",")),
        );
        if line.len().abs_diff(target) > best.len().abs_diff(target) && !best.is_empty() {
            return best;
        }
        best = line;
    }
}

/// Points of a small scene for the point clouds (x, y, z as f32).
fn cloud_points(n: usize) -> Vec<[f32; 3]> {
    let mut rng = Rng(0xd1b5_4a32_d192_ed03);
    (0..n)
        .map(|_| {
            [
                rng.f64(0.2, 12.0) as f32,
                rng.f64(-6.0, 6.0) as f32,
                rng.f64(-0.5, 2.5) as f32,
            ]
        })
        .collect()
}

/// sensor_msgs/PointCloud2 with `data` (uint8[]) as a JSON array of numbers,
/// as roslibjs-style clients send it; as many points as reach `target` bytes.
fn cloud_u8(target: usize) -> Vec<u8> {
    let fields = r#"[{"name":"x","offset":0,"datatype":7,"count":1},{"name":"y","offset":4,"datatype":7,"count":1},{"name":"z","offset":8,"datatype":7,"count":1}]"#;
    let build = |pts: &[[f32; 3]]| {
        let data: Vec<String> = pts
            .iter()
            .flat_map(|p| p.iter().flat_map(|c| c.to_le_bytes()))
            .map(|b| b.to_string())
            .collect();
        let msg = format!(
            r#"{{"header":{HEADER},"height":1,"width":{},"fields":{fields},"is_bigendian":false,"point_step":12,"row_step":{},"data":[{}],"is_dense":true}}"#,
            pts.len(),
            pts.len() * 12,
            data.join(",")
        );
        publish_line("/points", &msg)
    };
    let per_point = build(&cloud_points(2)).len() - build(&cloud_points(1)).len();
    let n = target.saturating_sub(build(&[]).len()) / per_point;
    build(&cloud_points(n.max(1)))
}

/// The same kind of cloud as a flat array of f32 numbers (x, y, z, ...).
fn cloud_f32(target: usize) -> Vec<u8> {
    let build = |pts: &[[f32; 3]]| {
        let xyz: Vec<String> = pts.iter().flatten().map(|c| c.to_string()).collect();
        let msg = format!(
            r#"{{"header":{HEADER},"frame":"xyz","points":[{}]}}"#,
            xyz.join(",")
        );
        publish_line("/points_xyz", &msg)
    };
    // Number lengths vary: estimate, then correct once on the real line.
    let per_point = build(&cloud_points(1000)).len() as f64 / 1000.0;
    let n = (target as f64 / per_point) as usize;
    let len = build(&cloud_points(n)).len();
    build(&cloud_points(n * target / len))
}

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for c in data.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            out.push(if i <= c.len() {
                A[(n >> shift & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// sensor_msgs/CompressedImage with `data` as base64 (rosbridge's encoding
/// of uint8[]), line length close to `target`.
fn image_base64(target: usize) -> Vec<u8> {
    let build = |raw: usize| {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let bytes: Vec<u8> = (0..raw).map(|_| rng.next() as u8).collect();
        let msg = format!(
            r#"{{"header":{HEADER},"format":"jpeg","data":"{}"}}"#,
            base64(&bytes)
        );
        publish_line("/camera/image_raw/compressed", &msg)
    };
    let overhead = build(0).len();
    build(target.saturating_sub(overhead) / 4 * 3)
}

// ----- decoders --------------------------------------------------------------

/// The name member of the ops benchmarked here.
fn name_key(line: &[u8]) -> &'static str {
    if line.starts_with(br#"{"op":"call_service""#) {
        "service"
    } else {
        "topic"
    }
}

fn payload_key(line: &[u8]) -> &'static str {
    if line.starts_with(br#"{"op":"call_service""#) {
        "args"
    } else {
        "msg"
    }
}

/// The shipped decoder. Returns name and payload lengths.
fn rosgate_decode(line: &[u8]) -> (usize, usize) {
    match decode(line) {
        Ok(Request {
            op: Op::Publish { topic, msg },
            ..
        }) => (topic.len(), msg.get().len()),
        Ok(Request {
            op: Op::CallService { service, args, .. },
            ..
        }) => (service.len(), args.map_or(0, |a| a.get().len())),
        Ok(r) => panic!("unexpected op {}", r.op.name()),
        Err(e) => panic!("decode failed: {e}"),
    }
}

/// The previous decoder, kept for comparison: serde_json deserializing the
/// line into borrowed `&RawValue` members with a map visitor (what
/// `rosgate_wire::decode` did before `scan`). Returns the topic or
/// service name length and the payload length, like `rosgate_decode`.
fn serde_raw_decode(line: &[u8]) -> (usize, usize) {
    use serde::de::{Deserializer, MapAccess, Visitor};
    use serde_json::value::RawValue;

    struct Members<'a>(Vec<(std::borrow::Cow<'a, str>, &'a RawValue)>);
    struct V;
    impl<'de> Visitor<'de> for V {
        type Value = Members<'de>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
            let mut out = Vec::with_capacity(8);
            while let Some(k) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                out.push((k, map.next_value::<&'de RawValue>()?));
            }
            Ok(Members(out))
        }
    }
    let text = std::str::from_utf8(line).expect("utf8");
    let mut de = serde_json::Deserializer::from_str(text);
    let m = (&mut de).deserialize_map(V).expect("valid line");
    let get = |k: &str| {
        let mut found = None;
        for (n, v) in &m.0 {
            if n == k {
                found = Some(v.get());
            }
        }
        found
    };
    let name = get("topic").or(get("service")).map_or(0, |n| n.len() - 2);
    let payload = get("msg").or(get("args")).map_or(0, str::len);
    (name, payload)
}

/// `to_tape_with_buffers` on a copy in a reused `Vec`.
struct SimdTape {
    copy: Vec<u8>,
    buffers: Buffers,
}

impl SimdTape {
    fn new() -> Self {
        SimdTape {
            copy: Vec::new(),
            buffers: Buffers::default(),
        }
    }

    /// Returns op, name lengths and the payload's tape node count.
    fn run(&mut self, line: &[u8]) -> (usize, usize, bool) {
        let (name, payload) = (name_key(line), payload_key(line));
        self.copy.clear();
        self.copy.extend_from_slice(line);
        let tape =
            simd_json::to_tape_with_buffers(&mut self.copy, &mut self.buffers).expect("valid JSON");
        let v = tape.as_value();
        let op = v.get("op").and_then(|o| o.into_string()).expect("op");
        let name = v.get(name).and_then(|n| n.into_string()).expect("name");
        (op.len(), name.len(), v.get(payload).is_some())
    }
}

/// `fill_tape_padded` into a reused tape from a reused padded copy.
struct SimdTapeReuse {
    copy: Vec<u8>,
    buffers: Buffers,
    tape: Option<Tape<'static>>,
}

impl SimdTapeReuse {
    fn new() -> Self {
        SimdTapeReuse {
            copy: Vec::new(),
            buffers: Buffers::default(),
            tape: Some(Tape::null()),
        }
    }

    fn run(&mut self, line: &[u8]) -> (usize, usize, bool) {
        let (name, payload) = (name_key(line), payload_key(line));
        self.copy.clear();
        self.copy.extend_from_slice(line);
        self.copy
            .resize(line.len() + simd_json::INPUT_PADDING, b' ');
        let mut tape = self.tape.take().unwrap_or_else(Tape::null).reset();
        simd_json::fill_tape_padded(&mut self.copy, line.len(), &mut self.buffers, &mut tape)
            .expect("valid JSON");
        let v = tape.as_value();
        let op = v.get("op").and_then(|o| o.into_string()).expect("op");
        let name = v.get(name).and_then(|n| n.into_string()).expect("name");
        let out = (op.len(), name.len(), v.get(payload).is_some());
        self.tape = Some(tape.reset());
        out
    }
}

/// `to_borrowed_value` on a copy in a reused `Vec`.
struct SimdBorrowed {
    copy: Vec<u8>,
}

impl SimdBorrowed {
    fn run(&mut self, line: &[u8]) -> (usize, usize, bool) {
        let (name, payload) = (name_key(line), payload_key(line));
        self.copy.clear();
        self.copy.extend_from_slice(line);
        let v = simd_json::to_borrowed_value(&mut self.copy).expect("valid JSON");
        let op = v.get("op").and_then(|o| o.as_str()).expect("op").len();
        let name = v.get(name).and_then(|n| n.as_str()).expect("name").len();
        (op, name, v.get(payload).is_some())
    }
}

/// An outgoing frame built from a decoded request, as the hub builds it.
enum Frame<'a> {
    /// The topic's cached prefix and the raw message.
    Publish(Box<[u8]>, Raw<'a>),
    /// A call forwarded to its provider, with the raw arguments.
    Call(&'a str),
}

impl Frame<'_> {
    fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        match self {
            Frame::Publish(prefix, msg) => encode::publish(out, prefix, *msg),
            Frame::Call(args) => encode::call_service(out, br#""/arm/set_pose""#, 1742, args),
        }
    }
}

// ----- main ------------------------------------------------------------------

struct Case {
    name: &'static str,
    what: &'static str,
    line: Vec<u8>,
}

fn main() {
    let (timer, filters) = Timer::from_args(Duration::from_millis(100));
    let cases = [
        Case {
            name: "small",
            what: "std_msgs/String status",
            line: small_status(),
        },
        Case {
            name: "call",
            what: "call_service with a pose",
            line: call_service(),
        },
        Case {
            name: "pose_array",
            what: "geometry_msgs/PoseArray ~1 KiB",
            line: pose_array(1024),
        },
        Case {
            name: "cloud_u8",
            what: "PointCloud2 ~100 KiB, data as u8 numbers",
            line: cloud_u8(100 * 1024),
        },
        Case {
            name: "cloud_f32",
            what: "point cloud ~100 KiB as f32 numbers",
            line: cloud_f32(100 * 1024),
        },
        Case {
            name: "image",
            what: "CompressedImage ~1 MiB, data as base64",
            line: image_base64(1024 * 1024),
        },
    ];
    let cases: Vec<&Case> = cases
        .iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f.as_str())))
        .collect();

    println!(
        "rosgate decode bench: median of {} rounds of ~{:?} after ~{:?} warm-up; \
         min = fastest round; spread = (max-min)/median",
        timer.rounds, timer.round, timer.warmup
    );
    for c in &cases {
        println!("  {:<11} {:>9} B  {}", c.name, c.line.len(), c.what);
    }
    println!();
    println!(
        "{:<11} {:>9}  {:<16} {:>10} {:>10} {:>9} {:>9} {:>7}",
        "case", "bytes", "decoder", "ns/line", "min ns", "MB/s", "vs rosgate", "spread"
    );

    let mut tape = SimdTape::new();
    let mut reuse = SimdTapeReuse::new();
    let mut borrowed = SimdBorrowed { copy: Vec::new() };
    let mut out = Vec::new();
    for c in &cases {
        let line = &c.line[..];
        // Every decoder must accept the line and agree on the name.
        let (name_len, payload_len) = rosgate_decode(line);
        assert_eq!(serde_raw_decode(line), (name_len, payload_len));
        assert_eq!(tape.run(line).1, name_len);
        assert_eq!(reuse.run(line).1, name_len);
        assert_eq!(borrowed.run(line).1, name_len);
        assert!(payload_len > 0);

        let row = |decoder: &str, bytes: usize, s: &Sample, base: f64| {
            println!(
                "{:<11} {:>9}  {:<16} {:>10.0} {:>10.0} {:>9.0} {:>9.2}x {:>6.1}%",
                c.name,
                bytes,
                decoder,
                s.ns,
                s.min,
                mb_per_s(bytes, s.ns),
                s.ns / base,
                s.spread * 100.0
            );
            std::io::stdout().flush().ok();
        };
        let base = timer.measure(|| {
            black_box(rosgate_decode(black_box(line)));
        });
        row("rosgate", line.len(), &base, base.ns);
        let s = timer.measure(|| {
            black_box(serde_raw_decode(black_box(line)));
        });
        row("serde RawValue", line.len(), &s, base.ns);
        let s = timer.measure(|| {
            black_box(tape.run(black_box(line)));
        });
        row("simd tape", line.len(), &s, base.ns);
        let s = timer.measure(|| {
            black_box(reuse.run(black_box(line)));
        });
        row("simd tape reuse", line.len(), &s, base.ns);
        let s = timer.measure(|| {
            black_box(borrowed.run(black_box(line)));
        });
        row("simd borrowed", line.len(), &s, base.ns);

        // Encoding the outgoing frame from the decoded request.
        let req = decode(line).expect("decoded above");
        let frame = match &req.op {
            Op::Publish { topic, msg } => Frame::Publish(encode::publish_prefix(topic), *msg),
            Op::CallService { args, .. } => Frame::Call(args.map_or("{}", |a| a.get())),
            other => panic!("unexpected op {}", other.name()),
        };
        frame.encode(&mut out);
        let frame_len = out.len();
        let s = timer.measure(|| {
            black_box(&frame).encode(&mut out);
            black_box(&out);
        });
        row("encode", frame_len, &s, base.ns);
    }
}
