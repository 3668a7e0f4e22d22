//! `Stats`: every counter of the gateway, and their JSON rendering for the
//! built-in `/rosgate/stats` service and the SIGUSR1 log line.
//!
//! Counters only ever grow; gauges (open connections, topics, calls pending)
//! are read from the tables when rendered, so they cannot drift.

use crate::codec::decode::ErrorKind;
use crate::conn::CloseReason;

/// Error kinds counted under `errors`, in rendering order.
pub const ERROR_LABELS: [&str; 14] = [
    "bad_json",
    "bad_utf8",
    "not_object",
    "missing_op",
    "unknown_op",
    "missing_field",
    "wrong_type",
    "too_long",
    "too_deep",
    "missing_id",
    "unknown_response",
    "not_provider",
    "reserved_name",
    "binary_frame",
];

/// A request error that is not a decode error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolError {
    TooLong,
    UnknownResponse,
    NotProvider,
    ReservedName,
    BinaryFrame,
}

#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub connections_accepted: u64,
    pub connections_rejected: u64,
    pub closes: [u64; CloseReason::ALL.len()],
    pub lines_in: u64,
    pub errors: [u64; ERROR_LABELS.len()],
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub published: u64,
    pub delivered: u64,
    pub dropped: u64,
    pub dropped_bytes: u64,
    pub calls_forwarded: u64,
    pub calls_answered: u64,
    pub calls_timed_out: u64,
    pub calls_failed_no_provider: u64,
    pub calls_failed_provider_gone: u64,
    pub calls_failed_too_many: u64,
    pub responses_stale: u64,
    pub accept_errors: u64,
}

/// Gauges read from the live tables at render time.
#[derive(Debug, Default, Clone, Copy)]
pub struct Gauges {
    pub connections_open: usize,
    pub topics: usize,
    pub subscriptions: usize,
    pub publishers: usize,
    pub services: usize,
    pub calls_pending: usize,
    pub queued_bytes: usize,
}

impl Stats {
    pub fn close(&mut self, reason: CloseReason) {
        let i = CloseReason::ALL
            .iter()
            .position(|&r| r == reason)
            .unwrap_or(0);
        self.closes[i] += 1;
    }

    /// The close counter for `reason`.
    pub fn closes_of(&self, reason: CloseReason) -> u64 {
        CloseReason::ALL
            .iter()
            .position(|&r| r == reason)
            .map_or(0, |i| self.closes[i])
    }

    pub fn decode_error(&mut self, kind: ErrorKind) {
        self.count_error(kind.label());
    }

    pub fn protocol_error(&mut self, e: ProtocolError) {
        self.count_error(match e {
            ProtocolError::TooLong => "too_long",
            ProtocolError::UnknownResponse => "unknown_response",
            ProtocolError::NotProvider => "not_provider",
            ProtocolError::ReservedName => "reserved_name",
            ProtocolError::BinaryFrame => "binary_frame",
        });
    }

    fn count_error(&mut self, label: &str) {
        if let Some(i) = ERROR_LABELS.iter().position(|&l| l == label) {
            self.errors[i] += 1;
        }
    }

    /// Counter for `label` under `errors` (tests and logs).
    pub fn errors_of(&self, label: &str) -> u64 {
        ERROR_LABELS
            .iter()
            .position(|&l| l == label)
            .map_or(0, |i| self.errors[i])
    }

    /// Renders counters and gauges as one JSON object (no newline).
    pub fn to_json(&self, g: &Gauges) -> String {
        use std::fmt::Write;
        let mut s = String::with_capacity(1024);
        let _ = write!(
            s,
            "{{\"connections_open\":{},\"connections_accepted\":{},\"connections_rejected\":{},\"closes\":{{",
            g.connections_open, self.connections_accepted, self.connections_rejected
        );
        for (i, r) in CloseReason::ALL.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(s, "{sep}\"{}\":{}", r.label(), self.closes[i]);
        }
        s.push_str("},\"errors\":{");
        for (i, l) in ERROR_LABELS.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(s, "{sep}\"{l}\":{}", self.errors[i]);
        }
        let fields: [(&str, u64); 23] = [
            ("lines_in", self.lines_in),
            ("bytes_in", self.bytes_in),
            ("bytes_out", self.bytes_out),
            ("published", self.published),
            ("delivered", self.delivered),
            ("dropped", self.dropped),
            ("dropped_bytes", self.dropped_bytes),
            ("topics", g.topics as u64),
            ("subscriptions", g.subscriptions as u64),
            ("publishers", g.publishers as u64),
            ("services", g.services as u64),
            ("calls_pending", g.calls_pending as u64),
            ("calls_forwarded", self.calls_forwarded),
            ("calls_answered", self.calls_answered),
            ("calls_timed_out", self.calls_timed_out),
            ("calls_failed_no_provider", self.calls_failed_no_provider),
            (
                "calls_failed_provider_gone",
                self.calls_failed_provider_gone,
            ),
            ("calls_failed_too_many", self.calls_failed_too_many),
            ("responses_stale", self.responses_stale),
            ("accept_errors", self.accept_errors),
            ("queued_bytes", g.queued_bytes as u64),
            ("closes_total", self.closes.iter().sum()),
            ("errors_total", self.errors.iter().sum()),
        ];
        s.push('}');
        for (k, v) in fields {
            let _ = write!(s, ",\"{k}\":{v}");
        }
        s.push('}');
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_valid_json_with_every_counter() {
        let mut st = Stats::default();
        st.close(CloseReason::WriteStall);
        st.protocol_error(ProtocolError::TooLong);
        st.decode_error(ErrorKind::BadJson);
        let v: serde_json::Value =
            serde_json::from_str(&st.to_json(&Gauges::default())).expect("valid JSON");
        assert_eq!(v["closes"]["write_stall"], 1);
        assert_eq!(v["errors"]["too_long"], 1);
        assert_eq!(v["errors"]["bad_json"], 1);
        assert_eq!(v["errors_total"], 2);
        assert_eq!(v["connections_open"], 0);
        for l in ERROR_LABELS {
            assert!(v["errors"][l].is_u64(), "{l}");
        }
    }
}
