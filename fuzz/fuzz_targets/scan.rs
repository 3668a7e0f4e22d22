//! Fuzz target `scan`: `rosgate_wire::scan::scan_object` agrees with serde_json on
//! every UTF-8 input (verdict, member spans, depth limit). The check lives in
//! `rosgate_sim::scan_parity`, shared with the differential test (`crates/sim/tests/scan.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::scan_parity::scan(data));
