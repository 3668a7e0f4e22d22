//! [`LinkSync`]: after each turn of a ROS 2 shell, what the link knows
//! that the hub must see: the link's refusal counts into the hub's
//! counters, the link's registry as the hub's types and type check
//! (installed again only when the link learned a type), and the link's
//! graph as the introspection lists of the gateway its shell names
//! ([`super::ROS_GRAPH`] for rmw_zenoh, [`super::DDS_GRAPH`] for DDS, so
//! both sides' graphs stand side by side),
//! rebuilt at most once per interval however fast the graph changes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rosgate_core::counters::Counter;
use rosgate_core::hub::{Bridges, RemoteGraph};
use rosgate_core::nodes::Domain;
use rosgate_ros2::link::Link;
use rosgate_ros2::registry::Registry;

use super::edge::Check;

/// What was last installed in the hub. See the module docs.
pub struct LinkSync {
    /// The name the graph is installed under.
    graph: &'static str,
    /// The link's refusal counts already added to the hub's counters.
    counted: (u64, u64),
    /// The link's registry the hub's type check was last installed with.
    checker: Option<Arc<Registry>>,
    /// When the graph was last rebuilt for introspection.
    last_graph: Option<Instant>,
    /// The link's graph generation last installed (none yet: the first
    /// turn installs the empty graph).
    graph_installed: Option<u64>,
}

impl LinkSync {
    /// Installs the link's graph as gateway `graph`'s.
    pub fn new(graph: &'static str) -> LinkSync {
        LinkSync {
            graph,
            counted: (0, 0),
            checker: None,
            last_graph: None,
            graph_installed: None,
        }
    }

    /// The link's counts, types and graph (of `domains`, at most every
    /// `interval`) into the hub. Returns when it wants the next turn at
    /// the latest (a graph change held back for its interval).
    pub fn after_turn(
        &mut self,
        link: &Link,
        hub: &mut Bridges<'_>,
        domains: &[Domain],
        interval: Duration,
        now: Instant,
    ) -> Option<Instant> {
        let stats = link.stats();
        hub.count(
            Counter::Ros2NamesRejected,
            stats.names_rejected - self.counted.0,
        );
        hub.count(Counter::Ros2EntitiesRefused, stats.refused - self.counted.1);
        self.counted = (stats.names_rejected, stats.refused);
        // The hub checks client messages by the link's registry, and
        // describes and encodes by it (`Hub::types`): both installed again
        // when the link learned a type.
        let types = link.types();
        if self.checker.as_ref().is_none_or(|c| !Arc::ptr_eq(c, types)) {
            self.checker = Some(types.clone());
            hub.set_type_checker(Box::new(Check(types.clone())));
            hub.set_types(types.clone());
        }
        // Rebuilt at most every interval: a burst of announcements costs
        // one rebuild, not one per turn.
        let dirty = self.graph_installed != Some(link.graph_generation());
        if let Some(due) = self.last_graph.map(|t| t + interval) {
            if now < due {
                return dirty.then_some(due);
            }
        }
        if !dirty {
            return None;
        }
        self.last_graph = Some(now);
        self.graph_installed = Some(link.graph_generation());
        for &d in domains {
            let (nodes, topics) = link.graph(u32::from(d));
            let graph = RemoteGraph::of(nodes, topics);
            hub.install_remote_graph(self.graph, d, graph);
        }
        None
    }
}
