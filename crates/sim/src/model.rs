//! The expected-state model, kept independently of the hub's tables: the
//! live clients (what each registered, how it reads, every line it is
//! owed), the services and their providers, and every call with its
//! caller, provider, deadline and fate.
//!
//! Nothing here looks at the hub. The driver (`driver.rs`, `effects.rs`)
//! updates the model as it feeds requests in; the reader (`reader.rs`)
//! crosses off each line a client receives; `checks.rs` compares the
//! model's tables with the hub's after every step.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Instant;

use serde_json::Value;

use rosgate_core::ConnRef;

use crate::actions::MAX_CLIENTS;

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

/// A publish frame a subscriber must receive unless it is shed.
#[derive(Debug)]
pub(crate) struct TopicFrame {
    pub bytes: Vec<u8>,
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
    pub topic: VecDeque<TopicFrame>,
    /// Topic bytes the hub reported shed for this client and not yet seen
    /// missing.
    pub owed_drop: u64,
}

/// One connected client as the model sees it.
#[derive(Debug)]
pub(crate) struct Client {
    pub conn: ConnRef,
    pub mode: ReadMode,
    pub subs: BTreeSet<String>,
    pub pubs: BTreeSet<String>,
    pub next_id: u64,
    /// Received bytes not yet making a whole line.
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
    pub fn new(conn: ConnRef, now: Instant) -> Client {
        Client {
            conn,
            mode: ReadMode::All,
            subs: BTreeSet::new(),
            pubs: BTreeSet::new(),
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
}

/// One call the model knows of, from the moment it was forwarded.
#[derive(Debug)]
pub(crate) struct CallModel {
    pub caller: ConnRef,
    pub caller_slot: usize,
    pub id_key: String,
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
}

impl Model {
    pub fn new() -> Model {
        Model {
            clients: (0..MAX_CLIENTS).map(|_| None).collect(),
            services: BTreeMap::new(),
            calls: Vec::new(),
            rg_map: HashMap::new(),
            all_learned: Vec::new(),
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

    /// `slot` is owed one status, matched by `id` if it has one.
    pub fn expect_status(&mut self, slot: usize, id: Option<&Id>, error: bool) {
        let e = &mut self.client_mut(slot).exp;
        match id {
            Some(id) => *e.statuses.entry((id.key.clone(), error)).or_default() += 1,
            None if error => e.anon_error += 1,
            None => e.anon_info += 1,
        }
    }

    /// Replaces the caller's `Pending(k)` under `key` by its outcome `r`;
    /// an error if the caller expects something else.
    pub fn set_resp(&mut self, slot: usize, k: usize, key: &str, r: Resp) -> Result<(), String> {
        let c = self.clients[slot].as_mut().expect("live");
        let current = c.exp.responses.get(key);
        if matches!(current, Some(Resp::Pending(x)) if *x == k) {
            c.exp.responses.insert(key.to_string(), r);
            return Ok(());
        }
        Err(format!(
            "model: call {k} completes but its caller expects {current:?}"
        ))
    }

    /// A call failing (timeout, provider gone, unadvertised): the caller,
    /// if still connected, gets one failure.
    pub fn fail_call(&mut self, k: usize) {
        let c = &mut self.calls[k];
        c.alive = false;
        let (caller, cs, key, service) =
            (c.caller, c.caller_slot, c.id_key.clone(), c.service.clone());
        if let Some(cl) = self.clients[cs].as_mut().filter(|cl| cl.conn == caller) {
            cl.exp.responses.insert(key, Resp::Failure { service });
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
            topics.extend(c.subs.iter().chain(c.pubs.iter()));
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
