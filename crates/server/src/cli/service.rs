//! `rosgate service list|type|call`.

use super::args::Args;
use super::client::json_quote;
use super::topic::{hidden_args, string, strings};
use super::{input, output, print, Ctx, Error};

pub const COMMANDS: &[(&str, &str)] = &[
    ("list", "list the services (rosapi services)"),
    ("type", "print a service's type"),
    ("call", "call a service and print the response"),
];

pub fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "list" => {
            "\
rosgate service list - list the services of the gateway's graph (rosapi services)

USAGE:
    rosgate service list [-t] [-c] [--include-hidden]

Includes the gateway's built-ins (/rosapi/*, /rosgate/*) and the parameter
services of nodes with parameters.

OPTIONS:
    -t, --show-types    print each service's type: /add [example_interfaces/srv/AddTwoInts]
    -c, --count-services print only the number of services
    --include-hidden    include hidden services (a name token starting with `_`)
"
        }
        "type" => {
            "\
rosgate service type - print a service's type (rosapi service_type)

USAGE:
    rosgate service type SERVICE
"
        }
        "call" => {
            "\
rosgate service call - call a service and print its response

USAGE:
    rosgate service call SERVICE TYPE [ARGS] [OPTIONS]

ARGS is JSON ('{\"a\": 1}') or YAML ('{a: 1, b: 2}', as `ros2 service call`
takes it) [default: {}]. TYPE is informational (the gateway routes by name).
The response is printed as YAML; a failed call (no provider, timeout, the
provider's `result: false`) prints the reason on stderr and exits 1. The call
times out after --timeout seconds.

OPTIONS:
    --json              print the response's values as one line of JSON
    --wait              wait (within --timeout) for a provider to appear
"
        }
        _ => return None,
    })
}

pub fn run(cmd: &str, mut a: Args, ctx: &Ctx) -> Result<(), Error> {
    match cmd {
        "list" => {
            let types = a.flag(["-t", "--show-types"]);
            let count = a.flag(["-c", "--count-services"]);
            let hidden = a.flag("--include-hidden") | a.flag("--include-hidden-services");
            a.finish(&[], 0)?;
            list(ctx, types, count, hidden)
        }
        "type" => {
            let p = a.finish(&["SERVICE"], 0)?;
            service_type(ctx, &p[0])
        }
        "call" => {
            let json = a.flag("--json");
            let wait = a.flag("--wait");
            let p = a.finish(&["SERVICE", "TYPE"], 1)?;
            let args = input::to_json(p.get(2).map_or("", String::as_str))
                .map_err(|e| Error::Usage(format!("ARGS: {e}")))?;
            call(ctx, &p[0], &args, json, wait)
        }
        _ => Err(Error::Usage(format!("unknown command {cmd:?}"))),
    }
}

/// `names` with their types from rosapi `<kind>_type` (pipelined), as
/// `name [type]` lines.
pub fn with_types(
    c: &mut super::client::Client,
    names: &[String],
    service: &str,
    field: &str,
) -> Result<String, Error> {
    let reqs: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            (
                service.to_string(),
                format!("{{{}:{}}}", json_quote(field), json_quote(n)),
            )
        })
        .collect();
    let answers = c.calls(&reqs)?;
    let mut out = String::new();
    for (n, a) in names.iter().zip(answers) {
        let ty = a.map(|v| string(&v, "type")).unwrap_or_default();
        out.push_str(&format!("{n} [{ty}]\n"));
    }
    Ok(out)
}

fn list(ctx: &Ctx, types: bool, count: bool, hidden: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let v = c.call("/rosapi/services", hidden_args(hidden))?;
    let services = strings(&v, "services");
    let out = if count {
        format!("{}\n", services.len())
    } else if types {
        with_types(&mut c, &services, "/rosapi/service_type", "service")?
    } else {
        services.iter().map(|s| format!("{s}\n")).collect()
    };
    c.close();
    print(&out)
}

fn service_type(ctx: &Ctx, service: &str) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let v = c.call(
        "/rosapi/service_type",
        &format!("{{\"service\":{}}}", json_quote(service)),
    )?;
    c.close();
    let ty = string(&v, "type");
    if ty.is_empty() {
        return Err(Error::Failed(format!("unknown service {service:?}")));
    }
    print(&format!("{ty}\n"))
}

fn call(ctx: &Ctx, service: &str, args: &str, json: bool, wait: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    if !json {
        print(&format!("requester: making request: {args}\n\n"))?;
    }
    let extra: &[(&str, &str)] = if wait { &[("wait", "true")] } else { &[] };
    let id = c.send_call(service, args, extra)?;
    let answer = c.reply(&id)?;
    c.close();
    let values = answer.map_err(|why| Error::Failed(format!("service call failed: {why}")))?;
    if json {
        print(&format!("{values}\n"))
    } else {
        print(&format!("response:\n{}", output::yaml(&values, 0)))
    }
}
