//! Pagination of object lists: Kubernetes' `limit`/`continue` on LIST of every kind.
//!
//! Owns the continue token, the cut of one page from a projection and the Statuses of bad and
//! expired tokens. The token is kube-apiserver's (`k8s.io/apiserver/pkg/storage` `EncodeContinue`):
//! base64url without padding of `{"v":"meta.k8s.io/v1","rv":<list resourceVersion>,"start":"<next
//! name>"}`, where the next name is the page's last name followed by NUL and `rv` -1 asks for the
//! newest state (the inconsistent continuation offered after compaction). Clients treat it as
//! opaque. [`cut`] is pure; [`serve`] answers a LIST and chooses the projection a page is cut from:
//! the first page from the present (or the time-travel state asked for), a later page from the
//! present while no object of the kind has changed since the list's resourceVersion
//! ([`crate::command::Hub::kind_changed_at`]), else from the state at that resourceVersion
//! ([`crate::store::Store::state_at`], on the blocking pool).

use super::errors::ApiError;
use super::selectors::{FieldQuery, LabelQuery};
use crate::command::Hub;
use crate::model::Kind;
use crate::state::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

/// The only token version kube-apiserver writes and reads.
const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// kube-apiserver's message for a continue token whose resourceVersion was compacted away
/// (`k8s.io/apiserver/pkg/storage/etcd3/store.go` `compactedContinue`).
pub const EXPIRED_MESSAGE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

#[derive(Serialize, Deserialize)]
struct Wire {
    v: String,
    rv: i64,
    start: String,
}

/// A decoded continue token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The list's resourceVersion every page is consistent at; `None` (-1 on the wire): the
    /// newest state, without consistency with earlier pages.
    pub rv: Option<u64>,
    /// The first name the next page may hold (the previous page's last name followed by NUL).
    pub start: String,
}

impl Token {
    /// The token's text.
    pub fn encode(&self) -> String {
        let wire = Wire {
            v: TOKEN_VERSION.into(),
            rv: self.rv.map_or(-1, |rv| rv as i64),
            start: self.start.clone(),
        };
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&wire).expect("JSON encodes"))
    }

    /// Reads a token as kube-apiserver's `DecodeContinue` does.
    ///
    /// Errors: 400 BadRequest `invalid continue token: continue key is not valid: <why>`.
    pub fn decode(text: &str) -> Result<Token, ApiError> {
        let invalid =
            |why: String| ApiError::bad_request(format!("invalid continue token: continue key is not valid: {why}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text)
            .map_err(|e| invalid(e.to_string()))?;
        let wire: Wire = serde_json::from_slice(&bytes).map_err(|e| invalid(e.to_string()))?;
        if wire.v != TOKEN_VERSION {
            return Err(invalid(format!(
                "server does not recognize this encoded version {:?}",
                wire.v
            )));
        }
        let rv = match wire.rv {
            -1 => None,
            rv if rv > 0 => Some(rv as u64),
            _ => {
                return Err(invalid(format!(
                    "incorrect encoded start resourceVersion (version {TOKEN_VERSION})"
                )))
            }
        };
        if wire.start.is_empty() {
            return Err(invalid(format!("encoded start key empty (version {TOKEN_VERSION})")));
        }
        Ok(Token { rv, start: wire.start })
    }
}

/// The `limit` query parameter: `None` (no limit) when absent, empty, zero or negative, as
/// Kubernetes reads it.
///
/// Errors: 400 for a value that is not an integer.
pub fn parse_limit(limit: Option<&str>) -> Result<Option<usize>, ApiError> {
    match limit.filter(|l| !l.is_empty()) {
        None => Ok(None),
        Some(l) => {
            let n: i64 = l
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}: must be an integer")))?;
            Ok((n > 0).then_some(n as usize))
        }
    }
}

/// One page of a list: the names of its objects, cut without serialising any object that is
/// not selected by a selector.
#[derive(Debug, Default)]
pub struct Page {
    /// At most `limit` objects' names, in name order.
    pub names: Vec<String>,
    /// `metadata.continue`: present when more objects remain.
    pub next: Option<String>,
    /// `metadata.remainingItemCount`: how many selected objects remain after this page.
    pub remaining: Option<u64>,
}

impl Page {
    /// Adds `continue` and `remainingItemCount` to a list's (or Table's) `metadata`.
    pub fn annotate(&self, metadata: &mut Value) {
        if let Some(next) = &self.next {
            metadata["continue"] = json!(next);
        }
        if let Some(n) = self.remaining {
            metadata["remainingItemCount"] = json!(n);
        }
    }
}

/// Cuts one page from `state`: the objects of `kind` from `start` on that `selected` keeps
/// (`None`: all), at most `limit` of them; when more remain, the token of the next page (at the
/// list's resourceVersion `list_rv`) and their number. Selectors apply before the cut, so a
/// page holds `limit` selected objects (fewer only on the last page). Without selectors no
/// object is serialised here, and the objects before `start` never are.
pub fn cut(
    state: &State,
    kind: Kind,
    start: &str,
    limit: Option<usize>,
    list_rv: u64,
    selected: Option<&dyn Fn(&Value) -> bool>,
) -> Page {
    let keep = |name: &str| match selected {
        None => true,
        Some(f) => state.get_json(kind, name).is_some_and(|o| f(&o)),
    };
    let mut page = Page::default();
    let mut names = state.names_from(kind, start);
    for name in names.by_ref() {
        if !keep(name) {
            continue;
        }
        if limit.is_some_and(|l| page.names.len() >= l) {
            let rest = names.filter(|n| keep(n)).count() as u64;
            let last = page.names.last().map_or("", String::as_str);
            page.next = Some(
                Token {
                    rv: Some(list_rv),
                    start: format!("{last}\0"),
                }
                .encode(),
            );
            page.remaining = Some(1 + rest);
            break;
        }
        page.names.push(name.to_string());
    }
    page
}

/// 410 Expired for a continue token whose resourceVersion is older than the retained log,
/// with kube-apiserver's message and, in `metadata.continue`, a token that continues from the
/// same name in the newest state (an inconsistent remainder, if the client wants it).
pub fn expired(start: &str) -> Response {
    let next = Token {
        rv: None,
        start: start.to_string(),
    }
    .encode();
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {"continue": next}, "status": "Failure",
        "message": EXPIRED_MESSAGE, "reason": "Expired", "details": {}, "code": 410,
    });
    (StatusCode::GONE, Json(body)).into_response()
}

/// What a LIST asks for beyond the kind: selectors, the page and the output shape.
#[derive(Clone)]
pub(super) struct ListRequest {
    pub kind: Kind,
    pub labels: LabelQuery,
    pub fields: FieldQuery,
    pub limit: Option<usize>,
    /// `Some(include)`: a `meta.k8s.io/v1` Table with `includeObject=<include>`.
    pub table: Option<String>,
}

impl ListRequest {
    fn selects(&self) -> bool {
        self.labels != LabelQuery::default() || self.fields != FieldQuery::default()
    }

    fn selected(&self, o: &Value) -> bool {
        self.labels.matches(o) && self.fields.matches(o)
    }

    /// This request's page of `state` from `start`, for a list at `list_rv`.
    fn cut(&self, state: &State, start: &str, list_rv: u64) -> Page {
        let f = |o: &Value| self.selected(o);
        let selector: Option<&dyn Fn(&Value) -> bool> = if self.selects() { Some(&f) } else { None };
        cut(state, self.kind, start, self.limit, list_rv, selector)
    }

    /// The list (or Table) response of this request's page of `state` from `start`, served at
    /// resourceVersion `rv`. A JSON list is written straight from the typed objects into the
    /// response body (kube-apiserver's watch cache serves lists the same way: encoded objects,
    /// no intermediate tree); a Table is written the same way, each row from the typed object
    /// ([`super::table::from_state`]).
    fn respond(&self, hub: &Hub, state: &State, start: &str, rv: u64) -> Response {
        let page = self.cut(state, start, rv);
        if let Some(include) = &self.table {
            let mut metadata = json!({"resourceVersion": rv.to_string()});
            page.annotate(&mut metadata);
            let t = super::table::from_state(state, self.kind, &page.names, hub.keys(), &metadata, include);
            return super::table::table_response(t);
        }
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        page.annotate(&mut metadata);
        let head = json!({
            "apiVersion": self.kind.api_version(hub.group()),
            "kind": format!("{}List", self.kind.as_str()),
            "metadata": metadata,
        })
        .to_string();
        let mut body = Vec::with_capacity(head.len() + 16 + page.names.len() * 1024);
        // `{...head fields` then `,"items":[...]}`: the head's closing brace is replaced.
        body.extend_from_slice(&head.as_bytes()[..head.len() - 1]);
        body.extend_from_slice(b",\"items\":[");
        for (i, name) in page.names.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            // The page's names were cut from this very state: each is present.
            let written = state.write_json(self.kind, name, &mut body);
            debug_assert!(written, "{name} was cut from this state");
        }
        body.extend_from_slice(b"]}");
        ([(axum::http::header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

/// Answers a LIST: the first page (or the whole list without `limit`) from `past` (a
/// time-travel read) or the present, or the page a continue token names. The page is cut and
/// encoded on the blocking pool from an immutable snapshot of the projection, so a long list
/// holds no lock and no async worker.
///
/// Errors: 410 Expired ([`expired`]) when the token's resourceVersion was compacted away; 504
/// for a token from the future (after waiting for it, as other reads); 500 for a store error.
pub(super) async fn serve(
    hub: &Arc<Hub>,
    req: ListRequest,
    token: Option<Token>,
    past: Option<State>,
) -> Result<Response, ApiError> {
    /// Where the page is cut from.
    enum Source {
        /// This projection, at this list resourceVersion.
        Held(Arc<State>, u64),
        /// The state at this resourceVersion, read from the log.
        At(u64),
    }
    let (source, start) = match token {
        None => {
            let state = past.map_or_else(|| hub.state(), Arc::new);
            let rv = state.seq;
            (Source::Held(state, rv), String::new())
        }
        // The inconsistent remainder offered with a 410: the newest state, its own version.
        Some(Token { rv: None, start }) => {
            let state = hub.state();
            let rv = state.seq;
            (Source::Held(state, rv), start)
        }
        Some(Token { rv: Some(rv), start }) => {
            if rv < hub.store().oldest_readable() {
                return Ok(expired(&start));
            }
            super::request::wait_for_resource_version(hub, rv).await?;
            let state = hub.state();
            if hub.kind_changed_at(req.kind) <= rv {
                // No object of the kind changed since the list's version: the present is it.
                (Source::Held(state, rv), start)
            } else {
                (Source::At(rv), start)
            }
        }
    };
    let hub = hub.clone();
    super::support::off_runtime(move || match source {
        Source::Held(state, rv) => Ok(req.respond(&hub, &state, &start, rv)),
        Source::At(rv) => match hub.store().state_at(rv) {
            Ok(then) => Ok(req.respond(&hub, &then, &start, rv)),
            Err(crate::store::StoreError::Compacted { .. }) => Ok(expired(&start)),
            Err(e) => Err(super::points::store_error(e)),
        },
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_bad_ones_are_refused() {
        for t in [
            Token {
                rv: Some(42),
                start: "worker-1\0".into(),
            },
            Token {
                rv: None,
                start: "a\0".into(),
            },
        ] {
            assert_eq!(Token::decode(&t.encode()).unwrap(), t);
        }
        // kube-apiserver's own encoding of {"v":"meta.k8s.io/v1","rv":42,"start":"worker-1\u0000"}
        let theirs = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(br#"{"v":"meta.k8s.io/v1","rv":42,"start":"worker-1\u0000"}"#);
        assert_eq!(Token::decode(&theirs).unwrap().start, "worker-1\0");
        for (bad, why) in [
            ("%%%".to_string(), "continue key is not valid: "),
            (
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"v":"v2","rv":1,"start":"a"}"#),
                "server does not recognize this encoded version",
            ),
            (
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(br#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
                "incorrect encoded start resourceVersion",
            ),
            (
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"v":"meta.k8s.io/v1","rv":3,"start":""}"#),
                "encoded start key empty",
            ),
        ] {
            let e = Token::decode(&bad).unwrap_err();
            assert_eq!(e.code, StatusCode::BAD_REQUEST);
            assert!(
                e.message
                    .starts_with("invalid continue token: continue key is not valid: "),
                "{}",
                e.message
            );
            assert!(e.message.contains(why), "{}", e.message);
        }
    }

    #[test]
    fn limits() {
        assert_eq!(parse_limit(None).unwrap(), None);
        assert_eq!(parse_limit(Some("0")).unwrap(), None);
        assert_eq!(parse_limit(Some("-3")).unwrap(), None);
        assert_eq!(parse_limit(Some("500")).unwrap(), Some(500));
        assert!(parse_limit(Some("ten")).is_err());
    }
}
