//! Replays every file under `fuzz/corpus/<target>/` and
//! `fuzz/artifacts/<target>/` through the check the fuzz target runs
//! (`rosgate_sim::fuzzing`), so past crashers stay fixed on stable Rust.

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use rosgate_sim::fuzzing;

fn inputs(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let Ok(dirs) = fs::read_dir(root) else {
        return out;
    };
    for d in dirs.flatten() {
        let target = d.file_name().to_string_lossy().into_owned();
        let Ok(files) = fs::read_dir(d.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || !f.path().is_file() {
                continue;
            }
            out.push((target.clone(), f.path()));
        }
    }
    out.sort();
    out
}

#[test]
fn replay_corpus_and_artifacts() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut all = inputs(&fuzz.join("corpus"));
    all.extend(inputs(&fuzz.join("artifacts")));
    let known: Vec<&str> = fuzzing::TARGETS.iter().map(|(n, _)| *n).collect();
    let mut failed = Vec::new();
    let mut ran = 0;
    for (target, path) in &all {
        assert!(
            known.contains(&target.as_str()),
            "{} is under a directory named after no fuzz target (known: {known:?})",
            path.display()
        );
        let data = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let r = catch_unwind(AssertUnwindSafe(|| fuzzing::run(target, &data)));
        ran += 1;
        if r.is_err() {
            failed.push(path.display().to_string());
        }
    }
    println!("replayed {ran} inputs");
    assert!(ran > 0, "no corpus found under {}", fuzz.display());
    assert!(failed.is_empty(), "failing inputs: {failed:#?}");
}

/// Regenerates the seed corpus from protocol examples and seeded action
/// schedules: `cargo test --test replay -- --ignored write_seed_corpus`.
#[test]
#[ignore]
fn write_seed_corpus() {
    use rosgate_sim::{actions_to_bytes, Action, Req, Rng};

    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join("fuzz")
        .join("corpus");
    let write = |target: &str, name: &str, data: &[u8]| {
        let dir = fuzz.join(target);
        fs::create_dir_all(&dir).expect("mkdir");
        fs::write(dir.join(name), data).expect("write");
    };
    let lines: &[&str] = &[
        r#"{"op":"advertise","topic":"/chatter","type":"example/Message","id":"pub-1"}"#,
        r#"{"op":"subscribe","topic":"/chatter","type":"example/Message","id":"sub-1"}"#,
        r#"{"op":"publish","topic":"/chatter","msg":{"data":"hello"}}"#,
        r#"{"op":"unsubscribe","topic":"/chatter","id":"sub-2"}"#,
        r#"{"op":"unadvertise","topic":"/chatter"}"#,
        r#"{"op":"advertise_service","service":"/echo","type":"example/Echo","id":"adv-1"}"#,
        r#"{"op":"unadvertise_service","service":"/echo","id":7}"#,
        r#"{"op":"call_service","service":"/echo","id":"call-17","args":{"text":"hello"}}"#,
        r#"{"op":"call_service","service":"/echo","id":{"n":[1,2]},"args":[],"timeout":0.25}"#,
        r#"{"op":"call_service","service":"/rosgate/stats","id":1,"args":null}"#,
        r#"{"op":"service_response","service":"/echo","id":"rg-3","values":{"echo":"hello"},"result":true,"status":""}"#,
        r#"{"op":"service_response","service":"/echo","id":"provider-call-3","values":{"echo":"hello"},"result":true}"#,
        r#"{"op":"status","level":"info","msg":"subscribed to /topic","id":"sub-1"}"#,
        r#"{ "msg" : {"n":12345678901234567890, "f":1e-300} ,"topic":"/a\u002fb","op":"publish","x":[1]}"#,
        r#"{"op":"publish","topic":"/decoy","msg":1,"topic":"/t","msg":{"last":true}}"#,
        r#"{"\u006fp":"subscribe","topic":"/\u00e9\ud83e\udd16","type":"t"}"#,
        r#"{"op":"publish","topic":"/t","msg":"\ud800"}"#,
        r#"{"op":"publish","topic":"/t","msg":1e400}"#,
        r#"{"op":"nope","id":[null]}"#,
        r#"{"op":"subscribe","id":"s1"}"#,
        r#"{"op":5,"id":1}"#,
        r#"{"id":{"deep":[[[]]]}}"#,
        r#"{"op":"call_service","service":"/s","args":{}}"#,
        r#"{"op":"call_service","service":"/s","id":1,"args":[],"timeout":"x"}"#,
        r#"{"op":"set_level","level":"info","id":2}"#,
        r#"{"op":"auth","mac":"x"}"#,
        r#"[1,2]"#,
        r#"{"op":"publish""#,
        "{\"op\":\"\u{ff}\"}",
    ];
    for (i, l) in lines.iter().enumerate() {
        write("decode", &format!("proto-{i:02}"), l.as_bytes());
    }
    let mut bad = br#"{"op":"subscribe","topic":"/"#.to_vec();
    bad.extend_from_slice(b"\xff\"}");
    write("decode", "bad-utf8", &bad);
    let deep = format!(
        r#"{{"op":"publish","topic":"/t","msg":{}{},"id":"d"}}"#,
        "[".repeat(128),
        "]".repeat(128)
    );
    write("decode", "too-deep", deep.as_bytes());

    // line_reader: [max selector, cut lo, cut hi] + stream.
    let stream = |sel: u8, cut: u16, body: &[u8]| {
        let mut v = vec![sel];
        v.extend_from_slice(&cut.to_le_bytes());
        v.extend_from_slice(body);
        v
    };
    let all = lines.join("\n") + "\n";
    write(
        "line_reader",
        "proto-all",
        &stream(255, 1000, all.as_bytes()),
    );
    write(
        "line_reader",
        "proto-crlf",
        &stream(255, 77, all.replace('\n', "\r\n").as_bytes()),
    );
    write(
        "line_reader",
        "short-max",
        &stream(9, 5, b"ok\n0123456789abc\nnext\n\r\n\n"),
    );
    write(
        "line_reader",
        "exact-max",
        &stream(9, 11, b"0123456789\n01234567890\n"),
    );
    write(
        "line_reader",
        "cr-only",
        &stream(3, 2, b"a\r\r\n\r\nb\rc\n"),
    );
    write("line_reader", "long-tail", &stream(15, 30, &[b'x'; 60]));
    write("line_reader", "empty-lines", &stream(0, 0, b"\n\n\n\r\n"));
    write(
        "line_reader",
        "tail-pending",
        &stream(40, 3, b"{\"op\":\"publish\"}\n{\"op\""),
    );

    // core: hand-written scenarios and seeded schedules.
    let send = |slot: u8, req: Req| Action::Send {
        slot,
        style: 0,
        split: 0,
        req,
    };
    let pubsub = vec![
        Action::Connect,
        Action::Connect,
        send(1, Req::Subscribe { topic: 0, id: 1 }),
        send(0, Req::Advertise { topic: 0, id: 2 }),
        send(
            0,
            Req::Publish {
                topic: 0,
                payload: 40,
                id: 0,
            },
        ),
        Action::Read { slot: 1, mode: 1 },
        send(
            0,
            Req::Publish {
                topic: 0,
                payload: 2000,
                id: 0,
            },
        ),
        send(
            0,
            Req::Publish {
                topic: 0,
                payload: 2001,
                id: 0,
            },
        ),
        send(
            0,
            Req::Publish {
                topic: 1,
                payload: 5,
                id: 3,
            },
        ),
        Action::Clock {
            v: (2 << 14) | 3000,
        },
        Action::Read { slot: 1, mode: 0 },
        send(1, Req::Unsubscribe { topic: 0, id: 4 }),
        Action::Disconnect { slot: 0, how: 0 },
    ];
    let calls = vec![
        Action::Connect,
        Action::Connect,
        Action::Connect,
        send(0, Req::AdvertiseService { service: 0, id: 1 }),
        send(
            1,
            Req::Call {
                service: 0,
                timeout: 0,
                args: 12,
                id: 2,
            },
        ),
        send(
            2,
            Req::Call {
                service: 0,
                timeout: 2,
                args: 13,
                id: 3,
            },
        ),
        send(
            0,
            Req::Respond {
                pick: 0,
                kind: 0,
                result: 0,
                status: 1,
            },
        ),
        send(
            2,
            Req::Respond {
                pick: 0,
                kind: 4,
                result: 0,
                status: 0,
            },
        ),
        send(
            1,
            Req::Call {
                service: 3,
                timeout: 0,
                args: 0,
                id: 5,
            },
        ),
        Action::Clock { v: (2 << 14) | 400 },
        send(
            0,
            Req::Respond {
                pick: 0,
                kind: 3,
                result: 1,
                status: 0,
            },
        ),
        send(1, Req::AdvertiseService { service: 0, id: 6 }),
        send(
            2,
            Req::Call {
                service: 0,
                timeout: 3,
                args: 1,
                id: 1,
            },
        ),
        Action::Disconnect { slot: 1, how: 1 },
        send(0, Req::UnadvertiseService { service: 0, id: 2 }),
        send(0, Req::Malformed { kind: 0, id: 3 }),
        send(
            0,
            Req::Garbage {
                bytes: b"{\"op\"".to_vec(),
            },
        ),
    ];
    write("core", "pubsub", &actions_to_bytes(0, &pubsub));
    write("core", "calls", &actions_to_bytes(0b0101_0101_0101, &calls));
    for seed in 0..16u64 {
        let mut rng = Rng::new(seed);
        let actions: Vec<Action> = (0..60).map(|_| Action::random(&mut rng)).collect();
        write(
            "core",
            &format!("seed-{seed:02}"),
            &actions_to_bytes(seed as u16 * 4099, &actions),
        );
    }
}
