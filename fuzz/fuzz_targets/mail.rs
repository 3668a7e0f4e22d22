//! Fuzz target `mail`: the records federated gateways mail each other
//! (`rosgate_wire::mail`); the check lives in `rosgate_sim::fuzzing::mail`,
//! shared with `tests/replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::fuzzing::mail(data));
