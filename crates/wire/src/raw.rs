//! [`Raw`]: a borrowed span of validated JSON, carried byte for byte.

/// A span of valid JSON taken from a request, forwarded byte for byte.
///
/// Only the decoder creates these from the wire, after `scan` validated the
/// whole line; that is why it is not `serde_json::RawValue`, which cannot be
/// borrowed from an already validated `&str` without parsing it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a>(pub(crate) &'a str);

impl<'a> Raw<'a> {
    /// Wraps text the caller knows to be one valid JSON value (tests, and
    /// our own constants).
    pub fn from_valid_json(text: &'a str) -> Raw<'a> {
        Raw(text)
    }

    /// The JSON text exactly as it arrived.
    pub fn get(self) -> &'a str {
        self.0
    }

    pub fn as_bytes(self) -> &'a [u8] {
        self.0.as_bytes()
    }
}
