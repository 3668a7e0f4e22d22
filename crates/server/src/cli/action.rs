//! `rosgate action list|send_goal`.

use std::time::Instant;

use super::args::Args;
use super::client::{reason, Event, Req};
use super::service::with_types;
use super::topic::strings;
use super::{input, output, print, Ctx, Error};

pub const COMMANDS: &[(&str, &str)] = &[
    ("list", "list the actions (rosapi action_servers)"),
    ("send_goal", "send a goal, print feedback and the result"),
];

pub fn help(cmd: &str) -> Option<&'static str> {
    Some(match cmd {
        "list" => {
            "\
rosgate action list - list the actions served in the gateway's graph

USAGE:
    rosgate action list [-t]

OPTIONS:
    -t, --show-types    print each action's type: /fibonacci [example_interfaces/action/Fibonacci]
"
        }
        "send_goal" => {
            "\
rosgate action send_goal - send a goal to an action and wait for its result

USAGE:
    rosgate action send_goal ACTION TYPE GOAL [--feedback]

GOAL is JSON or YAML ('{order: 5}'). Waits for the result as long as the goal
runs (goals have no deadline unless the gateway sets one). Ctrl-C cancels the
goal (cancel_action_goal), prints the result the server answers with and
exits 130; a second Ctrl-C exits at once. Exit 0 when the goal SUCCEEDED,
1 for any other end (ABORTED, CANCELED, no server).

OPTIONS:
    -f, --feedback      print feedback as it arrives
"
        }
        _ => return None,
    })
}

pub fn run(cmd: &str, mut a: Args, ctx: &Ctx) -> Result<(), Error> {
    match cmd {
        "list" => {
            let types = a.flag(["-t", "--show-types"]);
            a.finish(&[], 0)?;
            list(ctx, types)
        }
        "send_goal" => {
            let feedback = a.flag(["-f", "--feedback"]);
            let p = a.finish(&["ACTION", "TYPE", "GOAL"], 0)?;
            let goal = input::to_json(&p[2]).map_err(|e| Error::Usage(format!("GOAL: {e}")))?;
            send_goal(ctx, &p[0], &p[1], &goal, feedback)
        }
        _ => Err(Error::Usage(format!("unknown command {cmd:?}"))),
    }
}

fn list(ctx: &Ctx, types: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let v = c.call("/rosapi/action_servers", "{}")?;
    let actions = strings(&v, "action_servers");
    let out = if types {
        with_types(&mut c, &actions, "/rosapi/action_type", "action")?
    } else {
        actions.iter().map(|s| format!("{s}\n")).collect()
    };
    c.close();
    print(&out)
}

fn send_goal(ctx: &Ctx, action: &str, ty: &str, goal: &str, feedback: bool) -> Result<(), Error> {
    let mut c = ctx.connect()?;
    let id = c.next_id();
    print(&format!("Sending goal:\n{}\n", output::yaml(goal, 4)))?;
    let req = Req::new("send_action_goal")
        .raw("id", &id)
        .str("action", action)
        .str("action_type", ty)
        .raw("args", goal)
        .raw("feedback", if feedback { "true" } else { "false" })
        .finish();
    c.send(&req)?;
    // Set once Ctrl-C sent the cancel: then the wait is bounded.
    let mut cancel_deadline: Option<Instant> = None;
    loop {
        let event = c.next(cancel_deadline)?;
        let f = match event {
            Event::Stop if cancel_deadline.is_none() => {
                let cancel = Req::new("cancel_action_goal")
                    .raw("id", &id)
                    .str("action", action)
                    .finish();
                c.send(&cancel)?;
                eprintln!("Canceling goal...");
                c.clear_stop();
                cancel_deadline = Some(Instant::now() + c.timeout);
                continue;
            }
            Event::Stop => return Err(Error::Interrupted),
            Event::Timeout => {
                eprintln!(
                    "rosgate action send_goal: no result within {:.1} s of the cancel",
                    c.timeout.as_secs_f64()
                );
                return Err(Error::Interrupted);
            }
            Event::Frame(f) => f,
        };
        if !f.has_id(&id) {
            continue;
        }
        match f.op().as_ref() {
            "action_feedback" if feedback => {
                let values = f.raw("values").unwrap_or("null");
                print(&format!("Feedback:\n{}\n", output::yaml(values, 4)))?;
            }
            // An error status about the goal (TCP also answers a cancel of a
            // goal that just ended with one: its result is on the way then).
            "status" if cancel_deadline.is_none() => {
                c.close();
                return Err(Error::Failed(f.str("msg").unwrap_or_default().into_owned()));
            }
            "action_result" => {
                c.close();
                let status = f.raw("status").unwrap_or("0").to_string();
                let name = output::goal_status(&status);
                let values = f.raw("values").unwrap_or("null");
                if f.raw("result") != Some("true")
                    && f.raw("values").is_none_or(|v| v.starts_with('"'))
                {
                    let why = f.raw("values").map(reason).unwrap_or_default();
                    return Err(Error::Failed(format!("goal failed ({name}): {why}")));
                }
                print(&format!(
                    "Result:\n{}\nGoal finished with status: {name}\n",
                    output::yaml(values, 4)
                ))?;
                return if cancel_deadline.is_some() {
                    Err(Error::Interrupted)
                } else if name == "SUCCEEDED" {
                    Ok(())
                } else {
                    Err(Error::Failed(format!("goal finished with status {name}")))
                };
            }
            _ => {}
        }
    }
}
