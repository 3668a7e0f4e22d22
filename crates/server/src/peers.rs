//! Every peer network of the gateway behind one `rosgate_peers::Driver`:
//! the Zenoh session's peers (other gateways, ROS 2 over rmw_zenoh) and
//! DDS's (ROS 2 over DDS), as `--zenoh-*`, `--ros-domain` and
//! `--dds-domain` enable them. One driver, so the hub's interest changes
//! and typed messages have one consumer, and a sample one ROS 2 side sent
//! crosses to the other and never back (`PeerId::forwards_to` in
//! `rosgate_core::bridge`). One inbox (`rosgate_peers::Inbox`), so all
//! the networks' samples share one budget on their way into the loop.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use rosgate_core::Hub;
use rosgate_peers::{Driver, Inbox, Peer, ToLoop};

use crate::inbox::Handle;

/// The networks joined and their one driver. See the module docs.
pub struct Peers {
    driver: Driver,
    inbox: Arc<Inbox>,
    #[cfg(feature = "zenoh")]
    federation: Option<rosgate_zenoh::Federation>,
    #[cfg(feature = "dds")]
    _dds: Option<rosgate_dds::Dds>,
}

impl std::fmt::Debug for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peers").finish_non_exhaustive()
    }
}

/// What `start` takes: each network as its `prepare` checked it.
#[derive(Default)]
pub struct Prepared {
    #[cfg(feature = "zenoh")]
    pub zenoh: Option<crate::federation::Prepared>,
    #[cfg(feature = "dds")]
    pub dds: Option<rosgate_dds::Settings>,
}

impl Peers {
    /// Joins every network `prepared` names; `None` when it names none.
    pub fn start(prepared: Prepared, handle: &Handle, hub: &mut Hub) -> io::Result<Option<Peers>> {
        let h = handle.clone();
        let to_loop: ToLoop = Arc::new(move |job| h.send(job).is_ok());
        let inbox = Arc::new(Inbox::new(to_loop));
        let mut peers: Vec<Box<dyn Peer>> = Vec::new();
        #[cfg(feature = "zenoh")]
        let federation =
            crate::federation::start(prepared.zenoh, inbox.clone(), hub)?.map(|(f, p)| {
                peers.extend(p);
                f
            });
        #[cfg(feature = "dds")]
        let dds = crate::dds::start(prepared.dds, inbox.clone(), hub)?.map(|(d, p)| {
            peers.push(p);
            d
        });
        #[cfg(not(any(feature = "zenoh", feature = "dds")))]
        let _ = (prepared, hub);
        if peers.is_empty() {
            return Ok(None);
        }
        Ok(Some(Peers {
            driver: Driver::new(peers),
            inbox,
            #[cfg(feature = "zenoh")]
            federation,
            #[cfg(feature = "dds")]
            _dds: dds,
        }))
    }

    /// One loop turn's work: the peers' turn, then counters, the ledger
    /// and the status into the hub.
    pub fn turn(&mut self, hub: &mut Hub, now: Instant) {
        let hub = &mut hub.bridges();
        self.driver.turn(hub, now);
        #[allow(unused_mut)]
        let mut held = 0;
        #[allow(unused_mut)]
        let mut worker = None;
        #[cfg(feature = "zenoh")]
        if let Some(f) = &self.federation {
            f.after_turn(hub);
            held += f.held_bytes();
            worker = Some(f.worker_status());
        }
        self.driver.account(hub, &self.inbox, held, now, |status| {
            if let Some(w) = worker {
                status["zenoh_worker"] = w;
            }
        });
    }

    /// Leaves every network: Zenoh's worker stops first (its declarations
    /// go), then every peer closes, then the Zenoh session.
    pub fn close(self) {
        let Peers { driver, .. } = self;
        #[cfg(feature = "zenoh")]
        if let Some(f) = self.federation {
            return f.close(|| driver.close());
        }
        driver.close();
    }
}
