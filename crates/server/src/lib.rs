//! rosgate: a low-latency gateway for robot software. This crate is the I/O
//! shell around the sans-io core (`rosgate-core`): one mio poll loop on one
//! thread drives both listeners, every connection, the signal pipe and the
//! inbox other threads use; only this crate touches sockets or the clock.
//!
//! | module | owns |
//! |---|---|
//! | [`server`] | the mio loop: listeners, sockets, sticky readiness, budgets, loop phases, signals |
//! | [`inbox`] | `mio::Waker` + bounded job queue: how other threads hand work to the loop |
//! | [`config`] | `Config` and the server's own constants (re-exports the core's limits) |
//! | [`args`] | flags -> `Config`; the `--help` text |
//! | [`cli`] | `rosgate topic echo ...` and the other commands: the command-line client of a running gateway |
//! | [`files`] | reading every start-up file within a size cap; YAML loaded only if its expansion fits (aliases, nodes, text, depth) |
//! | [`access_file`] | `--auth-tokens` and `--auth-roles`: the token file and the roles file (YAML) |
//! | [`tls`] | `--tls-cert`/`--tls-key`: loading the certificate, one rustls session per connection (the loop drives it) |
//! | `federation` | `--zenoh-*` and `--ros-domain` (features `zenoh`, `ros2`): starts `rosgate-zenoh` and gives it the inbox |
//! | [`assets`] | the dashboard's files, compiled in (served at `/` on the WebSocket port) |
//! | [`foxglove_assets`] | `--foxglove-assets DIR`: the files Foxglove `fetchAsset` may read, resolved inside DIR |
//!
//! Clients speak newline-delimited JSON over TCP (`docs/protocol.md`) or
//! rosbridge v2 over WebSocket.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod access_file;
pub mod args;
pub mod assets;
pub mod cli;
pub mod config;
#[cfg(feature = "dds")]
pub mod dds;
#[cfg(feature = "zenoh")]
pub mod federation;
pub mod files;
pub mod foxglove_assets;
pub mod inbox;
pub mod params_file;
#[cfg(any(feature = "zenoh", feature = "dds"))]
pub mod peers;
pub mod server;
pub mod tls;
