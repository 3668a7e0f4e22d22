//! Fuzz target `ws_reader`: the check lives in `rosgate_sim::fuzzing::ws_reader`, shared
//! with `tests/replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::fuzzing::ws_reader(data));
