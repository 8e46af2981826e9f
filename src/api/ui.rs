//! The web dashboard's static files: `web/` embedded in the binary (rust-embed, in debug builds
//! too) and served at `/ui/`.
//!
//! Owns only serving: content types, validators, the single-page fallback for view URLs and
//! the browser redirect from `/`. The page itself talks to the same public API as kubectl and
//! the CLI (lists, watches, merge patches, `history.mco.dev/v1`); this module adds no endpoint
//! of its own for it.

use super::ApiError;
use axum::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;
use rust_embed::RustEmbed;

/// The files under `web/`, compiled into the binary.
#[derive(RustEmbed)]
#[folder = "web/"]
struct Assets;

/// Where the dashboard is served; `mco up` prints `http://ADDR` followed by this.
pub const UI_PATH: &str = "/ui/";

/// The dashboard loads nothing but its own files and talks only to this server.
const CSP: &str = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; \
                   form-action 'self'; frame-ancestors 'none'";

/// `GET /`, `/ui`, `/ui/` and `/ui/{*path}`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(root))
        .route("/ui", get(|| async { Redirect::permanent(UI_PATH) }))
        .route(
            "/ui/",
            get(|headers: HeaderMap| async move { asset("index.html", &headers) }),
        )
        .route(
            "/ui/{*path}",
            get(|Path(path): Path<String>, headers: HeaderMap| async move { asset(&path, &headers) }),
        )
}

/// `GET /`: a browser (one that accepts `text/html`) is sent to the dashboard; any other
/// client keeps the API's answer for an unknown path (a 404 `Status`), as before the dashboard.
async fn root(headers: HeaderMap) -> Response {
    if wants_html(&headers) {
        Redirect::to(UI_PATH).into_response()
    } else {
        ApiError::not_found_path().into_response()
    }
}

/// Whether the `Accept` header names `text/html` (browsers' navigations do; kubectl, curl and
/// the CLI do not).
pub fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            t.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("text/html")
        })
}

/// Whether a path names a view of the single-page app (no file extension in its last
/// segment), which is answered with `index.html` so that view URLs can be shared and reloaded.
pub fn is_view_path(path: &str) -> bool {
    !path.rsplit('/').next().unwrap_or("").contains('.')
}

/// One embedded file with its content type and a strong `ETag` (its SHA-256); `If-None-Match`
/// answers 304. Unknown files answer 404, unknown view paths `index.html`.
fn asset(path: &str, headers: &HeaderMap) -> Response {
    let file = match Assets::get(path) {
        Some(f) => f,
        None if is_view_path(path) => match Assets::get("index.html") {
            Some(f) => f,
            None => return ApiError::not_found_path().into_response(),
        },
        None => return ApiError::not_found_path().into_response(),
    };
    let etag = format!("\"{}\"", hex::encode(file.metadata.sha256_hash()));
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if matches {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        file.data.into_owned().into_response()
    };
    let h = resp.headers_mut();
    let mime = file.metadata.mimetype();
    let ct = if mime.starts_with("text/") || mime.ends_with("javascript") || mime.ends_with("json") {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_string()
    };
    if let Ok(v) = HeaderValue::from_str(&ct) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    // Revalidate each time: the files change with the binary, and the check is a 304.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsers_are_told_apart_by_accept() {
        let check = |accept: &str, want: bool| {
            let mut h = HeaderMap::new();
            h.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
            assert_eq!(wants_html(&h), want, "{accept}");
        };
        check("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", true);
        check("application/json", false);
        check("*/*", false);
        check("application/json;as=Table;v=v1;g=meta.k8s.io,application/json", false);
        assert!(!wants_html(&HeaderMap::new()));
    }

    #[test]
    fn view_paths_have_no_extension() {
        assert!(is_view_path("pools"));
        assert!(is_view_path("pool/worker"));
        assert!(!is_view_path("app.js"));
        assert!(!is_view_path("vendor/x.css"));
    }

    #[test]
    fn index_and_modules_are_embedded() {
        assert!(Assets::get("index.html").is_some());
        assert!(Assets::get("app.js").is_some());
    }

    /// Every file under `web/`, in subfolders too, is served under its relative path.
    #[test]
    fn every_web_file_is_embedded() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(&p, out);
                } else {
                    out.push(p);
                }
            }
        }
        let web = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("web");
        let mut files = Vec::new();
        walk(&web, &mut files);
        assert!(files.len() > 1);
        for f in files {
            let rel = f.strip_prefix(&web).unwrap().to_str().unwrap().replace('\\', "/");
            assert!(Assets::get(&rel).is_some(), "web/{rel} is not embedded");
        }
    }
}
