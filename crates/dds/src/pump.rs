//! The pump: one thread of this crate that waits on RustDDS's readers and
//! discovery listeners (they are mio 1 `Source`s) and hands what they
//! receive to the loop, never the other way round:
//! - discovery (endpoints found and lost, participants lost) and the
//!   nodes other participants list on `ros_discovery_info` go into
//!   [`Shared`]'s discovery queue, for the loop's next turn, where the
//!   adapter (`rosgate_ros2::link::rmw_dds::Graph`) turns them into the
//!   link's events;
//! - topic samples go into the link's queue
//!   (`rosgate_peers::ros2::queue::LinkQueue`), within the loop's inbox
//!   budget (a sample past it is dropped and counted here, before it costs
//!   the loop anything).
//!
//! Why a thread and not the loop's own poll: RustDDS runs its own threads
//! anyway (its event loop and discovery); its readers must be drained
//! promptly, whatever the loop is doing, and what they receive must reach
//! the loop through the same bounded hand-off as Zenoh's (so the budget
//! rules are one), and the server's poll stays the server's.
//!
//! Readers are made on the loop thread (where the link decides them) and
//! handed to the pump through its command queue ([`MAX_DDS_COMMANDS`];
//! a reader's removal is never refused), with a mio `Waker`.
//!
//! Invariants: the pump never waits for the loop (queues are bounded and
//! shed, counted); a sample's bytes are never read here beyond the
//! `ros_discovery_info` decoder's bounds.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use mio::{Events, Interest, Poll, Token, Waker};
use rosgate_core::nodes::Domain;
use rosgate_peers::ros2::queue::LinkQueue;
use rosgate_ros2::link::rmw_dds::{self, Endpoint, ParticipantInfo};
use rosgate_ros2::link::{Event, Gid};
use rustdds::no_key::SimpleDataReader;
use rustdds::{DomainParticipantStatusEvent, DomainParticipantStatusListener, StatusEvented};

use crate::raw::Raw;
use crate::requests::NoRequests;

/// Commands (readers to add or drop) waiting for the pump; an addition
/// past it is refused (its subscription is not made, counted), a removal
/// never is.
pub const MAX_DDS_COMMANDS: usize = 4096;

/// Discovery events waiting for the loop's next turn; more are dropped
/// (counted): an endpoint missed is not bridged until it is announced
/// again.
pub const MAX_DDS_DISCOVERY_EVENTS: usize = 4 * rosgate_ros2::link::MAX_ENTITIES;

/// Samples taken from one reader per wake before the pump looks at the
/// others (each is handed over or dropped at once; this only keeps one
/// busy topic from starving the rest).
pub const DDS_SAMPLES_PER_READER_WAKE: usize = 256;

pub type Reader = SimpleDataReader<Vec<u8>, Raw>;

const WAKER: Token = Token(0);

/// What a reader's samples are.
#[derive(Debug, Clone)]
pub enum Kind {
    /// A ROS 2 topic's data: its domain, ROS name and ROS type.
    Topic {
        domain: Domain,
        topic: String,
        ty: String,
    },
    /// `ros_discovery_info` of a domain.
    Info(Domain),
    /// Replies (`rr/`) to this gateway's calls.
    Reply { domain: Domain },
    /// Requests (`rq/`) of ROS 2 clients to a service this gateway offers.
    Request { domain: Domain, service: String },
    /// The feedback topic of an action this gateway's goals are in flight to.
    Feedback { domain: Domain, action: String },
}

/// A request's or reply's identity as rmw_fastrtps matches them: a GUID
/// (the client's reply reader when the request names it, else its request
/// writer) and the request's sequence number.
pub type SampleId = (Gid, i64);

/// What DDS discovery or `ros_discovery_info` said, for the loop.
#[derive(Debug)]
pub enum Disc {
    Found(Endpoint),
    Lost(Gid),
    ParticipantLost([u8; 12]),
    Info(ParticipantInfo),
    /// A reply to one of this gateway's calls: the reader that took it,
    /// the request it answers (its related sample identity), its CDR.
    Reply {
        reader: Gid,
        related: Option<SampleId>,
        payload: Vec<u8>,
    },
    /// A ROS 2 client's request: its identity, its CDR.
    Request {
        service: String,
        id: SampleId,
        payload: Vec<u8>,
    },
    /// A feedback message of an action (CDR).
    Feedback {
        action: String,
        payload: Vec<u8>,
    },
    /// One of this gateway's readers or writers matched a remote one.
    Matched(Gid),
}

enum Cmd {
    Add(Token, Box<Reader>, Kind),
    Drop(Token),
    Stop,
}

/// What the pump and the loop share. See the module docs.
pub struct Shared {
    pub queue: LinkQueue<NoRequests>,
    disc: Mutex<VecDeque<(Domain, Disc)>>,
    cmds: Mutex<Vec<Cmd>>,
    waker: Waker,
    /// This gateway's participants' prefixes (their endpoints are not news).
    own: Vec<[u8; 12]>,
    /// Discovery events and commands dropped, `ros_discovery_info`
    /// samples that did not decode, ever.
    pub disc_dropped: AtomicU64,
    pub cmds_refused: AtomicU64,
    pub bad_info: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn discovered(&self, domain: Domain, d: Disc) {
        let mut q = lock(&self.disc);
        if q.len() >= MAX_DDS_DISCOVERY_EVENTS {
            self.disc_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push_back((domain, d));
        drop(q);
        self.queue.inbox().wake();
    }

    /// The discovery events waiting, in order.
    pub fn take_discovery(&self) -> VecDeque<(Domain, Disc)> {
        std::mem::take(&mut *lock(&self.disc))
    }

    /// Hands `reader` to the pump (false, and counted, when its queue is
    /// full: the reader is dropped).
    pub fn add(&self, token: Token, reader: Reader, kind: Kind) -> bool {
        let mut c = lock(&self.cmds);
        if c.len() >= MAX_DDS_COMMANDS {
            self.cmds_refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        c.push(Cmd::Add(token, Box::new(reader), kind));
        drop(c);
        let _ = self.waker.wake();
        true
    }

    /// The pump drops the reader of `token` (never refused).
    pub fn remove(&self, token: Token) {
        lock(&self.cmds).push(Cmd::Drop(token));
        let _ = self.waker.wake();
    }
}

/// The pump thread's handle, on the loop's side.
pub struct Pump {
    pub shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// The first token readers get (the listeners have 1..=domains): the
/// `ros_discovery_info` readers first, one per domain, then topics' from
/// [`FIRST_TOPIC_TOKEN`].
pub const FIRST_READER_TOKEN: usize = 1 << 16;
/// The first token topics' readers get.
pub const FIRST_TOPIC_TOKEN: usize = FIRST_READER_TOKEN + 1024;

impl Pump {
    /// Starts the pump with the discovery listeners of each domain's
    /// participant (`own`: their GUID prefixes).
    pub fn start(
        listeners: Vec<(Domain, DomainParticipantStatusListener)>,
        own: Vec<[u8; 12]>,
        queue: LinkQueue<NoRequests>,
    ) -> Result<Pump, String> {
        let poll = Poll::new().map_err(|e| format!("dds: no poll: {e}"))?;
        let waker =
            Waker::new(poll.registry(), WAKER).map_err(|e| format!("dds: no waker: {e}"))?;
        let shared = Arc::new(Shared {
            queue,
            disc: Mutex::new(VecDeque::new()),
            cmds: Mutex::new(Vec::new()),
            waker,
            own,
            disc_dropped: AtomicU64::new(0),
            cmds_refused: AtomicU64::new(0),
            bad_info: AtomicU64::new(0),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("rosgate-dds".into())
            .spawn(move || run(poll, listeners, sh))
            .map_err(|e| format!("dds: no thread: {e}"))?;
        Ok(Pump {
            shared,
            thread: Some(thread),
        })
    }

    /// Stops the pump and waits for it (it drops its readers).
    pub fn stop(mut self) {
        lock(&self.shared.cmds).push(Cmd::Stop);
        let _ = self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn prefix(g: &Gid) -> [u8; 12] {
    let mut p = [0; 12];
    p.copy_from_slice(&g[..12]);
    p
}

fn endpoint(writer: bool, d: &rustdds::dds::statusevents::EndpointDescription) -> Endpoint {
    Endpoint {
        guid: d.guid.to_bytes(),
        writer,
        topic: d.topic_name.clone(),
        dds_type: d.type_name.clone(),
        qos: crate::qos::of(&d.qos),
        hash: rmw_dds::type_hash(&d.user_data),
    }
}

fn run(
    mut poll: Poll,
    mut listeners: Vec<(Domain, DomainParticipantStatusListener)>,
    sh: Arc<Shared>,
) {
    for (i, (_, l)) in listeners.iter_mut().enumerate() {
        if let Err(e) = poll
            .registry()
            .register(l, Token(1 + i), Interest::READABLE)
        {
            rosgate_core::log!(Warn, "dds: discovery not watched: {e}");
        }
    }
    let mut readers: HashMap<Token, (Box<Reader>, Kind)> = HashMap::new();
    let mut events = Events::with_capacity(256);
    // Readers left with samples after their allowance: taken again before
    // the pump waits (their readiness will not come again for those).
    let mut again: Vec<Token> = Vec::new();
    loop {
        let timeout = (!again.is_empty()).then_some(std::time::Duration::ZERO);
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            rosgate_core::log!(Warn, "dds: the pump stops: {e}");
            return;
        }
        let mut ready: Vec<Token> = events.iter().map(|e| e.token()).collect();
        ready.append(&mut again);
        ready.sort_unstable();
        ready.dedup();
        for t in ready {
            if t == WAKER {
                for c in std::mem::take(&mut *lock(&sh.cmds)) {
                    match c {
                        Cmd::Add(token, mut r, kind) => {
                            if poll
                                .registry()
                                .register(&mut *r, token, Interest::READABLE)
                                .is_ok()
                            {
                                // What arrived before registration.
                                if take(&sh, &mut r, &kind) {
                                    again.push(token);
                                }
                                readers.insert(token, (r, kind));
                            }
                        }
                        Cmd::Drop(token) => {
                            if let Some((mut r, _)) = readers.remove(&token) {
                                let _ = poll.registry().deregister(&mut *r);
                            }
                        }
                        Cmd::Stop => return,
                    }
                }
            } else if t.0 < FIRST_READER_TOKEN {
                if let Some((domain, l)) = listeners.get(t.0 - 1) {
                    status(&sh, *domain, l);
                }
            } else if let Some((r, kind)) = readers.get_mut(&t) {
                if take(&sh, r, kind) {
                    again.push(t);
                }
            }
        }
    }
}

/// Drains a domain's discovery events.
fn status(sh: &Shared, domain: Domain, l: &DomainParticipantStatusListener) {
    while let Some(ev) = l.try_recv_status() {
        let d = match ev {
            DomainParticipantStatusEvent::WriterDetected { writer } => {
                Disc::Found(endpoint(true, &writer))
            }
            DomainParticipantStatusEvent::ReaderDetected { reader } => {
                Disc::Found(endpoint(false, &reader))
            }
            DomainParticipantStatusEvent::WriterLost { guid, .. }
            | DomainParticipantStatusEvent::ReaderLost { guid, .. } => Disc::Lost(guid.to_bytes()),
            DomainParticipantStatusEvent::RemoteReaderMatched { local_writer, .. } => {
                Disc::Matched(local_writer.to_bytes())
            }
            DomainParticipantStatusEvent::RemoteWriterMatched { local_reader, .. } => {
                Disc::Matched(local_reader.to_bytes())
            }
            DomainParticipantStatusEvent::ParticipantLost { id, .. } => {
                let mut p = [0; 12];
                if let Some(b) = id.as_ref().get(..12) {
                    p.copy_from_slice(b);
                }
                Disc::ParticipantLost(p)
            }
            _ => continue,
        };
        let own = match &d {
            Disc::Found(e) => sh.own.contains(&prefix(&e.guid)),
            Disc::Lost(g) => sh.own.contains(&prefix(g)),
            Disc::ParticipantLost(p) => sh.own.contains(p),
            _ => false,
        };
        if !own {
            sh.discovered(domain, d);
        }
    }
}

/// Takes what a reader has, at most [`DDS_SAMPLES_PER_READER_WAKE`];
/// true when more may wait.
fn take(sh: &Shared, r: &mut Reader, kind: &Kind) -> bool {
    // RustDDS signals a reader through a bounded notification channel that
    // taking does not empty: undrained, it fills and the reader is never
    // signalled again (seen after about 277 900 KB images from Fast DDS).
    r.drain_read_notifications();
    for _ in 0..DDS_SAMPLES_PER_READER_WAKE {
        let s = match r.try_take_one() {
            Ok(Some(s)) => s,
            Ok(None) => return false,
            Err(e) => {
                rosgate_core::log!(Debug, "dds: a sample not read: {e}");
                continue;
            }
        };
        let writer = s.writer_guid.to_bytes();
        match kind {
            Kind::Info(domain) => match rmw_dds::decode_info(&s.sample) {
                Some(info) if !sh.own.contains(&prefix(&info.gid)) => {
                    sh.discovered(*domain, Disc::Info(info))
                }
                Some(_) => {}
                None => {
                    sh.bad_info.fetch_add(1, Ordering::Relaxed);
                }
            },
            Kind::Reply { domain } => {
                let reader = r.guid().to_bytes();
                let related = s
                    .write_options
                    .related_sample_identity()
                    .map(|r| (r.writer_guid.to_bytes(), i64::from(r.sequence_number)));
                sh.discovered(
                    *domain,
                    Disc::Reply {
                        reader,
                        related,
                        payload: s.sample,
                    },
                );
            }
            Kind::Request { domain, service } => {
                // rmw_fastrtps's clients name their reply reader in the
                // request's related sample identity; others are known by
                // their request writer.
                let guid = s
                    .write_options
                    .related_sample_identity()
                    .map(|r| r.writer_guid.to_bytes())
                    .filter(|g| g.iter().any(|b| *b != 0))
                    .unwrap_or(writer);
                sh.discovered(
                    *domain,
                    Disc::Request {
                        service: service.clone(),
                        id: (guid, i64::from(s.sequence_number)),
                        payload: s.sample,
                    },
                );
            }
            Kind::Feedback { domain, action } => sh.discovered(
                *domain,
                Disc::Feedback {
                    action: action.clone(),
                    payload: s.sample,
                },
            ),
            Kind::Topic { domain, topic, ty } => {
                if sh.own.contains(&prefix(&writer)) {
                    continue;
                }
                if sh.queue.inbox().is_full() {
                    sh.queue.inbox().drop_one();
                    continue;
                }
                sh.queue.sample(Event::Sample {
                    domain: u32::from(*domain),
                    topic: topic.clone(),
                    publisher: Some(writer),
                    ty: ty.clone(),
                    hash: String::new(),
                    payload: s.sample,
                });
            }
        }
    }
    true
}
