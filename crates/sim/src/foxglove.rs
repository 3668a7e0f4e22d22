//! The `foxglove` fuzz target's check: a Foxglove client's side of the
//! protocol (docs/protocol.md, "Foxglove WebSocket protocol") into the
//! sans-io codec (`rosgate_wire::foxglove::client`) and a hub session
//! (`rosgate_core::Hub`, `hub/foxglove.rs`).
//!
//! The bytes are a script of steps (first byte of each: the kind, then a
//! length byte and that many bytes): a text message, a binary message
//! from one of two Foxglove sessions (one subscribes to, the other
//! publishes on a topic a TCP client also publishes on, so data flows
//! both ways), a rosbridge JSON publish, a service call request to the
//! service the TCP client provides and that client's answers (a sum, a
//! failure, values not of the type), a time step, or raw bytes into a
//! session's WebSocket stream. Templates put well-formed ops (`subscribe`,
//! client `advertise` with `cdr` and `json` channels, message data, service
//! calls, parameters, graph) within reach of a short input, and the
//! fuzzer's bytes then fill and mangle their fields.
//!
//! Checked: nothing panics (no `unwrap` on client bytes); every byte the
//! hub queues for a session parses as server WebSocket frames, each text
//! message a JSON object with a string `op`, each binary message one of
//! the server opcodes (docs/protocol.md lists them); after every
//! connection closed and was freed, the memory ledger holds nothing but
//! held parameters and no topic is left.
//!
//! Not checked here: what a session must receive. The model does that
//! for Foxglove sessions in the seeded simulation (`driver::foxglove`,
//! `model::foxglove`): the opening with the subprotocol (`ws.rs`
//! `handshake_foxglove`, the 101 agreeing to it once); `serverInfo`
//! first; the channel of the model's typed topic
//! (`model::encodings::TYPED_TOPIC`, a bundled type, so `cdr`) advertised
//! and unadvertised in the order the model re-makes it (once per turn, at
//! the end of `Hub::expire`, and at the opening), its id learnt from the
//! hub's `advertise` and never reused; `subscribe` to it and
//! `unsubscribe`, each the connection's registration in the encoding
//! `Comp::Foxglove(sub)` (refused past the per-connection limit with an
//! error status), withdrawn with the channel when the topic loses its
//! publishers; the message data of each publish owed to it, under the
//! plain subscriber's rules (queue limit and memory budget shedding,
//! latching, the ledger of its shared frames), exactly its bytes
//! (subscription id, the turn's wall clock, the CDR) and its CDR decoded
//! back to the JSON publish (`ws_decode::fx_message_data`,
//! `ws_decode::cdr_matches`); its statuses as owed (a subscription's info,
//! a refusal's error, through the status filter); the drop warning
//! telling no more messages than the model shed for it; client publishing
//! on a `json` or `cdr` channel of the typed topic (client `advertise` and
//! `unadvertise` as the connection's advertisement, each message the
//! connection's publish, owed to every subscriber: JSON as sent, CDR as
//! the hub decodes it for JSON subscribers and untouched for CDR ones;
//! over the line limit, an error status).
//!
//! Still not modelled: the other topics' channels (learnt, not
//! predicted: their type and publishers are not tracked), services and
//! their calls, actions' channels, the connection graph, parameters,
//! client publishing on other topics (other types, types the gateway
//! does not know, CDR that does not fit),
//! `throttleMs`, and the drop warning's count and debounce exactly (it is
//! bounded by the frames shed, never asserted to come). This target
//! covers those only as well-formed output.

use std::io::IoSlice;
use std::time::{Duration, Instant};

use rosgate_core::out::MAX_IOVECS;
use rosgate_core::{Hub, Limits, Transport};
use rosgate_wire::foxglove::client as fx;
use rosgate_wire::ws::client;
use rosgate_wire::ws::frame::{OP_BINARY, OP_TEXT};
use serde_json::Value;

/// RFC 6455's example key.
const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

/// The server binary opcodes (`rosgate_wire::foxglove::server`): message
/// data, time, service call response, fetch asset response.
const SERVER_BINARY_OPS: [u8; 4] = [1, 2, 3, 4];

/// Text templates the script picks from; `%` is replaced by the step's
/// bytes as a number, `$` by them as (lossy) text.
const TEXTS: [&str; 14] = [
    r#"{"op":"subscribe","subscriptions":[{"id":%,"channelId":1}]}"#,
    r#"{"op":"subscribe","subscriptions":[{"id":1,"channelId":%}]}"#,
    r#"{"op":"unsubscribe","subscriptionIds":[%]}"#,
    r#"{"op":"advertise","channels":[{"id":%,"topic":"/c","encoding":"cdr","schemaName":"std_msgs/msg/String"}]}"#,
    r#"{"op":"advertise","channels":[{"id":%,"topic":"/j","encoding":"json","schemaName":"x/y"}]}"#,
    r#"{"op":"unadvertise","channelIds":[%]}"#,
    r#"{"op":"getParameters","parameterNames":["/n.$"],"id":"%"}"#,
    r#"{"op":"setParameters","parameters":[{"name":"/n.p","value":%}],"id":"$"}"#,
    r#"{"op":"subscribeParameterUpdates","parameterNames":["$"]}"#,
    r#"{"op":"subscribeConnectionGraph"}"#,
    r#"{"op":"unsubscribeConnectionGraph"}"#,
    r#"{"op":"fetchAsset","uri":"package://$","requestId":%}"#,
    r#"{"op":"subscribe","subscriptions":[{"id":1,"channelId":1,"$":%}]}"#,
    r#"{"op":"$"}"#,
];

/// A session: its connection key.
struct Session(u32);

/// `foxglove`: see the module docs.
pub fn foxglove(data: &[u8]) {
    // Every run opens and closes connections: their info lines would be
    // most of the work (and of the fuzzer's output).
    rosgate_core::log::set_level(rosgate_core::log::LogLevel::Error);
    codec(data);
    session(data);
}

/// The codec alone, on the whole input as one message of each kind.
fn codec(data: &[u8]) {
    let _ = fx::decode_text(data);
    let _ = fx::decode_binary(data);
}

struct Run {
    hub: Hub,
    now: Instant,
    fx: [Session; 2],
    tcp: u32,
    /// Ids (JSON text) of the calls forwarded to the TCP provider and not
    /// answered yet.
    calls: Vec<String>,
}

impl Run {
    fn open_foxglove(hub: &mut Hub, now: Instant) -> Session {
        let key = hub
            .open_as(Transport::WebSocket, now)
            .expect("a second connection is admitted")
            .key;
        let hs = client::request(
            "x",
            "/",
            WS_KEY,
            &[("Sec-WebSocket-Protocol", "foxglove.websocket.v1")],
        );
        hub.on_bytes(key, hs.as_bytes(), now);
        Session(key)
    }

    /// Everything queued for `key` (a perfect writer).
    fn drain(&mut self, key: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        while let Some(out) = self.hub.out(key).filter(|o| !o.is_empty()) {
            let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
            let n = out.fill(&mut iov, usize::MAX);
            let mut w = 0;
            for s in &iov[..n] {
                bytes.extend_from_slice(s);
                w += s.len();
            }
            self.hub.wrote(key, w, self.now);
        }
        bytes
    }

    /// A session's output: the opening's answer (once), then server frames.
    fn check_session(&mut self, i: usize, opened: &mut bool) {
        let key = self.fx[i].0;
        let bytes = self.drain(key);
        let mut rest = &bytes[..];
        if !*opened {
            match client::Response::parse(rest) {
                Ok(Some(r)) => {
                    assert_eq!(r.status, 101, "the Foxglove opening was refused");
                    rest = &rest[r.len..];
                    *opened = true;
                }
                Ok(None) if rest.is_empty() => return,
                other => panic!("not an HTTP answer to the opening: {other:?}"),
            }
        }
        client::Reader::new().feed(rest, usize::MAX, |e| match e {
            client::Event::Text(t) => {
                let v: Value = serde_json::from_slice(t).unwrap_or_else(|e| {
                    panic!(
                        "a text message that is not JSON ({e}): {:?}",
                        String::from_utf8_lossy(t)
                    )
                });
                assert!(v["op"].is_string(), "a text message without op: {v}");
            }
            client::Event::Binary(b) => assert!(
                b.first().is_some_and(|op| SERVER_BINARY_OPS.contains(op)),
                "a binary message with opcode {:?}",
                b.first()
            ),
            client::Event::Ping(_) | client::Event::Pong(_) | client::Event::Close(_) => {}
            other => panic!("the session's output does not parse: {other:?}"),
        });
    }
}

/// Up to `n` bytes of `data` from `*at`, advancing it.
fn take<'a>(data: &'a [u8], at: &mut usize, n: usize) -> &'a [u8] {
    let start = (*at).min(data.len());
    let end = start.saturating_add(n).min(data.len());
    *at = end;
    &data[start..end]
}

fn number(b: &[u8]) -> u64 {
    b.iter()
        .fold(0u64, |n, &x| n.wrapping_mul(251).wrapping_add(u64::from(x)))
}

fn session(data: &[u8]) {
    let t0 = Instant::now();
    let mut hub = Hub::new(Limits::default(), t0);
    let fx = [
        Run::open_foxglove(&mut hub, t0),
        Run::open_foxglove(&mut hub, t0),
    ];
    let tcp = hub.open(t0).expect("admitted").key;
    hub.on_bytes(
        tcp,
        b"{\"op\":\"advertise\",\"topic\":\"/c\",\"type\":\"std_msgs/msg/String\"}\n\
          {\"op\":\"advertise_service\",\"service\":\"/s\",\"type\":\"example_interfaces/srv/AddTwoInts\"}\n",
        t0,
    );
    let mut run = Run {
        hub,
        now: t0,
        fx,
        tcp,
        calls: Vec::new(),
    };
    let mut opened = [false, false];
    let mut at = 0;
    let mut steps = 0;
    while at < data.len() && steps < 64 {
        steps += 1;
        let kind = take(data, &mut at, 1)[0];
        let len = take(data, &mut at, 1).first().copied().unwrap_or(0) as usize;
        let body = take(data, &mut at, len);
        let who = usize::from(kind >> 7);
        let key = run.fx[who].0;
        let now = run.now;
        match kind & 0x7f {
            // A templated text op.
            k @ 0..=27 => {
                let tpl = TEXTS[usize::from(k) % TEXTS.len()];
                let text = tpl
                    .replace('%', &number(body).to_string())
                    .replace('$', &String::from_utf8_lossy(body).replace(['"', '\\'], ""));
                let frame = client::frame(OP_TEXT, text.as_bytes(), [1, 2, 3, 4]);
                run.hub.on_bytes(key, &frame, now);
            }
            // Client message data on a channel the body names, carrying
            // the rest (a String's CDR when it is short enough to be one).
            28..=39 => {
                let chan = u32::from(body.first().copied().unwrap_or(1) % 4);
                let mut msg = vec![1];
                msg.extend_from_slice(&chan.to_le_bytes());
                let s = body.get(1..).unwrap_or(&[]);
                if kind & 1 == 0 {
                    msg.extend_from_slice(&[0, 1, 0, 0]);
                    msg.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
                    msg.extend_from_slice(s);
                    msg.push(0);
                } else {
                    msg.extend_from_slice(s);
                }
                let frame = client::frame(OP_BINARY, &msg, [9, 8, 7, 6]);
                run.hub.on_bytes(key, &frame, now);
            }
            // Any binary message.
            40..=55 => {
                let frame = client::frame(OP_BINARY, body, [5, 6, 7, 8]);
                run.hub.on_bytes(key, &frame, now);
            }
            // Any text message.
            56..=71 => {
                let frame = client::frame(OP_TEXT, body, [5, 6, 7, 8]);
                run.hub.on_bytes(key, &frame, now);
            }
            // Raw bytes into the WebSocket stream.
            72..=79 => run.hub.on_bytes(key, body, now),
            // A rosbridge publish on the topic.
            80..=95 => {
                let mut line =
                    b"{\"op\":\"publish\",\"topic\":\"/c\",\"msg\":{\"data\":\"".to_vec();
                line.extend(body.iter().filter(|b| b.is_ascii_alphanumeric()));
                line.extend_from_slice(b"\"}}\n");
                run.hub.on_bytes(run.tcp, &line, now);
            }
            // A service call request: a small service id, CDR of two
            // int64 or JSON, or the body as it is.
            96..=103 => {
                let service = u32::from(body.first().copied().unwrap_or(0) % 8);
                let call = u32::from(body.get(1).copied().unwrap_or(0));
                let rest = body.get(2..).unwrap_or(&[]);
                let (encoding, payload): (&str, Vec<u8>) = match kind % 3 {
                    0 => {
                        let mut p = vec![0, 1, 0, 0];
                        p.extend(rest.iter().chain([0u8; 16].iter()).take(16));
                        ("cdr", p)
                    }
                    1 => (
                        "json",
                        format!(r#"{{"a":{},"b":2}}"#, number(rest)).into_bytes(),
                    ),
                    _ => ("cdr", rest.to_vec()),
                };
                let mut msg = vec![2];
                msg.extend_from_slice(&service.to_le_bytes());
                msg.extend_from_slice(&call.to_le_bytes());
                msg.extend_from_slice(&(encoding.len() as u32).to_le_bytes());
                msg.extend_from_slice(encoding.as_bytes());
                msg.extend_from_slice(&payload);
                let frame = client::frame(OP_BINARY, &msg, [4, 3, 2, 1]);
                run.hub.on_bytes(key, &frame, now);
            }
            // The TCP provider answers the calls forwarded to it: a sum,
            // a failure, or values that are not the response type.
            104..=111 => {
                let values = match body.first().copied().unwrap_or(0) % 3 {
                    0 => format!(r#"{{"sum":{}}}"#, number(body)),
                    1 => r#"{"sum":"x"}"#.to_owned(),
                    _ => "{}".to_owned(),
                };
                let result = body.get(1).is_none_or(|b| b % 4 != 0);
                let mut lines = Vec::new();
                for id in std::mem::take(&mut run.calls) {
                    lines.extend_from_slice(
                        format!(
                            r#"{{"op":"service_response","service":"/s","id":{id},"values":{values},"result":{result}}}"#
                        )
                        .as_bytes(),
                    );
                    lines.push(b'\n');
                }
                run.hub.on_bytes(run.tcp, &lines, now);
            }
            // Time passes.
            _ => {
                run.now += Duration::from_millis(number(body) % 20_000);
                let now = run.now;
                run.hub.expire(now);
            }
        }
        for (i, o) in opened.iter_mut().enumerate() {
            run.check_session(i, o);
        }
        let tcp = run.tcp;
        let out = run.drain(tcp);
        for line in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let v: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
                panic!(
                    "a TCP line that is not JSON ({e}): {:?}",
                    String::from_utf8_lossy(line)
                )
            });
            if v["op"] == "call_service" {
                run.calls.push(v["id"].to_string());
            }
        }
    }
    finish(run);
}

/// Closes everything; the hub must hold nothing after.
fn finish(mut run: Run) {
    let keys = [run.fx[0].0, run.fx[1].0, run.tcp];
    for k in keys {
        let now = run.now;
        run.hub.on_eof(k, now);
    }
    let mut closing = Vec::new();
    for _ in 0..4 {
        run.now += Duration::from_secs(60);
        let now = run.now;
        run.hub.expire(now);
        for k in keys {
            run.drain(k);
        }
        loop {
            run.hub.take_closing(&mut closing);
            if closing.is_empty() {
                break;
            }
            for &k in &closing {
                run.hub.free(k, now);
            }
        }
    }
    let mem = run.hub.memory();
    // `registrations` also counts the parameters the gateway holds for
    // nodes nobody owns (a `setParameters` of `/n.p` sets one): they
    // outlive connections by design (docs/limits.md, "parameters held by
    // the gateway"), so only the rest must be gone.
    let left = mem.total() - mem.registrations;
    assert_eq!(left, 0, "memory left after every connection went: {mem:?}");
    let i = run.hub.inspect();
    assert_eq!(i.registry().topic_count(), 0, "topics left");
}

#[cfg(test)]
mod tests {
    fn step(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut s = vec![kind, body.len() as u8];
        s.extend_from_slice(body);
        s
    }

    #[test]
    fn each_template_alone() {
        for k in 0..14u8 {
            for body in [&b""[..], b"p", b"7"] {
                let r = std::panic::catch_unwind(|| super::foxglove(&step(k, body)));
                assert!(r.is_ok(), "template {k} with {body:?}");
            }
        }
    }
}
