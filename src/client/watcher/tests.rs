//! The watcher alone, against a small scripted API on 127.0.0.1:0 (axum): each list and watch
//! request is recorded and answered from a script, so the tests see exactly which requests the
//! watcher makes after a cut, an end, a BOOKMARK and a 410.

use super::*;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// How a scripted watch stream goes on after its lines.
enum Then {
    /// The connection is cut (the body fails) once the test calls `cut`.
    Cut,
    /// The stream ends normally (the server's watch timeout).
    End,
    /// Nothing more: the stream stays open.
    Hang,
}

enum Reply {
    /// An HTTP failure with a Status body.
    Status(u16, Value),
    /// A 200 watch stream: these events (one JSON line each), then `Then`.
    Stream(Vec<Value>, Then),
}

#[derive(Default)]
struct Fake {
    /// `list` or `watch <resourceVersion>` per request, with its field selector.
    log: Mutex<Vec<String>>,
    /// The answers to the next lists (the list's resourceVersion and its items' names).
    lists: Mutex<VecDeque<(u64, Vec<&'static str>)>>,
    watches: Mutex<VecDeque<Reply>>,
    cut: Notify,
}

fn node(name: &str, rv: u64) -> Value {
    json!({"kind": "Node", "apiVersion": "v1", "metadata": {"name": name, "resourceVersion": rv.to_string()}})
}

fn event(type_: &str, object: Value) -> Value {
    json!({"type": type_, "object": object})
}

fn bookmark(rv: u64) -> Value {
    event(
        "BOOKMARK",
        json!({"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}}),
    )
}

fn expired() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": "too old resource version: 1 (10)", "reason": "Expired", "code": 410})
}

async fn nodes(State(fake): State<Arc<Fake>>, Query(q): Query<HashMap<String, String>>) -> Response {
    let field = q.get("fieldSelector").cloned().unwrap_or_default();
    if q.get("watch").map(String::as_str) != Some("true") {
        fake.log.lock().unwrap().push(format!("list {field}"));
        let Some((rv, names)) = fake.lists.lock().unwrap().pop_front() else {
            return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "no list scripted").into_response();
        };
        let items: Vec<Value> = names.iter().map(|n| node(n, rv)).collect();
        let list = json!({"kind": "NodeList", "apiVersion": "v1",
                          "metadata": {"resourceVersion": rv.to_string()}, "items": items});
        return axum::Json(list).into_response();
    }
    let rv = q.get("resourceVersion").cloned().unwrap_or_default();
    fake.log.lock().unwrap().push(format!("watch {rv} {field}"));
    let reply = fake.watches.lock().unwrap().pop_front();
    let (lines, then) = match reply {
        Some(Reply::Status(code, body)) => {
            let code = axum::http::StatusCode::from_u16(code).unwrap();
            return (code, axum::Json(body)).into_response();
        }
        Some(Reply::Stream(lines, then)) => (lines, then),
        None => (Vec::new(), Then::Hang),
    };
    let head = futures_util::stream::iter(
        lines
            .into_iter()
            .map(|l| Ok::<_, std::io::Error>(Bytes::from(format!("{l}\n")))),
    );
    let tail = futures_util::stream::once(async move {
        match then {
            Then::Cut => {
                fake.cut.notified().await;
                Some(Err(std::io::Error::other("cut")))
            }
            Then::End => None,
            Then::Hang => std::future::pending().await,
        }
    })
    .filter_map(|x| async move { x });
    Body::from_stream(head.chain(tail)).into_response()
}

async fn serve(fake: Arc<Fake>) -> Client {
    let app = axum::Router::new()
        .route("/api/v1/nodes", axum::routing::get(nodes))
        .with_state(fake);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Client::new(&format!("http://{addr}"), crate::model::DEFAULT_GROUP, "watcher-test")
}

fn watcher(client: Client) -> Watcher {
    Watcher::named(client, Kind::Node, "worker-0").with_backoff(Duration::from_millis(20), Duration::from_millis(200))
}

/// The next event, within a deadline.
async fn next(w: &mut Watcher) -> Result<Event, WatchError> {
    tokio::time::timeout(Duration::from_secs(20), w.next())
        .await
        .expect("an event within 20 s")
}

fn applied(name: &str, rv: u64) -> Event {
    Event::Applied {
        object: node(name, rv),
        resource_version: rv.to_string(),
    }
}

const SEL: &str = "metadata.name=worker-0";

/// A watch cut mid-stream resumes from the newest resourceVersion it delivered, without a
/// re-list (client-go's reflector: a broken watch re-watches from `lastSyncResourceVersion`).
#[tokio::test]
async fn a_cut_watch_resumes_from_the_last_resource_version_without_a_relist() {
    let fake = Arc::new(Fake::default());
    fake.lists.lock().unwrap().push_back((10, vec!["worker-0"]));
    fake.watches.lock().unwrap().extend([
        Reply::Stream(vec![event("MODIFIED", node("worker-0", 11))], Then::Cut),
        Reply::Stream(vec![event("MODIFIED", node("worker-0", 12))], Then::Hang),
    ]);
    let mut w = watcher(serve(fake.clone()).await);
    assert_eq!(
        next(&mut w).await.unwrap(),
        Event::Listed {
            objects: vec![node("worker-0", 10)],
            resource_version: "10".into()
        }
    );
    assert_eq!(next(&mut w).await.unwrap(), applied("worker-0", 11));
    fake.cut.notify_one();
    assert_eq!(next(&mut w).await.unwrap(), applied("worker-0", 12));
    assert_eq!(w.resource_version(), Some("12"));
    assert_eq!(
        *fake.log.lock().unwrap(),
        [
            format!("list {SEL}"),
            format!("watch 10 {SEL}"),
            format!("watch 11 {SEL}")
        ]
    );
}

/// A BOOKMARK moves the resourceVersion without an event, and a watch the server ends resumes
/// from it.
#[tokio::test]
async fn a_bookmark_advances_the_resource_version_an_ended_watch_resumes_from() {
    let fake = Arc::new(Fake::default());
    fake.lists.lock().unwrap().push_back((10, vec![]));
    fake.watches.lock().unwrap().extend([
        Reply::Stream(vec![bookmark(15)], Then::End),
        Reply::Stream(
            vec![
                event("ADDED", node("worker-0", 16)),
                event("DELETED", node("worker-0", 17)),
            ],
            Then::Hang,
        ),
    ]);
    let mut w = watcher(serve(fake.clone()).await);
    assert_eq!(
        next(&mut w).await.unwrap(),
        Event::Listed {
            objects: vec![],
            resource_version: "10".into()
        }
    );
    assert_eq!(next(&mut w).await.unwrap(), applied("worker-0", 16));
    assert_eq!(
        next(&mut w).await.unwrap(),
        Event::Deleted {
            object: node("worker-0", 17),
            resource_version: "17".into()
        }
    );
    assert_eq!(
        *fake.log.lock().unwrap(),
        [
            format!("list {SEL}"),
            format!("watch 10 {SEL}"),
            format!("watch 15 {SEL}")
        ]
    );
}

/// `410 Expired`, as an ERROR event in the stream or as the answer to opening the watch,
/// re-lists once and watches from the new list's resourceVersion.
#[tokio::test]
async fn expired_relists_once_then_watches_from_the_new_list() {
    let fake = Arc::new(Fake::default());
    fake.lists
        .lock()
        .unwrap()
        .extend([(10, vec!["worker-0"]), (20, vec!["worker-0"]), (30, vec![])]);
    fake.watches.lock().unwrap().extend([
        Reply::Stream(
            vec![event("MODIFIED", node("worker-0", 11)), event("ERROR", expired())],
            Then::Hang,
        ),
        Reply::Status(410, expired()),
        Reply::Stream(vec![event("ADDED", node("worker-0", 31))], Then::Hang),
    ]);
    let mut w = watcher(serve(fake.clone()).await);
    let listed = |rv: u64, objects: Vec<Value>| Event::Listed {
        objects,
        resource_version: rv.to_string(),
    };
    assert_eq!(next(&mut w).await.unwrap(), listed(10, vec![node("worker-0", 10)]));
    assert_eq!(next(&mut w).await.unwrap(), applied("worker-0", 11));
    assert_eq!(next(&mut w).await.unwrap(), listed(20, vec![node("worker-0", 20)]));
    assert_eq!(next(&mut w).await.unwrap(), listed(30, vec![]));
    assert_eq!(next(&mut w).await.unwrap(), applied("worker-0", 31));
    assert_eq!(
        *fake.log.lock().unwrap(),
        [
            format!("list {SEL}"),
            format!("watch 10 {SEL}"),
            format!("list {SEL}"),
            format!("watch 20 {SEL}"),
            format!("list {SEL}"),
            format!("watch 30 {SEL}"),
        ]
    );
}

/// Another ERROR event is reported with its Status and the watch resumes from where it was
/// (no re-list); a failed list is reported and retried after the pause.
#[tokio::test]
async fn other_errors_are_reported_then_retried() {
    let fake = Arc::new(Fake::default());
    let internal = json!({"kind": "Status", "status": "Failure", "message": "cannot read the log",
                          "reason": "InternalError", "code": 500});
    fake.watches.lock().unwrap().extend([
        Reply::Stream(vec![event("ERROR", internal)], Then::Hang),
        Reply::Stream(vec![event("ADDED", node("worker-0", 11))], Then::Hang),
    ]);
    let client = serve(fake.clone()).await;
    // No list scripted for the first watcher: a 500, reported, then retried.
    let mut empty = watcher(client.clone());
    let e = next(&mut empty).await.unwrap_err();
    assert!(
        matches!(&e, WatchError::Request(ClientError::Status(st)) if st.code == 500),
        "{e}"
    );
    drop(empty);
    fake.log.lock().unwrap().clear();
    fake.lists.lock().unwrap().push_back((10, vec![]));
    let mut w = watcher(client);
    assert!(matches!(next(&mut w).await.unwrap(), Event::Listed { .. }));
    match next(&mut w).await.unwrap_err() {
        WatchError::Ended(st) => assert_eq!((st.code, st.reason.as_str()), (500, "InternalError")),
        e => panic!("{e}"),
    }
    assert_eq!(next(&mut w).await.unwrap(), applied("worker-0", 11));
    assert_eq!(
        *fake.log.lock().unwrap(),
        [
            format!("list {SEL}"),
            format!("watch 10 {SEL}"),
            format!("watch 10 {SEL}")
        ]
    );
}
