//! `Peer`: one client of the gateway on TCP or WebSocket with the same
//! request/answer helpers, so a rule is tested alike on both transports
//! (`security`, `params`). WebSocket peers ask for every status
//! (`set_level info`) once admitted, so both transports answer alike.
//!
//! [`Peer::pending`] is a barrier: a request whose answer proves everything
//! sent before it has arrived. By default it is a rosapi call, which works
//! on a connection that declared a node (an unsubscribe from an invalid
//! name, `Client::barrier`, does not: names resolve there); a module whose
//! roles may refuse rosapi picks another with [`Peer::with_barrier`].

use std::time::Instant;

use serde_json::{json, Value};

use crate::support::*;
use crate::wsclient::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Tcp,
    Ws,
}

pub const VIAS: [Via; 2] = [Via::Tcp, Via::Ws];

impl Via {
    pub fn tag(self) -> &'static str {
        match self {
            Via::Tcp => "tcp",
            Via::Ws => "ws",
        }
    }
}

pub enum Link {
    Tcp(Client),
    Ws(Ws),
}

/// A client on TCP or WebSocket.
pub struct Peer {
    pub link: Link,
    pub name: String,
    /// How the connection ended, once it did (for failure messages).
    pub ended: Option<String>,
    /// The request (without `id`) [`Peer::pending`] sends.
    barrier: Value,
}

impl Peer {
    pub fn open(gw: &Gateway, via: Via) -> Peer {
        match via {
            Via::Tcp => Peer::tcp(gw),
            Via::Ws => Peer::ws_at(gw, "/", ""),
        }
    }

    pub fn tcp(gw: &Gateway) -> Peer {
        let c = gw.client();
        Peer::new(format!("tcp {}", c.name), Link::Tcp(c))
    }

    /// A WebSocket admitted at `target` (`/?node=x&domain=3`) with
    /// `headers` (raw lines), asking for every status.
    pub fn ws_at(gw: &Gateway, target: &str, headers: &str) -> Peer {
        let mut ws = Ws::connect_at(gw, target, headers);
        ws.send_text(r#"{"op":"set_level","level":"info"}"#);
        Peer::new(format!("ws {target} #{}", uniq()), Link::Ws(ws))
    }

    fn new(name: String, link: Link) -> Peer {
        Peer {
            link,
            name,
            ended: None,
            barrier: json!({"op":"call_service","service":"/rosapi/get_ros_version","args":{}}),
        }
    }

    /// Uses `req` (given a fresh `id`) as the barrier of [`Peer::pending`].
    pub fn with_barrier(mut self, req: Value) -> Peer {
        self.barrier = req;
        self
    }

    pub fn send(&mut self, v: &Value) {
        match &mut self.link {
            Link::Tcp(c) => c.send_json(v),
            Link::Ws(w) => w.send_text(&v.to_string()),
        }
    }

    /// The next message before `dl`; None at the deadline or when the
    /// connection ends.
    pub fn try_next(&mut self, dl: Instant) -> Option<Value> {
        match &mut self.link {
            Link::Tcp(c) => match c.try_recv_line(dl) {
                Recv::Line(l) => Some(parse_line(&String::from_utf8_lossy(&l))),
                Recv::Timeout => None,
                other => {
                    self.ended = Some(format!("{other:?}"));
                    None
                }
            },
            Link::Ws(w) => {
                let Some((op, payload)) = w.try_frame(dl) else {
                    if Instant::now() < dl {
                        // Ended before the deadline: say how.
                        use std::io::Read;
                        let mut one = [0u8; 1];
                        self.ended = Some(format!(
                            "the connection ended: read again {:?}, SO_ERROR {:?}",
                            w.s.read(&mut one),
                            w.s.take_error()
                        ));
                    }
                    return None;
                };
                if op == 0x8 {
                    self.ended = Some(format!(
                        "close frame {:?}",
                        String::from_utf8_lossy(&payload)
                    ));
                    return None;
                }
                assert_eq!(op, 0x1, "{}: text frame expected, got {op}", self.name);
                Some(serde_json::from_slice(&payload).expect("frame holds JSON"))
            }
        }
    }

    /// Reads until a message matches `pred`; returns it and those skipped.
    pub fn until(&mut self, pred: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let dl = deadline(REPLY);
        let mut skipped = Vec::new();
        loop {
            match self.try_next(dl) {
                Some(v) if pred(&v) => return (v, skipped),
                Some(v) => skipped.push(v),
                None => panic!(
                    "{}: no matching message ({}); skipped {skipped:?}",
                    self.name,
                    self.ended.as_deref().unwrap_or("deadline passed")
                ),
            }
        }
    }

    /// Sends `req` with a fresh id; returns the first message carrying it.
    pub fn request(&mut self, mut req: Value) -> Value {
        let id = format!("r{}", uniq());
        req["id"] = json!(id);
        self.send(&req);
        let want = json!(id);
        self.until(|v| v["id"] == want).0
    }

    /// `req` must succeed with an info status; returns its text.
    pub fn ok(&mut self, req: Value) -> String {
        let v = self.request(req.clone());
        assert_eq!(
            (v["op"].as_str(), v["level"].as_str()),
            (Some("status"), Some("info")),
            "{}: {req} -> {v}",
            self.name
        );
        v["msg"].as_str().unwrap_or_default().to_string()
    }

    /// `req` must be refused with an error status; returns its text.
    pub fn refused(&mut self, req: Value) -> String {
        let v = self.request(req.clone());
        assert_eq!(
            (v["op"].as_str(), v["level"].as_str()),
            (Some("status"), Some("error")),
            "{}: {req} -> {v}",
            self.name
        );
        let msg = v["msg"].as_str().unwrap_or_default().to_string();
        assert!(!msg.is_empty(), "{v}");
        msg
    }

    /// Calls `service`; returns the whole response (checked to be one for
    /// this service).
    pub fn call(&mut self, service: &str, args: Value) -> Value {
        let v = self.request(json!({"op":"call_service","service":service,"args":args}));
        assert_eq!(v["op"], "service_response", "{}: {service}: {v}", self.name);
        assert_eq!(v["service"], service, "{v}");
        v
    }

    /// Calls `service`; it must succeed; returns `values`.
    pub fn values(&mut self, service: &str, args: Value) -> Value {
        let v = self.call(service, args.clone());
        assert_eq!(v["result"], true, "{}: {service} {args} -> {v}", self.name);
        v["values"].clone()
    }

    /// Calls `service`; it must fail (`result:false`, reason string);
    /// returns the reason.
    pub fn fails(&mut self, service: &str, args: Value) -> String {
        let v = self.call(service, args.clone());
        assert_failure(&v);
        v["values"].as_str().unwrap_or_default().to_string()
    }

    /// Messages received before the answer to the barrier.
    pub fn pending(&mut self) -> Vec<Value> {
        let id = format!("q{}", uniq());
        let mut req = self.barrier.clone();
        req["id"] = json!(id);
        self.send(&req);
        let want = json!(id);
        self.until(|v| v["id"] == want).1
    }

    pub fn quiet(&mut self) {
        let extra = self.pending();
        assert!(
            extra.is_empty(),
            "{}: unexpected messages: {extra:?}",
            self.name
        );
    }

    /// Declares node `name` (`extra` may add namespace or domain); returns
    /// its full name.
    pub fn node(&mut self, name: &str, extra: Value) -> String {
        let mut req = json!({"op":"declare_node","name":name});
        if let Some(o) = extra.as_object() {
            for (k, v) in o {
                req[k] = v.clone();
            }
        }
        let msg = self.ok(req);
        msg.strip_prefix("declared node ")
            .and_then(|m| m.split(' ').next())
            .unwrap_or_else(|| panic!("declare_node answer: {msg}"))
            .to_string()
    }
}
