//! The loop's inbox: work queued from another thread runs on the loop
//! thread and reaches real clients; `Handle::stop` ends the loop.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rosgate::config::Config;
use rosgate::inbox::{Handle, SendError};
use rosgate::server::Server;
use rosgate_wire::Raw;

fn start() -> (Handle, std::net::SocketAddr, thread::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel();
    let join = thread::spawn(move || {
        let config = Config {
            listen: "127.0.0.1:0".parse().expect("addr"),
            ws_listen: None,
            ..Config::default()
        };
        let mut server = Server::bind(&config).expect("bind");
        let addr = server.local_addr().expect("addr");
        tx.send((server.handle(), addr)).expect("send handle");
        server.run().expect("loop");
    });
    let (handle, addr) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("server started");
    (handle, addr, join)
}

fn read_line(r: &mut BufReader<TcpStream>) -> serde_json::Value {
    let mut line = String::new();
    r.read_line(&mut line)
        .expect("read a line within the deadline");
    serde_json::from_str(&line).expect("a JSON line")
}

#[test]
fn a_job_from_another_thread_publishes_to_a_real_client() {
    let (handle, addr, join) = start();
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    s.write_all(b"{\"op\":\"subscribe\",\"topic\":\"/injected\",\"type\":\"T\",\"id\":1}\n")
        .expect("write");
    assert_eq!(read_line(&mut r)["id"], 1, "subscribed");

    let sender = handle.clone();
    thread::spawn(move || {
        sender
            .send(Box::new(|hub, now| {
                // What a peer network's job does (Zenoh's, with
                // `--zenoh-*`, where the shell turned federation on at
                // start): the hub routes remote data only then.
                hub.enable_federation();
                let msg = Raw::from_valid_json("{\"n\":42}");
                hub.bridges().remote_publish(0, "/injected", msg, None, now)
            }))
            .expect("queued");
    })
    .join()
    .expect("sender thread");
    let msg = read_line(&mut r);
    assert_eq!(msg["op"], "publish");
    assert_eq!(msg["topic"], "/injected");
    assert_eq!(msg["msg"]["n"], 42);

    handle.stop();
    let t0 = Instant::now();
    join.join().expect("loop thread ended cleanly");
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(
        handle
            .send(Box::new(|_, _| {}))
            .expect_err("the loop is gone"),
        SendError::Closed
    );
}

#[test]
fn a_full_inbox_refuses_without_blocking() {
    let (handle, _addr, join) = start();
    // Block the loop thread inside a job until we have filled the inbox.
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    handle
        .send(Box::new(move |_, _| {
            let _ = started_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(10));
        }))
        .expect("queued");
    started_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the loop ran the blocking job");
    let t0 = Instant::now();
    let mut refused = 0;
    for _ in 0..(rosgate::config::INBOX_CAPACITY + 10) {
        if handle.send(Box::new(|_, _| {})) == Err(SendError::Full) {
            refused += 1;
        }
    }
    assert!(t0.elapsed() < Duration::from_secs(2), "send never blocks");
    assert_eq!(refused, 10);
    assert_eq!(handle.refused(), 10);
    release_tx.send(()).expect("release");
    handle.stop();
    join.join().expect("loop thread ended cleanly");
}
