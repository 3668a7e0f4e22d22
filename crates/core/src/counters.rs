//! Typed counters: one enum per family, one array slot per member, and one
//! visitor ([`Counters::visit`]) that every rendering goes through: the
//! `/rosgate/stats` JSON today, the Prometheus exposition later. A member
//! that exists is rendered; none can be forgotten, and none can be looked up
//! by a misspelt string.
//!
//! Counters only ever grow. Gauges (open connections, topics, calls pending)
//! are read from the tables' own counts when rendered, so they cannot drift.

pub use crate::codes::{CloseReason, ErrorCode};
use crate::family::family;

family! {
    /// Plain monotonic counters.
    pub enum Counter {
        ConnectionsAccepted => "connections_accepted", "Connections admitted by the core.";
        ConnectionsRejected => "connections_rejected", "Connections refused at the connection limit.";
        LinesIn => "lines_in", "Request lines (or WebSocket messages) received.";
        BytesIn => "bytes_in", "Bytes read from clients.";
        BytesOut => "bytes_out", "Bytes written to clients.";
        Published => "published", "Publish requests received.";
        Delivered => "delivered", "Messages queued to subscribers (one per subscriber).";
        Dropped => "dropped", "Topic messages dropped for slow subscribers.";
        DroppedBytes => "dropped_bytes", "Bytes of topic messages dropped for slow subscribers.";
        DroppedForMemory => "dropped_for_memory", "Topic messages dropped to stay within the memory budget (also counted in dropped).";
        CallsForwarded => "calls_forwarded", "Service calls forwarded to a provider.";
        CallsAnswered => "calls_answered", "Service calls answered by their provider.";
        CallsTimedOut => "calls_timed_out", "Service calls failed by their deadline.";
        CallsFailedNoProvider => "calls_failed_no_provider", "Service calls failed because no provider was registered.";
        CallsFailedProviderGone => "calls_failed_provider_gone", "Service calls failed because their provider disconnected or unadvertised.";
        CallsFailedTooMany => "calls_failed_too_many", "Service calls failed by the per-connection in-flight limit.";
        CallsFailedShutdown => "calls_failed_shutdown", "Service calls failed because the gateway shut down.";
        ResponsesStale => "responses_stale", "Service responses that matched no outstanding call of their connection.";
        AcceptErrors => "accept_errors", "Errors returned by accept().";
        TlsHandshakes => "tls_handshakes", "TLS handshakes completed (--tls-cert).";
        TlsHandshakeFailures => "tls_handshake_failures", "TLS handshakes that ended in a TLS error: not TLS (a plaintext client), no common version or cipher, an alert from the client (it refused the certificate); also in closes.tls_error.";
        GoalsSent => "goals_sent", "Action goals forwarded to a server.";
        GoalsSucceeded => "goals_succeeded", "Goals ended by their server with status 4 (succeeded).";
        GoalsCanceled => "goals_canceled", "Goals ended by their server with status 5 (canceled).";
        GoalsAborted => "goals_aborted", "Goals ended by their server with another status (aborted).";
        GoalsFailedNoServer => "goals_failed_no_server", "Goals failed because no server was registered.";
        GoalsFailedServerGone => "goals_failed_server_gone", "Goals failed because their server disconnected or unadvertised.";
        GoalsFailedRefused => "goals_failed_refused", "Goals refused by a limit (per caller, per server) or a duplicate id.";
        GoalsTimedOut => "goals_timed_out", "Goals aborted at their deadline (the server was told to cancel).";
        GoalsFailedShutdown => "goals_failed_shutdown", "Goals failed because the gateway shut down.";
        GoalsOrphaned => "goals_orphaned", "Goals whose caller left or timed out: their server was told to cancel.";
        GoalResultsOrphaned => "goal_results_orphaned", "Results of orphaned goals, dropped.";
        GoalCancels => "goal_cancels", "Cancels forwarded to action servers.";
        FeedbackForwarded => "feedback_forwarded", "Goal feedback forwarded to callers (shed like topic data when they do not read).";
        FeedbackStale => "feedback_stale", "Feedback dropped: the goal ended, or its caller did not ask for feedback.";
        ActionMessagesStale => "action_messages_stale", "Feedback, results or cancels naming no goal of their connection.";
        ParamsDeclared => "params_declared", "Parameters declared by their node's owner.";
        ParamSetsAccepted => "param_sets_accepted", "Parameter changes applied (by owners or anyone else).";
        ParamSetsRejected => "param_sets_rejected", "Parameter changes refused: undeclared, read-only, type, range, limits, or by the owner.";
        ParamValidations => "param_validations", "Parameter changes sent to their owner for validation.";
        ParamValidationsFailed => "param_validations_failed", "Validations the owner did not answer (timed out, owner gone): the change was refused.";
        ParamEvents => "param_events", "Parameter changes (each is published on /parameter_events where anyone listens).";
        CallsWaited => "calls_waited", "Calls and goals that waited for a provider to appear (\"wait\": true).";
        QosIncompatible => "qos_incompatible", "Incompatible (publisher, subscriber) QoS pairs formed; both sides were warned.";
        QosSkipped => "qos_skipped", "Messages not delivered to a subscriber whose QoS request the publisher's offer does not meet.";
        LatchedDelivered => "latched_delivered", "Latched (transient local) messages sent to subscribers that joined late.";
        LatchEvicted => "latch_evicted", "Latched messages evicted from a publisher's cache (depth or bytes).";
        LatchDropped => "latch_dropped", "Messages not latched because every cache together was full.";
        DepthDropped => "depth_dropped", "Messages dropped by a subscription's depth (also counted in dropped).";
        ThrottleDropped => "throttle_dropped", "Messages a throttled subscription skipped (a newer one came within the interval).";
        ReliableWarnings => "reliable_warnings", "Warnings to reliable subscribers falling behind.";
        PeerNotifications => "peer_notifications", "Subscriber counts sent to publishers that asked for them (not those dropped with a publisher closed in the same turn).";
        HttpRequests => "http_requests", "Plain HTTP requests answered on the WebSocket port (metrics, health, dashboard).";
        NamesRejected => "names_rejected", "Names refused by the ROS 2 name rules (also counted in errors.invalid_name).";
        IntrospectionItems => "introspection_items", "Names and entries listed by built-in introspection replies (work they cost).";
        Authenticated => "authenticated", "Connections that presented a valid token.";
        AuthHeld => "auth_held", "Token attempts from an address past its budget of wrong tokens: not checked, held for a growing delay, then refused (also in closes.auth_failed).";
        BuiltinCalls => "builtin_calls", "Calls answered by the gateway itself (rosapi, /rosgate/stats).";
        FederationIn => "federation_in", "Topic messages received from other gateways and delivered here (--zenoh-*).";
        FederationOut => "federation_out", "Topic messages sent to other gateways: one per publish, however many gateways want it.";
        FederationInDropped => "federation_in_dropped", "Messages from other gateways dropped before delivery: the loop's inbox was full, or the payload or topic was invalid.";
        FederationOutDropped => "federation_out_dropped", "Messages not sent to other gateways or ROS 2: Zenoh refused them (congestion or a closed session), or a cancel or feedback found the federation outbox full.";
        FederationOutboxFull => "federation_outbox_full", "Calls and goals to other gateways or ROS 2 failed at once: the federation outbox was full (MAX_BRIDGE_OUTBOX_BYTES).";
        FederationAnnouncementsIgnored => "federation_announcements_ignored", "Announcements from Zenoh peers ignored: a graph from a peer without a live gateway token, an invalid gateway id, or past a table's bound.";
        FederationGraphItemsRefused => "federation_graph_items_refused", "Nodes, topics and parameters of other gateways' graphs not kept: names too long, or past the per-list, per-gateway, total or byte bound.";
        Ros2NamesRejected => "ros2_names_rejected", "ROS 2 entities (liveliness tokens) whose node, namespace or topic name breaks the ROS 2 name rules: not listed, not bridged.";
        EncodedCborFrames => "encoded_cbor_frames", "Messages encoded in the cbor compression (once per message, however many subscribers share it).";
        EncodedCborBytes => "encoded_cbor_bytes", "Bytes of cbor frames encoded (framing included).";
        EncodedCborMicros => "encoded_cbor_micros", "Time spent encoding cbor frames, microseconds.";
        EncodedCborRawFrames => "encoded_cbor_raw_frames", "Messages encoded in the cbor-raw compression (CDR in a CBOR frame).";
        EncodedCborRawBytes => "encoded_cbor_raw_bytes", "Bytes of cbor-raw frames encoded (framing included).";
        EncodedCborRawMicros => "encoded_cbor_raw_micros", "Time spent encoding cbor-raw frames, microseconds.";
        EncodedFoxgloveFrames => "encoded_foxglove_frames", "Message data frames made for Foxglove subscriptions (once per message and subscription id; the CDR once per message).";
        EncodedFoxgloveBytes => "encoded_foxglove_bytes", "Bytes of Foxglove message data frames made (framing included).";
        EncodedFoxgloveMicros => "encoded_foxglove_micros", "Time spent making Foxglove message data frames, microseconds.";
        EncodedPngFrames => "encoded_png_frames", "Messages encoded in the png compression.";
        EncodedPngBytes => "encoded_png_bytes", "Bytes of png frames encoded (framing and fragments included).";
        EncodedPngMicros => "encoded_png_micros", "Time spent encoding png frames, microseconds.";
        FragmentedOut => "fragmented_out", "Messages sent as fragment frames (a subscription's fragment_size), once per message and encoding.";
        FragmentFrames => "fragment_frames", "Fragment frames made for them.";
        CborUntyped => "cbor_untyped", "Messages sent in cbor without their type's mapping: they did not fit the topic's type.";
        EncodeFailed => "encode_failed", "Messages that could not be made in a compression subscribers asked for (cbor-raw of a message that does not fit its type), once per message and compression: those subscribers did not get them.";
        Ros2EntitiesRefused => "ros2_entities_refused", "ROS 2 entities not kept: past the bound per node, on nodes or on entities in total.";
        FragmentsIn => "fragments_in", "Pieces of fragmented messages (rosbridge's fragment op) taken from clients.";
        FragmentedIn => "fragmented_in", "Fragmented messages from clients reassembled whole and handled as one request.";
        FragmentsExpired => "fragments_expired", "Fragmented messages from clients dropped incomplete at their deadline (--fragment-timeout-ms); the client was told.";
        CdrPublished => "cdr_published", "Client publishes of raw CDR ({\"bytes\": ...}) decoded to JSON by the topic's type.";
        CdrIn => "cdr_in", "ROS 2 samples routed with their CDR bytes: cbor-raw subscribers get those bytes untouched.";
        CdrPassedThrough => "cdr_passed_through", "Of cdr_in, samples never decoded to JSON: every local subscriber of the topic takes cbor-raw.";
        CdrPublishedUntouched => "cdr_published_untouched", "Foxglove client CDR messages never decoded to JSON: every local subscriber of the topic takes CDR (Foxglove cdr channels, cbor-raw), no bridge, no latch, no type check.";
    }
}

family! {
    /// Values read from the tables at render time.
    pub enum Gauge {
        ConnectionsOpen => "connections_open", "Connections open now.";
        Topics => "topics", "Topics with at least one publisher or subscriber.";
        Subscriptions => "subscriptions", "Subscriptions (one per connection and topic).";
        Publishers => "publishers", "Advertisements (one per connection and topic).";
        Services => "services", "Services with a provider.";
        Actions => "actions", "Actions with a server.";
        CallsPending => "calls_pending", "Service calls and action goals in flight.";
        CallsWaiting => "calls_waiting", "Calls and goals waiting for a provider to appear now.";
        GoalsPending => "goals_pending", "Action goals in flight (orphans waiting for their server included).";
        QueuedBytes => "queued_bytes", "Bytes queued for clients, topic and control data (a shared frame counts once per queue).";
        ConnectionsPending => "connections_pending", "Connections that have not completed their opening.";
        FoxgloveSessions => "foxglove_sessions", "Connections speaking the Foxglove WebSocket protocol now (either WebSocket port).";
        MemoryBytes => "memory_bytes", "Bytes held for clients, against the memory budget.";
        MemoryBudgetBytes => "memory_budget_bytes", "The memory budget (--max-memory-bytes).";
        MemoryFramesBytes => "memory_frames_bytes", "Bytes of shared topic frames alive (each counted once).";
        MemoryEntriesBytes => "memory_entries_bytes", "Bytes queue entries cost beyond their frames (64 per topic entry per queue).";
        MemoryControlBytes => "memory_control_bytes", "Bytes of control data queued.";
        MemoryInputBytes => "memory_input_bytes", "Bytes of partial requests buffered.";
        MemoryCallsBytes => "memory_calls_bytes", "Bytes held for calls in flight.";
        MemoryRegistrationsBytes => "memory_registrations_bytes", "Bytes held for registrations.";
        MemoryFederationBytes => "memory_federation_bytes", "Bytes held for what other gateways and ROS 2 nodes announced: their graphs, the federation's tables, samples waiting for the loop, calls and answers waiting for them in the outbox.";
        MemoryTfBytes => "memory_tf_bytes", "Bytes held for TF: the frames and histories of /tf and /tf_static kept per domain, and the republisher's subscriptions (docs/tf.md).";
        Nodes => "nodes", "Nodes declared by connections, all domains.";
        Parameters => "parameters", "Parameters held (owned and held by the gateway), all domains.";
        Domains => "domains", "Domains with at least one client.";
        StartTimeSeconds => "start_time_seconds", "When the gateway started, seconds since the Unix epoch.";
    }
}

family! {
    /// Distributions kept as fixed-bucket histograms.
    pub enum Hist {
        CallLatency => "call_latency_seconds", "Service call round trips through the gateway (forwarded to answered), seconds.";
        GoalDuration => "goal_duration_seconds", "Action goals from sent to their server's result, seconds.";
        QueuedBytes => "connection_queued_bytes", "Bytes queued per open connection, sampled when rendered.";
    }
}

impl Hist {
    /// Bucket upper bounds (the `le` labels), ascending; `+Inf` follows.
    pub fn bounds(self) -> &'static [f64] {
        match self {
            Hist::CallLatency => &[
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0,
            ],
            Hist::GoalDuration => &[
                0.001, 0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
            ],
            Hist::QueuedBytes => &[
                0.0, 1024.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
                67108864.0,
            ],
        }
    }
}

/// One histogram's counts: per bucket (not cumulative), the `+Inf` bucket
/// last, and the sum of the observations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    buckets: Vec<u64>,
    sum: f64,
}

impl Histogram {
    /// An empty histogram with `h`'s buckets.
    pub fn default_for(h: Hist) -> Self {
        Self::new(h)
    }

    fn new(h: Hist) -> Self {
        Histogram {
            buckets: vec![0; h.bounds().len() + 1],
            sum: 0.0,
        }
    }

    /// Records one observation of `h`.
    pub fn observe(&mut self, h: Hist, v: f64) {
        let i = h
            .bounds()
            .iter()
            .position(|&b| v <= b)
            .unwrap_or(h.bounds().len());
        if let Some(b) = self.buckets.get_mut(i) {
            *b += 1;
        }
        self.sum += v;
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    pub fn sum(&self) -> f64 {
        self.sum
    }

    /// Cumulative counts, one per bound then `+Inf`.
    pub fn cumulative(&self) -> Vec<u64> {
        let mut acc = 0;
        self.buckets
            .iter()
            .map(|b| {
                acc += b;
                acc
            })
            .collect()
    }
}

/// Current gauge values, indexed by [`Gauge::index`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Gauges([u64; Gauge::COUNT]);

impl Gauges {
    pub fn get(&self, g: Gauge) -> u64 {
        self.0[g.index()]
    }

    pub fn set(&mut self, g: Gauge, v: u64) {
        self.0[g.index()] = v;
    }
}

/// Every counter of the gateway.
#[derive(Debug, Clone)]
pub struct Counters {
    plain: [u64; Counter::COUNT],
    closes: [u64; CloseReason::COUNT],
    errors: [u64; ErrorCode::COUNT],
    hists: Vec<Histogram>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            plain: [0; Counter::COUNT],
            closes: [0; CloseReason::COUNT],
            errors: [0; ErrorCode::COUNT],
            hists: Hist::ALL.iter().map(|&h| Histogram::new(h)).collect(),
        }
    }
}

/// What a rendering is told, member by member, in a fixed order.
pub trait Visitor {
    /// A gauge: a value that goes up and down.
    fn gauge(&mut self, g: Gauge, value: u64);
    /// A monotonic counter.
    fn counter(&mut self, c: Counter, value: u64);
    /// A labelled family of counters: its name, help, label key, and the
    /// members with their values.
    fn family(&mut self, f: Family, members: &[(&'static str, u64)]);
}

/// The labelled counter families.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Closed connections by reason.
    Closes,
    /// Refused requests by error code.
    Errors,
}

impl Family {
    /// The family's name (JSON key, metric name stem).
    pub fn name(self) -> &'static str {
        match self {
            Family::Closes => "closes",
            Family::Errors => "errors",
        }
    }

    /// The label the members are told apart by.
    pub fn label_key(self) -> &'static str {
        match self {
            Family::Closes => "reason",
            Family::Errors => "code",
        }
    }

    pub fn help(self) -> &'static str {
        match self {
            Family::Closes => "Connections closed, by reason.",
            Family::Errors => "Requests refused, by error code.",
        }
    }
}

impl Counters {
    #[inline]
    pub fn add(&mut self, c: Counter, n: u64) {
        self.plain[c.index()] += n;
    }

    #[inline]
    pub fn inc(&mut self, c: Counter) {
        self.add(c, 1);
    }

    pub fn get(&self, c: Counter) -> u64 {
        self.plain[c.index()]
    }

    pub fn close(&mut self, reason: CloseReason) {
        self.closes[reason.index()] += 1;
    }

    /// The close counter for `reason`.
    pub fn closes_of(&self, reason: CloseReason) -> u64 {
        self.closes[reason.index()]
    }

    /// Closes of every reason.
    pub fn closes_total(&self) -> u64 {
        self.closes.iter().sum()
    }

    pub fn error(&mut self, code: impl Into<ErrorCode>) {
        self.errors[code.into().index()] += 1;
    }

    /// The error counter for `code`.
    pub fn errors_of(&self, code: ErrorCode) -> u64 {
        self.errors[code.index()]
    }

    /// Records one observation of histogram `h`.
    pub fn observe(&mut self, h: Hist, v: f64) {
        if let Some(x) = self.hists.get_mut(h.index()) {
            x.observe(h, v);
        }
    }

    /// Histogram `h` as kept.
    pub fn hist(&self, h: Hist) -> Option<&Histogram> {
        self.hists.get(h.index())
    }

    /// Renders everything in the Prometheus text exposition format
    /// (version 0.0.4): `# HELP` and `# TYPE` for every metric, counters
    /// with `_total`, gauges, labelled families, and histograms (`extra`
    /// are histograms sampled at render time, such as queue sizes).
    pub fn to_prometheus(&self, gauges: &Gauges, extra: &[(Hist, Histogram)]) -> String {
        let mut r = PromRender(String::with_capacity(16 * 1024));
        self.visit(gauges, &mut r);
        for &h in Hist::ALL {
            let sampled = extra.iter().find(|(x, _)| *x == h).map(|(_, v)| v);
            if let Some(v) = sampled.or_else(|| self.hist(h)) {
                r.histogram(h, v);
            }
        }
        r.0
    }

    /// Walks every gauge, counter and family in rendering order.
    pub fn visit(&self, gauges: &Gauges, v: &mut impl Visitor) {
        for &g in Gauge::ALL {
            v.gauge(g, gauges.get(g));
        }
        for &c in Counter::ALL {
            v.counter(c, self.get(c));
        }
        let closes: Vec<_> = CloseReason::ALL
            .iter()
            .map(|&r| (r.label(), self.closes[r.index()]))
            .collect();
        v.family(Family::Closes, &closes);
        let errors: Vec<_> = ErrorCode::ALL
            .iter()
            .map(|&e| (e.label(), self.errors[e.index()]))
            .collect();
        v.family(Family::Errors, &errors);
    }

    /// Renders counters and gauges as one JSON object (no newline): every
    /// gauge and counter as a number, each family as an object of its
    /// members plus `<family>_total`.
    pub fn to_json(&self, gauges: &Gauges) -> String {
        let mut r = JsonRender(String::with_capacity(1536));
        r.0.push('{');
        self.visit(gauges, &mut r);
        r.0.push('}');
        r.0
    }
}

/// The Prometheus text rendering (see [`Counters::to_prometheus`]).
struct PromRender(String);

/// The prefix of every metric name.
const METRIC_PREFIX: &str = "rosgate_";

/// A help text escaped for `# HELP` (backslash and newline).
fn prom_help(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A float as Prometheus writes it (`+Inf` for infinity).
fn prom_float(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{v}")
    }
}

impl PromRender {
    fn head(&mut self, name: &str, help: &str, ty: &str) {
        use std::fmt::Write;
        let _ = writeln!(self.0, "# HELP {name} {}", prom_help(help));
        let _ = writeln!(self.0, "# TYPE {name} {ty}");
    }

    fn histogram(&mut self, h: Hist, v: &Histogram) {
        use std::fmt::Write;
        let name = format!("{METRIC_PREFIX}{}", h.label());
        self.head(&name, h.help(), "histogram");
        let cum = v.cumulative();
        for (i, c) in cum.iter().enumerate() {
            let le = h
                .bounds()
                .get(i)
                .map_or("+Inf".to_string(), |&b| prom_float(b));
            let _ = writeln!(self.0, "{name}_bucket{{le=\"{le}\"}} {c}");
        }
        let _ = writeln!(self.0, "{name}_sum {}", prom_float(v.sum()));
        let _ = writeln!(self.0, "{name}_count {}", v.count());
    }
}

impl Visitor for PromRender {
    fn gauge(&mut self, g: Gauge, value: u64) {
        use std::fmt::Write;
        let name = format!("{METRIC_PREFIX}{}", g.label());
        self.head(&name, g.help(), "gauge");
        let _ = writeln!(self.0, "{name} {value}");
    }

    fn counter(&mut self, c: Counter, value: u64) {
        use std::fmt::Write;
        let name = format!("{METRIC_PREFIX}{}_total", c.label());
        self.head(&name, c.help(), "counter");
        let _ = writeln!(self.0, "{name} {value}");
    }

    fn family(&mut self, f: Family, members: &[(&'static str, u64)]) {
        use std::fmt::Write;
        let name = format!("{METRIC_PREFIX}{}_total", f.name());
        self.head(&name, f.help(), "counter");
        for &(label, v) in members {
            let _ = writeln!(self.0, "{name}{{{}=\"{label}\"}} {v}", f.label_key());
        }
    }
}

struct JsonRender(String);

impl JsonRender {
    fn key(&mut self, k: &str) {
        if !self.0.ends_with('{') {
            self.0.push(',');
        }
        self.0.push('"');
        self.0.push_str(k);
        self.0.push_str("\":");
    }

    fn num(&mut self, v: u64) {
        use std::fmt::Write;
        let _ = write!(self.0, "{v}");
    }
}

impl Visitor for JsonRender {
    fn gauge(&mut self, g: Gauge, value: u64) {
        self.key(g.label());
        self.num(value);
    }

    fn counter(&mut self, c: Counter, value: u64) {
        self.key(c.label());
        self.num(value);
    }

    fn family(&mut self, f: Family, members: &[(&'static str, u64)]) {
        self.key(f.name());
        self.0.push('{');
        for &(label, v) in members {
            self.key(label);
            self.num(v);
        }
        self.0.push('}');
        self.key(&format!("{}_total", f.name()));
        self.num(members.iter().map(|m| m.1).sum());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_valid_json_with_every_member() {
        let mut st = Counters::default();
        st.close(CloseReason::WriteStall);
        st.error(ErrorCode::TooLong);
        st.error(rosgate_wire::decode::ErrorKind::BadJson);
        st.inc(Counter::Delivered);
        let mut g = Gauges::default();
        g.set(Gauge::Topics, 3);
        let v: serde_json::Value = serde_json::from_str(&st.to_json(&g)).expect("valid JSON");
        assert_eq!(v["closes"]["write_stall"], 1);
        assert_eq!(v["errors"]["too_long"], 1);
        assert_eq!(v["errors"]["bad_json"], 1);
        assert_eq!(v["errors_total"], 2);
        assert_eq!(v["closes_total"], 1);
        assert_eq!(v["delivered"], 1);
        assert_eq!(v["topics"], 3);
        for &e in ErrorCode::ALL {
            assert!(v["errors"][e.label()].is_u64(), "{}", e.label());
        }
        for &r in CloseReason::ALL {
            assert!(v["closes"][r.label()].is_u64(), "{}", r.label());
        }
        for &c in Counter::ALL {
            assert!(v[c.label()].is_u64(), "{}", c.label());
        }
        for &g in Gauge::ALL {
            assert!(v[g.label()].is_u64(), "{}", g.label());
        }
    }

    #[test]
    fn labels_are_unique_across_the_top_level() {
        let mut seen = std::collections::HashSet::new();
        let top = Gauge::ALL
            .iter()
            .map(|g| g.label())
            .chain(Counter::ALL.iter().map(|c| c.label()))
            .chain(["closes", "errors", "closes_total", "errors_total"]);
        for l in top {
            assert!(seen.insert(l), "duplicate key {l}");
        }
    }
}
