//! Fuzz target `ws_client`: the check lives in `rosgate_sim::fuzzing::ws_client`, shared
//! with `tests/replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::fuzzing::ws_client(data));
