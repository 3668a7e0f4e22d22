//! The check the fuzz target `ros2` runs on every input (and
//! `tests/fuzz_replay.rs` replays on the seed corpus): everything that
//! reads bytes from a ROS 2 graph, fed anything.
//!
//! The first byte picks a message type; the rest is, at once, a CDR
//! payload of that type, an attachment, and (when it is UTF-8) a
//! liveliness token, a data key and a QoS chunk, and what DDS brings: a
//! `ros_discovery_info` sample (`link::rmw_dds`), USER_DATA, a DDS topic
//! name, and the adapter's graph fed the node list. Nothing may panic; what
//! decodes must be valid JSON that encodes back to the same values (floats
//! bit for bit, NaN as NaN), and a goal id in it reads back as its 16
//! bytes; a token that parses must
//! render to a key that parses to the same token; a node list that
//! decodes must encode back to what decodes to it again.

use std::sync::OnceLock;

use crate::link::rmw_dds;
use crate::registry::Registry;
use crate::rmw::{self, Attachment, Qos, Token};
use crate::{action, cdr};

/// Types the fuzzer decodes as: nested, arrays of structs, base64 fields,
/// strings, no bounded strings (U+FFFD for bad UTF-8 may lengthen a
/// string past a bound, so bounded ones need not round-trip).
pub const TYPES: &[&str] = &[
    "std_msgs/msg/String",
    "geometry_msgs/msg/Twist",
    "sensor_msgs/msg/Image",
    "sensor_msgs/msg/Imu",
    "sensor_msgs/msg/PointCloud2",
    "sensor_msgs/msg/JointState",
    "visualization_msgs/msg/Marker",
    "rcl_interfaces/msg/ParameterEvent",
    "rcl_interfaces/msg/Log",
    "tf2_msgs/msg/TFMessage",
    "nav_msgs/msg/OccupancyGrid",
    "action_msgs/msg/GoalStatusArray",
    "std_msgs/msg/Empty",
    "example_interfaces/action/Fibonacci_SendGoal_Request",
    "example_interfaces/action/Fibonacci_FeedbackMessage",
    "example_interfaces/action/Fibonacci_GetResult_Response",
    "action_msgs/srv/CancelGoal_Request",
];

fn types() -> &'static Registry {
    static TYPES: OnceLock<Registry> = OnceLock::new();
    TYPES.get_or_init(Registry::bundled)
}

/// See the module docs. Panics (the fuzzer's finding) when a property
/// fails.
#[allow(clippy::expect_used)]
pub fn check(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    if let Some(a) = Attachment::decode(rest) {
        assert_eq!(Attachment::decode(&a.encode()), Some(a));
    }
    let _ = rmw_dds::type_hash(rest);
    if let Some(info) = rmw_dds::decode_info(rest) {
        let again = rmw_dds::decode_info(&rmw_dds::encode_info(&info));
        assert_eq!(
            again.as_ref(),
            Some(&info),
            "a node list changes through CDR and back"
        );
        let mut g = rmw_dds::Graph::new(0);
        let mut events = Vec::new();
        g.info(info.clone(), &mut events);
        g.participant_lost(&info.gid[..12].try_into().unwrap_or([0; 12]), &mut events);
        assert_eq!(g.bytes(), 0, "the graph gives back what it held");
    }
    if let Ok(text) = std::str::from_utf8(rest) {
        if let Some(t) = Token::parse(text) {
            assert_eq!(Token::parse(&t.to_key()).as_ref(), Some(&t), "{text:?}");
        }
        let _ = rmw::parse_data_key(text);
        if let Some((name, role)) = rmw_dds::ros_name(text) {
            assert_eq!(
                rmw_dds::ros_name(&rmw_dds::dds_name(&name, role)),
                Some((name, role))
            );
        }
        let _ = Qos::parse(text);
    }
    let ty = TYPES[usize::from(pick) % TYPES.len()];
    let mut out = Vec::new();
    if cdr::decode_json(types(), ty, rest, &mut out).is_ok() {
        // Valid for every reader (serde_json's default parser here), and
        // read back exactly as the gateway reads a client's message.
        serde_json::from_slice::<serde_json::Value>(&out).expect("decode_json wrote invalid JSON");
        let v: serde_json::Value =
            crate::json::from_slice(&out).expect("decode_json wrote JSON the codec cannot read");
        let again = cdr::encode(types(), ty, &v).expect("a decoded message does not encode again");
        // And it encodes to the same values: decoded again, the same text.
        // A float's text reads back as one value, so equal text is equal
        // bits for every float but NaN, which is `null` both times (its
        // payload is not kept: compared by being NaN).
        let mut twice = Vec::new();
        cdr::decode_json(types(), ty, &again, &mut twice)
            .expect("a re-encoded message does not decode");
        assert_eq!(
            String::from_utf8_lossy(&twice),
            String::from_utf8_lossy(&out),
            "a decoded message changes through JSON and back"
        );
        // A decoded goal id (uint8[16], base64) reads back as 16 bytes.
        if v.get("goal_id").is_some() {
            let id = action::goal_id_of(&v).expect("a decoded goal id does not read back");
            assert_eq!(v["goal_id"]["uuid"], action::uuid_text(&id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fuzzer's first find: a Marker whose `uv_coordinates[13].v` is
    /// `f32::MAX` decoded to `3.4028235e38`, which the encoder refused as
    /// beyond float32 (as a double it is a little above `f32::MAX`). With
    /// the other edges of float32 beside it.
    #[test]
    fn a_marker_with_float32_edges_in_its_arrays_passes_the_check() {
        let ty = "visualization_msgs/msg/Marker";
        let pick = TYPES.iter().position(|t| *t == ty).expect("Marker") as u8;
        let edges = [
            f32::MAX,
            f32::MIN,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            // Its shortest text reads back as the next float32 up.
            f32::from_bits(0x15ae_43fd),
        ];
        let mut v = cdr::default_json(types(), ty).expect("default");
        let mut uv: Vec<serde_json::Value> = (0..13)
            .map(|_| serde_json::json!({"u": 0.0, "v": 0.0}))
            .collect();
        uv.push(serde_json::json!({"u": 0.5, "v": f64::from(f32::MAX)}));
        v["uv_coordinates"] = uv.into();
        let mut bytes = vec![pick];
        bytes.extend(cdr::encode(types(), ty, &v).expect("encode"));
        check(&bytes);
        // Each edge in every float32 of the message: the colors, and the
        // UV coordinates. Patched into the CDR, since NaN and the
        // infinities are not JSON numbers.
        let max = f32::MAX.to_le_bytes();
        let at = bytes
            .windows(4)
            .position(|w| w == max)
            .expect("uv_coordinates[13].v");
        for x in edges {
            let mut b = bytes.clone();
            b[at..at + 4].copy_from_slice(&x.to_le_bytes());
            check(&b);
        }
    }

    #[test]
    fn random_inputs_and_valid_messages_pass_the_check() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for (i, ty) in TYPES.iter().enumerate() {
            let v = cdr::default_json(types(), ty).expect("default");
            let mut bytes = vec![i as u8];
            bytes.extend(cdr::encode(types(), ty, &v).expect("encode"));
            check(&bytes);
            for cut in 0..bytes.len() {
                check(&bytes[..cut]);
            }
        }
        for _ in 0..2000 {
            let len = (next() % 200) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if bytes.len() > 4 {
                bytes[1..5].copy_from_slice(&[0, 1, 0, 0]);
            }
            check(&bytes);
        }
    }
}
