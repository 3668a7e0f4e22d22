//! Fuzz target `ros2`: the check lives in `rosgate_ros2::fuzzing::check`,
//! shared with `crates/ros2/tests/fuzz_replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_ros2::fuzzing::check(data));
