//! Fuzz target `decode`: the check lives in `rosgate_sim::fuzzing::decode`, shared
//! with `tests/replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::fuzzing::decode(data));
