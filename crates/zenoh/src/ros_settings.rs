//! `--ros-domain` and `--interfaces` as settings: checked and their files
//! read before anything opens, whether or not this build has ROS 2 interop
//! (without the `ros2` feature a domain is refused with a reason).

use std::path::PathBuf;

use rosgate_core::nodes::{Domain, MAX_DOMAIN};
use rosgate_ros2::registry::Registry;

/// What `--ros-domain` and `--interfaces` ask for.
#[derive(Debug, Clone, Default)]
pub struct RosSettings {
    /// ROS domain ids joined; each is bridged with the rosgate domain of
    /// the same number.
    pub domains: Vec<Domain>,
    /// Directories of `.msg`/`.srv`/`.action` files (`<pkg>/msg/...`)
    /// added to the bundled interfaces.
    pub interfaces: Vec<PathBuf>,
}

impl RosSettings {
    /// The types: the bundled interfaces plus every `--interfaces` dir.
    pub fn registry(&self) -> Result<Registry, String> {
        let mut r = Registry::bundled();
        for dir in &self.interfaces {
            r.load_dir(dir)
                .map_err(|e| format!("--interfaces {}: {e}", dir.display()))?;
        }
        r.check().map_err(|e| format!("--interfaces: {e}"))?;
        Ok(r)
    }

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
