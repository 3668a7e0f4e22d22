//! Why things end: [`CloseReason`] for connections, [`ErrorCode`] for
//! refused requests. Each member has a counter (`closes`, `errors`).

use crate::family::family;

family! {
    /// Why a connection was closed. Every close has one; each has a counter.
    pub enum CloseReason {
        /// The client closed its side (read returned 0, or a WebSocket close).
        PeerClosed => "peer_closed", "The client closed the connection.";
        /// A WebSocket client broke the framing protocol or its handshake.
        ProtocolError => "protocol_error", "The client broke the WebSocket protocol or handshake.";
        /// A TLS error: a failed handshake (a plaintext client, no common
        /// version or cipher) or a bad record, on a TLS listener.
        TlsError => "tls_error", "A TLS error: a failed handshake (a plaintext client, no common version or cipher) or a bad record.";
        /// A read or write failed (reset, broken pipe, ...).
        Reset => "reset", "A read or write failed.";
        /// Control data queued beyond `--max-control-bytes` (P6).
        ControlOverflow => "control_overflow", "Control data queued beyond the per-connection limit.";
        /// Output pending without write progress for `--write-stall-ms` (P7).
        WriteStall => "write_stall", "Output pending without write progress for too long.";
        /// Refused at accept: `--max-connections` reached (P9).
        MaxConnections => "max_connections", "Refused at the connection limit.";
        /// The gateway is shutting down.
        Shutdown => "shutdown", "The gateway shut down.";
        /// The global memory budget was exceeded and this connection held
        /// the most (P17).
        MemoryPressure => "memory_pressure", "Closed to keep the gateway within its memory budget.";
        /// The opening (WebSocket upgrade, first TCP line) took too long (P21).
        HandshakeTimeout => "handshake_timeout", "The opening was not completed in time.";
        /// A partial line or message sat unfinished too long (P18).
        PartialTimeout => "partial_timeout", "A partial request sat unfinished too long.";
        /// No input and no output for `--idle-timeout-ms` (P21).
        IdleTimeout => "idle_timeout", "No traffic for the idle timeout.";
        /// Control data stayed above the soft limit too long (P19).
        SlowConsumer => "slow_consumer", "Control data stayed above the soft limit too long.";
        /// Closed, before it completed its opening, to admit a newcomer at
        /// the connection limit (P21).
        Evicted => "evicted", "An unfinished opening evicted at the connection limit.";
        /// Refused at accept: too many connections from its address (P21).
        PerIpLimit => "per_ip_limit", "Refused: too many connections from one address.";
        /// A plain HTTP request on the WebSocket port was answered.
        HttpServed => "http_served", "An HTTP request (metrics, health, dashboard) was answered.";
        /// A reliable subscription fell more than twice `--max-queue-bytes`
        /// behind: reliable data is never dropped, so the reader goes.
        ReliableOverflow => "reliable_overflow", "A reliable subscriber fell too far behind (reliable data is never dropped).";
        /// A token was presented and matched none (or none was presented
        /// to an `auth` op).
        AuthFailed => "auth_failed", "Authentication failed (wrong or missing token).";
        /// A browser page whose origin is not allowed tried to open a
        /// WebSocket (403).
        OriginRefused => "origin_refused", "A WebSocket opening from a browser origin that is not allowed.";
    }
}

impl CloseReason {
    /// Whether the close was the gateway's decision (logged as a warning).
    pub fn is_forced(self) -> bool {
        matches!(
            self,
            CloseReason::ControlOverflow
                | CloseReason::WriteStall
                | CloseReason::MaxConnections
                | CloseReason::ProtocolError
                | CloseReason::TlsError
                | CloseReason::MemoryPressure
                | CloseReason::HandshakeTimeout
                | CloseReason::PartialTimeout
                | CloseReason::IdleTimeout
                | CloseReason::SlowConsumer
                | CloseReason::AuthFailed
                | CloseReason::OriginRefused
                | CloseReason::Evicted
                | CloseReason::PerIpLimit
                | CloseReason::ReliableOverflow
        )
    }
}

family! {
    /// Why a request was refused: each has a counter under `errors`.
    pub enum ErrorCode {
        BadJson => "bad_json", "Lines that are not valid JSON.";
        BadUtf8 => "bad_utf8", "Lines that are not valid UTF-8.";
        NotObject => "not_object", "Lines that are JSON but not an object.";
        MissingOp => "missing_op", "Requests without an op.";
        UnknownOp => "unknown_op", "Requests with an unknown op.";
        MissingField => "missing_field", "Requests missing a required field.";
        WrongType => "wrong_type", "Requests with a field of the wrong type.";
        TooLong => "too_long", "Lines or messages over the length limit.";
        TooDeep => "too_deep", "Requests nested deeper than the depth limit.";
        MissingId => "missing_id", "Requests missing a required id.";
        UnknownResponse => "unknown_response", "Responses to no outstanding call of the connection.";
        NotProvider => "not_provider", "unadvertise_service from a connection that is not the provider.";
        ReservedName => "reserved_name", "Registrations under the gateway's reserved prefix.";
        BinaryFrame => "binary_frame", "WebSocket binary frames that do not hold a JSON object (binary frames are read as UTF-8 JSON text, as rosbridge does; CBOR and BSON are not).";
        NumberOutOfRange => "number_out_of_range", "Requests with a number beyond the f64 range.";
        LoneSurrogate => "lone_surrogate", "Requests with a string escaping an unpaired surrogate.";
        IdTooLong => "id_too_long", "Requests whose id is over the length limit (the id is not echoed).";
        NameTooLong => "name_too_long", "Requests with a name over the length limit.";
        TooManyRegistrations => "too_many_registrations", "Registrations refused by a per-connection limit.";
        InvalidName => "invalid_name", "Names, node names or remap rules that break the ROS 2 name rules.";
        UnknownNode => "unknown_node", "Requests naming a node the connection did not declare.";
        DuplicateNode => "duplicate_node", "declare_node of a full name the connection already declared.";
        InvalidDomain => "invalid_domain", "A domain out of range, or a change of domain after registering.";
        UnknownGoal => "unknown_goal", "Feedback, results or cancels naming no goal of their connection.";
        BadParameter => "bad_parameter", "Parameter operations refused (bad name, value or descriptor; not declared; rules; limits).";
        FoxgloveRequest => "foxglove_request", "Foxglove WebSocket protocol messages refused (not that protocol's JSON or binary layout, an unknown op or opcode, an unknown channel, subscription or service id, a capability this server does not have).";
        BadArgs => "bad_args", "Calls to a built-in service with arguments it cannot use.";
        Unauthenticated => "unauthenticated", "Requests before the connection authenticated.";
        Forbidden => "forbidden", "Operations the connection's role may not do.";
        BadCompression => "bad_compression", "Subscriptions refused for their compression: unknown, not on this transport, or needing a type the gateway does not know.";
        TypeMismatch => "type_mismatch", "Messages that do not fit the ROS 2 type their topic has in a joined ROS 2 graph (--ros-domain).";
        BadFragment => "bad_fragment", "Pieces of fragmented messages refused (num out of range, total changed, duplicate, over the line limit, too many in flight, a piece of a failed message, a fragment inside a fragment): the message is dropped whole.";
        BadCdr => "bad_cdr", "Raw CDR publishes ({\"bytes\": ...}) refused: the topic has no type or one the gateway does not know, the bytes are not base64 or 0-255 integers, or not CDR of the type.";
    }
}

impl From<rosgate_wire::decode::ErrorKind> for ErrorCode {
    fn from(kind: rosgate_wire::decode::ErrorKind) -> Self {
        use rosgate_wire::decode::ErrorKind as K;
        match kind {
            K::BadUtf8 => ErrorCode::BadUtf8,
            K::BadJson => ErrorCode::BadJson,
            K::NotObject => ErrorCode::NotObject,
            K::TooDeep => ErrorCode::TooDeep,
            K::MissingOp => ErrorCode::MissingOp,
            K::UnknownOp => ErrorCode::UnknownOp,
            K::MissingField(_) => ErrorCode::MissingField,
            K::WrongType(_) => ErrorCode::WrongType,
            K::MissingId => ErrorCode::MissingId,
            K::NumberOutOfRange => ErrorCode::NumberOutOfRange,
            K::LoneSurrogate => ErrorCode::LoneSurrogate,
            K::IdTooLong => ErrorCode::IdTooLong,
            K::NameTooLong(_) => ErrorCode::NameTooLong,
        }
    }
}
