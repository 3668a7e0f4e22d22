//! Fuzz target `fragment`: `rosgate_wire::fragment::Reassembly` under any
//! sequence of pieces and clock steps keeps its bounds and agrees with a
//! model; split texts reassemble exactly. The check lives in
//! `rosgate_sim::binary::fragment`, shared with `tests/replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::binary::fragment(data));
