//! Wire-level integration tests for rosgate: real binary, real sockets, JSON lines in and out.
//!
//! Each test starts its own gateway on an ephemeral port (`--listen 127.0.0.1:0`).

#[allow(dead_code)]
mod fxclient;
#[allow(dead_code)]
mod peer;
#[allow(dead_code)]
mod support;
#[allow(dead_code)]
mod wsclient;

mod actions;
mod binary;
mod bounds;
mod cli;
mod errors;
mod files;
mod foxglove;
mod fragments;
mod framing;
mod graph;
mod http;
mod limits;
mod observe;
mod params;
mod qos;
mod security;
mod services;
mod stats;
mod tf;
mod tls;
mod topics;
mod typedefs;
mod websocket;
