//! `--ros-domain` as settings, with the types the gateway knows (the
//! bundled interfaces plus `--interfaces`, read by the server before
//! anything opens): checked whether or not this build has ROS 2 interop
//! (without the `ros2` feature a domain is refused with a reason).

use std::sync::Arc;

use rosgate_core::nodes::{Domain, MAX_DOMAIN};
use rosgate_ros2::registry::Registry;

/// What `--ros-domain` asks for.
#[derive(Debug, Clone)]
pub struct RosSettings {
    /// ROS domain ids joined; each is bridged with the rosgate domain of
    /// the same number.
    pub domains: Vec<Domain>,
    /// The types known at start-up (the hub's: `Hub::types`).
    pub types: Arc<Registry>,
}

impl Default for RosSettings {
    fn default() -> Self {
        RosSettings {
            domains: Vec::new(),
            types: Registry::bundled_shared(),
        }
    }
}

impl RosSettings {
    /// Checks the domain ids (and that ROS 2 interop was built in).
    pub fn check(&self) -> Result<(), String> {
        if !cfg!(feature = "ros2") && !self.domains.is_empty() {
            return Err("--ros-domain: built without ROS 2 interop (feature `ros2`)".into());
        }
        match self.domains.iter().find(|&&d| d > MAX_DOMAIN) {
            Some(d) => Err(format!(
                "--ros-domain {d}: ROS domain ids go up to {MAX_DOMAIN}"
            )),
            None => Ok(()),
        }
    }
}
