//! The model's data for a Foxglove WebSocket session (`docs/protocol.md`,
//! "Foxglove WebSocket protocol"; the behaviour is `driver/foxglove.rs`):
//! what the hub holds for it and what the client learnt from it.
//!
//! The hub advertises one channel per topic of the session's domain with a
//! type and a publisher, and re-makes the list once per turn (`Hub::expire`,
//! after the QoS flushes) when the registry changed; channel ids are the
//! hub's own and never reused, so the client learns them from the
//! `advertise` it reads. The model predicts the channel of
//! [`TYPED_TOPIC`](super::encodings::TYPED_TOPIC) exactly (every
//! registration of it names its type, a bundled one, so its channel is
//! `cdr`): it exists while some connection of the domain advertises the
//! topic, and each time it comes back it is a new channel (an ordinal
//! here, an id the client learns). Other topics' channels are learnt but
//! not predicted.
//!
//! Invariants: a subscription the model holds ([`FxSide::subs`]) is a
//! registration of the connection on its topic with no id and no node, in
//! the encoding `Comp::Foxglove(sub)`; the hub withdraws it when its
//! channel goes, and the model with it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// One sync of the typed topic's channel the client must read, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChanEvent {
    /// `advertise` of a new channel for the topic.
    Advertised,
    /// `unadvertise` of its channel.
    Unadvertised,
}

/// A Foxglove session's side of a WebSocket client.
#[derive(Debug, Default)]
pub(crate) struct FxSide {
    /// The hub started the session (its opening was answered with the
    /// subprotocol); the hub then syncs its channels.
    pub started: bool,
    /// `serverInfo` was read (it comes first).
    pub info: bool,
    /// The hub's current channel of the typed topic: its ordinal (how
    /// many times the hub has advertised one to this session).
    pub chan: Option<u64>,
    /// Channels made so far for the typed topic.
    pub made: u64,
    /// Changes of the typed topic's channel owed to the client, in order.
    pub owed: VecDeque<ChanEvent>,
    /// Client side: channel id -> (topic, ordinal of the typed topic's
    /// channel, 0 for others), from the `advertise` messages read.
    pub learnt: BTreeMap<u32, (String, u64)>,
    /// Every channel id advertised to it (never reused).
    pub ids: BTreeSet<u32>,
    /// Advertises of the typed topic read so far.
    pub seen: u64,
    /// The hub's subscriptions of the session: id -> topic.
    pub subs: BTreeMap<u32, String>,
    /// The next subscription id the client uses.
    pub next_sub: u32,
    /// Its client channel on the typed topic when it advertised one (id,
    /// `cdr` rather than `json`), and the next id it gives one.
    pub client_chan: Option<(u32, bool)>,
    pub next_client_chan: u32,
    /// Its topic frames shed, and how many of them a drop warning told.
    pub shed: u64,
    pub warned: u64,
}

impl FxSide {
    /// The id the client learnt for the typed topic's current channel,
    /// when what it read is up to date with the hub.
    pub fn typed_channel(&self) -> Option<u32> {
        let now = self.chan?;
        self.learnt
            .iter()
            .find(|(_, (t, n))| t == super::encodings::TYPED_TOPIC && *n == now)
            .map(|(&id, _)| id)
    }
}
