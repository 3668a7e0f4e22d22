//! Fuzz target `foxglove`: the check lives in `rosgate_sim::foxglove::foxglove`, shared
//! with `tests/replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::foxglove::foxglove(data));
