//! Fuzz target `cbor`: `rosgate_wire::cbor::from_json` never panics, accepts
//! what serde_json accepts, and writes CBOR that reads back as the same
//! value. The check lives in `rosgate_sim::binary::cbor`, shared with
//! `tests/replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::binary::cbor(data));
