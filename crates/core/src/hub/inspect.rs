//! [`Inspect`]: the simulation's and the tests' read-only view of a
//! [`Hub`] (`hub.inspect()`): the tables (registries, parameters, nodes,
//! calls), the gauges read from them, the limits, and the state of the
//! turn, the shutdown and the auth budget. It owns nothing and changes
//! nothing: every method reads the hub's fields as they are now.
//!
//! It keeps [`Hub`]'s own public methods the shell's contract (see
//! `mod.rs`): what only a checker needs to see is here, behind the cargo
//! feature `inspect` (enabled by `rosgate-sim`'s and `rosgate-bench`'s
//! dependency on this crate, and always in this crate's own tests), so a
//! build of the gateway alone (`cargo build -p rosgate`) shows that the
//! shell uses none of it.

use crate::calls::Calls;
use crate::conn::ConnRef;
use crate::counters::Gauges;
use crate::limits::Limits;
use crate::nodes::{Domain, Nodes};
use crate::params::ParamStore;
use crate::registry::Registry;
use crate::transport::Transport;

use super::Hub;

/// A read-only view of a [`Hub`] (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct Inspect<'a> {
    hub: &'a Hub,
}

impl Hub {
    /// The simulation's and the tests' read-only view (see [`Inspect`]).
    pub fn inspect(&self) -> Inspect<'_> {
        Inspect { hub: self }
    }
}

impl<'a> Inspect<'a> {
    pub fn limits(&self) -> &'a Limits {
        &self.hub.limits
    }

    /// The registry of domain 0.
    pub fn registry(&self) -> &'a Registry {
        self.hub.registries.get(0)
    }

    /// The registry of `domain`.
    pub fn registry_in(&self, domain: Domain) -> &'a Registry {
        self.hub.registries.get(domain)
    }

    /// The parameters of `domain` (owned and held by the gateway).
    pub fn params_in(&self, domain: Domain) -> &'a ParamStore {
        self.hub.params.store(domain)
    }

    /// The declared nodes.
    pub fn nodes(&self) -> &'a Nodes {
        &self.hub.nodes
    }

    /// Calls and goals in flight.
    pub fn calls(&self) -> &'a Calls {
        &self.hub.calls
    }

    /// The handle of a live connection.
    pub fn conn_ref(&self, key: u32) -> Option<ConnRef> {
        self.hub
            .conns
            .get(key as usize)
            .map(|c| ConnRef { key, gen: c.gen() })
    }

    /// Gauges read from the tables (what `stats_json` and `/metrics`
    /// report with the counters).
    pub fn gauges(&self) -> Gauges {
        self.hub.gauges()
    }

    /// Calls of departed providers whose failure is not sent yet (a few
    /// are sent each turn).
    pub fn failing(&self) -> usize {
        self.hub.gone.len()
    }

    /// Whether a shutdown is under way.
    pub fn is_draining(&self) -> bool {
        self.hub.draining
    }

    /// Whether every open connection has written all its output.
    pub fn is_drained(&self) -> bool {
        self.hub
            .conns
            .iter()
            .all(|(_, c)| !c.is_open() || c.out().is_empty())
    }

    /// Whether `expire` has work left over from its last turn.
    pub fn has_expire_backlog(&self) -> bool {
        self.hub.has_expire_backlog()
    }

    /// What a connection refused at the connection limit is sent before
    /// it is closed.
    pub fn rejection_frame(&self, transport: Transport) -> Vec<u8> {
        self.hub.rejection_frame(transport)
    }

    /// Addresses whose wrong tokens are remembered now.
    pub fn auth_addresses(&self) -> usize {
        self.hub.auth_budget.len()
    }
}
