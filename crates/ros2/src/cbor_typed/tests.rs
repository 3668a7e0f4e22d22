use serde_json::json;

use super::*;
use crate::registry::Registry;

fn enc(ty: &str, msg: Value) -> Result<Vec<u8>, CdrError> {
    let mut out = vec![0xAA];
    let r = encode(&Registry::bundled(), ty, &msg, &mut out);
    match r {
        Ok(()) => Ok(out[1..].to_vec()),
        Err(e) => {
            assert_eq!(out, [0xAA], "out unchanged on error");
            Err(e)
        }
    }
}

/// `{"data": <item>}`: a one-field map (0xa1, text "data").
fn data(item: &[u8]) -> Vec<u8> {
    let mut v = vec![0xa1, 0x64, b'd', b'a', b't', b'a'];
    v.extend_from_slice(item);
    v
}

#[test]
fn integers_take_rfc8949_appendix_a_forms() {
    // RFC 8949 Appendix A: 0, 23, 24, 100, 1000, 1000000, -1, -100, -1000.
    let cases: &[(&str, Value, &[u8])] = &[
        ("std_msgs/msg/Int32", json!(0), &[0x00]),
        ("std_msgs/msg/Int32", json!(23), &[0x17]),
        ("std_msgs/msg/Int32", json!(24), &[0x18, 0x18]),
        ("std_msgs/msg/Int32", json!(100), &[0x18, 0x64]),
        ("std_msgs/msg/Int32", json!(1000), &[0x19, 0x03, 0xe8]),
        (
            "std_msgs/msg/Int32",
            json!(1000000),
            &[0x1a, 0x00, 0x0f, 0x42, 0x40],
        ),
        ("std_msgs/msg/Int32", json!(-1), &[0x20]),
        ("std_msgs/msg/Int32", json!(-100), &[0x38, 0x63]),
        ("std_msgs/msg/Int16", json!(-1000), &[0x39, 0x03, 0xe7]),
        (
            "std_msgs/msg/UInt64",
            json!(18446744073709551615u64),
            &[0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        ),
        // A float with no fraction for an integer field, as cdr.rs takes it.
        ("std_msgs/msg/UInt8", json!(3.0), &[0x03]),
    ];
    for (ty, v, item) in cases {
        assert_eq!(enc(ty, json!({"data": v})).unwrap(), data(item), "{ty} {v}");
    }
}

#[test]
fn floats_are_doubles_and_float32_is_narrowed_first() {
    // RFC 8949 Appendix A: 1.1 is 0xfb3ff199999999999a.
    assert_eq!(
        enc("std_msgs/msg/Float64", json!({"data": 1.1})).unwrap(),
        data(&[0xfb, 0x3f, 0xf1, 0x99, 0x99, 0x99, 0x99, 0x99, 0x9a])
    );
    let mut want = vec![0xfb];
    want.extend_from_slice(&f64::from(0.1f32).to_be_bytes());
    assert_eq!(
        enc("std_msgs/msg/Float32", json!({"data": 0.1})).unwrap(),
        data(&want)
    );
    // null is NaN, the strings are the infinities (RFC 8949 Appendix A
    // spells them as doubles: 0xfb7ff8000000000000, 0xfb7ff0000000000000).
    assert_eq!(
        enc("std_msgs/msg/Float64", json!({"data": null})).unwrap(),
        data(&[0xfb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0])
    );
    assert_eq!(
        enc("std_msgs/msg/Float64", json!({"data": "Infinity"})).unwrap(),
        data(&[0xfb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0])
    );
}

#[test]
fn bool_and_strings() {
    assert_eq!(
        enc("std_msgs/msg/Bool", json!({"data": true})).unwrap(),
        data(&[0xf5])
    );
    assert_eq!(
        enc("std_msgs/msg/Bool", json!({"data": 0})).unwrap(),
        data(&[0xf4])
    );
    // RFC 8949 Appendix A: "a" is 0x6161, "\u00fc" is 0x62c3bc.
    assert_eq!(
        enc("std_msgs/msg/String", json!({"data": "a"})).unwrap(),
        data(&[0x61, 0x61])
    );
    assert_eq!(
        enc("std_msgs/msg/String", json!({"data": "\u{fc}"})).unwrap(),
        data(&[0x62, 0xc3, 0xbc])
    );
}

/// The `data` field of a `*MultiArray`, after its `layout` (an empty
/// `dim` and `data_offset` 0).
fn multi_array(item: &[u8]) -> Vec<u8> {
    let mut v = vec![0xa2];
    v.extend_from_slice(&[0x66, b'l', b'a', b'y', b'o', b'u', b't']);
    v.extend_from_slice(&[0xa2, 0x63, b'd', b'i', b'm', 0x80]);
    v.extend_from_slice(&[0x6b]);
    v.extend_from_slice(b"data_offset");
    v.push(0x00);
    v.extend_from_slice(&[0x64, b'd', b'a', b't', b'a']);
    v.extend_from_slice(item);
    v
}

#[test]
fn numeric_arrays_are_rfc8746_typed_arrays() {
    // RFC 8746 §2.1: tag 69 is uint16 little-endian, 77 sint16 LE, 85
    // binary32 LE, 86 binary64 LE; the content is one byte string.
    let v = enc("std_msgs/msg/UInt16MultiArray", json!({"data": [1, 258]})).unwrap();
    assert_eq!(v, multi_array(&[0xd8, 69, 0x44, 1, 0, 2, 1]));
    let v = enc("std_msgs/msg/Int16MultiArray", json!({"data": [-2]})).unwrap();
    assert_eq!(v, multi_array(&[0xd8, 77, 0x42, 0xfe, 0xff]));
    let v = enc("std_msgs/msg/Float32MultiArray", json!({"data": [1.5]})).unwrap();
    assert_eq!(v, multi_array(&[0xd8, 85, 0x44, 0, 0, 0xc0, 0x3f]));
    let v = enc("std_msgs/msg/Float64MultiArray", json!({"data": []})).unwrap();
    assert_eq!(v, multi_array(&[0xd8, 86, 0x40]));
    let v = enc("std_msgs/msg/Int8MultiArray", json!({"data": [-1, 1]})).unwrap();
    assert_eq!(v, multi_array(&[0xd8, 72, 0x42, 0xff, 0x01]));
}

#[test]
fn uint8_arrays_are_byte_strings_from_base64_or_lists() {
    let want = multi_array(&[0x43, 1, 2, 3]);
    assert_eq!(
        enc("std_msgs/msg/UInt8MultiArray", json!({"data": "AQID"})).unwrap(),
        want
    );
    assert_eq!(
        enc("std_msgs/msg/UInt8MultiArray", json!({"data": [1, 2, 3]})).unwrap(),
        want
    );
    // byte[] stays a list (rosbridge types it as a list of ints).
    let v = enc("std_msgs/msg/ByteMultiArray", json!({"data": [1, 2]})).unwrap();
    assert_eq!(v, multi_array(&[0x82, 1, 2]));
}

#[test]
fn missing_fields_take_zero_values_in_declaration_order() {
    // geometry_msgs/Vector3 with only y: x and z are 0.0, keys in order.
    let v = enc("geometry_msgs/msg/Vector3", json!({"y": 2.0})).unwrap();
    let mut want = vec![0xa3];
    for (k, x) in [("x", 0.0f64), ("y", 2.0), ("z", 0.0)] {
        want.push(0x61);
        want.push(k.as_bytes()[0]);
        want.push(0xfb);
        want.extend_from_slice(&x.to_be_bytes());
    }
    assert_eq!(v, want);
    // A fixed array missing is its length of zeros (Imu's covariance, 9
    // float64s: a typed array of 72 bytes).
    let v = enc("sensor_msgs/msg/Imu", json!({})).unwrap();
    let needle = [0xd8, 86, 0x58, 72];
    assert!(v.windows(4).any(|w| w == needle));
}

#[test]
fn mismatches_name_the_field_and_leave_nothing() {
    let e = enc("std_msgs/msg/Int8", json!({"data": 300})).unwrap_err();
    assert_eq!(e.path, "data");
    let e = enc("std_msgs/msg/String", json!({"data": 1})).unwrap_err();
    assert_eq!(e.path, "data");
    let e = enc("std_msgs/msg/String", json!({"data": "x", "other": 1})).unwrap_err();
    assert_eq!(e.path, "other");
    let e = enc("std_msgs/msg/Float64MultiArray", json!({"data": [1, "x"]})).unwrap_err();
    assert_eq!(e.path, "data[1]");
    let e = enc("std_msgs/msg/UInt8MultiArray", json!({"data": "!!"})).unwrap_err();
    assert_eq!(e.kind, CdrErrorKind::BadBase64);
    assert!(enc("no_pkg/msg/Nope", json!({})).is_err());
    assert!(enc("std_msgs/msg/String", json!([1])).is_err());
}

#[test]
fn publish_frame_wraps_the_message() {
    let mut out = Vec::new();
    publish(
        &Registry::bundled(),
        "std_msgs/String",
        "/t",
        &json!({"data": "a"}),
        &mut out,
    )
    .unwrap();
    let mut want = Vec::new();
    cbor::map(&mut want, 3);
    for s in ["op", "publish", "topic", "/t", "msg"] {
        cbor::text(&mut want, s);
    }
    want.extend_from_slice(&data(&[0x61, 0x61]));
    assert_eq!(out, want);
}
