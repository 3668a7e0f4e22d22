//! A Foxglove client's messages: JSON text operations and binary frames
//! (spec, "Client messages"), decoded into [`ClientOp`] and
//! [`ClientBinary`].
//!
//! Invariants: every error names what was wrong (the op, the field);
//! numbers that are not `u32` ids are refused, never truncated; the
//! number of items in one operation is bounded by the message's length
//! (the caller's `max_line_bytes`), and the session's tables by their own
//! limits.

use serde_json::Value;

/// A client channel (`advertise` from the client, for `clientPublish`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientChannel {
    pub id: u32,
    pub topic: String,
    /// `json`, `cdr`, ... as the client names it.
    pub encoding: String,
    pub schema_name: String,
    /// The schema text, when given.
    pub schema: Option<String>,
    pub schema_encoding: Option<String>,
}

/// One subscription of a `subscribe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription {
    pub id: u32,
    pub channel: u32,
    /// `throttleMs`, a rosgate extension (docs/protocol.md, "Foxglove
    /// WebSocket protocol"): at most one message per this many
    /// milliseconds; 0 (or absent) none.
    pub throttle_ms: u32,
}

/// The subscription's throttling extension field: an integer of
/// milliseconds, as rosbridge's `throttle_rate`.
pub const THROTTLE_FIELD: &str = "throttleMs";

/// A client's JSON operation.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientOp {
    /// `subscribe`: one entry per subscription.
    Subscribe(Vec<Subscription>),
    /// `unsubscribe`: subscription ids.
    Unsubscribe(Vec<u32>),
    /// `advertise`: client channels.
    Advertise(Vec<ClientChannel>),
    /// `unadvertise`: client channel ids.
    Unadvertise(Vec<u32>),
    GetParameters {
        names: Vec<String>,
        id: Option<String>,
    },
    /// `setParameters`: each parameter as sent (`name`, `value`, `type`).
    SetParameters {
        parameters: Vec<Value>,
        id: Option<String>,
    },
    SubscribeParameterUpdates(Vec<String>),
    UnsubscribeParameterUpdates(Vec<String>),
    SubscribeConnectionGraph,
    UnsubscribeConnectionGraph,
    /// `fetchAsset`.
    FetchAsset {
        uri: String,
        request_id: u32,
    },
}

/// A client's binary message (spec, "Client binary messages").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientBinary<'a> {
    /// Opcode 0x01: a message on a client channel.
    MessageData { channel: u32, payload: &'a [u8] },
    /// Opcode 0x02: a service call request.
    ServiceCallRequest {
        service: u32,
        call: u32,
        encoding: &'a str,
        payload: &'a [u8],
    },
}

/// Binary opcode of client message data.
pub const OP_MESSAGE_DATA: u8 = 0x01;
/// Binary opcode of a service call request.
pub const OP_SERVICE_CALL_REQUEST: u8 = 0x02;

fn u32_field(v: &Value, key: &str, op: &str) -> Result<u32, String> {
    v.get(key)
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| format!("{op}: {key:?} must be an integer from 0 to 4294967295"))
}

fn str_field(v: &Value, key: &str, op: &str) -> Result<String, String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("{op}: {key:?} must be a string"))
}

fn array<'v>(v: &'v Value, key: &str, op: &str) -> Result<&'v Vec<Value>, String> {
    v.get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{op}: {key:?} must be an array"))
}

fn u32_list(v: &Value, key: &str, op: &str) -> Result<Vec<u32>, String> {
    array(v, key, op)?
        .iter()
        .map(|n| {
            n.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{op}: {key:?} must hold integers from 0 to 4294967295"))
        })
        .collect()
}

fn str_list(v: &Value, key: &str, op: &str) -> Result<Vec<String>, String> {
    array(v, key, op)?
        .iter()
        .map(|s| {
            s.as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{op}: {key:?} must hold strings"))
        })
        .collect()
}

fn opt_id(v: &Value) -> Option<String> {
    v.get("id").and_then(Value::as_str).map(str::to_owned)
}

/// One JSON text message of a client.
pub fn decode_text(msg: &[u8]) -> Result<ClientOp, String> {
    let v: Value = serde_json::from_slice(msg).map_err(|e| format!("not a JSON message: {e}"))?;
    let Some(op) = v.get("op").and_then(Value::as_str) else {
        return Err("a message must be a JSON object with a string \"op\"".into());
    };
    Ok(match op {
        "subscribe" => ClientOp::Subscribe(
            array(&v, "subscriptions", op)?
                .iter()
                .map(|s| {
                    Ok(Subscription {
                        id: u32_field(s, "id", op)?,
                        channel: u32_field(s, "channelId", op)?,
                        throttle_ms: match s.get(THROTTLE_FIELD) {
                            None | Some(Value::Null) => 0,
                            Some(_) => u32_field(s, THROTTLE_FIELD, op)?,
                        },
                    })
                })
                .collect::<Result<_, String>>()?,
        ),
        "unsubscribe" => ClientOp::Unsubscribe(u32_list(&v, "subscriptionIds", op)?),
        "advertise" => ClientOp::Advertise(
            array(&v, "channels", op)?
                .iter()
                .map(|c| {
                    Ok(ClientChannel {
                        id: u32_field(c, "id", op)?,
                        topic: str_field(c, "topic", op)?,
                        encoding: str_field(c, "encoding", op)?,
                        schema_name: str_field(c, "schemaName", op)?,
                        schema: c.get("schema").and_then(Value::as_str).map(str::to_owned),
                        schema_encoding: c
                            .get("schemaEncoding")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                    })
                })
                .collect::<Result<_, String>>()?,
        ),
        "unadvertise" => ClientOp::Unadvertise(u32_list(&v, "channelIds", op)?),
        "getParameters" => ClientOp::GetParameters {
            names: str_list(&v, "parameterNames", op)?,
            id: opt_id(&v),
        },
        "setParameters" => ClientOp::SetParameters {
            parameters: array(&v, "parameters", op)?.clone(),
            id: opt_id(&v),
        },
        "subscribeParameterUpdates" => {
            ClientOp::SubscribeParameterUpdates(str_list(&v, "parameterNames", op)?)
        }
        "unsubscribeParameterUpdates" => {
            ClientOp::UnsubscribeParameterUpdates(str_list(&v, "parameterNames", op)?)
        }
        "subscribeConnectionGraph" => ClientOp::SubscribeConnectionGraph,
        "unsubscribeConnectionGraph" => ClientOp::UnsubscribeConnectionGraph,
        "fetchAsset" => ClientOp::FetchAsset {
            uri: str_field(&v, "uri", op)?,
            request_id: u32_field(&v, "requestId", op)?,
        },
        other => return Err(format!("unknown op {other:?}")),
    })
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(u32::from_le_bytes(bytes))
}

/// One binary message of a client.
pub fn decode_binary(msg: &[u8]) -> Result<ClientBinary<'_>, String> {
    match msg.first() {
        Some(&OP_MESSAGE_DATA) => {
            let channel = le32(msg, 1).ok_or(
                "client message data: shorter than its 5-byte header (opcode, channel id)",
            )?;
            Ok(ClientBinary::MessageData {
                channel,
                payload: &msg[5..],
            })
        }
        Some(&OP_SERVICE_CALL_REQUEST) => {
            let short = "service call request: shorter than its header (opcode, service id, call id, encoding length, encoding)";
            let (service, call, len) = match (le32(msg, 1), le32(msg, 5), le32(msg, 9)) {
                (Some(s), Some(c), Some(l)) => (s, c, l as usize),
                _ => return Err(short.into()),
            };
            let end = 13usize.checked_add(len).ok_or(short)?;
            let enc = msg.get(13..end).ok_or(short)?;
            let encoding = std::str::from_utf8(enc)
                .map_err(|_| "service call request: the encoding is not UTF-8".to_string())?;
            Ok(ClientBinary::ServiceCallRequest {
                service,
                call,
                encoding,
                payload: &msg[end..],
            })
        }
        Some(op) => Err(format!(
            "unknown binary opcode 0x{op:02x} (0x01 message data, 0x02 service call request)"
        )),
        None => Err("an empty binary message".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscribe_and_unsubscribe_as_the_spec_writes_them() {
        let op = decode_text(
            br#"{"op":"subscribe","subscriptions":[{"id":0,"channelId":3},{"id":1,"channelId":5}]}"#,
        )
        .unwrap();
        let sub = |id, channel, throttle_ms| Subscription {
            id,
            channel,
            throttle_ms,
        };
        assert_eq!(op, ClientOp::Subscribe(vec![sub(0, 3, 0), sub(1, 5, 0)]));
        // rosgate's extension: a throttle in milliseconds per subscription.
        let op = decode_text(
            br#"{"op":"subscribe","subscriptions":[{"id":2,"channelId":3,"throttleMs":250}]}"#,
        )
        .unwrap();
        assert_eq!(op, ClientOp::Subscribe(vec![sub(2, 3, 250)]));
        let e = decode_text(
            br#"{"op":"subscribe","subscriptions":[{"id":2,"channelId":3,"throttleMs":-1}]}"#,
        )
        .unwrap_err();
        assert!(e.contains("throttleMs"), "{e}");
        let op = decode_text(br#"{"op":"unsubscribe","subscriptionIds":[0,1]}"#).unwrap();
        assert_eq!(op, ClientOp::Unsubscribe(vec![0, 1]));
    }

    #[test]
    fn bad_messages_name_the_problem() {
        let e = decode_text(b"{").unwrap_err();
        assert!(e.starts_with("not a JSON message"), "{e}");
        let e = decode_text(br#"{"op":"nope"}"#).unwrap_err();
        assert_eq!(e, "unknown op \"nope\"");
        let e = decode_text(br#"{"op":"subscribe","subscriptions":[{"id":-1,"channelId":3}]}"#)
            .unwrap_err();
        assert!(e.contains("\"id\""), "{e}");
        let e = decode_text(br#"{"op":"unsubscribe","subscriptionIds":[4294967296]}"#).unwrap_err();
        assert!(e.contains("subscriptionIds"), "{e}");
        let e = decode_text(br#"[1]"#).unwrap_err();
        assert!(e.contains("\"op\""), "{e}");
    }

    #[test]
    fn client_advertise_keeps_its_schema() {
        let op = decode_text(
            br#"{"op":"advertise","channels":[{"id":2,"topic":"/c","encoding":"json","schemaName":"std_msgs/msg/String","schema":"string data","schemaEncoding":"ros2msg"}]}"#,
        )
        .unwrap();
        let ClientOp::Advertise(chans) = op else {
            panic!("{op:?}")
        };
        assert_eq!(chans[0].id, 2);
        assert_eq!(chans[0].schema.as_deref(), Some("string data"));
    }

    /// The layouts of foxglove-sdk's snapshot tests
    /// (`rust/foxglove/src/protocol/common/client/snapshots/`): message data
    /// is opcode, channel id (u32 LE), payload; a service call request is
    /// opcode, service id, call id, encoding length (u32 LE each), the
    /// encoding, payload.
    #[test]
    fn binary_layouts() {
        let msg = [0x01, 0x1e, 0, 0, 0, b'{', b'}'];
        assert_eq!(
            decode_binary(&msg).unwrap(),
            ClientBinary::MessageData {
                channel: 30,
                payload: b"{}"
            }
        );
        let mut req = vec![0x02, 0x0a, 0, 0, 0, 0x0b, 0, 0, 0, 4, 0, 0, 0];
        req.extend_from_slice(b"json{\"a\":1}");
        assert_eq!(
            decode_binary(&req).unwrap(),
            ClientBinary::ServiceCallRequest {
                service: 10,
                call: 11,
                encoding: "json",
                payload: b"{\"a\":1}"
            }
        );
        assert!(decode_binary(&[0x01, 1, 0]).is_err());
        assert!(
            decode_binary(&[0x02, 1, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, b'j'])
                .unwrap_err()
                .contains("shorter")
        );
        assert!(decode_binary(&[0x07]).unwrap_err().contains("0x07"));
        assert!(decode_binary(&[]).is_err());
    }
}
