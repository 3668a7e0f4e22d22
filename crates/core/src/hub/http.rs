//! Plain HTTP on the WebSocket port: a request without `Upgrade` is
//! answered here and the connection closed (one request per connection).
//!
//! | path | answer |
//! |---|---|
//! | `/metrics` | the Prometheus text exposition of every counter, gauge and histogram |
//! | `/healthz` | `200 ok` while the loop turns (the answer is the proof) |
//! | `/version` | `{"protocol":{"major","minor","patch"},"server":{"name","version"}}` |
//! | `/`, other assets | the dashboard, served from memory (no CDN, works offline) |
//!
//! Invariants:
//! - a request costs O(1) plus the size of its answer; `/metrics` walks the
//!   connections once (the queued-bytes histogram), bounded by the
//!   connection limit, and is rendered at most once per loop turn (the
//!   scrapes of a turn share it);
//! - the head is parsed by `httparse` with the WebSocket handshake's limits
//!   (8 KiB, the opening deadline); anything but `GET`/`HEAD` gets 405.

use std::rc::Rc;
use std::time::Instant;

use rosgate_wire::query;
use rosgate_wire::ws::handshake::{self, HttpRequest};

use super::Hub;
use crate::conn::{CloseReason, ConnRef};
use crate::counters::{Counter, Hist, Histogram};

/// One file the HTTP side serves.
#[derive(Debug, Clone)]
pub struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    pub body: &'static [u8],
}

/// What the HTTP side serves beside the metrics: set by the shell.
#[derive(Debug, Clone, Default)]
pub struct HttpSettings {
    /// The dashboard's files; `/` serves the one at `/index.html`.
    pub assets: Vec<Asset>,
    /// The gateway's version (`/version`).
    pub version: String,
}

/// rosbridge v2's protocol version, which rosgate speaks.
const PROTOCOL: (u32, u32, u32) = (2, 0, 0);

impl Hub {
    /// Sets the dashboard files and the version the HTTP side reports.
    pub fn set_http_settings(&mut self, s: HttpSettings) {
        self.http = s;
    }

    /// Answers a plain HTTP request and closes the connection.
    pub(super) fn on_http(&mut self, me: ConnRef, req: HttpRequest, now: Instant) {
        self.counters.inc(Counter::HttpRequests);
        let path = query::path(&req.target);
        let head = req.method == "HEAD";
        let mut resp = if req.method != "GET" && !head {
            handshake::response(
                405,
                "Method Not Allowed",
                "text/plain; charset=utf-8",
                b"only GET and HEAD are served here\n",
                &[("Allow", "GET, HEAD")],
            )
        } else {
            match path {
                "/metrics" if !self.http_authorized(me, &req, now) => handshake::response(
                    401,
                    "Unauthorized",
                    "text/plain; charset=utf-8",
                    b"a token is required: Authorization: Bearer <token> (or ?token=)\n",
                    &[("WWW-Authenticate", "Bearer realm=\"rosgate\"")],
                ),
                "/metrics" => self.metrics_response().to_vec(),
                "/healthz" => {
                    handshake::response(200, "OK", "text/plain; charset=utf-8", b"ok\n", &[])
                }
                "/version" => {
                    let body = serde_json::json!({
                        "protocol": {"major": PROTOCOL.0, "minor": PROTOCOL.1, "patch": PROTOCOL.2},
                        "server": {"name": "rosgate", "version": self.http.version},
                    })
                    .to_string();
                    handshake::response(200, "OK", "application/json", body.as_bytes(), &[])
                }
                p => {
                    let p = if p == "/" { "/index.html" } else { p };
                    match self.http.assets.iter().find(|a| a.path == p) {
                        Some(a) => handshake::response(200, "OK", a.content_type, a.body, &[]),
                        None => handshake::response(
                            404,
                            "Not Found",
                            "text/plain; charset=utf-8",
                            b"not found: try /, /metrics, /healthz or /version\n",
                            &[],
                        ),
                    }
                }
            }
        };
        if head {
            // The same head, no body.
            if let Some(end) = memchr::memmem::find(&resp, b"\r\n\r\n") {
                resp.truncate(end + 4);
            }
        }
        self.send_raw(me, &resp, now);
        self.close(me.key, CloseReason::HttpServed, now);
    }

    /// The `/metrics` answer, rendered at most once per loop turn: the
    /// scrapes of one turn share it (64 scrapers arriving together cost one
    /// rendering, not 64); the next turn renders afresh, so a scrape never
    /// shows figures older than the turn it is answered in.
    fn metrics_response(&mut self) -> Rc<[u8]> {
        if let Some(r) = &self.metrics_turn {
            return r.clone();
        }
        let body = self.metrics_text();
        let r: Rc<[u8]> = handshake::response(
            200,
            "OK",
            "text/plain; version=0.0.4; charset=utf-8",
            body.as_bytes(),
            &[],
        )
        .into();
        self.metrics_turn = Some(r.clone());
        r
    }

    /// The Prometheus exposition: counters, gauges, and histograms, with
    /// the queued bytes per connection sampled now.
    fn metrics_text(&self) -> String {
        let mut queued = Histogram::default_for(Hist::QueuedBytes);
        for (_, c) in self.conns.iter() {
            if c.is_open() {
                let q = c.out().control_bytes() + c.out().topic_bytes();
                queued.observe(Hist::QueuedBytes, q as f64);
            }
        }
        self.counters
            .to_prometheus(&self.gauges(), &[(Hist::QueuedBytes, queued)])
    }
}
