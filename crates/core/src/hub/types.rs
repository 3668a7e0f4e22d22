//! The interface types this gateway knows: the bundled ROS 2 packages,
//! the `--interfaces` directories and what the ROS 2 link learns from
//! running nodes (`~/get_type_description`), as one registry
//! (`rosgate_ros2::registry::Registry`).
//!
//! The hub is the one owner of "the types known now": rosapi's message
//! definitions and the binary encodings read them here, and a learner
//! (the ROS 2 link, through the Zenoh side) hands over a whole new
//! registry rather than editing this one.
//!
//! Invariants:
//! - the registry is replaced whole, never edited in place: an `Arc` a
//!   reader took stays valid and unchanged;
//! - [`Hub::types_generation`] grows with every replacement, so a cache
//!   keyed by it (an encoding plan per topic type) is never stale.

use std::sync::Arc;

use rosgate_ros2::registry::Registry;

use super::Hub;

/// The types and the count of replacements so far.
pub(crate) struct Types {
    registry: Arc<Registry>,
    generation: u64,
}

/// The generation only: the registry holds about a thousand types.
impl std::fmt::Debug for Types {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Types")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl Default for Types {
    fn default() -> Self {
        Types {
            registry: Registry::bundled_shared(),
            generation: 0,
        }
    }
}

impl Hub {
    /// The types known now (bundled, `--interfaces`, learned).
    pub fn types(&self) -> &Arc<Registry> {
        &self.types.registry
    }

    /// Replaces the types known (at start-up with `--interfaces`, and when
    /// the ROS 2 link learns one). The registry must have passed
    /// [`Registry::check`].
    pub fn set_types(&mut self, registry: Arc<Registry>) {
        self.types.registry = registry;
        self.types.generation += 1;
    }

    /// How many times the types were replaced.
    pub fn types_generation(&self) -> u64 {
        self.types.generation
    }
}
