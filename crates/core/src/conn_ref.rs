//! [`ConnRef`]: the handle every table keeps for a connection.

/// Slab key plus generation: names one connection for its whole life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnRef {
    pub key: u32,
    pub gen: u32,
}
