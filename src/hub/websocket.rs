//! WebSocket events -> hub actions. Text messages take the same path as
//! NDJSON lines (decoded in the rosbridge dialect); the rest is the
//! transport's own business: handshake, ping/pong, close handshake.

use std::time::Instant;

use super::Hub;
use crate::conn::{CloseReason, ConnRef};
use crate::log;
use crate::stats::ProtocolError;
use crate::ws::{self, WsEvent, WsReader};

/// Status code for a protocol violation (RFC 6455 §7.4.1).
const CLOSE_PROTOCOL_ERROR: u16 = 1002;

impl Hub {
    pub(super) fn on_ws_bytes(
        &mut self,
        me: ConnRef,
        reader: &mut WsReader,
        bytes: &[u8],
        now: Instant,
    ) {
        let max = self.limits.max_line_bytes;
        reader.feed(bytes, max, |event| {
            if !matches!(event, WsEvent::Text(_)) {
                // Keep control frames in order with publishes read before.
                self.flush_publishes(now);
            }
            self.on_ws_event(me, event, now)
        });
    }

    fn on_ws_event(&mut self, me: ConnRef, event: WsEvent<'_>, now: Instant) {
        match event {
            WsEvent::Open(response) => self.send_raw(me, &response, now),
            WsEvent::Refuse(response) => {
                self.send_raw(me, &response, now);
                self.close(me.key, CloseReason::ProtocolError, now);
            }
            WsEvent::Text(msg) => self.on_message(me, msg, now),
            WsEvent::Binary => {
                self.stats.lines_in += 1;
                let msg = "binary frames are not supported; send one JSON object per text frame";
                self.protocol_error(me, ProtocolError::BinaryFrame, msg, None, now);
            }
            WsEvent::Ping(payload) => self.send_raw(me, &ws::frame::pong(payload), now),
            WsEvent::Close(code) => {
                // Complete the close handshake, echoing the client's code.
                let reply = match code {
                    Some(code) => ws::frame::close(code),
                    None => ws::frame::frame(0x8, &[]),
                };
                self.send_raw(me, &reply, now);
                self.close(me.key, CloseReason::PeerClosed, now);
            }
            WsEvent::TooLong => self.too_long(me, now),
            WsEvent::Protocol(why) => {
                log!(Debug, "websocket conn={}: {why}", me.key);
                self.send_raw(me, &ws::frame::close(CLOSE_PROTOCOL_ERROR), now);
                self.close(me.key, CloseReason::ProtocolError, now);
            }
        }
    }
}
