//! The expected-state model, kept independently of the hub's tables: the
//! live clients (their transport, what each registered, how it reads,
//! every line it is owed), the services and their providers, and every
//! call with its caller, provider, deadline and fate.
//!
//! Two kinds of client share the routing: NDJSON over TCP (the protocol
//! file: registrations per connection, every status) and rosbridge over
//! WebSocket ([`WsSide`]: registrations per request id, statuses through
//! the filter the hub had when it opened, frames instead of lines).
//!
//! Nothing here looks at the hub. The driver (`driver.rs`, `effects.rs`)
//! updates the model as it feeds requests in; the reader (`reader.rs`)
//! crosses off each line a client receives; `checks.rs` compares the
//! model's tables with the hub's after every step.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use serde_json::Value;

use rosgate_core::{ConnRef, StatusFilter};

use crate::actions::MAX_CLIENTS;
use crate::ws::{self, Answer};

/// How a client reads its output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadMode {
    All,
    Stopped,
    /// At most this many bytes per step.
    Slow(usize),
}

/// A request id: the JSON text sent and its canonical form (map key).
#[derive(Debug, Clone)]
pub(crate) struct Id {
    pub raw: String,
    pub key: String,
}

/// A publish a subscriber must receive unless it is shed.
#[derive(Debug)]
pub(crate) struct TopicFrame {
    /// The JSON line, without its newline: what a TCP line or a WebSocket
    /// text frame carries.
    pub line: Vec<u8>,
    /// The bytes it takes in this subscriber's queue (line and newline, or
    /// frame header and line): what is counted when it is shed.
    pub wire_len: usize,
}

/// What a caller expects for one call id.
#[derive(Debug)]
pub(crate) enum Resp {
    /// In flight: model call index. Receiving a response now is a bug.
    Pending(usize),
    Failure {
        service: String,
    },
    Success {
        service: String,
        values: Value,
        result: Value,
        status: Option<Value>,
    },
    /// The built-in stats service, with the gauges at call time:
    /// connections_open, calls_pending, topics, subscriptions, publishers,
    /// services.
    Stats([u64; 6]),
}

/// Every line one client is owed and has not received yet.
#[derive(Debug, Default)]
pub(crate) struct Expect {
    /// Statuses with an id: (canonical id, is error) -> count.
    pub statuses: HashMap<(String, bool), u32>,
    pub anon_info: u32,
    pub anon_error: u32,
    /// Forwarded calls this provider must receive, in order.
    pub forwards: VecDeque<usize>,
    /// Responses by canonical caller id.
    pub responses: HashMap<String, Resp>,
    /// Responses to calls made without an id (rosbridge dialect), which
    /// come back without one: told apart by content.
    pub anon_responses: Vec<Resp>,
    /// Pong payloads owed, in ping order.
    pub pongs: VecDeque<Vec<u8>>,
    pub topic: VecDeque<TopicFrame>,
    /// Topic bytes the hub reported shed for this client and not yet seen
    /// missing.
    pub owed_drop: u64,
}

/// Registrations of one kind: topic -> the raw ids registered for it. A
/// TCP connection's set is `{None}` (one registration per connection); a
/// WebSocket connection's holds each request id it used (`None`: no id).
pub(crate) type Regs = BTreeMap<String, BTreeSet<Option<String>>>;

/// The WebSocket side of a client: handshake, control frames, dialect.
#[derive(Debug)]
pub(crate) struct WsSide {
    /// Statuses the hub sends this connection (fixed when it opened).
    pub status: StatusFilter,
    /// A handshake request not sent yet: it goes with the first frames.
    pub pending_handshake: Option<Vec<u8>>,
    /// The handshake answer owed and not read yet.
    pub answer: Option<Answer>,
    /// The 101 was read: frames follow.
    pub open: bool,
    /// The payload of the close frame the server must send last: the echo
    /// of ours, or 1002 after a protocol error.
    pub close: Option<Vec<u8>>,
    /// The server's close frame (or refusal) arrived: nothing may follow.
    pub done: bool,
    /// We broke the protocol (or the handshake): the hub must close the
    /// connection as a protocol error.
    pub protocol_close: bool,
}

/// How a client is connected.
#[derive(Debug)]
pub(crate) enum Link {
    Tcp,
    Ws(WsSide),
}

/// One connected client as the model sees it.
#[derive(Debug)]
pub(crate) struct Client {
    pub conn: ConnRef,
    pub link: Link,
    pub mode: ReadMode,
    pub subs: Regs,
    pub pubs: Regs,
    pub next_id: u64,
    /// Received bytes not yet making a whole line or frame.
    pub inbuf: Vec<u8>,
    pub exp: Expect,
    /// Raw provider-side ids this client received in forwarded calls.
    pub learned: Vec<String>,
    /// Model of the hub's `out_since`.
    pub out_since: Instant,
    pub empty_at_start: bool,
    pub wrote: bool,
    /// The simulation closed it (EOF or reset) this step.
    pub closed_by_us: bool,
}

impl Client {
    pub fn new(conn: ConnRef, link: Link, now: Instant) -> Client {
        Client {
            conn,
            link,
            mode: ReadMode::All,
            subs: Regs::new(),
            pubs: Regs::new(),
            next_id: 0,
            inbuf: Vec::new(),
            exp: Expect::default(),
            learned: Vec::new(),
            out_since: now,
            empty_at_start: true,
            wrote: false,
            closed_by_us: false,
        }
    }

    pub fn ws(&self) -> Option<&WsSide> {
        match &self.link {
            Link::Ws(w) => Some(w),
            Link::Tcp => None,
        }
    }

    pub fn ws_mut(&mut self) -> Option<&mut WsSide> {
        match &mut self.link {
            Link::Ws(w) => Some(w),
            Link::Tcp => None,
        }
    }

    /// Speaks the rosbridge dialect (WebSocket): per-id registrations,
    /// lenient decoding, rosbridge-style answers.
    pub fn rosbridge(&self) -> bool {
        self.ws().is_some()
    }

    /// Whether the hub sends this client statuses of this level.
    pub fn wants_status(&self, error: bool) -> bool {
        match self.ws().map(|w| w.status) {
            None | Some(StatusFilter::All) => true,
            Some(StatusFilter::Errors) => error,
            Some(StatusFilter::None) => false,
        }
    }

    /// The bytes a `len`-byte JSON line takes in this client's queue.
    pub fn wire_len(&self, len: usize) -> usize {
        match self.link {
            Link::Tcp => len + 1,
            Link::Ws(_) => ws::server_frame_len(len),
        }
    }

    /// `subscribe` (`sub`) or `advertise` with `id` (raw).
    pub fn register(&mut self, sub: bool, topic: &str, id: Option<&str>) {
        let per_id = self.rosbridge();
        let regs = if sub { &mut self.subs } else { &mut self.pubs };
        let id = id.filter(|_| per_id).map(str::to_string);
        regs.entry(topic.to_string()).or_default().insert(id);
    }

    /// `unsubscribe` (`sub`) or `unadvertise` with `id` (raw): per
    /// connection, the topic goes; per id, an id removes only its own
    /// registration and no id removes all of them.
    pub fn unregister(&mut self, sub: bool, topic: &str, id: Option<&str>) {
        let per_id = self.rosbridge();
        let regs = if sub { &mut self.subs } else { &mut self.pubs };
        match id.filter(|_| per_id) {
            Some(id) => {
                if let Some(ids) = regs.get_mut(topic) {
                    ids.remove(&Some(id.to_string()));
                    if ids.is_empty() {
                        regs.remove(topic);
                    }
                }
            }
            None => {
                regs.remove(topic);
            }
        }
    }
}

/// One call the model knows of, from the moment it was forwarded.
#[derive(Debug)]
pub(crate) struct CallModel {
    pub caller: ConnRef,
    pub caller_slot: usize,
    /// The caller's canonical id; `None` for a rosbridge call without one.
    pub id_key: Option<String>,
    pub service: String,
    pub args: Value,
    pub provider: ConnRef,
    /// Timer tick (from the hub's creation) at which it times out.
    pub due_tick: u64,
    pub alive: bool,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Model {
    pub clients: Vec<Option<Client>>,
    /// Service name -> current provider.
    pub services: BTreeMap<String, ConnRef>,
    /// Every call ever forwarded, by model call index.
    pub calls: Vec<CallModel>,
    /// Raw provider-side id -> model call index.
    pub rg_map: HashMap<String, usize>,
    /// Every raw provider-side id any client received.
    pub all_learned: Vec<String>,
    /// The status filter WebSocket connections opened now get.
    pub ws_status: StatusFilter,
}

impl Model {
    pub fn new(ws_status: StatusFilter) -> Model {
        Model {
            clients: (0..MAX_CLIENTS).map(|_| None).collect(),
            services: BTreeMap::new(),
            calls: Vec::new(),
            rg_map: HashMap::new(),
            all_learned: Vec::new(),
            ws_status,
        }
    }

    pub fn client(&self, slot: usize) -> &Client {
        self.clients[slot].as_ref().expect("live slot")
    }

    pub fn client_mut(&mut self, slot: usize) -> &mut Client {
        self.clients[slot].as_mut().expect("live slot")
    }

    pub fn live(&self) -> impl Iterator<Item = &Client> + Clone {
        self.clients.iter().flatten()
    }

    /// The slot of the live client `c`, if any.
    pub fn slot_of(&self, c: ConnRef) -> Option<usize> {
        self.clients
            .iter()
            .position(|x| x.as_ref().is_some_and(|x| x.conn == c))
    }

    /// The slot of the live client with slab key `key`, if any.
    pub fn slot_of_key(&self, key: u32) -> Option<usize> {
        self.clients
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.conn.key == key))
    }

    /// `slot` if live, else the next live slot after it.
    pub fn resolve(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS)
            .map(|i| (s + i) % MAX_CLIENTS)
            .find(|&i| self.clients[i].is_some())
    }

    /// From `slot` on, the first live WebSocket client.
    pub fn resolve_ws(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS)
            .map(|i| (s + i) % MAX_CLIENTS)
            .find(|&i| self.clients[i].as_ref().is_some_and(Client::rosbridge))
    }

    /// Whether provider-side id `raw` names a call in flight that was
    /// forwarded to `provider`.
    pub fn serving(&self, raw: &str, provider: ConnRef) -> bool {
        self.rg_map
            .get(raw)
            .is_some_and(|&k| self.calls[k].alive && self.calls[k].provider == provider)
    }

    /// From `slot` on, the first client that received a call still in flight.
    pub fn holder(&self, slot: u8) -> Option<usize> {
        let s = slot as usize % MAX_CLIENTS;
        (0..MAX_CLIENTS).map(|i| (s + i) % MAX_CLIENTS).find(|&i| {
            self.clients[i]
                .as_ref()
                .is_some_and(|c| c.learned.iter().any(|raw| self.serving(raw, c.conn)))
        })
    }

    /// Calls in flight made by `conn`.
    pub fn calls_made(&self, conn: ConnRef) -> usize {
        self.calls
            .iter()
            .filter(|x| x.alive && x.caller == conn)
            .count()
    }

    /// Calls in flight forwarded to `conn`.
    pub fn calls_served(&self, conn: ConnRef) -> usize {
        self.calls
            .iter()
            .filter(|x| x.alive && x.provider == conn)
            .count()
    }

    /// `slot` is owed one status, matched by `id` if it has one, unless
    /// its status filter withholds that level.
    pub fn expect_status(&mut self, slot: usize, id: Option<&Id>, error: bool) {
        let c = self.client_mut(slot);
        if !c.wants_status(error) {
            return;
        }
        let e = &mut c.exp;
        match id {
            Some(id) => *e.statuses.entry((id.key.clone(), error)).or_default() += 1,
            None if error => e.anon_error += 1,
            None => e.anon_info += 1,
        }
    }

    /// Replaces the caller's `Pending(k)` (under `key`, or among its
    /// id-less calls) by its outcome `r`; an error if the caller expects
    /// something else.
    pub fn set_resp(
        &mut self,
        slot: usize,
        k: usize,
        key: Option<&str>,
        r: Resp,
    ) -> Result<(), String> {
        let e = &mut self.clients[slot].as_mut().expect("live").exp;
        let pending = |x: &Resp| matches!(x, Resp::Pending(p) if *p == k);
        let entry = match key {
            Some(key) => e.responses.get_mut(key),
            None => e.anon_responses.iter_mut().find(|x| pending(x)),
        };
        match entry {
            Some(x) if pending(x) => {
                *x = r;
                Ok(())
            }
            other => Err(format!(
                "model: call {k} completes but its caller expects {other:?}"
            )),
        }
    }

    /// A call failing (timeout, provider gone, unadvertised): the caller,
    /// if still connected, gets one failure.
    pub fn fail_call(&mut self, k: usize) {
        let c = &mut self.calls[k];
        c.alive = false;
        let (caller, cs, key, service) =
            (c.caller, c.caller_slot, c.id_key.clone(), c.service.clone());
        let Some(cl) = self.clients[cs].as_mut().filter(|cl| cl.conn == caller) else {
            return;
        };
        let failure = Resp::Failure { service };
        match key {
            Some(key) => {
                cl.exp.responses.insert(key, failure);
            }
            None => match cl
                .exp
                .anon_responses
                .iter_mut()
                .find(|x| matches!(x, Resp::Pending(p) if *p == k))
            {
                Some(x) => *x = failure,
                None => cl.exp.anon_responses.push(failure),
            },
        }
    }

    /// Fails every call in flight that `pred` selects.
    pub fn fail_calls_where(&mut self, pred: impl Fn(&CallModel) -> bool) {
        let failing: Vec<usize> = (0..self.calls.len())
            .filter(|&k| self.calls[k].alive && pred(&self.calls[k]))
            .collect();
        for k in failing {
            self.fail_call(k);
        }
    }

    /// connections_open, calls_pending, topics, subscriptions, publishers,
    /// services.
    pub fn gauges(&self) -> [u64; 6] {
        let mut topics = BTreeSet::new();
        let (mut subs, mut pubs) = (0, 0);
        for c in self.live() {
            subs += c.subs.len();
            pubs += c.pubs.len();
            topics.extend(c.subs.keys().chain(c.pubs.keys()));
        }
        [
            self.live().count() as u64,
            self.calls.iter().filter(|c| c.alive).count() as u64,
            topics.len() as u64,
            subs as u64,
            pubs as u64,
            self.services.len() as u64,
        ]
    }

    /// The model's side of `free`: registrations withdrawn, calls made
    /// forgotten, calls served failed.
    pub fn close(&mut self, slot: usize) {
        let c = self.clients[slot].take().expect("live");
        let me = c.conn;
        self.services.retain(|_, p| *p != me);
        for call in self.calls.iter_mut().filter(|x| x.alive && x.caller == me) {
            call.alive = false;
        }
        self.fail_calls_where(|c| c.provider == me);
    }
}
