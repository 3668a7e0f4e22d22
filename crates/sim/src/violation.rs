//! [`Violation`]: an invariant broken at some step, what every check of
//! the simulation returns. A leaf: it depends on nothing in the crate.

use std::fmt;

/// An invariant broken at some step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub step: u64,
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step {}: {}", self.step, self.what)
    }
}

impl std::error::Error for Violation {}
