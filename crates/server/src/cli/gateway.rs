//! `rosgate gateway list`: the gateways a federated gateway sees
//! (`/rosgate/federation`, docs/federation.md).

use serde_json::Value;

use super::args::Args;
use super::{print, Ctx, Error};

pub const COMMANDS: &[(&str, &str)] = &[(
    "list",
    "this gateway and the others of its federation, with their nodes and topics",
)];

pub fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "list" => {
            "\
rosgate gateway list - the gateways of a federation (/rosgate/federation)

USAGE:
    rosgate gateway list [-v]

One line per gateway: its Zenoh id, since when this one sees it, and how
many nodes and topics it has in the caller's domain; this gateway first.
A ROS 2 graph joined with --ros-domain is one more line, `ros2`.
Without federation (`--zenoh-*`), says so and exits 1.

OPTIONS:
    -v, --verbose   list each gateway's nodes and topics (with types)
"
        }
        _ => return None,
    })
}

pub fn run(cmd: &str, mut a: Args, ctx: &Ctx) -> Result<(), Error> {
    match cmd {
        "list" => {
            let verbose = a.flag(["-v", "--verbose"]);
            a.finish(&[], 0)?;
            list(ctx, verbose)
        }
        _ => Err(Error::Usage(format!("unknown command {cmd:?}"))),
    }
}

fn list(ctx: &Ctx, verbose: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let raw = c.call("/rosgate/federation", "{}")?;
    c.close();
    let v: Value = serde_json::from_str(&raw)
        .map_err(|e| Error::Failed(format!("unreadable answer from the gateway: {e}")))?;
    if v["enabled"] != true {
        return Err(Error::Failed(
            "this gateway is not federated (start it with --zenoh-connect or --zenoh-listen)"
                .into(),
        ));
    }
    let me = v["gateway"].as_str().unwrap_or_default();
    let domain = v["domain"].as_u64().unwrap_or(0);
    let mut out = format!("{me}  (this gateway, domain {domain})\n");
    let graphs = v["graphs"].as_array().cloned().unwrap_or_default();
    let graph_of = |id: &str| graphs.iter().find(|g| g["gateway"] == id).cloned();
    let mut rows: Vec<(String, String)> = v["gateways"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|g| {
            let id = g["id"].as_str().unwrap_or_default().to_string();
            let when = format!("since {}", since(g["since_ms"].as_u64().unwrap_or(0)));
            (id, when)
        })
        .collect();
    // A joined ROS 2 graph is listed as one more "gateway": `ros2` over
    // rmw_zenoh (--ros-domain), `dds` over DDS (--dds-domain).
    if graph_of("ros2").is_some() {
        rows.push(("ros2".into(), "ROS 2 graph over rmw_zenoh".into()));
    }
    if graph_of("dds").is_some() {
        rows.push(("dds".into(), "ROS 2 graph over DDS".into()));
    }
    for (id, when) in rows {
        let graph = graph_of(&id).unwrap_or(Value::Null);
        let nodes = graph["nodes"].as_array().cloned().unwrap_or_default();
        let topics = graph["topics"].as_array().cloned().unwrap_or_default();
        out.push_str(&format!(
            "{id}  {when}  nodes: {}  topics: {}\n",
            nodes.len(),
            topics.len()
        ));
        if verbose {
            for n in &nodes {
                out.push_str(&format!("    node  {}\n", n.as_str().unwrap_or_default()));
            }
            for t in &topics {
                out.push_str(&format!(
                    "    topic {} [{}]  subscribers: {}\n",
                    t[0].as_str().unwrap_or_default(),
                    t[1].as_str().unwrap_or_default(),
                    t[2].as_u64().unwrap_or(0)
                ));
            }
        }
    }
    print(&out)
}

/// A Unix time in milliseconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC).
fn since(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = rosgate_core::log::civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn since_prints_utc() {
        assert_eq!(super::since(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::since(1_796_260_643_116), "2026-12-03T01:17:23Z");
    }
}
