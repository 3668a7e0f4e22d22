//! The server's messages to a Foxglove client (spec, "Server messages"):
//! JSON text messages written as one line each (`...\n`, the hub's control
//! lines; the WebSocket queue frames each line as one text message), and
//! the binary messages' headers.
//!
//! Invariants: every JSON message is one line of valid JSON (strings
//! escaped by serde_json); binary headers are little-endian as the spec
//! lays them out.

use serde_json::{json, Map, Value};

/// Binary opcode of message data.
pub const OP_MESSAGE_DATA: u8 = 0x01;
/// Binary opcode of a time message.
pub const OP_TIME: u8 = 0x02;
/// Binary opcode of a service call response.
pub const OP_SERVICE_CALL_RESPONSE: u8 = 0x03;
/// Binary opcode of a fetch asset response.
pub const OP_FETCH_ASSET_RESPONSE: u8 = 0x04;

/// Bytes of a message data header: opcode, subscription id, log time.
pub const MESSAGE_DATA_HEAD: usize = 1 + 4 + 8;

/// A status message's level (spec, "Status": 0 info, 1 warning, 2 error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusLevel {
    Info = 0,
    Warning = 1,
    Error = 2,
}

/// A server channel as `advertise` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel<'a> {
    pub id: u32,
    pub topic: &'a str,
    /// `cdr` or `json`.
    pub encoding: &'a str,
    pub schema_name: &'a str,
    pub schema: &'a str,
    /// `ros2msg` or `jsonschema`.
    pub schema_encoding: &'a str,
}

fn line(out: &mut Vec<u8>, v: &Value) {
    // serde_json's writer into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, v);
    out.push(b'\n');
}

/// What `serverInfo` says of the server.
#[derive(Debug, Clone, Default)]
pub struct ServerInfo<'a> {
    pub name: &'a str,
    pub capabilities: &'a [&'a str],
    pub supported_encodings: &'a [&'a str],
    pub metadata: &'a [(&'a str, &'a str)],
    pub session_id: &'a str,
}

/// `serverInfo`, the first message of a session.
pub fn server_info(out: &mut Vec<u8>, info: &ServerInfo<'_>) {
    let metadata: Map<String, Value> = info
        .metadata
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
        .collect();
    line(
        out,
        &json!({
            "op": "serverInfo",
            "name": info.name,
            "capabilities": info.capabilities,
            "supportedEncodings": info.supported_encodings,
            "metadata": metadata,
            "sessionId": info.session_id,
        }),
    );
}

/// `status`.
pub fn status(out: &mut Vec<u8>, level: StatusLevel, message: &str, id: Option<&str>) {
    let mut v = json!({"op": "status", "level": level as u8, "message": message});
    if let Some(id) = id {
        v["id"] = Value::from(id);
    }
    line(out, &v);
}

/// `advertise` of `channels`.
pub fn advertise(out: &mut Vec<u8>, channels: &[Channel<'_>]) {
    let list: Vec<Value> = channels
        .iter()
        .map(|c| {
            json!({
                "id": c.id,
                "topic": c.topic,
                "encoding": c.encoding,
                "schemaName": c.schema_name,
                "schema": c.schema,
                "schemaEncoding": c.schema_encoding,
            })
        })
        .collect();
    line(out, &json!({"op": "advertise", "channels": list}));
}

/// `unadvertise` of channel `ids`.
pub fn unadvertise(out: &mut Vec<u8>, ids: &[u32]) {
    line(out, &json!({"op": "unadvertise", "channelIds": ids}));
}

/// One side (request or response) of a service as `advertiseServices`
/// describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSchema<'a> {
    /// `cdr` or `json`.
    pub encoding: &'a str,
    pub schema_name: &'a str,
    /// `ros2msg` or `jsonschema`.
    pub schema_encoding: &'a str,
    pub schema: &'a str,
}

/// A service as `advertiseServices` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service<'a> {
    pub id: u32,
    pub name: &'a str,
    pub ty: &'a str,
    pub request: MessageSchema<'a>,
    pub response: MessageSchema<'a>,
}

/// `advertiseServices`: each service's `request` and `response` schemas
/// (the spec's current fields) and, for clients written against
/// foxglove_bridge, `requestSchema`/`responseSchema` with the same texts.
pub fn advertise_services(out: &mut Vec<u8>, services: &[Service<'_>]) {
    let side = |m: &MessageSchema<'_>| {
        json!({
            "encoding": m.encoding,
            "schemaName": m.schema_name,
            "schemaEncoding": m.schema_encoding,
            "schema": m.schema,
        })
    };
    let list: Vec<Value> = services
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "name": s.name,
                "type": s.ty,
                "request": side(&s.request),
                "response": side(&s.response),
                "requestSchema": s.request.schema,
                "responseSchema": s.response.schema,
            })
        })
        .collect();
    line(out, &json!({"op": "advertiseServices", "services": list}));
}

/// `unadvertiseServices` of service `ids`.
pub fn unadvertise_services(out: &mut Vec<u8>, ids: &[u32]) {
    line(
        out,
        &json!({"op": "unadvertiseServices", "serviceIds": ids}),
    );
}

/// `serviceCallFailure` of call `call` to service `service`.
pub fn service_call_failure(out: &mut Vec<u8>, service: u32, call: u32, message: &str) {
    line(
        out,
        &json!({"op": "serviceCallFailure", "serviceId": service, "callId": call, "message": message}),
    );
}

/// A service call response (binary): opcode, service id, call id,
/// encoding length (u32 LE each), the encoding, then the payload.
pub fn service_call_response(service: u32, call: u32, encoding: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(13 + encoding.len() + payload.len());
    out.push(OP_SERVICE_CALL_RESPONSE);
    out.extend_from_slice(&service.to_le_bytes());
    out.extend_from_slice(&call.to_le_bytes());
    out.extend_from_slice(&(encoding.len() as u32).to_le_bytes());
    out.extend_from_slice(encoding.as_bytes());
    out.extend_from_slice(payload);
    out
}

/// A fetch asset response (spec, "Fetch Asset Response"): opcode 0x04,
/// request id, status (0 the file's bytes follow, 1 an error text does),
/// error text length and text, then the asset's bytes (none on error).
pub fn fetch_asset_response(request_id: u32, asset: Result<&[u8], &str>) -> Vec<u8> {
    let (status, error, data) = match asset {
        Ok(data) => (0u8, "", data),
        Err(why) => (1u8, why, &[][..]),
    };
    let mut out = Vec::with_capacity(10 + error.len() + data.len());
    out.push(OP_FETCH_ASSET_RESPONSE);
    out.extend_from_slice(&request_id.to_le_bytes());
    out.push(status);
    out.extend_from_slice(&(error.len() as u32).to_le_bytes());
    out.extend_from_slice(error.as_bytes());
    out.extend_from_slice(data);
    out
}

/// `parameterValues`: `parameters` as given (each `{name, value, type?}`),
/// with the request's `id` when it had one.
pub fn parameter_values(out: &mut Vec<u8>, parameters: &[Value], id: Option<&str>) {
    let mut v = json!({"op": "parameterValues", "parameters": parameters});
    if let Some(id) = id {
        v["id"] = Value::from(id);
    }
    line(out, &v);
}

/// A name (topic or service) and the ids (node names) on it.
pub type Endpoints<'a> = (&'a str, &'a [String]);

/// What a `connectionGraphUpdate` carries: the topics and services added
/// or changed, and those gone.
#[derive(Debug, Clone, Default)]
pub struct GraphUpdate<'a> {
    pub published: Vec<Endpoints<'a>>,
    pub subscribed: Vec<Endpoints<'a>>,
    pub services: Vec<Endpoints<'a>>,
    pub removed_topics: Vec<&'a str>,
    pub removed_services: Vec<&'a str>,
}

/// `connectionGraphUpdate`.
pub fn connection_graph_update(out: &mut Vec<u8>, u: &GraphUpdate<'_>) {
    let list = |key: &str, l: &[Endpoints<'_>]| -> Vec<Value> {
        l.iter()
            .map(|(name, ids)| json!({"name": name, key: ids}))
            .collect()
    };
    line(
        out,
        &json!({
            "op": "connectionGraphUpdate",
            "publishedTopics": list("publisherIds", &u.published),
            "subscribedTopics": list("subscriberIds", &u.subscribed),
            "advertisedServices": list("providerIds", &u.services),
            "removedTopics": u.removed_topics,
            "removedServices": u.removed_services,
        }),
    );
}

/// The header of a message data message: what precedes the payload.
pub fn message_data_head(subscription: u32, log_time_ns: u64) -> [u8; MESSAGE_DATA_HEAD] {
    let mut h = [0u8; MESSAGE_DATA_HEAD];
    h[0] = OP_MESSAGE_DATA;
    h[1..5].copy_from_slice(&subscription.to_le_bytes());
    h[5..13].copy_from_slice(&log_time_ns.to_le_bytes());
    h
}

/// A time message: opcode, timestamp (ns, u64 LE).
pub fn time(ns: u64) -> [u8; 9] {
    let mut h = [0u8; 9];
    h[0] = OP_TIME;
    h[1..9].copy_from_slice(&ns.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(out: &[u8]) -> Value {
        assert_eq!(out.last(), Some(&b'\n'));
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        serde_json::from_slice(out).unwrap()
    }

    /// foxglove-sdk's `message_data__tests__encode` snapshot
    /// (`rust/foxglove/src/protocol/common/server/snapshots/`):
    /// subscription 30, log time 1234, then the payload.
    #[test]
    fn message_data_layout() {
        let h = message_data_head(30, 1234);
        assert_eq!(
            h,
            [0x01, 0x1e, 0x00, 0x00, 0x00, 0xd2, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00]
        );
        assert_eq!(time(1234), [0x02, 0xd2, 0x04, 0, 0, 0, 0, 0, 0]);
    }

    /// foxglove-sdk's `service_call_response__tests__encode` layout:
    /// opcode 0x03, service id, call id, encoding length, encoding, payload.
    #[test]
    fn service_call_response_layout() {
        let b = service_call_response(10, 11, "json", b"{}");
        assert_eq!(
            b,
            [3, 10, 0, 0, 0, 11, 0, 0, 0, 4, 0, 0, 0, b'j', b's', b'o', b'n', b'{', b'}']
        );
        let mut out = Vec::new();
        service_call_failure(&mut out, 1, 2, "no");
        assert_eq!(
            parse(&out),
            json!({"op":"serviceCallFailure","serviceId":1,"callId":2,"message":"no"})
        );
        out.clear();
        let side = MessageSchema {
            encoding: "cdr",
            schema_name: "x/srv/S_Request",
            schema_encoding: "ros2msg",
            schema: "int64 a\n",
        };
        advertise_services(
            &mut out,
            &[Service {
                id: 3,
                name: "/s",
                ty: "x/srv/S",
                request: side.clone(),
                response: side,
            }],
        );
        let v = parse(&out);
        assert_eq!(v["services"][0]["request"]["schemaName"], "x/srv/S_Request");
        assert_eq!(v["services"][0]["requestSchema"], "int64 a\n");
        out.clear();
        unadvertise_services(&mut out, &[3]);
        assert_eq!(
            parse(&out),
            json!({"op":"unadvertiseServices","serviceIds":[3]})
        );
    }

    #[test]
    fn connection_graph_update_names_its_lists_as_the_spec() {
        let ids = vec!["/n".to_string()];
        let mut out = Vec::new();
        connection_graph_update(
            &mut out,
            &GraphUpdate {
                published: vec![("/t", &ids)],
                subscribed: vec![],
                services: vec![("/s", &ids)],
                removed_topics: vec!["/old"],
                removed_services: vec![],
            },
        );
        assert_eq!(
            parse(&out),
            json!({"op":"connectionGraphUpdate",
                "publishedTopics":[{"name":"/t","publisherIds":["/n"]}],
                "subscribedTopics":[],
                "advertisedServices":[{"name":"/s","providerIds":["/n"]}],
                "removedTopics":["/old"],"removedServices":[]})
        );
    }

    #[test]
    fn json_messages_are_one_line_each() {
        let mut out = Vec::new();
        server_info(
            &mut out,
            &ServerInfo {
                name: "rosgate",
                capabilities: &["clientPublish"],
                supported_encodings: &["cdr", "json"],
                metadata: &[("ROS_DISTRO", "jazzy")],
                session_id: "1",
            },
        );
        let v = parse(&out);
        assert_eq!(v["op"], "serverInfo");
        assert_eq!(v["supportedEncodings"], json!(["cdr", "json"]));
        assert_eq!(v["metadata"]["ROS_DISTRO"], "jazzy");
        assert_eq!(v["sessionId"], "1");

        out.clear();
        status(&mut out, StatusLevel::Error, "bad \"x\"\n", Some("7"));
        assert_eq!(
            parse(&out),
            json!({"op":"status","level":2,"message":"bad \"x\"\n","id":"7"})
        );

        out.clear();
        advertise(
            &mut out,
            &[Channel {
                id: 1,
                topic: "/chatter",
                encoding: "cdr",
                schema_name: "std_msgs/msg/String",
                schema: "string data\n",
                schema_encoding: "ros2msg",
            }],
        );
        assert_eq!(
            parse(&out),
            json!({"op":"advertise","channels":[{"id":1,"topic":"/chatter","encoding":"cdr",
                "schemaName":"std_msgs/msg/String","schema":"string data\n","schemaEncoding":"ros2msg"}]})
        );
        out.clear();
        unadvertise(&mut out, &[1, 2]);
        assert_eq!(parse(&out), json!({"op":"unadvertise","channelIds":[1,2]}));
    }

    #[test]
    fn fetch_asset_response_layout() {
        assert_eq!(
            fetch_asset_response(0x0102_0304, Ok(b"ab")),
            [0x04, 4, 3, 2, 1, 0, 0, 0, 0, 0, b'a', b'b']
        );
        assert_eq!(
            fetch_asset_response(7, Err("no")),
            [0x04, 7, 0, 0, 0, 1, 2, 0, 0, 0, b'n', b'o']
        );
    }
}
