//! Fan-out cost inside the sans-io core, without sockets.
//!
//! One publisher and N subscribers on one topic of a `rosgate_core::Hub`.
//! Each timed iteration feeds a batch of publish lines to the publisher in a
//! single `on_bytes` call, then drains every dirty subscriber's queue the way
//! the shell does (`take_dirty`, `out(key).fill`, `wrote`) as if every write
//! succeeded in full ("perfect writers": no bytes are copied anywhere).
//! What is measured is the core: line framing, decode once, encode once,
//! one `Rc` clone + queue push per subscriber, and the queue pop on drain.
//!
//! Plain harness, no criterion: warm-up (which calibrates the iteration
//! count), then 5 timed rounds; the median is reported with the spread
//! (max - min) / median of the rounds as a noise indicator.
//!
//! ```text
//! cargo bench --bench fanout               # ~1.2 s per case, ~10 s in all
//! cargo bench --bench fanout -- --quick    # ~120 ms per case, CI smoke run
//! ```

use std::hint::black_box;
use std::io::{IoSlice, Write as _};
use std::time::{Duration, Instant};

use rosgate_core::counters::Counter;
use rosgate_core::out::MAX_IOVECS;
use rosgate_core::Hub;
use rosgate_core::Limits;

mod harness;

use harness::Timer;

// ----- the core under test ---------------------------------------------------

const TOPIC: &str = "/bench";
/// Publish lines fed per `on_bytes` call (and per timed iteration).
const BATCH: usize = 64;

/// A hub with one publisher and `subs` subscribers on [`TOPIC`], all
/// set-up output (status frames) already drained.
struct Bench {
    hub: Hub,
    publisher: u32,
    subscribers: Vec<u32>,
    dirty: Vec<u32>,
    now: Instant,
}

impl Bench {
    fn new(subs: usize) -> Self {
        let now = Instant::now();
        let mut hub = Hub::new(Limits::default(), now);
        let publisher = hub.open(now).expect("publisher admitted").key;
        let advertise =
            format!(r#"{{"op":"advertise","topic":"{TOPIC}","type":"std_msgs/String"}}"#);
        hub.on_bytes(publisher, format!("{advertise}\n").as_bytes(), now);
        let subscribe =
            format!(r#"{{"op":"subscribe","topic":"{TOPIC}","type":"std_msgs/String"}}"#);
        let subscribers = (0..subs)
            .map(|_| {
                let key = hub.open(now).expect("subscriber admitted").key;
                hub.on_bytes(key, format!("{subscribe}\n").as_bytes(), now);
                key
            })
            .collect();
        let mut b = Bench {
            hub,
            publisher,
            subscribers,
            dirty: Vec::new(),
            now,
        };
        b.drain(|_, _| {});
        assert_eq!(b.hub.inspect().registry().topic_count(), 1);
        b
    }

    /// Writes out every dirty connection's queue in full; `seen` gets each
    /// connection's bytes as they would be written. Returns bytes drained.
    fn drain(&mut self, mut seen: impl FnMut(u32, &[u8])) -> usize {
        let now = self.now;
        self.hub.take_dirty(&mut self.dirty);
        let mut total = 0;
        for &key in &self.dirty {
            loop {
                let n = {
                    let Some(q) = self.hub.out(key) else { break };
                    if q.is_empty() {
                        break;
                    }
                    let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
                    let used = q.fill(&mut iov, usize::MAX);
                    iov[..used]
                        .iter()
                        .map(|s| {
                            seen(key, s);
                            s.len()
                        })
                        .sum()
                };
                self.hub.wrote(key, n, now);
                total += n;
            }
        }
        total
    }

    /// One timed iteration: a batch of publishes, then a full drain.
    fn step(&mut self, batch: &[u8]) -> usize {
        self.hub.on_bytes(self.publisher, batch, self.now);
        self.drain(|_, _| {})
    }
}

/// A publish line whose `msg` is `{"data":"..."}` of exactly `msg_len` bytes.
fn publish_line(msg_len: usize, seq: usize) -> String {
    let fill = msg_len - r#"{"data":""}"#.len();
    let text: String = format!("sample {seq} ")
        .chars()
        .chain("abcdefghijklmnopqrstuvwxyz0123456789".chars().cycle())
        .take(fill)
        .collect();
    format!(r#"{{"op":"publish","topic":"{TOPIC}","msg":{{"data":"{text}"}}}}"#)
}

/// Checks that one batch reaches every subscriber whole and in order.
fn check(b: &mut Bench, lines: &[String], batch: &[u8]) {
    let before = b.hub.counters().get(Counter::Delivered);
    b.hub.on_bytes(b.publisher, batch, b.now);
    let mut got = vec![Vec::new(); b.subscribers.len()];
    let subs = b.subscribers.clone();
    b.drain(|key, bytes| {
        let i = subs
            .iter()
            .position(|&s| s == key)
            .expect("only subscribers get output");
        got[i].extend_from_slice(bytes);
    });
    let expected: String = lines.iter().map(|l| format!("{l}\n")).collect();
    for g in &got {
        assert_eq!(g, expected.as_bytes());
    }
    let delivered = b.hub.counters().get(Counter::Delivered) - before;
    assert_eq!(delivered as usize, lines.len() * b.subscribers.len());
}

fn main() {
    let (timer, _) = Timer::from_args(Duration::from_millis(200));
    println!(
        "rosgate fan-out bench (sans-io core, perfect writers): {BATCH} publishes per on_bytes; \
         median of {} rounds of ~{:?} after ~{:?} warm-up; min = fastest round; \
         spread = (max-min)/median",
        timer.rounds, timer.round, timer.warmup
    );
    println!(
        "{:>6} {:>6} {:>7} {:>5}  {:>11} {:>11} {:>13} {:>14} {:>10} {:>7}",
        "msg B",
        "line B",
        "frame B",
        "subs",
        "ns/publish",
        "min ns/pub",
        "ns/delivered",
        "delivered/s",
        "out MB/s",
        "spread"
    );
    for msg_len in [64, 1024] {
        let lines: Vec<String> = (0..BATCH).map(|i| publish_line(msg_len, i)).collect();
        let batch: Vec<u8> = lines
            .iter()
            .flat_map(|l| l.bytes().chain([b'\n']))
            .collect();
        // The frame a subscriber gets is the publish line, re-encoded.
        let frame_len = lines[0].len() + 1;
        let mut per_publish = Vec::new();
        for subs in [0, 1, 16, 256] {
            let mut b = Bench::new(subs);
            check(&mut b, &lines, &batch);
            let published = b.hub.counters().get(Counter::Published);
            let mut iterations = 0u64;
            let s = timer.measure(|| {
                black_box(b.step(black_box(&batch)));
                iterations += 1;
            });
            // Everything published was delivered, nothing was dropped.
            let stats = b.hub.counters();
            assert_eq!(
                stats.get(Counter::Published) - published,
                iterations * BATCH as u64
            );
            assert_eq!(stats.get(Counter::Dropped), 0);
            assert!(b
                .subscribers
                .iter()
                .all(|&k| b.hub.out(k).is_some_and(|q| q.is_empty())));

            let ns_publish = s.ns / BATCH as f64;
            let deliveries = (BATCH * subs) as f64;
            let (ns_delivered, per_sec, mb_s) = if subs == 0 {
                ("-".to_string(), "-".to_string(), "-".to_string())
            } else {
                let ns = s.ns / deliveries;
                (
                    format!("{ns:.1}"),
                    format!("{:.0}", 1e9 / ns),
                    format!("{:.0}", frame_len as f64 / ns * 1e3),
                )
            };
            println!(
                "{:>6} {:>6} {:>7} {:>5}  {:>11.1} {:>11.1} {:>13} {:>14} {:>10} {:>6.1}%",
                msg_len,
                lines[0].len(),
                frame_len,
                subs,
                ns_publish,
                s.min / BATCH as f64,
                ns_delivered,
                per_sec,
                mb_s,
                s.spread * 100.0
            );
            std::io::stdout().flush().ok();
            per_publish.push((subs, ns_publish));
        }
        // Marginal cost of one more subscriber, from the 1 and 256 rows.
        let at = |n: usize| per_publish.iter().find(|p| p.0 == n).map_or(0.0, |p| p.1);
        println!(
            "{:>6} marginal ns per extra subscriber (256 vs 1): {:.1}; publish with no subscriber \
             (framing + decode + topic look-up): {:.1} ns",
            msg_len,
            (at(256) - at(1)) / 255.0,
            at(0)
        );
    }
}
