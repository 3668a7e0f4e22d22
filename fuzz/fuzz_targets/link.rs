//! Fuzz target `link`: the ROS 2 link (`rosgate_ros2::link`) on a schedule
//! the bytes choose; the check lives in `rosgate_sim::fuzzing::link`, shared
//! with `tests/replay.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rosgate_sim::fuzzing::link(data));
