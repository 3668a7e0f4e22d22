//! The services the gateway answers itself: `/rosgate/stats`,
//! `/rosgate/topic_info`, `/rosgate/connections` and rosapi
//! (rosbridge's introspection node), served natively from the registry
//! of the caller's domain, with `rosapi_msgs` request and response fields
//! so roslibjs and roslibpy parse them unchanged.
//!
//! Invariants:
//! - a built-in call is answered at once, exactly once, with the caller's
//!   id and the service name as the caller wrote it; a failure has the
//!   usual `result:false` shape;
//! - names are reachable as `/rosapi/<name>` and `rosapi/<name>` (roslib
//!   omits the slash) whatever the caller's namespace, and no client can
//!   provide a service under `/rosapi/` or `/rosgate/`;
//! - a reply lists at most [`MAX_LIST_ITEMS`] names per list and scans at
//!   most [`MAX_LIST_SCAN`] table entries, so its cost is bounded whatever
//!   the table sizes; a cut list says `"truncated":true`; the items are
//!   counted as work, so a client asking for big lists is charged for them;
//! - `/rosgate/topic_stats` is paged ([`TOPIC_STATS_PAGE`] topics a reply,
//!   a `next` cursor to go on), so no reply of it walks the whole table;
//! - results are per domain, sorted, without hidden names unless the
//!   request says `"include_hidden":true`;
//! - message definitions (`topics_and_raw_types`' texts, the `*_details`
//!   typedefs, `interfaces`) come from the hub's types (`types.rs`),
//!   rendered by `rosgate_ros2::typedefs`; one reply carries and renders
//!   at most [`MAX_TYPEDEFS_REPLY_BYTES`] of text.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use rosgate_ros2::typedefs::{Part, RenderError, TypeDef, MAX_FULL_TEXT_BYTES};
use rosgate_wire::encode;
use rosgate_wire::Raw;

use super::graph::{GATEWAY_NODE, GATEWAY_TOPICS};
use super::params::NODE_PARAM_SERVICES;

use super::Hub;
use crate::access::{Class, RoleId};
use crate::conn::ConnRef;
use crate::counters::{Counter, ErrorCode};
use crate::nodes::Domain;
use crate::registry::{NodeTag, Provided, Role};
use crate::tf::{
    REPUBLISH_TFS_SERVICE, REPUBLISH_TFS_TYPE, TF_ACTION, TF_ACTION_TYPE, TF_FRAMES_SERVICE,
};

/// Services under this prefix are rosapi's, answered by the gateway.
pub const ROSAPI_PREFIX: &str = "/rosapi/";

/// The built-in statistics service.
pub const STATS_SERVICE: &str = "/rosgate/stats";

/// A topic's endpoints with their QoS, and its incompatible pairs.
pub const TOPIC_INFO_SERVICE: &str = "/rosgate/topic_info";

/// Names one list in a reply holds at most.
pub const MAX_LIST_ITEMS: usize = 10_000;

/// Table entries one filtered listing (`topics_for_type`, ...) looks at.
pub const MAX_LIST_SCAN: usize = 10_000;

/// Bytes of definition texts (as JSON strings) one `topics_and_raw_types`
/// reply carries, and bytes of texts one reply may render (a cached text
/// costs no rendering). Typical texts are 0.1 to 6 KiB, so a thousand
/// topics' or more fit; past it the remaining topics get `""` and
/// `"typedefs_truncated"`. Half the control data soft limit
/// (`DEFAULT_CONTROL_SOFT_BYTES`), so one reply never makes a reader slow.
/// A reply this full held the loop about 4 ms rendering (cold) and 0.1 to
/// 1 ms from the cache (release build, the 40 topics of
/// `hub::tests::typedefs::one_reply_carries_a_bounded_amount_of_text`).
pub const MAX_TYPEDEFS_REPLY_BYTES: usize = 2 * 1024 * 1024;

/// The rosapi services served, with their types.
pub const ROSAPI_SERVICES: &[(&str, &str)] = &[
    ("action_servers", "rosapi_msgs/srv/GetActionServers"),
    ("action_type", "rosapi_msgs/srv/ActionType"),
    ("delete_param", "rosapi_msgs/srv/DeleteParam"),
    ("get_param", "rosapi_msgs/srv/GetParam"),
    ("get_param_names", "rosapi_msgs/srv/GetParamNames"),
    ("get_ros_version", "rosapi_msgs/srv/GetROSVersion"),
    ("get_time", "rosapi_msgs/srv/GetTime"),
    ("has_param", "rosapi_msgs/srv/HasParam"),
    ("interfaces", "rosapi_msgs/srv/Interfaces"),
    ("message_details", "rosapi_msgs/srv/MessageDetails"),
    ("node_details", "rosapi_msgs/srv/NodeDetails"),
    ("nodes", "rosapi_msgs/srv/Nodes"),
    ("publishers", "rosapi_msgs/srv/Publishers"),
    ("service_node", "rosapi_msgs/srv/ServiceNode"),
    ("service_providers", "rosapi_msgs/srv/ServiceProviders"),
    (
        "service_request_details",
        "rosapi_msgs/srv/ServiceRequestDetails",
    ),
    (
        "service_response_details",
        "rosapi_msgs/srv/ServiceResponseDetails",
    ),
    ("service_type", "rosapi_msgs/srv/ServiceType"),
    ("services", "rosapi_msgs/srv/Services"),
    ("services_for_type", "rosapi_msgs/srv/ServicesForType"),
    ("set_param", "rosapi_msgs/srv/SetParam"),
    ("subscribers", "rosapi_msgs/srv/Subscribers"),
    ("topic_type", "rosapi_msgs/srv/TopicType"),
    ("topics", "rosapi_msgs/srv/Topics"),
    ("topics_and_raw_types", "rosapi_msgs/srv/TopicsAndRawTypes"),
    ("topics_for_type", "rosapi_msgs/srv/TopicsForType"),
];

/// Type of the stats service (informational).
const STATS_TYPE: &str = "rosgate_msgs/srv/Stats";
/// Type of the topic info service (informational).
const TOPIC_INFO_TYPE: &str = "rosgate_msgs/srv/TopicInfo";
/// The connection list (see `hub/clients.rs`).
pub const CONNECTIONS_SERVICE: &str = "/rosgate/connections";
/// Per-topic publish counters.
pub const TOPIC_STATS_SERVICE: &str = "/rosgate/topic_stats";
/// The federation's state: this gateway's Zenoh id, the gateways it sees,
/// the topics wanted across, its counters (`docs/federation.md`).
pub const FEDERATION_SERVICE: &str = "/rosgate/federation";
const FEDERATION_TYPE: &str = "rosgate_msgs/srv/Federation";
/// Type of the topic counters service (informational).
const TOPIC_STATS_TYPE: &str = "rosgate_msgs/srv/TopicStats";
/// Type of the TF frames service (informational).
const TF_FRAMES_TYPE: &str = "rosgate_msgs/srv/TfFrames";
/// Type of the connection list service (informational).
const CONNECTIONS_TYPE: &str = "rosgate_msgs/srv/Connections";

/// A built-in service's full name and type, in order.
fn builtin_services() -> impl Iterator<Item = (String, &'static str)> {
    ROSAPI_SERVICES
        .iter()
        .map(|(n, t)| (format!("{ROSAPI_PREFIX}{n}"), *t))
        .chain([
            (STATS_SERVICE.to_string(), STATS_TYPE),
            (TOPIC_INFO_SERVICE.to_string(), TOPIC_INFO_TYPE),
            (CONNECTIONS_SERVICE.to_string(), CONNECTIONS_TYPE),
            (TOPIC_STATS_SERVICE.to_string(), TOPIC_STATS_TYPE),
            (FEDERATION_SERVICE.to_string(), FEDERATION_TYPE),
            (TF_FRAMES_SERVICE.to_string(), TF_FRAMES_TYPE),
            // Served by the gateway unless a client provides it (`tf.rs`).
            (REPUBLISH_TFS_SERVICE.to_string(), REPUBLISH_TFS_TYPE),
        ])
}

/// The type of built-in service `name`, if it is one.
fn builtin_type(name: &str) -> Option<&'static str> {
    if name == STATS_SERVICE {
        return Some(STATS_TYPE);
    }
    if name == TOPIC_INFO_SERVICE {
        return Some(TOPIC_INFO_TYPE);
    }
    if name == CONNECTIONS_SERVICE {
        return Some(CONNECTIONS_TYPE);
    }
    if name == TOPIC_STATS_SERVICE {
        return Some(TOPIC_STATS_TYPE);
    }
    if name == FEDERATION_SERVICE {
        return Some(FEDERATION_TYPE);
    }
    if name == TF_FRAMES_SERVICE {
        return Some(TF_FRAMES_TYPE);
    }
    if name == REPUBLISH_TFS_SERVICE {
        return Some(REPUBLISH_TFS_TYPE);
    }
    let short = name.strip_prefix(ROSAPI_PREFIX)?;
    ROSAPI_SERVICES
        .iter()
        .find(|(n, _)| *n == short)
        .map(|(_, t)| *t)
}

/// The type of gateway topic `name`, if it is one.
fn gateway_topic_type(name: &str) -> Option<&'static str> {
    GATEWAY_TOPICS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
}

/// Who sees a topic, a service, an action in introspection: a role that
/// may use it in one of these ways.
const TOPIC_CLASSES: &[Class] = &[Class::Publish, Class::Subscribe];
const SERVICE_CLASSES: &[Class] = &[Class::Call, Class::Provide];
const ACTION_CLASSES: &[Class] = &[Class::ActionSend, Class::ActionServe];

/// A string field of the request, "" when absent.
fn arg<'a>(args: &'a Value, key: &str) -> &'a str {
    args.get(key).and_then(Value::as_str).unwrap_or("")
}

/// `v` with `"truncated": true` when its list was cut.
fn with_cut(mut v: Value, cut: bool) -> Value {
    if cut {
        v["truncated"] = json!(true);
    }
    v
}

/// Topics one `/rosgate/topic_stats` reply lists at most: a page, whose
/// `next` the caller sends back as `after` for the following one.
/// Written straight into the reply (no intermediate values), a page costs
/// about 0.3 ms; the whole table at once (100 000 topics) held the loop
/// for 62 ms.
pub const TOPIC_STATS_PAGE: usize = 1_000;

/// Which page of a paged listing a request asks for: names after `after`
/// (exclusive; "" for the first page), at most `limit` of them.
#[derive(Debug, Clone, Copy)]
pub(super) struct Page<'a> {
    after: &'a str,
    limit: usize,
}

impl<'a> Page<'a> {
    /// The page `args` asks for: `after` (a string) and `limit` (a
    /// positive integer, at most [`TOPIC_STATS_PAGE`], which is also the
    /// default); anything else in them is ignored.
    fn of(args: &'a Value) -> Page<'a> {
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(TOPIC_STATS_PAGE, |n| {
                usize::try_from(n).map_or(TOPIC_STATS_PAGE, |n| n.clamp(1, TOPIC_STATS_PAGE))
            });
        Page {
            after: arg(args, "after"),
            limit,
        }
    }
}

/// Collects at most [`MAX_LIST_ITEMS`] items; says whether more were left.
fn capped<T>(it: impl Iterator<Item = T>) -> (Vec<T>, bool) {
    let mut out = Vec::new();
    for x in it {
        if out.len() == MAX_LIST_ITEMS {
            return (out, true);
        }
        out.push(x);
    }
    (out, false)
}

impl Hub {
    /// Answers `name` if it is a built-in service; false if it is not one.
    pub(super) fn builtin_call(
        &mut self,
        me: ConnRef,
        name: &str,
        args: Option<Raw<'_>>,
        id: Option<&[u8]>,
        now: Instant,
    ) -> bool {
        let plain = name.strip_prefix('/').unwrap_or(name);
        if plain == "rosgate/stats" {
            let values = self.stats_json();
            self.counters.inc(Counter::BuiltinCalls);
            self.reply(me, name, id, values.as_bytes(), now);
            return true;
        }
        if plain == "rosgate/connections" {
            self.counters.inc(Counter::BuiltinCalls);
            let values = self.connections_json(now).to_string();
            self.reply(me, name, id, values.as_bytes(), now);
            return true;
        }
        if plain == "rosgate/tf_frames" {
            self.counters.inc(Counter::BuiltinCalls);
            let domain = self.conn(me.key).map_or(0, |c| c.domain());
            let args = args
                .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
                .unwrap_or(Value::Null);
            let values = self.tf_frames_json(domain, &args);
            self.reply(me, name, id, values.as_bytes(), now);
            return true;
        }
        if plain == "rosgate/federation" {
            self.counters.inc(Counter::BuiltinCalls);
            let values = self.federation_json(me);
            self.reply(me, name, id, values.as_bytes(), now);
            return true;
        }
        if plain == "rosgate/topic_stats" {
            self.counters.inc(Counter::BuiltinCalls);
            let domain = self.conn(me.key).map_or(0, |c| c.domain());
            let role = self.viewer(me);
            let args = args
                .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
                .unwrap_or(Value::Null);
            let page = Page::of(&args);
            let values = self.topic_stats(domain, role, page);
            self.reply(me, name, id, &values, now);
            return true;
        }
        if plain == "rosgate/topic_info" {
            self.counters.inc(Counter::BuiltinCalls);
            let topic = args
                .and_then(|a| serde_json::from_str::<Value>(a.get()).ok())
                .and_then(|v| v.get("topic").and_then(Value::as_str).map(str::to_string))
                .unwrap_or_default();
            let domain = self.conn(me.key).map_or(0, |c| c.domain());
            let values = if self.visible(self.viewer(me), TOPIC_CLASSES, &topic) {
                self.topic_info(domain, &topic).to_string()
            } else {
                // As for a topic that does not exist.
                json!({"topic": topic, "type": "", "publishers": [], "subscribers": [], "incompatible": []})
                    .to_string()
            };
            self.reply(me, name, id, values.as_bytes(), now);
            return true;
        }
        let Some(short) = plain.strip_prefix("rosapi/") else {
            return false;
        };
        self.counters.inc(Counter::BuiltinCalls);
        let args: Value = match args {
            None => Value::Object(Map::new()),
            Some(raw) => match serde_json::from_str(raw.get()) {
                Ok(v @ Value::Object(_)) => v,
                // rosbridge zips a list with the fields; none of ours needs it.
                Ok(Value::Array(a)) if a.is_empty() => Value::Object(Map::new()),
                _ => {
                    let reason = format!("{name}: args must be an object");
                    self.counters.error(ErrorCode::BadArgs);
                    self.fail_builtin(me, name, id, &reason, now);
                    return true;
                }
            },
        };
        let domain = self.conn(me.key).map_or(0, |c| c.domain());
        let at = super::params::Answering {
            me,
            service: name,
            id,
        };
        match self.rosapi_params(at, domain, short, &args, now) {
            // Answered already (a set goes through validation).
            Some(Ok(Value::Null)) => return true,
            Some(Ok(values)) => {
                let bytes = values.to_string();
                self.reply(me, name, id, bytes.as_bytes(), now);
                return true;
            }
            Some(Err(reason)) => {
                self.fail_builtin(me, name, id, &reason, now);
                return true;
            }
            None => {}
        }
        let role = self.viewer(me);
        if let Some(bytes) = self.topic_listing(domain, role, short, &args) {
            self.reply(me, name, id, &bytes, now);
            return true;
        }
        match self.rosapi(domain, role, short, &args, now) {
            Ok(values) => {
                let bytes = values.to_string();
                self.reply(me, name, id, bytes.as_bytes(), now);
            }
            Err(reason) => self.fail_builtin(me, name, id, &reason, now),
        }
        true
    }

    fn reply(&mut self, me: ConnRef, name: &str, id: Option<&[u8]>, values: &[u8], now: Instant) {
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let mut out = Vec::with_capacity(values.len() + name.len() + 64);
        encode::service_response(&mut out, &name_json, id, values, b"true", None);
        self.send_control(me, &out, now);
    }

    fn fail_builtin(
        &mut self,
        me: ConnRef,
        name: &str,
        id: Option<&[u8]>,
        reason: &str,
        now: Instant,
    ) {
        let mut name_json = Vec::with_capacity(name.len() + 2);
        encode::json_string(&mut name_json, name);
        let mut out = Vec::new();
        encode::service_failure(&mut out, &name_json, id, reason);
        self.send_control(me, &out, now);
    }

    /// The `values` of rosapi service `short` in `domain`.
    fn rosapi(
        &mut self,
        domain: Domain,
        role: Option<RoleId>,
        short: &str,
        args: &Value,
        now: Instant,
    ) -> Result<Value, String> {
        let hidden = args
            .get("include_hidden")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let reg = &self.registries[domain as usize];
        let mut items = 0usize;
        let values = match short {
            "services" => {
                let (names, cut) = self.service_types(domain, role, hidden);
                let services: Vec<String> = names.into_keys().collect();
                items += services.len();
                with_cut(json!({ "services": services }), cut)
            }
            "services_for_type" => {
                let want = arg(args, "type");
                let (names, cut) = self.service_types(domain, role, hidden);
                let services: Vec<String> = names
                    .into_iter()
                    .filter(|(_, t)| t == want)
                    .map(|(n, _)| n)
                    .collect();
                items += services.len();
                with_cut(json!({ "services": services }), cut)
            }
            "nodes" => {
                let (nodes, cut) = self.node_names(domain);
                items += nodes.len();
                with_cut(json!({ "nodes": nodes }), cut)
            }
            "node_details" => {
                let (mut subscribing, mut publishing, mut services) =
                    self.node_details(domain, arg(args, "node"));
                subscribing.retain(|t| self.visible(role, TOPIC_CLASSES, t));
                publishing.retain(|t| self.visible(role, TOPIC_CLASSES, t));
                services.retain(|t| self.visible(role, SERVICE_CLASSES, t));
                items += subscribing.len() + publishing.len() + services.len();
                json!({"subscribing": subscribing, "publishing": publishing, "services": services})
            }
            // A name the role may not use is answered as one that does not
            // exist.
            "topic_type" | "publishers" | "subscribers"
                if !self.visible(role, TOPIC_CLASSES, arg(args, "topic")) =>
            {
                if short == "topic_type" {
                    json!({ "type": "" })
                } else {
                    json!({ short: [] })
                }
            }
            "service_type" | "service_node" | "service_providers"
                if reg.service(arg(args, "service")).is_some()
                    && !self.visible(role, SERVICE_CLASSES, arg(args, "service")) =>
            {
                match short {
                    "service_type" => json!({ "type": "" }),
                    "service_node" => json!({ "node": "" }),
                    _ => json!({ "providers": [] }),
                }
            }
            "action_type" if !self.visible(role, ACTION_CLASSES, arg(args, "action")) => {
                json!({ "type": "" })
            }
            "topic_type" => {
                let topic = arg(args, "topic");
                let ty = gateway_topic_type(topic)
                    .map(str::to_string)
                    .or_else(|| reg.topic_named(topic).map(|t| t.ty().to_string()))
                    .or_else(|| {
                        self.remote_topics(domain)
                            .find(|(n, _)| *n == topic)
                            .map(|(_, t)| t.to_string())
                    })
                    .unwrap_or_default();
                json!({ "type": ty })
            }
            "service_type" => {
                let service = arg(args, "service");
                let ty = builtin_type(service)
                    .map(str::to_string)
                    .or_else(|| reg.service(service).map(|s| s.ty().to_string()))
                    .or_else(|| self.param_service(domain, service).map(|(_, t)| t.to_string()))
                    .unwrap_or_default();
                json!({ "type": ty })
            }
            "publishers" | "subscribers" => {
                let role = if short == "publishers" {
                    Role::Publisher
                } else {
                    Role::Subscriber
                };
                let list = self.endpoint_nodes(domain, arg(args, "topic"), role);
                items += list.len();
                json!({ short: list })
            }
            "service_providers" => {
                // rosapi matches the request against service *types*
                // despite the field's name; a service name works too.
                let want = arg(args, "service");
                let mut providers: Vec<String> = Vec::new();
                if let Some(s) = reg.service(want) {
                    providers.push(self.node_label(s.provider(), s.node()));
                } else {
                    let scan = reg.service_names(true).take(MAX_LIST_SCAN);
                    let found: Vec<(ConnRef, NodeTag)> = scan
                        .filter(|n| self.visible(role, SERVICE_CLASSES, n))
                        .filter_map(|n| reg.service(n))
                        .filter(|s| s.ty() == want)
                        .map(|s| (s.provider(), s.node()))
                        .collect();
                    providers = found.into_iter().map(|(c, t)| self.node_label(c, t)).collect();
                }
                if builtin_type(want).is_some() || ROSAPI_SERVICES.iter().any(|(_, t)| *t == want) {
                    providers.push(GATEWAY_NODE.to_string());
                }
                providers.sort();
                providers.dedup();
                items += providers.len();
                json!({ "providers": providers })
            }
            "service_node" => {
                let service = arg(args, "service");
                // A client providing /republish_tfs wins over the gateway.
                let node = if let Some(s) = reg.service(service).filter(|_| service == REPUBLISH_TFS_SERVICE) {
                    self.node_label(s.provider(), s.node())
                } else if builtin_type(service).is_some() {
                    GATEWAY_NODE.to_string()
                } else if let Some(s) = reg.service(service) {
                    self.node_label(s.provider(), s.node())
                } else {
                    // The gateway serves a node's parameter services in
                    // the node's name.
                    self.param_service(domain, service)
                        .map(|(n, _)| n.to_string())
                        .unwrap_or_default()
                };
                json!({ "node": node })
            }
            "get_time" => {
                let (sec, nanosec) = self.graph_time(domain, now)?;
                json!({"time": {"sec": sec, "nanosec": nanosec}})
            }
            "get_ros_version" => json!({"version": 2, "distro": self.settings.distro}),
            "message_details" | "service_request_details" | "service_response_details"
            | "action_goal_details" | "action_result_details" | "action_feedback_details" => {
                let list = self.details(short, arg(args, "type"))?;
                items += list.len();
                json!({ "typedefs": list })
            }
            "action_servers" => {
                let (names, cut) = capped(reg.provided_names(Provided::Action, hidden));
                // Each server's node too, in the same order (as `topics`
                // gives `types`): rosapi names no action server's node, and
                // a page opened after `action_added` could not learn it.
                let (names, nodes): (Vec<String>, Vec<String>) = names
                    .into_iter()
                    .filter(|n| self.visible(role, ACTION_CLASSES, n))
                    .filter_map(|n| reg.provided(Provided::Action, n).map(|s| (n, s)))
                    .map(|(n, s)| (n.to_string(), self.node_label(s.provider(), s.node())))
                    .unzip();
                // tf2_web_republisher, served by the gateway (`tf.rs`).
                let (mut names, mut nodes) = (names, nodes);
                if self.tf_serves_action(domain) && self.visible(role, ACTION_CLASSES, TF_ACTION) {
                    let at = names.partition_point(|n| n.as_str() < TF_ACTION);
                    names.insert(at, TF_ACTION.to_string());
                    nodes.insert(at, GATEWAY_NODE.to_string());
                }
                items += names.len();
                with_cut(json!({ "action_servers": names, "nodes": nodes }), cut)
            }
            "action_type" => {
                let action = arg(args, "action");
                let ty = reg
                    .provided(Provided::Action, action)
                    .map(|s| s.ty().to_string())
                    .or_else(|| (action == TF_ACTION).then(|| TF_ACTION_TYPE.to_string()))
                    .unwrap_or_default();
                json!({ "type": ty })
            }
            "interfaces" => {
                let (topics, _) = self.topic_types(domain, role, true);
                // Few distinct types among many topics: deduplicated
                // before anything is copied.
                let mut topic_types: Vec<&str> = topics.into_iter().map(|(_, t)| t).collect();
                topic_types.sort_unstable();
                topic_types.dedup();
                let types = self.types();
                // A known type in use is listed once, by its full name.
                let topics: Vec<String> = topic_types
                    .into_iter()
                    .map(|t| types.canonical_msg(t).unwrap_or(t).to_string())
                    .collect();
                let (known, known_cut) = self.known_interfaces();
                let (services, _) = self.service_types(domain, role, true);
                let actions: Vec<String> = reg
                    .provided_names(Provided::Action, true)
                    .take(MAX_LIST_SCAN)
                    .filter(|n| self.visible(role, ACTION_CLASSES, n))
                    .filter_map(|n| reg.provided(Provided::Action, n))
                    .map(|s| s.ty().to_string())
                    .collect();
                let services = services
                    .into_values()
                    .map(|t| types.canonical_srv(&t).map_or(t, str::to_string));
                let actions = actions
                    .into_iter()
                    .map(|t| types.canonical_action(&t).map_or(t, str::to_string));
                let mut all: Vec<String> = topics
                    .into_iter()
                    .chain(services)
                    .chain(actions)
                    .filter(|t| !t.is_empty())
                    .chain(known.iter().cloned())
                    .collect();
                all.sort();
                all.dedup();
                let cut = *known_cut || all.len() > MAX_LIST_ITEMS;
                all.truncate(MAX_LIST_ITEMS);
                items += all.len();
                with_cut(json!({ "interfaces": all }), cut)
            }
            other => {
                return Err(format!(
                    "{ROSAPI_PREFIX}{other} is not served by rosgate (see docs/protocol.md, \"rosapi\")"
                ))
            }
        };
        self.counters.add(Counter::IntrospectionItems, items as u64);
        Ok(values)
    }

    /// One page of `domain`'s topics (hidden ones included, sorted by
    /// name) with their endpoints and publish counters; a reader diffs two
    /// walks for rates. Written straight into the reply's bytes: at most
    /// [`TOPIC_STATS_PAGE`] topics listed and [`MAX_LIST_SCAN`] names
    /// looked at, so a call costs the same whatever the table's size; a
    /// page that is not the last says where the next one starts (`next`,
    /// the last name listed).
    fn topic_stats(&mut self, domain: Domain, role: Option<RoleId>, page: Page<'_>) -> Vec<u8> {
        let reg = &self.registries[domain as usize];
        let mut out = Vec::with_capacity(page.limit.min(64) * 160 + 32);
        out.extend_from_slice(b"{\"topics\":[");
        let (mut listed, mut scanned) = (0usize, 0usize);
        let mut last: Option<&str> = None;
        let mut more = false;
        for (n, t) in reg.topics_sorted_after(true, page.after) {
            if listed == page.limit || scanned == MAX_LIST_SCAN {
                more = true;
                break;
            }
            scanned += 1;
            if !self.visible(role, TOPIC_CLASSES, n) {
                continue;
            }
            last = Some(n);
            if listed > 0 {
                out.push(b',');
            }
            listed += 1;
            let (msgs, bytes) = t.published();
            out.extend_from_slice(b"{\"topic\":");
            encode::json_string(&mut out, n);
            out.extend_from_slice(b",\"type\":");
            encode::json_string(&mut out, t.ty());
            let _ = write!(
                out,
                ",\"publishers\":{},\"subscribers\":{},\"published\":{msgs},\"published_bytes\":{bytes},\"epoch\":{}}}",
                t.publishers().len(),
                t.subscribers().len(),
                t.epoch()
            );
        }
        out.push(b']');
        // The cursor is the last name listed, never one the caller's role
        // may not see; a scan that found none to list cannot go on.
        match (more, last) {
            (true, Some(last)) => {
                out.extend_from_slice(b",\"next\":");
                encode::json_string(&mut out, last);
            }
            (true, None) => out.extend_from_slice(b",\"truncated\":true"),
            (false, _) => {}
        }
        out.push(b'}');
        self.counters
            .add(Counter::IntrospectionItems, scanned.max(1) as u64);
        out
    }

    /// Topic names and types of `domain`, the gateway's own included,
    /// sorted, borrowed from the tables (no map, no copies: a 10 000-topic
    /// listing was mostly allocation); true when the list was cut.
    fn topic_types(
        &self,
        domain: Domain,
        role: Option<RoleId>,
        hidden: bool,
    ) -> (Vec<(&str, &str)>, bool) {
        let reg = &self.registries[domain as usize];
        let (names, mut cut) = capped(reg.topics_sorted(hidden));
        // (name, type, precedence): the gateway's own topic types win over
        // a client's, a client's over another gateway's (one graph).
        let mut rows: Vec<(&str, &str, u8)> =
            Vec::with_capacity(names.len() + GATEWAY_TOPICS.len());
        rows.extend(names.into_iter().map(|(n, t)| (n, t.ty(), 1)));
        for (n, t) in GATEWAY_TOPICS {
            if hidden || !rosgate_wire::names::is_hidden(n) {
                rows.push((n, t, 0));
            }
        }
        // Topics of the other gateways of a federation.
        for (n, t) in self.remote_topics(domain) {
            if rows.len() >= MAX_LIST_ITEMS {
                cut = true;
                break;
            }
            if hidden || !rosgate_wire::names::is_hidden(n) {
                rows.push((n, t, 2));
            }
        }
        // Sorted runs already: the stable sort merges them in O(n).
        rows.sort_by(|a, b| a.0.cmp(b.0).then(a.2.cmp(&b.2)));
        rows.dedup_by(|later, first| later.0 == first.0);
        let list = rows
            .into_iter()
            .filter(|(n, _, _)| self.visible(role, TOPIC_CLASSES, n))
            .map(|(n, t, _)| (n, t))
            .collect();
        (list, cut)
    }

    /// rosapi's `topics`, `topics_and_raw_types` and `topics_for_type`,
    /// written straight into the reply's bytes; `None` for other names.
    fn topic_listing(
        &mut self,
        domain: Domain,
        role: Option<RoleId>,
        short: &str,
        args: &Value,
    ) -> Option<Vec<u8>> {
        if !matches!(short, "topics" | "topics_and_raw_types" | "topics_for_type") {
            return None;
        }
        let hidden = args
            .get("include_hidden")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let (rows, cut) = self.topic_types(domain, role, hidden);
        let mut out = Vec::with_capacity(rows.len() * 64 + 64);
        let list = |out: &mut Vec<u8>, key: &[u8], items: &mut dyn Iterator<Item = &str>| {
            out.extend_from_slice(key);
            out.push(b'[');
            for (i, x) in items.enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                encode::json_string(out, x);
            }
            out.push(b']');
        };
        let items = if short == "topics_for_type" {
            let want = arg(args, "type");
            let mut n = 0;
            let mut it = rows
                .iter()
                .filter(|(_, t)| *t == want)
                .map(|(name, _)| *name)
                .inspect(|_| n += 1);
            list(&mut out, b"{\"topics\":", &mut it);
            n
        } else {
            list(&mut out, b"{\"topics\":", &mut rows.iter().map(|r| r.0));
            list(&mut out, b",\"types\":", &mut rows.iter().map(|r| r.1));
            if short == "topics_and_raw_types" {
                self.full_texts(&mut out, rows.iter().map(|r| r.1));
            }
            rows.len()
        };
        if cut {
            out.extend_from_slice(b",\"truncated\":true");
        }
        out.push(b'}');
        self.counters.add(Counter::IntrospectionItems, items as u64);
        Some(out)
    }

    /// `"typedefs_full_text"` for topics of these types, in order: each
    /// known type's `ros2msg` text, `""` for a type the gateway does not
    /// know. At most [`MAX_TYPEDEFS_REPLY_BYTES`] of text in all, and as
    /// much rendering (texts from the cache cost none); past either, the
    /// remaining topics get `""` and the reply says
    /// `"typedefs_truncated":true`.
    fn full_texts<'a>(&self, out: &mut Vec<u8>, tys: impl Iterator<Item = &'a str>) {
        let mut left = MAX_TYPEDEFS_REPLY_BYTES;
        let mut rendering = MAX_TYPEDEFS_REPLY_BYTES;
        let mut cut = false;
        // One look-up per distinct type (many topics share a few types).
        let mut seen: HashMap<&str, Option<Arc<str>>> = HashMap::new();
        out.extend_from_slice(b",\"typedefs_full_text\":[");
        for (i, ty) in tys.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let json = seen.entry(ty).or_insert_with(|| {
                if let Some(j) = self.cached_typedef_json(ty) {
                    return Some(j);
                }
                if rendering == 0 || left == 0 {
                    // It may exist: the reply says it is cut.
                    cut = true;
                    return None;
                }
                match self.typedef_json(ty) {
                    Ok((j, fresh)) => {
                        if fresh {
                            rendering = rendering.saturating_sub(j.len());
                        }
                        Some(j)
                    }
                    Err(RenderError::Unknown(_)) => None,
                    Err(_) => {
                        rendering = rendering.saturating_sub(MAX_FULL_TEXT_BYTES);
                        cut = true;
                        None
                    }
                }
            });
            match json {
                Some(j) if j.len() <= left => {
                    left -= j.len();
                    out.extend_from_slice(j.as_bytes());
                }
                Some(_) => {
                    cut = true;
                    out.extend_from_slice(b"\"\"");
                }
                None => out.extend_from_slice(b"\"\""),
            }
        }
        out.push(b']');
        if cut {
            out.extend_from_slice(b",\"typedefs_truncated\":true");
        }
    }

    /// rosapi's `*_details` (`short`) of interface `ty`: the typedefs of
    /// the struct asked for and of all it nests. An unknown type is an
    /// error naming it (rosapi answers an empty list, which a client
    /// cannot tell from a type without fields).
    fn details(&self, short: &str, ty: &str) -> Result<Vec<Value>, String> {
        let Some(part) = Part::of_rosapi(short) else {
            return Err(format!("{ROSAPI_PREFIX}{short} is not a details service"));
        };
        let types = self.types();
        let Some(root) = part.struct_name(types, ty) else {
            return Err(format!(
                "{ROSAPI_PREFIX}{short}: unknown {} type {ty:?}; rosgate knows the bundled types, \
                 those of --interfaces and those learned from ROS 2 nodes ({ROSAPI_PREFIX}interfaces lists them)",
                part.kind()
            ));
        };
        let list = rosgate_ros2::typedefs::typedefs(types, root)
            .map_err(|e| format!("{ROSAPI_PREFIX}{short}: {e}"))?;
        Ok(list.iter().map(TypeDef::to_json).collect())
    }

    /// Service names and types of `domain`, built-ins included.
    fn service_types(
        &self,
        domain: Domain,
        role: Option<RoleId>,
        hidden: bool,
    ) -> (BTreeMap<String, String>, bool) {
        let reg = &self.registries[domain as usize];
        let (names, cut) = capped(reg.service_names(hidden));
        let mut map: BTreeMap<String, String> = names
            .into_iter()
            .map(|n| {
                let ty = reg.service(n).map_or("", |s| s.ty());
                (n.to_string(), ty.to_string())
            })
            .collect();
        for (n, t) in builtin_services() {
            // A client providing /republish_tfs keeps its own type.
            map.entry(n).or_insert_with(|| t.to_string());
        }
        // The parameter services the gateway serves for nodes with
        // parameters (hidden ones only when asked).
        let nodes: Vec<&str> = self
            .params
            .store(domain)
            .node_names()
            .take(MAX_LIST_SCAN)
            .collect();
        for node in nodes {
            for (s, t) in NODE_PARAM_SERVICES {
                let name = format!("{node}/{s}");
                if hidden || !rosgate_wire::names::is_hidden(&name) {
                    map.insert(name, t.to_string());
                }
            }
        }
        map.retain(|n, _| self.visible(role, SERVICE_CLASSES, n));
        (map, cut)
    }

    /// Node full names of `domain`: the gateway's, the declared ones, and
    /// the own names of connections holding registrations for no declared
    /// node; sorted (two nodes may share a name: both are listed).
    fn node_names(&self, domain: Domain) -> (Vec<String>, bool) {
        let reg = &self.registries[domain as usize];
        let mut names: Vec<String> = vec![GATEWAY_NODE.to_string()];
        let (declared, mut cut) = capped(self.nodes.in_domain(domain).map(|(n, _)| n.to_string()));
        names.extend(declared);
        for who in reg.members().take(MAX_LIST_ITEMS) {
            if self.has_own_registrations(domain, who) {
                names.push(self.conn_node_name(who));
            }
        }
        cut |= reg.members().nth(MAX_LIST_ITEMS).is_some();
        // Nodes of the other gateways of a federation: one graph.
        for n in self.remote_nodes(domain) {
            if names.len() >= MAX_LIST_ITEMS {
                cut = true;
                break;
            }
            names.push(n.to_string());
        }
        names.sort();
        (names, cut)
    }

    /// Whether `who` holds registrations made for no declared node.
    fn has_own_registrations(&self, domain: Domain, who: ConnRef) -> bool {
        let reg = &self.registries[domain as usize];
        if self.nodes.of(who).is_empty() {
            return reg.has_any(who);
        }
        let own = Some(NodeTag::CONN);
        !reg.topics_of(who, own, Role::Publisher).is_empty()
            || !reg.topics_of(who, own, Role::Subscriber).is_empty()
            || !reg.services_of(who, own).is_empty()
    }

    /// The node full names registered on `topic` as `role`, sorted.
    fn endpoint_nodes(&self, domain: Domain, topic: &str, role: Role) -> Vec<String> {
        let reg = &self.registries[domain as usize];
        let mut out: Vec<String> = match reg.topic_id(topic) {
            Some(t) => reg
                .topic_nodes(t, role)
                .into_iter()
                .take(MAX_LIST_ITEMS)
                .map(|(who, tag)| self.node_label(who, tag))
                .collect(),
            None => Vec::new(),
        };
        if role == Role::Publisher && gateway_topic_type(topic).is_some() {
            out.push(GATEWAY_NODE.to_string());
        }
        out.sort();
        out
    }

    /// What node(s) named `node` in `domain` subscribe to, publish and
    /// provide (all nodes of that name together), each sorted.
    fn node_details(&self, domain: Domain, node: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
        let reg = &self.registries[domain as usize];
        let (mut subs, mut pubs, mut srvs) = (Vec::new(), Vec::new(), Vec::new());
        if node == GATEWAY_NODE {
            pubs.extend(GATEWAY_TOPICS.iter().map(|(n, _)| n.to_string()));
            srvs.extend(builtin_services().map(|(n, _)| n));
            if self.settings.use_sim_time {
                subs.push(super::graph::CLOCK.to_string());
            }
            // Lists are sorted (GATEWAY_TOPICS is not: /rosout < /rosgate/graph).
            pubs.sort();
            srvs.sort();
            return (subs, pubs, srvs);
        }
        let mut owners: Vec<(ConnRef, NodeTag)> = self
            .nodes
            .named(domain, node)
            .filter_map(|t| self.nodes.get(t).map(|n| (n.owner(), t)))
            .collect();
        if owners.is_empty() {
            // A connection's own node name.
            if let Some(who) = reg
                .members()
                .take(MAX_LIST_SCAN)
                .find(|&w| self.conn_node_name(w) == node)
            {
                owners.push((who, NodeTag::CONN));
            }
        }
        if self
            .params
            .store(domain)
            .node(node)
            .is_some_and(|n| !n.params.is_empty())
        {
            srvs.extend(
                NODE_PARAM_SERVICES
                    .iter()
                    .map(|(s, _)| format!("{node}/{s}")),
            );
        }
        for (who, tag) in owners {
            let mine = Some(tag);
            subs.extend(
                reg.topics_of(who, mine, Role::Subscriber)
                    .into_iter()
                    .map(str::to_string),
            );
            pubs.extend(
                reg.topics_of(who, mine, Role::Publisher)
                    .into_iter()
                    .map(str::to_string),
            );
            srvs.extend(reg.services_of(who, mine).into_iter().map(str::to_string));
        }
        for v in [&mut subs, &mut pubs, &mut srvs] {
            v.sort();
            v.dedup();
            v.truncate(MAX_LIST_ITEMS);
        }
        (subs, pubs, srvs)
    }
}
