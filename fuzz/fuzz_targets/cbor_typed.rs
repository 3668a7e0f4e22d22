//! Fuzz target `cbor_typed`: `rosgate_ros2::cbor_typed::encode` (the
//! `cbor` compression's typed mapping) never panics, accepts every type's
//! default message, and writes one well-formed CBOR map of the type's
//! fields or, refusing, nothing. The check lives in
//! `rosgate_sim::binary::cbor_typed`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::binary::cbor_typed(data));
