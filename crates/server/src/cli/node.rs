//! `rosgate node list|info`.

use super::args::{absolute, Args};
use super::client::json_quote;
use super::topic::{hidden_args, string, strings};
use super::{print, Ctx, Error};

pub const COMMANDS: &[(&str, &str)] = &[
    ("list", "list the nodes (rosapi nodes)"),
    (
        "info",
        "a node's publishers, subscribers and services, with types",
    ),
];

pub fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "list" => {
            "\
rosgate node list - list the nodes of the gateway's graph (rosapi nodes)

USAGE:
    rosgate node list [-a] [-c]

Nodes are the ones clients declared, `/rosgate` (the gateway's own topics and
services), and `/rosgate_tcp_<n>` / `/rosgate_ws_<n>` for connections that
declared none while they hold a registration.

OPTIONS:
    -a, --all           include hidden nodes (a name token starting with `_`)
    -c, --count-nodes   print only the number of nodes
"
        }
        "info" => {
            "\
rosgate node info - what a node publishes, subscribes to and serves

USAGE:
    rosgate node info NODE

(rosapi node_details, with each name's type.) An unknown node exits 1.
"
        }
        _ => return None,
    })
}

pub fn run(cmd: &str, mut a: Args, ctx: &Ctx) -> Result<(), Error> {
    match cmd {
        "list" => {
            let all = a.flag(["-a", "--all"]);
            let count = a.flag(["-c", "--count-nodes"]);
            a.finish(&[], 0)?;
            list(ctx, all, count)
        }
        "info" => {
            let p = a.finish(&["NODE"], 0)?;
            info(ctx, &absolute(&p[0]))
        }
        _ => Err(Error::Usage(format!("unknown command {cmd:?}"))),
    }
}

fn list(ctx: &Ctx, all: bool, count: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let v = c.call("/rosapi/nodes", hidden_args(all))?;
    c.close();
    let nodes = strings(&v, "nodes");
    if count {
        return print(&format!("{}\n", nodes.len()));
    }
    print(&nodes.iter().map(|n| format!("{n}\n")).collect::<String>())
}

fn info(ctx: &Ctx, node: &str) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let nodes = strings(&c.call("/rosapi/nodes", hidden_args(true))?, "nodes");
    if !nodes.iter().any(|n| n == node) {
        c.close();
        return Err(Error::Failed(format!("node {node} not found")));
    }
    let v = c.call(
        "/rosapi/node_details",
        &format!("{{\"node\":{}}}", json_quote(node)),
    )?;
    let subs = strings(&v, "subscribing");
    let pubs = strings(&v, "publishing");
    let srvs = strings(&v, "services");
    // Every name's type, in one pipelined round.
    let mut reqs = Vec::new();
    for t in subs.iter().chain(&pubs) {
        reqs.push((
            "/rosapi/topic_type".to_string(),
            format!("{{\"topic\":{}}}", json_quote(t)),
        ));
    }
    for s in &srvs {
        reqs.push((
            "/rosapi/service_type".to_string(),
            format!("{{\"service\":{}}}", json_quote(s)),
        ));
    }
    let mut types = c
        .calls(&reqs)?
        .into_iter()
        .map(|a| a.map(|v| string(&v, "type")).unwrap_or_default());
    c.close();
    let mut out = format!("{node}\n");
    for (title, names) in [
        ("Subscribers", &subs),
        ("Publishers", &pubs),
        ("Service Servers", &srvs),
    ] {
        out.push_str(&format!("  {title}:\n"));
        for n in names {
            let ty = types.next().unwrap_or_default();
            out.push_str(&format!("    {n}: {ty}\n"));
        }
    }
    print(&out)
}
