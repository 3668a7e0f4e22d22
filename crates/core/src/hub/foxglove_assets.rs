//! Foxglove `fetchAsset` (the `assets` capability; docs/protocol.md,
//! "Foxglove WebSocket protocol"): a session asks for a file by URI
//! (`package://PKG/path`, `file:///...`, as a URDF names its meshes) and
//! gets one binary fetch asset response with the request's id: the bytes
//! (status 0) or an error text (status 1).
//!
//! The core reads no files: the shell installs an [`AssetSource`]
//! (`--foxglove-assets DIR`, `crates/server/src/foxglove_assets.rs`),
//! which resolves the URI inside its directory and refuses anything
//! outside it; without one the capability is not offered and a
//! `fetchAsset` gets an error status, as any op of a capability the
//! server lacks.
//!
//! Invariants: every `fetchAsset` of a session with the capability gets
//! exactly one response with its request id; an asset is at most
//! [`MAX_FOXGLOVE_ASSET_BYTES`] (checked here too, whatever the source
//! returns), so one response stays far under the control queue's limit
//! (`--max-control-bytes`).

use std::time::Instant;

use rosgate_wire::foxglove::server;

use super::Hub;
use crate::conn::ConnRef;
use crate::transport::Framing;

/// Bytes. The largest asset a `fetchAsset` answers with (a robot's mesh
/// is a few megabytes); a larger file gets an error response naming its
/// size. A quarter of the default control queue limit.
pub const MAX_FOXGLOVE_ASSET_BYTES: usize = 16 * 1024 * 1024;

/// Where a Foxglove session's `fetchAsset` finds files: the shell's, which
/// may read the file system; the core only asks.
pub trait AssetSource: std::fmt::Debug {
    /// The bytes of the asset `uri` names, at most `max` of them, or why
    /// not (a text for the client: no such file, outside the directory,
    /// too large, a scheme not served).
    fn fetch(&self, uri: &str, max: usize) -> Result<Vec<u8>, String>;
}

impl Hub {
    /// Serves Foxglove `fetchAsset` from `source` from now on: sessions
    /// opened later are offered the `assets` capability.
    pub fn set_foxglove_assets(&mut self, source: Box<dyn AssetSource>) {
        self.foxglove_assets = Some(source);
    }

    /// Whether sessions are offered the `assets` capability.
    pub(super) fn foxglove_serves_assets(&self) -> bool {
        self.foxglove_assets.is_some()
    }

    /// A session's `fetchAsset` (`uri`, `request_id`), answered at once.
    /// Only called when [`Hub::foxglove_serves_assets`].
    pub(super) fn foxglove_fetch_asset(
        &mut self,
        me: ConnRef,
        uri: &str,
        request_id: u32,
        now: Instant,
    ) {
        let max = MAX_FOXGLOVE_ASSET_BYTES;
        let got = match &self.foxglove_assets {
            Some(source) => source.fetch(uri, max),
            None => Err("this server serves no assets".to_owned()),
        };
        let got = got.and_then(|bytes| {
            if bytes.len() > max {
                Err(format!(
                    "{uri}: {} bytes, over the limit of {max}",
                    bytes.len()
                ))
            } else {
                Ok(bytes)
            }
        });
        let body = match &got {
            Ok(bytes) => server::fetch_asset_response(request_id, Ok(bytes)),
            Err(why) => server::fetch_asset_response(request_id, Err(why)),
        };
        let mut frame = Vec::with_capacity(body.len() + 10);
        if Framing::WebSocket.push_binary(&mut frame, &body) {
            self.send_raw(me, &frame, now);
        }
    }
}
