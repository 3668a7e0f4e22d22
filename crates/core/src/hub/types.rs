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
//!   keyed by it (an encoding plan per topic type) is never stale;
//! - the caches of what is derived from the types (rosapi's definition
//!   texts, the list of interface names) are emptied by the replacement,
//!   and the texts kept hold at most [`MAX_TYPEDEF_CACHE_BYTES`].

use std::cell::{OnceCell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;

use rosgate_ros2::model::Kind;
use rosgate_ros2::registry::Registry;
use rosgate_ros2::typedefs::{self, RenderError};

use super::rosapi::MAX_LIST_ITEMS;
use super::Hub;

/// Bytes of rendered definition texts (rosapi `typedefs_full_text`) kept
/// for the next call: a page polling `topics_and_raw_types` (Foxglove
/// does, every few seconds) gets them without rendering again. Past it
/// the cache starts over.
pub const MAX_TYPEDEF_CACHE_BYTES: usize = 16 * 1024 * 1024;

/// The types and the count of replacements so far, with what is derived
/// from them. The caches sit behind cells because rosapi reads them while
/// it holds the hub's tables borrowed (the topic listing borrows its names).
pub(crate) struct Types {
    registry: Arc<Registry>,
    generation: u64,
    /// Full texts by the type name a topic gave, of this generation, as
    /// JSON strings: a reply copies them, nothing to escape again.
    texts: RefCell<TextCache>,
    /// Every interface known (`pkg/msg/M`, `pkg/srv/S`, `pkg/action/A`),
    /// sorted, at most [`MAX_LIST_ITEMS`]; true when cut.
    interfaces: OnceCell<(Vec<String>, bool)>,
}

#[derive(Default)]
struct TextCache {
    texts: HashMap<String, Arc<str>>,
    bytes: usize,
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
            texts: RefCell::default(),
            interfaces: OnceCell::new(),
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
        self.types.texts = RefCell::default();
        self.types.interfaces = OnceCell::new();
    }

    /// How many times the types were replaced.
    pub fn types_generation(&self) -> u64 {
        self.types.generation
    }

    /// The `ros2msg` full text of message type `ty` (any name form) as a
    /// JSON string (quoted and escaped, ready for a reply): from the
    /// cache, or rendered (at most `typedefs::MAX_FULL_TEXT_BYTES`) and
    /// kept. The flag says whether it was rendered now.
    pub(super) fn typedef_json(&self, ty: &str) -> Result<(Arc<str>, bool), RenderError> {
        if let Some(t) = self.cached_typedef_json(ty) {
            return Ok((t, false));
        }
        let text = typedefs::full_text(&self.types.registry, ty, typedefs::MAX_FULL_TEXT_BYTES)?;
        let mut json = Vec::with_capacity(text.len() + text.len() / 16 + 2);
        rosgate_wire::encode::json_string(&mut json, &text);
        // JSON of a str is UTF-8; the fallback is never taken.
        let json: Arc<str> = String::from_utf8(json).unwrap_or_default().into();
        let mut cache = self.types.texts.borrow_mut();
        let cost = json.len() + ty.len();
        if cache.bytes + cost > MAX_TYPEDEF_CACHE_BYTES {
            *cache = TextCache::default();
        }
        cache.bytes += cost;
        cache.texts.insert(ty.to_owned(), json.clone());
        Ok((json, true))
    }

    /// [`Hub::typedef_json`] if it is cached, without rendering.
    pub(super) fn cached_typedef_json(&self, ty: &str) -> Option<Arc<str>> {
        self.types.texts.borrow().texts.get(ty).cloned()
    }

    /// Every interface type known (bundled, `--interfaces`, learned):
    /// `pkg/msg/M`, `pkg/srv/S` and `pkg/action/A` (not the structs rosidl
    /// derives from services and actions), sorted, at most
    /// [`MAX_LIST_ITEMS`]; true when the list was cut. Built once per
    /// generation.
    pub(super) fn known_interfaces(&self) -> &(Vec<String>, bool) {
        self.types.interfaces.get_or_init(|| {
            let reg = &self.types.registry;
            let of_kind = |name: &str, kind: Kind| name.split('/').nth(1) == Some(kind.as_str());
            let mut all: Vec<String> = reg
                .msgs()
                .map(|m| m.name.as_str())
                .filter(|n| of_kind(n, Kind::Msg))
                .chain(
                    reg.srvs()
                        .map(|s| s.name.as_str())
                        .filter(|n| of_kind(n, Kind::Srv)),
                )
                .chain(reg.actions().map(|a| a.name.as_str()))
                .map(str::to_owned)
                .collect();
            all.sort_unstable();
            let cut = all.len() > MAX_LIST_ITEMS;
            all.truncate(MAX_LIST_ITEMS);
            (all, cut)
        })
    }
}
