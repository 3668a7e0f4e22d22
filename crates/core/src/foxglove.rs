//! `Session`: what one Foxglove WebSocket connection holds of the
//! protocol (`docs/protocol.md`, "Foxglove WebSocket protocol"): the
//! channels advertised to it (one per (topic, type) of its domain), its
//! subscriptions by the client's ids. The hub (`hub/foxglove.rs`) turns
//! them into its ordinary operations: a subscription is the connection's
//! registration on the topic in the encoding
//! `Compression::Foxglove { sub, cdr }`, so delivery, shedding and the
//! memory ledger are the rosbridge subscriptions' own.
//!
//! Invariants:
//! - channel ids are never reused within a session (a topic that goes
//!   and comes back gets a new id), so a late message of an old channel
//!   cannot be read as a new one's;
//! - at most [`MAX_FOXGLOVE_CHANNELS`] channels are advertised to one
//!   session; topics past it are not advertised (the hub says so once);
//! - a channel has at most one subscription (the hub registers one per
//!   topic and connection), so subscriptions are bounded by channels;
//! - the session goes with its connection (it lives in `Conn`): nothing
//!   to withdraw elsewhere, the registrations go through `Registry::withdraw`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Channels advertised to one Foxglove session at most.
pub const MAX_FOXGLOVE_CHANNELS: usize = 10_000;

/// Client channels (`advertise` from the client, for `clientPublish`) one
/// session holds at most.
pub const MAX_FOXGLOVE_CLIENT_CHANNELS: usize = 10_000;

/// Under sim time, a session hears the time (when it moved) at most this
/// often.
pub const TIME_INTERVAL: Duration = Duration::from_millis(50);

/// Parameter names one session watches (`subscribeParameterUpdates`) at
/// most.
pub const MAX_FOXGLOVE_PARAM_WATCHES: usize = 10_000;

/// Goals one session keeps (sent through an action's `send_goal`
/// service, for `get_result` and `cancel_goal`); past it, the oldest ended
/// one is forgotten, and with none ended a new goal is refused.
pub const MAX_FOXGLOVE_GOALS: usize = 1_000;

/// `get_result` calls waiting for one goal's end at most.
pub const MAX_FOXGLOVE_RESULT_WAITERS: usize = 16;

/// Services advertised to one session at most.
pub const MAX_FOXGLOVE_SERVICES: usize = 10_000;

/// A session whose messages are shed hears so in a warning `status` at
/// most this often, with the count since the last one.
pub const DROP_WARNING_INTERVAL: Duration = Duration::from_secs(1);

/// A channel of the server, as advertised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub topic: String,
    /// The type as the topic has it in the registry.
    pub ty: String,
    /// `cdr` (the type is known) or `json`.
    pub cdr: bool,
    /// The subscription on it, if any.
    pub sub: Option<u32>,
}

/// A client channel: the client publishes `topic` through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientChannel {
    pub topic: String,
    /// Its type (the client's `schemaName`), as registered.
    pub ty: String,
    /// `cdr` (decoded by `ty`), else `json`.
    pub cdr: bool,
}

/// A service of the session's domain, as advertised to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub name: String,
    /// Its type as the registry has it (any name form).
    pub ty: String,
}

/// The connection graph as a session was last told it: topics' publishers
/// and subscribers and services' providers, by name, as node names
/// (sorted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Graph {
    pub published: BTreeMap<String, Vec<String>>,
    pub subscribed: BTreeMap<String, Vec<String>>,
    pub services: BTreeMap<String, Vec<String>>,
}

/// What changed from one [`Graph`] to the next, as
/// `connectionGraphUpdate` says it: entries added or changed, names gone.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct GraphDiff {
    pub published: Vec<(String, Vec<String>)>,
    pub subscribed: Vec<(String, Vec<String>)>,
    pub services: Vec<(String, Vec<String>)>,
    pub removed_topics: Vec<String>,
    pub removed_services: Vec<String>,
}

impl GraphDiff {
    pub fn is_empty(&self) -> bool {
        *self == GraphDiff::default()
    }
}

fn changed(
    old: &BTreeMap<String, Vec<String>>,
    new: &BTreeMap<String, Vec<String>>,
) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    // A name that lost every member of one side but stays on the other.
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.push((k.clone(), Vec::new()));
    }
    out
}

impl Graph {
    /// What `self` (told) must hear to become `new`.
    pub fn diff(&self, new: &Graph) -> GraphDiff {
        let topic_in =
            |g: &Graph, k: &str| g.published.contains_key(k) || g.subscribed.contains_key(k);
        let gone_topics: Vec<String> = self
            .published
            .keys()
            .chain(self.subscribed.keys())
            .filter(|k| !topic_in(new, k))
            .cloned()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let strip = |l: Vec<(String, Vec<String>)>| -> Vec<(String, Vec<String>)> {
            l.into_iter()
                .filter(|(k, _)| !gone_topics.contains(k))
                .collect()
        };
        GraphDiff {
            published: strip(changed(&self.published, &new.published)),
            subscribed: strip(changed(&self.subscribed, &new.subscribed)),
            services: changed(&self.services, &new.services)
                .into_iter()
                .filter(|(k, _)| new.services.contains_key(k))
                .collect(),
            removed_services: self
                .services
                .keys()
                .filter(|k| !new.services.contains_key(*k))
                .cloned()
                .collect(),
            removed_topics: gone_topics,
        }
    }
}

/// A `get_result` call waiting for its goal's end: (service id, call id,
/// encoding).
pub type Waiter = (u32, u32, String);

/// A goal a session sent, by its UUID.
#[derive(Debug, Clone, Default)]
pub struct Goal {
    /// The action's name and type.
    pub action: String,
    pub ty: String,
    /// When it was sent (wall time: seconds, nanoseconds), its
    /// `GoalInfo.stamp` on the status channel.
    pub stamp: (u64, u32),
    /// A `cancel_goal` of it was accepted (status CANCELING until its end).
    pub canceling: bool,
    /// Its end when it came: (`action_msgs/msg/GoalStatus` status, the
    /// result's JSON, or the reason when it failed without a result).
    pub end: Option<(i8, String)>,
    /// `get_result` calls answered at its end.
    pub waiting: Vec<Waiter>,
}

/// See the module docs.
#[derive(Debug)]
pub struct Session {
    /// The subprotocol agreed (echoed in the opening).
    protocol: &'static str,
    channels: BTreeMap<u32, Channel>,
    /// (topic, type) -> channel id.
    by_topic: HashMap<(String, String), u32>,
    /// Subscription id -> channel id.
    subs: HashMap<u32, u32>,
    next_channel: u32,
    /// The change counts (the domain's registry, other gateways' and the
    /// ROS 2 graph's) the channels were last made from.
    synced: Option<(u64, u64)>,
    /// The channel limit was reported.
    told_full: bool,
    /// Services advertised, by id (never reused), and by (name, type).
    services: BTreeMap<u32, Service>,
    service_ids: HashMap<(String, String), u32>,
    next_service: u32,
    told_services_full: bool,
    /// Goals sent, by UUID, in the order sent.
    goals: HashMap<[u8; 16], Goal>,
    goal_order: std::collections::VecDeque<[u8; 16]>,
    /// Parameter names watched, as the client names them (`/node.param`).
    param_watches: std::collections::HashSet<String>,
    /// The connection graph as last told, while subscribed to it.
    graph: Option<Graph>,
    /// The last time message's stamp (ns) and when it was sent.
    time: Option<(u64, Instant)>,
    /// Client channels by the client's ids.
    client_channels: HashMap<u32, ClientChannel>,
    /// Messages shed since the last warning, and when that was.
    dropped: u64,
    warned_at: Option<Instant>,
}

/// What a subscribe asks of the hub, or why it is refused.
#[derive(Debug, PartialEq, Eq)]
pub enum SubscribeCheck<'a> {
    /// Register on this channel.
    Register(&'a Channel),
    Refused(String),
}

impl Session {
    pub fn new(protocol: &'static str) -> Session {
        Session {
            protocol,
            channels: BTreeMap::new(),
            by_topic: HashMap::new(),
            subs: HashMap::new(),
            next_channel: 1,
            synced: None,
            told_full: false,
            services: BTreeMap::new(),
            service_ids: HashMap::new(),
            next_service: 1,
            told_services_full: false,
            goals: HashMap::new(),
            goal_order: std::collections::VecDeque::new(),
            param_watches: std::collections::HashSet::new(),
            graph: None,
            time: None,
            client_channels: HashMap::new(),
            dropped: 0,
            warned_at: None,
        }
    }

    /// Makes the advertised services those of `want` ((name, type), at
    /// most [`MAX_FOXGLOVE_SERVICES`]): the ids gone, the ids added, and
    /// whether `want` was cut (first time only).
    pub fn sync_services(&mut self, want: &[(String, String)]) -> (Vec<u32>, Vec<u32>, bool) {
        let keep: std::collections::HashSet<(&str, &str)> = want
            .iter()
            .take(MAX_FOXGLOVE_SERVICES)
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        let mut gone = Vec::new();
        self.services.retain(|&id, s| {
            let stays = keep.contains(&(s.name.as_str(), s.ty.as_str()));
            if !stays {
                gone.push((id, (s.name.clone(), s.ty.clone())));
            }
            stays
        });
        for (_, key) in &gone {
            self.service_ids.remove(key);
        }
        let mut added = Vec::new();
        for (name, ty) in want.iter().take(MAX_FOXGLOVE_SERVICES) {
            let key = (name.clone(), ty.clone());
            if self.service_ids.contains_key(&key) {
                continue;
            }
            let id = self.next_service;
            self.next_service = self.next_service.wrapping_add(1).max(1);
            self.service_ids.insert(key, id);
            self.services.insert(
                id,
                Service {
                    name: name.clone(),
                    ty: ty.clone(),
                },
            );
            added.push(id);
        }
        let cut = want.len() > MAX_FOXGLOVE_SERVICES && !self.told_services_full;
        self.told_services_full |= cut;
        (gone.into_iter().map(|(id, _)| id).collect(), added, cut)
    }

    pub fn service(&self, id: u32) -> Option<&Service> {
        self.services.get(&id)
    }

    /// Why client channel `id` cannot be added, if it cannot.
    pub fn check_client_channel(&self, id: u32) -> Option<String> {
        if self.client_channels.contains_key(&id) {
            return Some(format!(
                "client channel {id} is advertised already; not advertised"
            ));
        }
        (self.client_channels.len() >= MAX_FOXGLOVE_CLIENT_CHANNELS).then(|| {
            format!(
                "client channel {id}: this session holds {MAX_FOXGLOVE_CLIENT_CHANNELS} client channels, the limit; not advertised"
            )
        })
    }

    /// Records client channel `id` (the hub registered its publisher).
    pub fn add_client_channel(&mut self, id: u32, ch: ClientChannel) {
        self.client_channels.insert(id, ch);
    }

    pub fn client_channel(&self, id: u32) -> Option<&ClientChannel> {
        self.client_channels.get(&id)
    }

    /// Forgets client channel `id`: it and whether another client channel
    /// still publishes its topic (then the registration stays).
    pub fn remove_client_channel(&mut self, id: u32) -> Option<(ClientChannel, bool)> {
        let ch = self.client_channels.remove(&id)?;
        let shared = self.client_channels.values().any(|c| c.topic == ch.topic);
        Some((ch, shared))
    }

    /// Records goal `uuid` of `action`, sent at `stamp`; `Err` says why
    /// not (the UUID is in use, or [`MAX_FOXGLOVE_GOALS`] goals are in
    /// flight).
    pub fn add_goal(
        &mut self,
        uuid: [u8; 16],
        action: &str,
        ty: &str,
        stamp: (u64, u32),
    ) -> Result<(), String> {
        if self.goals.contains_key(&uuid) {
            return Err("a goal with this goal_id was sent already".into());
        }
        if self.goals.len() >= MAX_FOXGLOVE_GOALS {
            let ended = self
                .goal_order
                .iter()
                .position(|u| self.goals.get(u).is_some_and(|g| g.end.is_some()));
            match ended {
                Some(i) => {
                    if let Some(u) = self.goal_order.remove(i) {
                        self.goals.remove(&u);
                    }
                }
                None => {
                    return Err(format!(
                        "this session has {MAX_FOXGLOVE_GOALS} goals in flight, the limit"
                    ))
                }
            }
        }
        self.goals.insert(
            uuid,
            Goal {
                action: action.to_owned(),
                ty: ty.to_owned(),
                stamp,
                ..Goal::default()
            },
        );
        self.goal_order.push_back(uuid);
        Ok(())
    }

    pub fn goal(&self, uuid: &[u8; 16]) -> Option<&Goal> {
        self.goals.get(uuid)
    }

    /// Marks goal `uuid` as being canceled (a `cancel_goal` was accepted).
    pub fn canceling(&mut self, uuid: &[u8; 16]) {
        if let Some(g) = self.goals.get_mut(uuid) {
            g.canceling = true;
        }
    }

    /// The goals of `action` this session keeps, in the order sent:
    /// (UUID, the goal).
    pub fn goals_of<'a>(&'a self, action: &'a str) -> impl Iterator<Item = ([u8; 16], &'a Goal)> {
        self.goal_order
            .iter()
            .filter_map(|u| Some((*u, self.goals.get(u)?)))
            .filter(move |(_, g)| g.action == action)
    }

    /// Records goal `uuid`'s end; the `get_result` calls waiting for it.
    pub fn end_goal(&mut self, uuid: &[u8; 16], status: i8, result: String) -> Vec<Waiter> {
        match self.goals.get_mut(uuid) {
            Some(g) => {
                g.end = Some((status, result));
                std::mem::take(&mut g.waiting)
            }
            None => Vec::new(),
        }
    }

    /// A `get_result` call for goal `uuid`: its end now if it came (the
    /// call is answered at once), else `Ok(None)` and it waits; `Err` for an
    /// unknown goal or too many waiting.
    pub fn wait_result(
        &mut self,
        uuid: &[u8; 16],
        w: Waiter,
    ) -> Result<Option<(i8, String)>, String> {
        let g = self
            .goals
            .get_mut(uuid)
            .ok_or_else(|| "no goal of this session has this goal_id".to_string())?;
        if let Some(end) = &g.end {
            return Ok(Some(end.clone()));
        }
        if g.waiting.len() >= MAX_FOXGLOVE_RESULT_WAITERS {
            return Err(format!(
                "{MAX_FOXGLOVE_RESULT_WAITERS} get_result calls wait for this goal already"
            ));
        }
        g.waiting.push(w);
        Ok(None)
    }

    /// The subscription on the channel of `topic`, if any.
    pub fn subscription_on(&self, topic: &str) -> Option<u32> {
        self.channels
            .values()
            .find(|c| c.topic == topic)
            .and_then(|c| c.sub)
    }

    /// Watches parameter `name`; false (nothing changed) past
    /// [`MAX_FOXGLOVE_PARAM_WATCHES`].
    pub fn watch_param(&mut self, name: &str) -> bool {
        if self.param_watches.contains(name) {
            return true;
        }
        if self.param_watches.len() >= MAX_FOXGLOVE_PARAM_WATCHES {
            return false;
        }
        self.param_watches.insert(name.to_owned());
        true
    }

    pub fn unwatch_param(&mut self, name: &str) {
        self.param_watches.remove(name);
    }

    pub fn watches_param(&self, name: &str) -> bool {
        self.param_watches.contains(name)
    }

    /// `subscribeConnectionGraph` (`true`) or its end.
    pub fn watch_graph(&mut self, on: bool) {
        self.graph = on.then(Graph::default);
    }

    pub fn watches_graph(&self) -> bool {
        self.graph.is_some()
    }

    /// What the session must hear to know `now` (kept as told); `None`
    /// when it does not watch the graph or nothing changed.
    pub fn graph_update(&mut self, now: Graph) -> Option<GraphDiff> {
        let told = self.graph.as_mut()?;
        let d = told.diff(&now);
        *told = now;
        (!d.is_empty()).then_some(d)
    }

    /// Whether a time message stamped `ns` is due at `now`: a new stamp,
    /// and the last message at least `interval` ago.
    pub fn time_due(&mut self, ns: u64, now: Instant, interval: Duration) -> bool {
        let due = match self.time {
            None => true,
            Some((last, at)) => last != ns && now.saturating_duration_since(at) >= interval,
        };
        if due {
            self.time = Some((ns, now));
        }
        due
    }

    /// Counts `n` messages shed from the connection's queue.
    pub fn note_dropped(&mut self, n: u64) {
        self.dropped += n;
    }

    /// The messages shed to report now, if any and the last warning is
    /// [`DROP_WARNING_INTERVAL`] old (debounced).
    pub fn take_drop_warning(&mut self, now: Instant) -> Option<u64> {
        if self.dropped == 0
            || self
                .warned_at
                .is_some_and(|t| now.saturating_duration_since(t) < DROP_WARNING_INTERVAL)
        {
            return None;
        }
        self.warned_at = Some(now);
        Some(std::mem::take(&mut self.dropped))
    }

    pub fn protocol(&self) -> &'static str {
        self.protocol
    }

    /// Channels advertised now.
    pub fn channels(&self) -> impl Iterator<Item = (u32, &Channel)> {
        self.channels.iter().map(|(&id, c)| (id, c))
    }

    pub fn channel_count(&self) -> usize {
        self.channels.len()
    }

    pub fn subscription_count(&self) -> usize {
        self.subs.len()
    }

    /// Whether the channels were made from change counts `epoch`.
    pub fn synced_at(&self, epoch: (u64, u64)) -> bool {
        self.synced == Some(epoch)
    }

    pub fn set_synced(&mut self, epoch: (u64, u64)) {
        self.synced = Some(epoch);
    }

    /// Makes the channels those of `want` ((topic, type, cdr), at most
    /// [`MAX_FOXGLOVE_CHANNELS`] taken): returns the channels gone (with
    /// their subscriptions, which the hub withdraws) and the ids of those
    /// added, and whether `want` was cut (first time only).
    pub fn sync(&mut self, want: &[(String, String, bool)]) -> Synced {
        let mut keep: HashMap<(&str, &str), bool> = HashMap::with_capacity(want.len());
        for (topic, ty, cdr) in want.iter().take(MAX_FOXGLOVE_CHANNELS) {
            keep.insert((topic.as_str(), ty.as_str()), *cdr);
        }
        let mut gone = Vec::new();
        self.channels.retain(|&id, c| {
            let stays = keep.get(&(c.topic.as_str(), c.ty.as_str())) == Some(&c.cdr);
            if !stays {
                gone.push((id, c.clone()));
            }
            stays
        });
        for (_, c) in &gone {
            self.by_topic.remove(&(c.topic.clone(), c.ty.clone()));
            if let Some(sub) = c.sub {
                self.subs.remove(&sub);
            }
        }
        let mut added = Vec::new();
        for (topic, ty, cdr) in want.iter().take(MAX_FOXGLOVE_CHANNELS) {
            let key = (topic.clone(), ty.clone());
            if self.by_topic.contains_key(&key) {
                continue;
            }
            let id = self.next_channel;
            self.next_channel = self.next_channel.wrapping_add(1).max(1);
            self.by_topic.insert(key, id);
            self.channels.insert(
                id,
                Channel {
                    topic: topic.clone(),
                    ty: ty.clone(),
                    cdr: *cdr,
                    sub: None,
                },
            );
            added.push(id);
        }
        let cut = want.len() > MAX_FOXGLOVE_CHANNELS && !self.told_full;
        self.told_full |= cut;
        Synced { gone, added, cut }
    }

    pub fn channel(&self, id: u32) -> Option<&Channel> {
        self.channels.get(&id)
    }

    /// Whether subscription `sub` on channel `chan` may be made.
    pub fn check_subscribe(&self, sub: u32, chan: u32) -> SubscribeCheck<'_> {
        if let Some(c) = self.subs.get(&sub) {
            return SubscribeCheck::Refused(format!(
                "subscription id {sub} is in use (channel {c}); not subscribed"
            ));
        }
        match self.channels.get(&chan) {
            None => SubscribeCheck::Refused(format!(
                "subscription {sub}: no channel {chan} is advertised; not subscribed"
            )),
            Some(c) => match c.sub {
                Some(other) => SubscribeCheck::Refused(format!(
                    "subscription {sub}: channel {chan} ({}) is subscribed already (subscription {other}); not subscribed",
                    c.topic
                )),
                None => SubscribeCheck::Register(c),
            },
        }
    }

    /// Records subscription `sub` on channel `chan` (the hub registered).
    pub fn subscribed(&mut self, sub: u32, chan: u32) {
        if let Some(c) = self.channels.get_mut(&chan) {
            c.sub = Some(sub);
            self.subs.insert(sub, chan);
        }
    }

    /// Forgets subscription `sub`; its channel, if it was one.
    pub fn unsubscribe(&mut self, sub: u32) -> Option<&Channel> {
        let chan = self.subs.remove(&sub)?;
        let c = self.channels.get_mut(&chan)?;
        c.sub = None;
        Some(c)
    }
}

/// What [`Session::sync`] changed.
#[derive(Debug, Default)]
pub struct Synced {
    /// Channels no longer advertised, with their subscription if any.
    pub gone: Vec<(u32, Channel)>,
    /// Ids of the channels advertised anew.
    pub added: Vec<u32>,
    /// `want` held more than [`MAX_FOXGLOVE_CHANNELS`] (said once).
    pub cut: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn want(list: &[(&str, &str)]) -> Vec<(String, String, bool)> {
        list.iter()
            .map(|(t, ty)| (t.to_string(), ty.to_string(), true))
            .collect()
    }

    #[test]
    fn channels_follow_the_graph_and_ids_are_not_reused() {
        let mut s = Session::new("foxglove.sdk.v1");
        let r = s.sync(&want(&[("/a", "x/msg/A"), ("/b", "x/msg/B")]));
        assert_eq!(r.added, vec![1, 2]);
        assert!(matches!(
            s.check_subscribe(7, 1),
            SubscribeCheck::Register(_)
        ));
        s.subscribed(7, 1);
        assert!(matches!(
            s.check_subscribe(7, 2),
            SubscribeCheck::Refused(_)
        ));
        assert!(matches!(
            s.check_subscribe(8, 1),
            SubscribeCheck::Refused(_)
        ));
        assert!(matches!(
            s.check_subscribe(8, 9),
            SubscribeCheck::Refused(_)
        ));
        // /a goes: its channel and subscription with it.
        let r = s.sync(&want(&[("/b", "x/msg/B")]));
        assert_eq!(r.gone.len(), 1);
        assert_eq!(r.gone[0].1.sub, Some(7));
        assert_eq!(s.subscription_count(), 0);
        // It comes back: a new id.
        let r = s.sync(&want(&[("/a", "x/msg/A"), ("/b", "x/msg/B")]));
        assert_eq!(r.added, vec![3]);
        assert_eq!(s.unsubscribe(7), None);
    }

    #[test]
    fn drop_warnings_are_debounced() {
        let t0 = Instant::now();
        let mut s = Session::new("foxglove.sdk.v1");
        assert_eq!(s.take_drop_warning(t0), None);
        s.note_dropped(3);
        assert_eq!(s.take_drop_warning(t0), Some(3));
        s.note_dropped(2);
        assert_eq!(s.take_drop_warning(t0 + Duration::from_millis(500)), None);
        s.note_dropped(1);
        assert_eq!(s.take_drop_warning(t0 + DROP_WARNING_INTERVAL), Some(3));
    }

    #[test]
    fn client_channels_share_a_topic_and_are_bounded() {
        let mut s = Session::new("foxglove.sdk.v1");
        let ch = |t: &str| ClientChannel {
            topic: t.into(),
            ty: "x/msg/A".into(),
            cdr: false,
        };
        s.add_client_channel(1, ch("/a"));
        s.add_client_channel(2, ch("/a"));
        assert!(s.check_client_channel(1).is_some());
        assert_eq!(
            s.remove_client_channel(1).map(|(_, shared)| shared),
            Some(true)
        );
        assert_eq!(
            s.remove_client_channel(2).map(|(_, shared)| shared),
            Some(false)
        );
        assert_eq!(s.remove_client_channel(2), None);
        for i in 0..MAX_FOXGLOVE_CLIENT_CHANNELS as u32 {
            s.add_client_channel(i, ch("/b"));
        }
        assert!(s
            .check_client_channel(u32::MAX)
            .unwrap()
            .contains("the limit"));
    }

    #[test]
    fn services_follow_the_graph_with_fresh_ids() {
        let mut s = Session::new("foxglove.sdk.v1");
        let w = |l: &[&str]| -> Vec<(String, String)> {
            l.iter()
                .map(|n| (n.to_string(), "x/srv/S".to_string()))
                .collect()
        };
        assert_eq!(
            s.sync_services(&w(&["/a", "/b"])),
            (vec![], vec![1, 2], false)
        );
        assert_eq!(s.sync_services(&w(&["/b"])), (vec![1], vec![], false));
        assert_eq!(s.sync_services(&w(&["/a", "/b"])), (vec![], vec![3], false));
        assert_eq!(s.service(3).map(|x| x.name.as_str()), Some("/a"));
        let many: Vec<_> = (0..MAX_FOXGLOVE_SERVICES + 1)
            .map(|i| (format!("/s{i}"), "x/srv/S".to_string()))
            .collect();
        assert!(s.sync_services(&many).2);
    }

    #[test]
    fn graph_updates_are_incremental() {
        let g = |pubs: &[(&str, &[&str])], subs: &[(&str, &[&str])], svcs: &[(&str, &[&str])]| {
            let m = |l: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
                l.iter()
                    .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
                    .collect()
            };
            Graph {
                published: m(pubs),
                subscribed: m(subs),
                services: m(svcs),
            }
        };
        let mut s = Session::new("foxglove.sdk.v1");
        assert_eq!(s.graph_update(Graph::default()), None, "not watching");
        s.watch_graph(true);
        let d = s
            .graph_update(g(
                &[("/a", &["/n"])],
                &[("/a", &["/m"])],
                &[("/s", &["/n"])],
            ))
            .unwrap();
        assert_eq!(d.published, vec![("/a".into(), vec!["/n".into()])]);
        assert_eq!(d.services.len(), 1);
        assert_eq!(
            s.graph_update(g(
                &[("/a", &["/n"])],
                &[("/a", &["/m"])],
                &[("/s", &["/n"])]
            )),
            None
        );
        // /a loses its publisher but keeps its subscriber; /s goes.
        let d = s.graph_update(g(&[], &[("/a", &["/m"])], &[])).unwrap();
        assert_eq!(d.published, vec![("/a".into(), vec![])]);
        assert_eq!(d.removed_services, vec!["/s".to_string()]);
        assert!(d.removed_topics.is_empty());
        // /a goes.
        let d = s.graph_update(Graph::default()).unwrap();
        assert_eq!(d.removed_topics, vec!["/a".to_string()]);
        assert!(d.subscribed.is_empty());
    }

    #[test]
    fn time_is_sent_when_it_moves_at_a_bounded_rate() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut s = Session::new("foxglove.sdk.v1");
        assert!(s.time_due(1, t0, ms(50)));
        assert!(!s.time_due(2, t0 + ms(10), ms(50)));
        assert!(!s.time_due(1, t0 + ms(60), ms(50)), "the same stamp");
        assert!(s.time_due(3, t0 + ms(60), ms(50)));
    }

    #[test]
    fn parameter_watches_are_bounded() {
        let mut s = Session::new("foxglove.sdk.v1");
        for i in 0..MAX_FOXGLOVE_PARAM_WATCHES {
            assert!(s.watch_param(&format!("/n.p{i}")));
        }
        assert!(s.watch_param("/n.p0"), "already watched");
        assert!(!s.watch_param("/n.more"));
        s.unwatch_param("/n.p0");
        assert!(!s.watches_param("/n.p0"));
        assert!(s.watch_param("/n.more"));
    }

    #[test]
    fn goals_are_bounded_and_their_results_wait() {
        let mut s = Session::new("foxglove.sdk.v1");
        let u = |i: u16| {
            let mut b = [0u8; 16];
            b[..2].copy_from_slice(&i.to_le_bytes());
            b
        };
        s.add_goal(u(0), "/a", "x/action/A", (0, 0)).unwrap();
        assert!(s.add_goal(u(0), "/a", "x/action/A", (0, 0)).is_err());
        assert_eq!(s.wait_result(&u(0), (1, 2, "json".into())), Ok(None));
        assert!(s.wait_result(&u(9), (1, 3, "json".into())).is_err());
        let waiting = s.end_goal(&u(0), 4, "{}".into());
        assert_eq!(waiting, vec![(1, 2, "json".to_string())]);
        assert_eq!(
            s.wait_result(&u(0), (1, 4, "json".into())),
            Ok(Some((4, "{}".to_string())))
        );
        for i in 1..MAX_FOXGLOVE_GOALS as u16 {
            s.add_goal(u(i), "/a", "x/action/A", (0, 0)).unwrap();
        }
        // Full: the oldest ended goal (0) makes room; then none is ended.
        s.add_goal(u(60000), "/a", "x/action/A", (0, 0)).unwrap();
        assert!(s.goal(&u(0)).is_none());
        assert!(s.add_goal(u(60001), "/a", "x/action/A", (0, 0)).is_err());
    }

    #[test]
    fn channels_are_bounded() {
        let mut s = Session::new("foxglove.sdk.v1");
        let many: Vec<_> = (0..MAX_FOXGLOVE_CHANNELS + 5)
            .map(|i| (format!("/t{i}"), "x/msg/A".to_string(), true))
            .collect();
        let r = s.sync(&many);
        assert!(r.cut);
        assert_eq!(s.channel_count(), MAX_FOXGLOVE_CHANNELS);
        assert!(!s.sync(&many).cut, "said once");
    }
}
