//! roslibrust's rosbridge backend (`roslibrust::rosbridge::ClientHandle`)
//! against a running rosgate: publish, subscribe and call services.
//!
//! Run through `scripts/clients.sh`, which starts rosgate on an ephemeral
//! port and passes `ROSGATE_WS_URL` (ws://127.0.0.1:PORT). Every test is
//! bounded by `deadline`, so a gateway bug fails a test instead of hanging.
//!
//! Message and service types are written by hand (the shapes of
//! std_msgs/String and rospy_tutorials/AddTwoInts) instead of through
//! roslibrust's codegen, which would need ROS message packages on disk.

use std::future::Future;
use std::time::Duration;

use roslibrust::rosbridge::{ClientHandle, ClientHandleOptions};
use roslibrust::{
    Error, MessageDescriptor, Publish, RosMessageType, RosServiceType, ServiceProvider, Subscribe,
    TopicProvider,
};
use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------- types

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct StringMsg {
    data: String,
}

impl RosMessageType for StringMsg {
    const DESCRIPTION: MessageDescriptor =
        MessageDescriptor::new::<Self>("std_msgs/String", "", "string data", "", &[0; 32]);
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct AddTwoIntsRequest {
    a: i64,
    b: i64,
}

impl RosMessageType for AddTwoIntsRequest {
    const DESCRIPTION: MessageDescriptor = MessageDescriptor::new::<Self>(
        "rospy_tutorials/AddTwoIntsRequest",
        "",
        "int64 a\nint64 b",
        "",
        &[0; 32],
    );
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct AddTwoIntsResponse {
    sum: i64,
}

impl RosMessageType for AddTwoIntsResponse {
    const DESCRIPTION: MessageDescriptor = MessageDescriptor::new::<Self>(
        "rospy_tutorials/AddTwoIntsResponse",
        "",
        "int64 sum",
        "",
        &[0; 32],
    );
}

struct AddTwoInts;

impl RosServiceType for AddTwoInts {
    const ROS_SERVICE_NAME: &'static str = "rospy_tutorials/AddTwoInts";
    type Request = AddTwoIntsRequest;
    type Response = AddTwoIntsResponse;
}

/// The part of rosgate's `/rosgate/stats` answer these tests read.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct Stats {
    subscriptions: u64,
    publishers: u64,
    services: u64,
    calls_pending: u64,
}

impl RosMessageType for Stats {
    const DESCRIPTION: MessageDescriptor =
        MessageDescriptor::new::<Self>("rosgate/StatsResponse", "", "", "", &[0; 32]);
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Empty {}

impl RosMessageType for Empty {
    const DESCRIPTION: MessageDescriptor =
        MessageDescriptor::new::<Self>("rosgate/StatsRequest", "", "", "", &[0; 32]);
}

struct StatsSrv;

impl RosServiceType for StatsSrv {
    const ROS_SERVICE_NAME: &'static str = "rosgate/Stats";
    type Request = Empty;
    type Response = Stats;
}

// -------------------------------------------------------------- helpers

const TEST_DEADLINE: Duration = Duration::from_secs(30);
const RECV_DEADLINE: Duration = Duration::from_secs(5);

fn url() -> String {
    std::env::var("ROSGATE_WS_URL")
        .expect("ROSGATE_WS_URL is not set: run these tests through scripts/clients.sh")
}

async fn connect() -> ClientHandle {
    let opts = ClientHandleOptions::new(url()).timeout(Duration::from_secs(10));
    tokio::time::timeout(
        Duration::from_secs(10),
        ClientHandle::new_with_options(opts),
    )
    .await
    .expect("connecting to rosgate timed out")
    .expect("connecting to rosgate failed")
}

/// Runs a test body with an overall deadline.
async fn deadline<F: Future<Output = ()>>(body: F) {
    tokio::time::timeout(TEST_DEADLINE, body)
        .await
        .expect("test exceeded its deadline");
}

/// Round trip on `ros`'s connection: rosgate handles one connection's
/// frames in order, so once this returns every request sent earlier on the
/// same connection (subscribe, advertise_service...) has taken effect.
async fn barrier(ros: &ClientHandle) -> Stats {
    ros.call_service::<StatsSrv>("/rosgate/stats", Empty {})
        .await
        .expect("/rosgate/stats")
}

/// Gives the gateway `for_ms` to apply frames sent on another connection
/// (drops run their unsubscribe/unadvertise in a spawned task).
async fn settle(for_ms: u64) {
    tokio::time::sleep(Duration::from_millis(for_ms)).await;
}

async fn next_msg<S: Subscribe<StringMsg>>(sub: &mut S) -> StringMsg {
    tokio::time::timeout(RECV_DEADLINE, sub.next())
        .await
        .expect("no message within the deadline")
        .expect("subscriber error")
}

/// Attempts at a call served by a roslibrust service server, and how long
/// each may take.
const SERVED_CALL_ATTEMPTS: u32 = 4;
const SERVED_CALL_ATTEMPT: Duration = Duration::from_secs(5);

/// Runs `call` (a call served by a roslibrust service server) until it
/// answers, at most `SERVED_CALL_ATTEMPTS` times; returns the answer and
/// how many attempts were abandoned.
///
/// Why a retry: roslibrust 0.26 (the newest) drops calls it has read.
/// Its `stubborn_spin` runs each `spin_once` under a 10 ms
/// `tokio::time::timeout`, and a service server's `handle_service` awaits
/// the writer lock and `spawn_blocking` inside it. When serving a call
/// outlasts what is left of those 10 ms, the future is dropped with the
/// request already read off the socket, and no answer is ever sent. On an
/// idle machine that is rare; on a loaded 2-core CI machine it failed
/// `advertise_and_call_service`. strace showed rosgate had written the
/// call_service frame, the provider's socket had nothing queued, and every
/// client thread was parked. An application calling a roslibrust server has
/// to retry; so do these tests. The gateway still answers every abandoned
/// attempt, when its call timeout fires (`many_concurrent_calls` checks that).
async fn served_call<T, F, Fut>(mut call: F) -> (T, u32)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    for abandoned in 0..SERVED_CALL_ATTEMPTS {
        match tokio::time::timeout(SERVED_CALL_ATTEMPT, call()).await {
            Ok(answer) => return (answer.expect("call served by roslibrust"), abandoned),
            Err(_) => eprintln!("served_call: attempt {abandoned} unanswered, retrying"),
        }
    }
    panic!("no answer in {SERVED_CALL_ATTEMPTS} attempts of {SERVED_CALL_ATTEMPT:?}");
}

/// Like `served_call` for a call the provider answers with an error.
async fn served_call_err<T: std::fmt::Debug, F, Fut>(mut call: F) -> Error
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, Error>>,
{
    for abandoned in 0..SERVED_CALL_ATTEMPTS {
        match tokio::time::timeout(SERVED_CALL_ATTEMPT, call()).await {
            Ok(answer) => return answer.expect_err("the provider refuses"),
            Err(_) => eprintln!("served_call_err: attempt {abandoned} unanswered, retrying"),
        }
    }
    panic!("no answer in {SERVED_CALL_ATTEMPTS} attempts of {SERVED_CALL_ATTEMPT:?}");
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_and_subscribe_across_connections() {
    deadline(async {
        let sub_ros = connect().await;
        let pub_ros = connect().await;
        let mut sub = sub_ros
            .subscribe::<StringMsg>("/rlr/chatter")
            .await
            .expect("subscribe");
        barrier(&sub_ros).await;
        let publisher = pub_ros
            .advertise::<StringMsg>("/rlr/chatter")
            .await
            .expect("advertise");
        for i in 0..5 {
            let msg = StringMsg {
                data: format!("hello {i} \u{e9}\u{1f916}"),
            };
            publisher.publish(&msg).await.expect("publish");
            assert_eq!(next_msg(&mut sub).await, msg);
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_subscribers_on_one_handle_each_get_every_message() {
    deadline(async {
        let ros = connect().await;
        // roslibrust sends one `subscribe` per Subscriber and a single
        // `unsubscribe` (without id) when the last one for a topic drops.
        let mut a = ros.subscribe::<StringMsg>("/rlr/fan").await.unwrap();
        let mut b = ros.subscribe::<StringMsg>("/rlr/fan").await.unwrap();
        let publisher = ros.advertise::<StringMsg>("/rlr/fan").await.unwrap();
        barrier(&ros).await;
        let msg = StringMsg {
            data: "both".into(),
        };
        publisher.publish(&msg).await.unwrap();
        assert_eq!(next_msg(&mut a).await, msg);
        assert_eq!(next_msg(&mut b).await, msg);

        // The gateway delivers one copy per connection: no duplicate queued.
        let second = StringMsg {
            data: "again".into(),
        };
        publisher.publish(&second).await.unwrap();
        assert_eq!(next_msg(&mut a).await, second);
        assert_eq!(next_msg(&mut b).await, second);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_subscriber_and_publisher_withdraws_them() {
    deadline(async {
        let ros = connect().await;
        let other = connect().await;
        let before = barrier(&other).await;

        let sub = ros.subscribe::<StringMsg>("/rlr/drop").await.unwrap();
        let publisher = ros.advertise::<StringMsg>("/rlr/drop").await.unwrap();
        barrier(&ros).await;
        let during = barrier(&other).await;
        assert!(during.subscriptions > before.subscriptions, "{during:?}");
        assert!(during.publishers > before.publishers, "{during:?}");

        drop(sub);
        drop(publisher);
        settle(300).await;
        barrier(&ros).await;
        let after = barrier(&other).await;
        assert_eq!(after.subscriptions, before.subscriptions, "{after:?}");
        assert_eq!(after.publishers, before.publishers, "{after:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advertise_and_call_service() {
    deadline(async {
        let provider = connect().await;
        let caller = connect().await;
        let server = provider
            .advertise_service::<AddTwoInts, _>("/rlr/add", |req: AddTwoIntsRequest| {
                Ok(AddTwoIntsResponse { sum: req.a + req.b })
            })
            .await
            .expect("advertise_service");
        barrier(&provider).await;

        let (resp, _) = served_call(|| {
            caller.call_service::<AddTwoInts>("/rlr/add", AddTwoIntsRequest { a: 2, b: 40 })
        })
        .await;
        assert_eq!(resp.sum, 42);

        // A persistent client goes through the same path.
        let client = caller
            .service_client::<AddTwoInts>("/rlr/add")
            .await
            .unwrap();
        let (resp, _) = served_call(|| client.call(AddTwoIntsRequest { a: -5, b: 3 })).await;
        assert_eq!(resp.sum, -2);

        // Dropping the handle unadvertises; later calls fail at once.
        drop(server);
        settle(300).await;
        barrier(&provider).await;
        let err = caller
            .call_service::<AddTwoInts>("/rlr/add", AddTwoIntsRequest { a: 1, b: 1 })
            .await
            .expect_err("the service was unadvertised");
        assert!(matches!(err, Error::ServerError(_)), "{err:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_failures_reach_the_caller() {
    deadline(async {
        let ros = connect().await;

        // No provider: rosgate answers result:false with a reason string.
        let started = std::time::Instant::now();
        let err = ros
            .call_service::<AddTwoInts>("/rlr/nobody", AddTwoIntsRequest { a: 1, b: 2 })
            .await
            .expect_err("no provider");
        match &err {
            Error::ServerError(reason) => assert!(reason.contains("/rlr/nobody"), "{reason}"),
            other => panic!("expected ServerError, got {other:?}"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "failure was not immediate"
        );

        // A provider whose callback fails: roslibrust answers result:false
        // with the error text as `values`.
        let _server = ros
            .advertise_service::<AddTwoInts, _>("/rlr/fails", |_req: AddTwoIntsRequest| {
                Err(anyhow::anyhow!("refusing on purpose"))
            })
            .await
            .unwrap();
        barrier(&ros).await;
        let err = served_call_err(|| {
            ros.call_service::<AddTwoInts>("/rlr/fails", AddTwoIntsRequest { a: 1, b: 2 })
        })
        .await;
        match &err {
            Error::ServerError(reason) => {
                assert!(reason.contains("refusing on purpose"), "{reason}")
            }
            other => panic!("expected ServerError, got {other:?}"),
        }
    })
    .await;
}

/// Calls `many_concurrent_calls` has in flight at once.
const CONCURRENT_CALLS: i64 = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_calls() {
    deadline(async {
        let provider = connect().await;
        let caller = connect().await;
        let _server = provider
            .advertise_service::<AddTwoInts, _>("/rlr/many", |req: AddTwoIntsRequest| {
                Ok(AddTwoIntsResponse {
                    sum: req.a * 1000 + req.b,
                })
            })
            .await
            .unwrap();
        barrier(&provider).await;

        // roslibrust's service server answers one call at a time (each
        // through spawn_blocking): 200 took over 10 s on a busy 2-core
        // machine. 64 in flight at once still interleave on the wire.
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..CONCURRENT_CALLS {
            let caller = caller.clone();
            tasks.spawn(async move {
                let (resp, abandoned) = served_call(|| {
                    caller.call_service::<AddTwoInts>("/rlr/many", AddTwoIntsRequest { a: i, b: 7 })
                })
                .await;
                assert_eq!(resp.sum, i * 1000 + 7, "call {i} got another call's answer");
                abandoned
            });
        }
        let (mut done, mut abandoned) = (0, 0);
        while let Some(joined) = tasks.join_next().await {
            abandoned += joined.expect("call task");
            done += 1;
        }
        assert_eq!(done, CONCURRENT_CALLS);
        // Every answered call is settled; only attempts roslibrust lost
        // (each waits for the gateway's call timeout) may still be pending.
        let pending = barrier(&caller).await.calls_pending;
        assert!(
            pending <= u64::from(abandoned),
            "{pending} pending, {abandoned} abandoned"
        );
    })
    .await;
}

/// roslibrust's own generic traits (`TopicProvider`, `ServiceProvider`),
/// as backend-independent application code would use them.
async fn generic_round_trip<R: TopicProvider + ServiceProvider>(ros: &R, topic: &str) -> String {
    let mut sub = ros.subscribe::<StringMsg>(topic).await.expect("subscribe");
    // Through the traits there is no per-connection barrier; publish until
    // the subscription is in place.
    let publisher = ros.advertise::<StringMsg>(topic).await.expect("advertise");
    let msg = StringMsg {
        data: "generic".into(),
    };
    loop {
        publisher.publish(&msg).await.expect("publish");
        if let Ok(got) = tokio::time::timeout(Duration::from_millis(200), sub.next()).await {
            return got.expect("subscriber").data;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_traits_work_over_rosgate() {
    deadline(async {
        let ros = connect().await;
        assert_eq!(generic_round_trip(&ros, "/rlr/generic").await, "generic");
        let _server = ServiceProvider::advertise_service::<AddTwoInts, _>(
            &ros,
            "/rlr/generic_add",
            |req: AddTwoIntsRequest| Ok(AddTwoIntsResponse { sum: req.a + req.b }),
        )
        .await
        .unwrap();
        barrier(&ros).await;
        let (resp, _) = served_call(|| {
            ServiceProvider::call_service::<AddTwoInts>(
                &ros,
                "/rlr/generic_add",
                AddTwoIntsRequest { a: 20, b: 22 },
            )
        })
        .await;
        assert_eq!(resp.sum, 42);
    })
    .await;
}
