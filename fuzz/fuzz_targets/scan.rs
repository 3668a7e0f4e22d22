//! Fuzz target `scan`: `codec::scan::scan_object` agrees with serde_json on
//! every UTF-8 input (verdict, member spans, depth limit). The check lives in
//! `rosgate::codec::scan::fuzzing`, shared with the differential unit test.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate::codec::scan::fuzzing::scan(data));
