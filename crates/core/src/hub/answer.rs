//! The shapes of an answer the hub sends back to whoever asked (a client's
//! line or a peer's typed message, `hub/bridge_out.rs`): a service's
//! answer, a goal's end, a goal's failure. Raw JSON spans, forwarded byte
//! for byte. A leaf: it depends on nothing of the hub's.

/// A service's answer as raw JSON: `values`, `result` (`true` or
/// `false`) and the rosbridge `status`, if any.
#[derive(Debug, Clone, Copy)]
pub(super) struct Answer<'a> {
    pub(super) values: &'a [u8],
    pub(super) result: &'a [u8],
    pub(super) status: Option<&'a [u8]>,
}

impl<'a> Answer<'a> {
    /// A successful answer carrying `values`.
    pub(super) fn ok(values: &'a [u8]) -> Self {
        Answer {
            values,
            result: b"true",
            status: None,
        }
    }

    /// A failure whose `values` is the reason (a JSON string).
    pub(super) fn failed(values: &'a [u8]) -> Self {
        Answer {
            values,
            result: b"false",
            status: None,
        }
    }
}

/// A goal's end as raw JSON: `values`, its `status` and `result`.
#[derive(Debug, Clone, Copy)]
pub(super) struct GoalEnd<'a> {
    pub(super) values: &'a [u8],
    pub(super) status: &'a [u8],
    pub(super) result: &'a [u8],
}

/// A goal that ends without its server's result: its `status` and why.
#[derive(Debug, Clone, Copy)]
pub(super) struct GoalFailure<'a> {
    pub(super) status: u8,
    pub(super) reason: &'a str,
}
