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

/// Fuzz targets whose corpus another crate replays.
const REPLAYED_ELSEWHERE: &[&str] = &["ros2"];

#[test]
fn replay_corpus_and_artifacts() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut all = inputs(&fuzz.join("corpus"));
    all.extend(inputs(&fuzz.join("artifacts")));
    let known: Vec<&str> = fuzzing::TARGETS.iter().map(|(n, _)| *n).collect();
    let mut failed = Vec::new();
    let mut ran = 0;
    for (target, path) in &all {
        // `ros2` (the codec's check) has its own replay in rosgate-ros2:
        // crates/ros2/tests/fuzz_replay.rs.
        if REPLAYED_ELSEWHERE.contains(&target.as_str()) {
            continue;
        }
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
/// schedules: `cargo test -p rosgate-sim --test replay -- --ignored
/// write_seed_corpus`.
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

    // cbor: the protocol lines above (JSON in), and the conversion's edges.
    for (i, l) in lines.iter().enumerate() {
        write("cbor", &format!("proto-{i:02}"), l.as_bytes());
    }
    let edges: &[&str] = &[
        "18446744073709551615",
        "-18446744073709551616",
        "18446744073709551616",
        "-0",
        "[1.5,-2.25e-3,0.1]",
        r#"{"k":1,"k":[],"":{}}"#,
        r#""\ud83e\udd16\u00e9\/\b""#,
    ];
    for (i, l) in edges.iter().enumerate() {
        write("cbor", &format!("edge-{i:02}"), l.as_bytes());
    }
    write("cbor", "too-deep", deep.as_bytes());

    // cbor_typed: [type selector, 2 bytes LE] + JSON; the selector counts
    // in the bundled registry's order of full names.
    let typed: &[(&str, &str)] = &[
        ("empty", "{}"),
        ("wrong-kind", r#"{"data":"x","layout":5}"#),
        (
            "arrays",
            r#"{"data":[1,2,3],"layout":{"dim":[{"label":"a","size":3,"stride":3}],"data_offset":0}}"#,
        ),
        ("base64", r#"{"data":"AQID"}"#),
        ("floats", r#"{"x":null,"y":"Infinity","z":-0.0}"#),
        ("unknown-key", r#"{"nope":1}"#),
    ];
    for (sel, (name, json)) in typed.iter().enumerate() {
        let mut d = vec![(sel * 37) as u8, 0];
        d.extend_from_slice(json.as_bytes());
        write("cbor_typed", name, &d);
    }

    // fragment: [max selector] + 4-byte ops (kind: id << 2 | 0..2 piece,
    // 3 clock step; num; total; piece) -- see rosgate_sim::binary.
    let piece = |id: u8, num: u8, total: u8, data: u8| [id << 2, num, total, data];
    let step = |n: u8| [3, n, 0, 0];
    let schedules: &[(&str, u8, Vec<[u8; 4]>)] = &[
        (
            "in-order",
            255,
            vec![piece(0, 0, 3, 5), piece(0, 1, 3, 6), piece(0, 2, 3, 7)],
        ),
        (
            "out-of-order",
            255,
            vec![piece(1, 2, 3, 9), piece(1, 0, 3, 1), piece(1, 1, 3, 2)],
        ),
        (
            "refusals",
            255,
            vec![
                piece(0, 0, 2, 4),
                piece(0, 0, 2, 4),
                piece(0, 1, 2, 4),
                piece(1, 5, 2, 0),
                piece(2, 0, 0, 0),
                piece(3, 0, 2, 0),
                piece(3, 1, 3, 0),
                step(60),
                piece(0, 0, 1, 4),
            ],
        ),
        (
            "budget",
            4,
            vec![
                piece(0, 0, 4, 255),
                piece(1, 0, 4, 255),
                piece(0, 1, 4, 255),
            ],
        ),
        (
            "deadline",
            255,
            vec![
                piece(2, 0, 5, 8),
                step(30),
                piece(2, 1, 5, 8),
                step(30),
                piece(2, 2, 5, 8),
            ],
        ),
    ];
    for (name, sel, ops) in schedules {
        let mut d = vec![*sel];
        for op in ops {
            d.extend_from_slice(op);
        }
        write("fragment", name, &d);
    }
    let long = format!("{}{}", "\u{e9}\u{1f916}".repeat(300), lines.join(""));
    write(
        "fragment",
        "split-long",
        &[&[7u8][..], long.as_bytes()].concat(),
    );

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
    let scenarios = websocket_scenarios()
        .into_iter()
        .chain(bounds_scenarios())
        .chain(node_scenarios());
    for (name, selector, actions) in scenarios {
        write("core", name, &actions_to_bytes(selector, &actions));
    }
    for seed in 0..16u64 {
        let mut rng = Rng::new(seed);
        let actions: Vec<Action> = (0..60).map(|_| Action::random(&mut rng)).collect();
        write(
            "core",
            &format!("seed-{seed:02}"),
            &actions_to_bytes((seed as u32).wrapping_mul(0x9E37_79B9), &actions),
        );
    }
}

/// WebSocket (rosbridge dialect) scenarios for the `core` corpus, with TCP
/// clients alongside: per-id registrations, lenient requests, rosbridge
/// answers, control frames, refused handshakes and status filters.
fn websocket_scenarios() -> Vec<(&'static str, u32, Vec<rosgate_sim::Action>)> {
    use rosgate_sim::{Action, Req};

    // 4096-byte lines, 1 MiB topic queues, 64 calls per connection; bit
    // 15 set: WebSocket clients get every status (so per-id statuses are
    // visible), clear: errors only, the hub's default.
    const ALL: u32 = 2 | (3 << 2) | (1 << 13) | (1 << 15);
    const ERRORS: u32 = ALL & !(1 << 15);
    // Handshake selectors: spelling (0-2, 3 refused), feeding << 2, key << 4.
    const PLAIN: u8 = 0;
    const BROWSER_LAZY: u8 = 1 | (3 << 2) | (1 << 4);
    const SPACED_BYTEWISE: u8 = 2 | (1 << 2) | (2 << 4);
    const HALVES: u8 = 2 << 2 | (3 << 4);
    const LAZY: u8 = 3 << 2;
    const NO_UPGRADE: u8 = 3;
    const TOO_BIG: u8 = 3 | (3 << 4);
    // Send styles: 2 raw CR/LF whitespace on WebSocket (1 adds a trailing
    // CRLF), 64 a ping between fragments, 128 optional fields left out.
    const NEWLINES: u8 = 2 | 1;
    const PING_BETWEEN: u8 = 64;
    const LEAN: u8 = 128;
    // Splits: fragments - 1 in bits 0-1, reads in bits 2-7 (0 one, 63 byte
    // by byte, 1-31 two at n/32, above one per frame).
    const TWO_IN_TWO_READS: u8 = 1 | (16 << 2);
    const FOUR_PER_FRAME: u8 = 3 | (40 << 2);

    let send = |slot: u8, style: u8, split: u8, req: Req| Action::Send {
        slot,
        style,
        split,
        req,
    };
    let publish = |slot: u8, payload: u16| {
        send(
            slot,
            0,
            0,
            Req::Publish {
                topic: 0,
                payload,
                id: 0,
            },
        )
    };
    let sub = |slot: u8, id: u8| send(slot, 0, 0, Req::Subscribe { topic: 0, id });
    let unsub = |slot: u8, id: u8| send(slot, 0, 0, Req::Unsubscribe { topic: 0, id });
    let call = |slot: u8, style: u8, service: u8, id: u8| {
        send(
            slot,
            style,
            0,
            Req::Call {
                service,
                timeout: 0,
                args: 21,
                id,
            },
        )
    };
    // `result`: text index + 6 x values shape (0 object, 2 array, 3 string).
    let respond = |slot: u8, kind: u8, result: u8| {
        send(
            slot,
            0,
            0,
            Req::Respond {
                pick: 0,
                kind,
                result,
                status: 2,
            },
        )
    };
    let control = |slot: u8, kind: u8, arg: u8| Action::WsControl { slot, kind, arg };

    // Slot 0 TCP, 1 and 2 WebSocket, all on /a.
    let pubsub = vec![
        Action::Connect,
        Action::ConnectWs { how: PLAIN },
        Action::ConnectWs { how: BROWSER_LAZY },
        sub(1, 1),
        sub(1, 2),
        sub(1, 1),
        sub(2, 0),
        sub(0, 1),
        publish(0, 40),
        send(
            1,
            NEWLINES,
            TWO_IN_TWO_READS,
            Req::Publish {
                topic: 0,
                payload: 41,
                id: 2,
            },
        ),
        unsub(1, 1),
        publish(0, 42),
        unsub(1, 2),
        publish(2, 43),
        unsub(2, 3),
        publish(0, 44),
        unsub(2, 0),
        publish(0, 45),
        send(1, LEAN, FOUR_PER_FRAME, Req::Advertise { topic: 0, id: 1 }),
        send(1, LEAN, 0, Req::Unadvertise { topic: 0, id: 0 }),
        Action::Read { slot: 1, mode: 1 },
        publish(0, 2000),
        publish(0, 2001),
        sub(1, 3),
        publish(0, 2002),
        Action::Read { slot: 1, mode: 3 },
        Action::Clock { v: 100 },
        Action::Read { slot: 1, mode: 0 },
        Action::Disconnect { slot: 1, how: 2 },
    ];
    // Slot 0 TCP, 1 a WebSocket provider of /s1, 2 a WebSocket caller.
    let calls = vec![
        Action::Connect,
        Action::ConnectWs { how: PLAIN },
        Action::ConnectWs {
            how: SPACED_BYTEWISE,
        },
        send(1, LEAN, 0, Req::AdvertiseService { service: 0, id: 0 }),
        call(0, 0, 0, 1),
        call(2, LEAN, 0, 0),
        respond(1, 0, 1),
        respond(1, 7, 1),
        call(0, 0, 0, 2),
        respond(1, 0, 1 + 6 * 2),
        call(2, 0, 0, 0),
        respond(1, 7, 0),
        call(2, 0, 0, 3),
        respond(1, 0, 3 + 6 * 3),
        send(0, 0, 0, Req::AdvertiseService { service: 1, id: 2 }),
        call(2, 0, 1, 4),
        respond(0, 0, 1),
        send(2, 0, 0, Req::Malformed { kind: 3, id: 1 }),
        call(2, 0, 3, 0),
        call(2, LEAN, 2, 0),
        Action::Clock {
            v: (2 << 14) | 2000,
        },
        respond(1, 0, 0),
        Action::Disconnect { slot: 1, how: 0 },
        call(0, 0, 0, 5),
    ];
    let ctl = vec![
        Action::Connect,
        Action::ConnectWs { how: PLAIN },
        control(1, 0, 10),
        control(1, 1, 3),
        control(1, 2, 3),
        control(1, 6, 1),
        control(1, 7, 0),
        control(1, 7, 1),
        send(
            1,
            PING_BETWEEN,
            FOUR_PER_FRAME,
            Req::Subscribe { topic: 0, id: 1 },
        ),
        send(1, 0, 0, Req::Blank),
        control(1, 3, 2),
        Action::ConnectWs { how: NO_UPGRADE },
        Action::ConnectWs { how: TOO_BIG },
        Action::ConnectWs {
            how: SPACED_BYTEWISE,
        },
        control(1, 5, 7),
        Action::ConnectWs { how: HALVES },
        control(1, 4, 0),
        Action::ConnectWs { how: LAZY },
        control(1, 5, 0),
        Action::WsStatus { filter: 2 },
        Action::ConnectWs { how: PLAIN },
        send(1, 0, 0, Req::Malformed { kind: 0, id: 1 }),
        Action::WsStatus { filter: 1 },
        Action::ConnectWs { how: PLAIN },
        send(2, 0, 0, Req::Subscribe { topic: 0, id: 1 }),
        send(2, 0, 0, Req::Malformed { kind: 1, id: 1 }),
        send(0, 0, 0, Req::AdvertiseService { service: 0, id: 1 }),
        send(2, 0, 0, Req::AdvertiseService { service: 0, id: 2 }),
        control(2, 5, 11),
    ];
    vec![
        ("ws-pubsub", ALL, pubsub),
        ("ws-calls", ERRORS, calls),
        ("ws-control", ERRORS, ctl),
    ]
}

/// Selector bits of [`rosgate_sim::SimConfig::from_selector`]: 4096-byte
/// lines, 64 calls per connection, everything else at its first choice
/// (the defaults, or the loosest).
const PLAIN_LIMITS: u32 = 2 | (1 << 13);

/// Scenarios for the bounds on memory and work, each aimed at one group of
/// them (the test below checks that each exercises what it is aimed at):
/// eviction of unfinished openings and the opening deadline; partial,
/// slow-consumer and idle deadlines; registration limits and per-item
/// caps; the memory budget (shedding the biggest queue first, then
/// closing the biggest holder); and a shutdown.
fn bounds_scenarios() -> Vec<(&'static str, u32, Vec<rosgate_sim::Action>)> {
    use rosgate_sim::{Action, Req};

    let send = |slot: u8, req: Req| Action::Send {
        slot,
        style: 0,
        split: 0,
        req,
    };
    let sub = |slot: u8, topic: u8, id: u8| send(slot, Req::Subscribe { topic, id });
    let publish = |slot: u8, topic: u8, fill: u16| {
        send(
            slot,
            Req::Publish {
                topic,
                payload: fill << 2,
                id: 0,
            },
        )
    };
    let bad = |slot: u8, kind: u8| send(slot, Req::Malformed { kind, id: 1 });
    let trickle = |slot: u8, cut: u8, req: Req| Action::Trickle {
        slot,
        style: 0,
        cut,
        req,
    };
    let ms = |n: u16| Action::Clock { v: (2 << 14) | n };
    const LAZY: u8 = 3 << 2;

    // 4 connections, openings within 2 s.
    let evict = vec![
        Action::Connect,
        Action::Connect,
        sub(1, 0, 1),
        Action::ConnectWs { how: LAZY },
        Action::Connect,
        // At the limit: slot 0 (silent, oldest) gives way ...
        Action::Connect,
        // ... then the WebSocket client that never sent its upgrade.
        Action::Connect,
        sub(3, 0, 2),
        sub(4, 0, 3),
        sub(0, 0, 4),
        // Everyone has opened: refused.
        Action::Connect,
        Action::Disconnect { slot: 1, how: 0 },
        Action::Connect,
        ms(1500),
        ms(600),
        publish(0, 0, 3),
    ];
    // Opening 5 s, partial requests 1 s, idle 4 s, control above 600
    // bytes for 0.5 s.
    let deadlines = vec![
        Action::Connect,
        Action::Connect,
        Action::ConnectWs { how: 0 },
        Action::Connect,
        Action::ConnectWs { how: LAZY },
        sub(0, 0, 1),
        trickle(1, 128, Req::Subscribe { topic: 1, id: 2 }),
        trickle(2, 100, Req::Subscribe { topic: 0, id: 1 }),
        trickle(4, 20, Req::Subscribe { topic: 0, id: 1 }),
        ms(300),
        trickle(1, 100, Req::Blank),
        send(2, Req::Subscribe { topic: 1, id: 2 }),
        sub(3, 0, 3),
        Action::Read { slot: 3, mode: 1 },
        bad(3, 0),
        bad(3, 1),
        bad(3, 2),
        bad(3, 4),
        bad(3, 5),
        bad(3, 8),
        bad(3, 0),
        bad(3, 1),
        ms(400),
        ms(400),
        ms(400),
        ms(3500),
        ms(600),
    ];
    // One subscription, one advertisement, one service per connection.
    let limits = vec![
        Action::Connect,
        Action::ConnectWs { how: 0 },
        sub(0, 0, 1),
        sub(0, 1, 2),
        sub(0, 0, 3),
        send(0, Req::AdvertiseService { service: 0, id: 4 }),
        send(0, Req::AdvertiseService { service: 0, id: 5 }),
        send(0, Req::AdvertiseService { service: 1, id: 6 }),
        sub(1, 0, 1),
        sub(1, 0, 2),
        sub(1, 0, 1),
        bad(0, 10),
        bad(0, 11),
        bad(0, 12),
        bad(0, 12 | 16),
        bad(1, 13),
        bad(1, 13 | 16),
        bad(0, 14),
        bad(1, 15),
        bad(0, 15),
        bad(1, 7),
    ];
    // A 6000-byte budget: two readers that stopped, the one holding more
    // topic data is shed first (enough on its own); then a client whose
    // error statuses pile up is closed as the biggest holder.
    let memory = vec![
        Action::Connect,
        Action::Connect,
        Action::Connect,
        sub(1, 0, 1),
        sub(2, 1, 2),
        Action::Read { slot: 1, mode: 1 },
        Action::Read { slot: 2, mode: 1 },
        publish(0, 1, 300),
        publish(0, 1, 300),
        publish(0, 0, 600),
        publish(0, 0, 600),
        publish(0, 0, 600),
        publish(0, 0, 600),
        publish(0, 0, 600),
        publish(0, 0, 600),
        publish(0, 0, 600),
        publish(0, 0, 600),
        Action::Connect,
        Action::Read { slot: 3, mode: 1 },
    ]
    .into_iter()
    .chain((0..100).map(|i| bad(3, [0, 1, 2, 4, 5, 8][i % 6])))
    .chain([
        Action::Read { slot: 1, mode: 0 },
        Action::Read { slot: 2, mode: 0 },
        publish(0, 0, 10),
    ])
    .collect();
    // The same budget, with small frames: the biggest queue (by bytes and
    // entries) frees enough only if its entries count, so nothing else is
    // shed when the statuses of a client that stopped reading push the
    // total over.
    let entries = [
        Action::Connect,
        Action::Connect,
        Action::Connect,
        Action::Connect,
        sub(1, 0, 1),
        sub(2, 1, 2),
        Action::Read { slot: 1, mode: 1 },
        Action::Read { slot: 2, mode: 1 },
        Action::Read { slot: 3, mode: 1 },
    ]
    .into_iter()
    .chain((0..10).map(|_| publish(0, 0, 0)))
    .chain((0..3).map(|_| publish(0, 1, 0)))
    .chain((0..60).map(|i| bad(3, [0, 1, 2, 4, 5, 8][i % 6])))
    .collect();
    let shutdown = vec![
        Action::Connect,
        Action::ConnectWs { how: 0 },
        Action::Connect,
        send(0, Req::AdvertiseService { service: 0, id: 1 }),
        send(
            1,
            Req::Call {
                service: 0,
                timeout: 0,
                args: 5,
                id: 2,
            },
        ),
        sub(1, 0, 1),
        sub(2, 0, 3),
        Action::Read { slot: 2, mode: 1 },
        publish(0, 0, 40),
        trickle(0, 90, Req::Subscribe { topic: 2, id: 4 }),
        // Never sent its upgrade: no goodbye for it.
        Action::ConnectWs { how: LAZY },
        Action::Shutdown,
    ];
    vec![
        ("bounds-evict", PLAIN_LIMITS | (2 << 8) | (1 << 17), evict),
        (
            "bounds-deadlines",
            PLAIN_LIMITS | (2 << 17) | (1 << 19) | (2 << 21) | (3 << 23),
            deadlines,
        ),
        ("bounds-limits", PLAIN_LIMITS | (3 << 27), limits),
        ("bounds-memory", PLAIN_LIMITS | (2 << 25), memory),
        ("bounds-entries", PLAIN_LIMITS | (2 << 25), entries),
        ("bounds-shutdown", PLAIN_LIMITS, shutdown),
    ]
}

/// Each bounds scenario passes the simulation's checks and exercises what
/// it is aimed at.
#[test]
fn bounds_scenarios_exercise_their_limits() {
    use rosgate_sim::{Counts, Sim, SimConfig};

    let run = |name: &str, sel: u32, actions: &[rosgate_sim::Action]| -> Counts {
        let mut sim = Sim::new(SimConfig::from_selector(u64::from(sel)));
        for a in actions {
            sim.step(a).unwrap_or_else(|v| panic!("{name}: {v}"));
        }
        sim.finish()
            .unwrap_or_else(|v| panic!("{name}: {v} (in finish)"));
        sim.counts().clone()
    };
    for (name, sel, actions) in bounds_scenarios() {
        let c = run(name, sel, &actions);
        let ok = match name {
            "bounds-evict" => {
                c.evictions == 2 && c.rejected_connections == 1 && c.closes_handshake == 1
            }
            "bounds-deadlines" => {
                c.closes_partial >= 1
                    && c.closes_slow_consumer == 1
                    && c.closes_idle >= 1
                    && c.trickles == 3
            }
            "bounds-limits" => c.registrations_refused == 3 && c.cap_errors == 6,
            "bounds-memory" => c.memory_shed_frames > 0 && c.closes_memory > 0,
            "bounds-entries" => c.memory_shed_frames >= 9,
            "bounds-shutdown" => {
                c.shutdowns == 1
                    && c.shutdown_failures_received == 1
                    && c.goodbyes_received == 1
                    && c.closes_drained == 4
            }
            _ => false,
        };
        assert!(ok, "{name} did not exercise its limits: {c:?}");
    }
}

/// Nodes, names and domains for the `core` corpus: a node declared by a
/// WebSocket URL in domain 3 and one declared by a TCP client moving there
/// (the same full name: both owners warned), a TCP client in domain 0
/// with opaque relative names, then a node of its own; remapped, relative,
/// private and absolute names, the `node` field naming a second node, a
/// publish and a call that must not leave their domain, refusals
/// (duplicate node, a domain change after registering, an unknown node,
/// an invalid name, a 400 for a bad URL), a node destroyed and its
/// registrations with it, and a WebSocket client declaring by op.
fn node_scenarios() -> Vec<(&'static str, u32, Vec<rosgate_sim::Action>)> {
    use rosgate_sim::{Action, NamedReq, Req};

    let send = |slot: u8, req: Req| Action::Send {
        slot,
        style: 0,
        split: 0,
        req,
    };
    let declare = |slot: u8, name: u8, ns: u8, remap: u8, domain: u8| {
        send(
            slot,
            Req::DeclareNode {
                name,
                ns,
                remap,
                domain,
                id: 1,
            },
        )
    };
    // Named ops: 0 subscribe, 2 advertise, 4 publish, 5 advertise_service,
    // 7 call_service; names: 0 chatter, 1 ~/cmd, 2 /chatter, 3 scan, 7 ~bad;
    // node: 0 none, 6 the second node, 7 one never declared.
    let named = |slot: u8, op: u8, name: u8, node: u8| {
        send(
            slot,
            Req::Named(NamedReq {
                op,
                name,
                node,
                payload: 40,
                id: 2,
            }),
        )
    };
    let nodes = vec![
        Action::Connect,
        Action::Connect,
        // ?node=talker&namespace=/r1&domain=3, then ?domain=x (a 400).
        Action::ConnectWsAt { how: 0, query: 2 },
        Action::ConnectWsAt { how: 0, query: 8 },
        // Slot 1, no node: `chatter` as written.
        named(1, 0, 0, 0),
        // Slot 0 moves to domain 3 as /r1/talker (chatter:=/talk): the
        // WebSocket client's full name, so both are warned.
        declare(0, 0, 1, 2, 4),
        declare(1, 1, 0, 0, 0),
        named(1, 0, 0, 0),
        named(2, 0, 2, 0),
        named(0, 0, 0, 0),
        // /chatter in domain 3 reaches slot 2, not slot 1's /chatter in 0.
        named(0, 4, 2, 0),
        // chatter is /talk for slot 0's node: its own subscription.
        named(0, 4, 0, 0),
        // /r1/talker/cmd in domain 3, called by slot 0 and answered; slot
        // 1 calls its own ~/cmd, which nobody provides.
        named(2, 5, 1, 0),
        named(0, 7, 1, 0),
        send(
            2,
            Req::Respond {
                pick: 0,
                kind: 0,
                result: 0,
                status: 0,
            },
        ),
        named(1, 7, 1, 0),
        // A second node (/cam) and a registration for it by name.
        declare(0, 3, 0, 0, 0),
        named(0, 0, 3, 6),
        // Refused: a duplicate, a domain change, an unknown node, a name.
        declare(0, 0, 1, 0, 0),
        declare(0, 1, 1, 0, 6),
        named(0, 0, 0, 7),
        named(0, 0, 7, 0),
        // /r1/talker goes with /talk; /cam is the default node now.
        send(0, Req::DestroyNode { pick: 0, id: 3 }),
        named(0, 0, 0, 0),
        named(2, 4, 2, 0),
        // A WebSocket client declaring by op, in domain 3 (the full name
        // slot 2 holds: warned).
        Action::ConnectWs { how: 0 },
        declare(3, 2, 1, 0, 5),
        named(3, 0, 2, 0),
        named(0, 4, 2, 0),
        Action::Disconnect { slot: 2, how: 0 },
        named(0, 4, 2, 0),
    ];
    // 4096-byte lines, 64 calls per connection, WebSocket clients under
    // the default filter (warnings and errors).
    vec![("nodes", PLAIN_LIMITS, nodes)]
}

/// Each node scenario passes the simulation's checks and exercises what
/// it is aimed at.
#[test]
fn node_scenarios_exercise_nodes() {
    use rosgate_sim::{Sim, SimConfig};

    for (name, sel, actions) in node_scenarios() {
        let mut sim = Sim::new(SimConfig::from_selector(u64::from(sel)));
        for a in &actions {
            sim.step(a).unwrap_or_else(|v| panic!("{name}: {v}"));
        }
        sim.finish()
            .unwrap_or_else(|v| panic!("{name}: {v} (in finish)"));
        let c = sim.counts();
        let ok = c.nodes_declared == 5
            && c.nodes_destroyed == 1
            && c.duplicate_node_names == 2
            && c.warnings_received == 4
            && c.domain_changes == 2
            && c.domain_changes_refused == 1
            && c.isolated_by_domain >= 2
            && c.ws_queries == 1
            && c.ws_queries_refused == 1
            && c.responses_ok == 1;
        assert!(
            ok,
            "{name} did not exercise nodes, names and domains: {c:?}"
        );
    }
}

/// Messages from another gateway reach every local subscriber of their
/// topic and domain, over TCP and WebSocket, as the gateway's own
/// publishes do, and the hub's reported interest follows the
/// subscribers (checked every step).
#[test]
fn remote_messages_reach_local_subscribers_only() {
    use rosgate_sim::{Action, Req, Sim, SimConfig};

    let send = |slot: u8, req: Req| Action::Send {
        slot,
        style: 0,
        split: 0,
        req,
    };
    let actions = vec![
        Action::Connect,
        Action::ConnectWs { how: 0 },
        Action::Connect,
        // Topic 2 is /chatter; both clients subscribe.
        send(0, Req::Subscribe { topic: 2, id: 1 }),
        send(1, Req::Subscribe { topic: 2, id: 1 }),
        Action::Remote {
            slot: 0,
            topic: 2,
            msg: 0,
        },
        Action::Remote {
            slot: 0,
            topic: 2,
            msg: 1,
        },
        // Nobody listens to /a: delivered to no one.
        Action::Remote {
            slot: 2,
            topic: 0,
            msg: 2,
        },
        send(0, Req::Unsubscribe { topic: 2, id: 1 }),
        Action::Remote {
            slot: 0,
            topic: 2,
            msg: 0,
        },
        Action::Read { slot: 0, mode: 0 },
        Action::Clock { v: 100 },
    ];
    let mut sim = Sim::new(SimConfig::from_selector(0));
    for a in &actions {
        sim.step(a).unwrap_or_else(|v| panic!("{v}"));
    }
    sim.finish().unwrap_or_else(|v| panic!("{v} (in finish)"));
    let c = sim.counts();
    assert_eq!(c.remote_publishes, 4, "{c:?}");
    assert!(c.publishes_received >= 3, "{c:?}");
    assert_eq!(
        sim.hub()
            .counters()
            .get(rosgate_core::counters::Counter::FederationIn),
        4
    );
}
