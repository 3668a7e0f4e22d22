//! `Conn`: the sans-io state of one client connection (a slab entry of the
//! hub), `ConnRef`, the generation-checked handle other tables keep, and
//! `CloseReason`.
//!
//! Invariants:
//! - slab keys are reused, generations are not (until u32 wraps): any
//!   reference kept across loop iterations is a `ConnRef` and is checked
//!   against the slab entry's `gen` before use;
//! - a `Conn` holds only its own transport and output state; what it has
//!   registered and which calls name it are kept by their owners
//!   ([`crate::registry::Registry`], [`crate::calls::Calls`]), which
//!   withdraw it in one call each when it is freed;
//! - once `closing` is set, nothing new is queued for the connection.

use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use rosgate_wire::fragment::Reassembly;

use crate::access::RoleId;
pub use crate::codes::CloseReason;
pub use crate::conn_ref::ConnRef;
use crate::nodes::Domain;
use crate::out::OutQueue;
use crate::transport::{Link, Policy, StatusFilter, Transport};

/// One connection's protocol state. The socket lives in the I/O shell.
#[derive(Debug)]
pub struct Conn {
    gen: u32,
    link: Link,
    /// The link's policy, kept here too: the link is taken out while its
    /// events are handled, and handlers ask for the policy.
    policy: Policy,
    out: OutQueue,
    closing: Option<CloseReason>,
    /// Last write progress, or when output became pending (P7).
    out_since: Instant,
    /// Already listed in the hub's dirty list this iteration.
    dirty: bool,
    opened_at: Instant,
    /// Completed its opening (WebSocket upgrade, or a first whole line).
    established: bool,
    /// Last input, or write progress (for the idle timeout).
    last_active: Instant,
    /// Since when a partial message has been buffered.
    partial_since: Option<Instant>,
    /// Since when control data has been above the soft limit (P19).
    soft_since: Option<Instant>,
    /// Bytes of partial input held, as last accounted (partial lines or
    /// WebSocket messages, and partial fragmented messages).
    input_held: usize,
    /// Its partial fragmented messages (`hub/fragments.rs`); made at its
    /// first `fragment` piece, as few clients fragment.
    fragments: Option<Box<Reassembly>>,
    /// The peer's address when it is limited per address (non-loopback).
    limited_peer: Option<IpAddr>,
    /// The peer's address and port, when the shell knows it.
    peer: Option<SocketAddr>,
    transport: Transport,
    /// The graph its registrations belong to (`docs/protocol.md`,
    /// "Domains").
    domain: Domain,
    /// Names it uses are resolved (it declared a node, or `--names
    /// strict`); otherwise they are opaque exact strings.
    resolves: bool,
    /// It was warned that a reliable subscription falls behind.
    reliable_warned: bool,
    /// What it may do ([`crate::access::Access`]); with authentication on,
    /// meaningful once `authed`.
    role: RoleId,
    /// It presented a valid token (always true with authentication off).
    authed: bool,
    /// Held for the token-guessing delay (`hub/auth.rs`): its input is
    /// ignored until it is refused and closed.
    held: bool,
    /// A federation link, not a client (`hub/federation.rs`): no socket,
    /// no deadlines, never counted or listed as a client.
    bridge: bool,
    /// The Foxglove protocol's state, when the opening agreed to it.
    foxglove: Option<Box<crate::foxglove::Session>>,
    /// Accepted on the Foxglove listener: its opening must offer a
    /// Foxglove subprotocol.
    foxglove_port: bool,
}

impl Conn {
    pub(crate) fn new(
        gen: u32,
        now: Instant,
        transport: Transport,
        ws_status: StatusFilter,
        peer: Option<SocketAddr>,
        limited_peer: Option<IpAddr>,
    ) -> Self {
        let link = Link::new(transport, ws_status);
        Conn {
            gen,
            out: OutQueue::with_framing(link.framing()),
            policy: link.policy(),
            link,
            closing: None,
            out_since: now,
            dirty: false,
            opened_at: now,
            established: false,
            last_active: now,
            partial_since: None,
            soft_since: None,
            input_held: 0,
            fragments: None,
            limited_peer,
            peer,
            transport,
            domain: 0,
            resolves: false,
            reliable_warned: false,
            role: 0,
            authed: false,
            held: false,
            bridge: false,
            foxglove: None,
            foxglove_port: false,
        }
    }

    /// Whether it came from the Foxglove listener.
    pub fn on_foxglove_port(&self) -> bool {
        self.foxglove_port
    }

    pub(crate) fn set_foxglove_port(&mut self) {
        self.foxglove_port = true;
    }

    /// The Foxglove session, when the connection speaks that protocol.
    pub fn foxglove(&self) -> Option<&crate::foxglove::Session> {
        self.foxglove.as_deref()
    }

    pub(crate) fn foxglove_mut(&mut self) -> Option<&mut crate::foxglove::Session> {
        self.foxglove.as_deref_mut()
    }

    /// Makes it a Foxglove session (its opening agreed to the protocol).
    pub(crate) fn start_foxglove(&mut self, session: crate::foxglove::Session) {
        self.policy = Policy::foxglove(self.policy.statuses());
        self.foxglove = Some(Box::new(session));
    }

    /// Whether it is a federation link rather than a client.
    pub fn is_bridge(&self) -> bool {
        self.bridge
    }

    /// Turns a fresh connection into a federation link: established and
    /// authorised from the start, exempt from the client deadlines.
    pub(crate) fn make_bridge(&mut self, role: RoleId) {
        self.bridge = true;
        self.established = true;
        self.authorize(role);
    }

    pub fn role(&self) -> RoleId {
        self.role
    }

    pub fn is_authed(&self) -> bool {
        self.authed
    }

    /// Whether it is held for the token-guessing delay.
    pub fn is_held(&self) -> bool {
        self.held
    }

    pub(crate) fn hold(&mut self) {
        self.held = true;
    }

    /// Admits it with `role` (a valid token, or authentication off).
    pub(crate) fn authorize(&mut self, role: RoleId) {
        self.role = role;
        self.authed = true;
    }

    pub(crate) fn reliable_warned(&self) -> bool {
        self.reliable_warned
    }

    pub(crate) fn set_reliable_warned(&mut self, v: bool) {
        self.reliable_warned = v;
    }

    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The peer's address and port, when known.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    pub fn domain(&self) -> Domain {
        self.domain
    }

    pub(crate) fn set_domain(&mut self, domain: Domain) {
        self.domain = domain;
    }

    /// Whether the names it uses are resolved (see the field).
    pub fn resolves(&self) -> bool {
        self.resolves
    }

    pub(crate) fn set_resolves(&mut self) {
        self.resolves = true;
    }

    /// Which statuses it receives from now on (`set_level`).
    pub(crate) fn set_statuses(&mut self, statuses: StatusFilter) {
        self.policy = self.policy.with_statuses(statuses);
    }

    /// When the connection was admitted.
    pub fn opened_at(&self) -> Instant {
        self.opened_at
    }

    /// Whether it completed its opening.
    pub fn is_established(&self) -> bool {
        self.established
    }

    pub(crate) fn establish(&mut self) {
        self.established = true;
    }

    pub(crate) fn limited_peer(&self) -> Option<IpAddr> {
        self.limited_peer
    }

    /// Records input at `now`; returns the change in bytes of partial input
    /// held (for the memory ledger).
    pub(crate) fn after_input(&mut self, now: Instant) -> isize {
        self.last_active = now;
        let held = self.link.buffered();
        if held == 0 {
            self.partial_since = None;
        } else if self.partial_since.is_none() {
            self.partial_since = Some(now);
        }
        self.account_input()
    }

    /// Recounts the partial input held (after fragments changed); returns
    /// the change in bytes, for the memory ledger.
    pub(crate) fn account_input(&mut self) -> isize {
        let held = self.link.buffered() + self.fragments.as_ref().map_or(0, |f| f.held_bytes());
        let delta = held as isize - self.input_held as isize;
        self.input_held = held;
        delta
    }

    /// Its fragment table, made with `make` at first use.
    pub(crate) fn fragments_mut(&mut self, make: impl FnOnce() -> Reassembly) -> &mut Reassembly {
        self.fragments.get_or_insert_with(|| Box::new(make()))
    }

    /// Whether it has a fragment table (listed for the expiry).
    pub(crate) fn has_fragment_table(&self) -> bool {
        self.fragments.is_some()
    }

    /// Its fragment table, when it has one with messages in flight.
    pub(crate) fn fragments_in_flight(&mut self) -> Option<&mut Reassembly> {
        self.fragments.as_deref_mut().filter(|f| !f.is_empty())
    }

    /// Drops its fragment table once empty (most clients fragment rarely).
    pub(crate) fn drop_empty_fragments(&mut self) {
        if self.fragments.as_ref().is_some_and(|f| f.is_empty()) {
            self.fragments = None;
        }
    }

    /// Bytes of partial input held.
    pub fn input_held(&self) -> usize {
        self.input_held
    }

    pub(crate) fn last_active(&self) -> Instant {
        self.last_active
    }

    pub(crate) fn partial_since(&self) -> Option<Instant> {
        self.partial_since
    }

    /// Updates the soft-limit clock after control bytes changed.
    pub(crate) fn note_control(&mut self, soft_limit: usize, now: Instant) {
        if self.out.control_bytes() > soft_limit {
            self.soft_since.get_or_insert(now);
        } else {
            self.soft_since = None;
        }
    }

    pub(crate) fn soft_since(&self) -> Option<Instant> {
        self.soft_since
    }

    /// Empties the output queue (the connection is being freed); returns
    /// (bytes of shared frames freed, topic bytes dropped, control bytes
    /// dropped).
    pub(crate) fn clear_out(&mut self) -> (usize, usize, usize) {
        let (topic, control) = (self.out.topic_bytes(), self.out.control_bytes());
        (self.out.clear(), topic, control)
    }

    pub fn gen(&self) -> u32 {
        self.gen
    }

    pub fn is_open(&self) -> bool {
        self.closing.is_none()
    }

    /// Why the connection is closing, once it is.
    pub fn closing(&self) -> Option<CloseReason> {
        self.closing
    }

    /// Marks the connection closing; false if it already was.
    pub(crate) fn mark_closing(&mut self, reason: CloseReason) -> bool {
        if self.closing.is_some() {
            return false;
        }
        self.closing = Some(reason);
        true
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// What the transport sends when the gateway goes away, if anything.
    pub(crate) fn goodbye(&self) -> Option<Vec<u8>> {
        self.link.goodbye()
    }

    pub(crate) fn link_mut(&mut self) -> &mut Link {
        &mut self.link
    }

    /// Takes the link out (so its events can be handled with the hub
    /// borrowed); [`Conn::restore_link`] puts it back.
    pub(crate) fn take_link(&mut self) -> Link {
        let placeholder = Link::new(Transport::Tcp, StatusFilter::All);
        std::mem::replace(&mut self.link, placeholder)
    }

    pub(crate) fn restore_link(&mut self, link: Link) {
        self.link = link;
    }

    pub fn out(&self) -> &OutQueue {
        &self.out
    }

    /// The output queue, for pushing; starts the stall clock when the queue
    /// was empty.
    pub(crate) fn out_mut(&mut self, now: Instant) -> &mut OutQueue {
        if self.out.is_empty() {
            self.out_since = now;
        }
        &mut self.out
    }

    /// The output queue, for changes that queue nothing (a topic's QoS):
    /// unlike [`Conn::out_mut`], the stall clock is left alone.
    pub(crate) fn out_settings_mut(&mut self) -> &mut OutQueue {
        &mut self.out
    }

    /// Records `n` bytes written; returns (bytes of shared frames freed,
    /// control bytes written).
    pub(crate) fn wrote(&mut self, n: usize, now: Instant) -> (usize, usize) {
        let control = self.out.control_bytes();
        let released = self.out.consume(n);
        if n > 0 {
            self.out_since = now;
            self.last_active = now;
        }
        (released, control - self.out.control_bytes())
    }

    /// Since when output has been pending without progress.
    pub(crate) fn out_since(&self) -> Instant {
        self.out_since
    }

    /// Sets the dirty flag; true if it was not set (the caller lists it).
    pub(crate) fn set_dirty(&mut self) -> bool {
        !std::mem::replace(&mut self.dirty, true)
    }

    pub(crate) fn clear_dirty(&mut self) {
        self.dirty = false;
    }
}
