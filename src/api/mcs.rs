//! The Machine Config Server (MCO `pkg/server/api.go`, `cluster_server.go`, `server.go`;
//! mco-facts section 7): `GET|HEAD /config/<pool>` serves the pool's rendered config as a new
//! node's first-boot Ignition, with the files MCO adds, in the spec version the `Accept` header
//! asks for.
//!
//! Owns the version negotiation ([`ignition_version_for`]), the served config ([`served_config`],
//! pure: a state in, JSON out), the down-translation to older 3.x and to spec 2.2.0, and the
//! router used both inside the API and on the separate listener (MCO's 22623/22624 ports,
//! `mco server --mcs-listen`).

use super::ApiState;
use crate::model::{Keys, MachineConfig};
use crate::state::State as Projection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};

/// Why a config cannot be served; each maps to MCO's status code.
#[derive(Debug, PartialEq, Eq)]
pub enum McsError {
    /// The pool or its rendered config is not there (500, empty body as MCO).
    NotFound(String),
    /// The config cannot be expressed in the requested version (400, mco says why).
    Untranslatable(String),
}

/// The spec version to serve for an `Accept` header, as MCO's `pkg/server/api.go` reads it
/// (mco-facts 7 and 13.17): media types sorted by `q` (stable), the first
/// `application/vnd.coreos.ignition+json` with a parseable `version` decides; any 2.x at or
/// above 2.2 gives 2.2.0; 3.0–3.5 give that minor (patch ignored); newer 3.x gives 3.5.0; 4.x and
/// above are refused. Without a usable entry MCO serves 2.2.0; mco serves its rendered 3.4.0
/// (a documented difference: a spec 3 client is the common case today).
pub fn ignition_version_for(accept: &str) -> Result<String, String> {
    type Entry = (f32, usize, Option<(u64, u64)>);
    let mut entries: Vec<Entry> = Vec::new();
    for (i, media) in accept.split(',').enumerate() {
        let mut parts = media.split(';').map(str::trim);
        let mime = parts.next().unwrap_or("");
        if !mime.eq_ignore_ascii_case("application/vnd.coreos.ignition+json") {
            continue;
        }
        let (mut q, mut version) = (1.0f32, None);
        for p in parts {
            if let Some(v) = p.strip_prefix("q=") {
                q = v.parse().unwrap_or(0.0);
            } else if let Some(v) = p.strip_prefix("version=") {
                let mut n = v.split('.').map(|x| x.parse::<u64>());
                if let (Some(Ok(major)), Some(Ok(minor)), Some(Ok(_))) = (n.next(), n.next(), n.next()) {
                    version = Some((major, minor));
                }
            }
        }
        entries.push((q, i, version));
    }
    entries.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    match entries.into_iter().find_map(|(_, _, v)| v) {
        None => Ok(crate::ignition::RENDERED_VERSION.to_string()),
        Some((2, minor)) if minor >= 2 => Ok("2.2.0".into()),
        Some((3, minor)) if minor <= 5 => Ok(format!("3.{minor}.0")),
        Some((3, _)) => Ok("3.5.0".into()),
        Some((major, minor)) => Err(format!("unsupported Ignition spec version {major}.{minor} requested")),
    }
}

/// A file MCO adds to a served config: mode 0644 (420), overwrite true, a data URL.
fn added_file(path: &str, contents: &[u8]) -> Value {
    use base64::Engine as _;
    json!({"path": path, "mode": 420, "overwrite": true,
        "contents": {"source": format!("data:;base64,{}", base64::engine::general_purpose::STANDARD.encode(contents))}})
}

/// The config a new node of `pool` gets for `version` (mco-facts 7): the rendered config named
/// by `spec.configuration` when `status.updatedMachineCount > 0` (else `status.configuration`),
/// plus `/etc/machine-config-daemon/node-annotations.json` (currentConfig, desiredConfig and
/// firstPivotConfig = the served name, state Done, under the configured group),
/// `/etc/mcs-machine-config-content.json` (the rendered MachineConfig, indented) and
/// `/etc/ignition-machine-config-encapsulated.json` (the MachineConfig with an empty config of
/// the requested version). Below 3.3 the Ignition `kernelArguments.shouldExist` move into the
/// MachineConfig's `spec.kernelArguments` and any `shouldNotExist` is refused. Then the config
/// is written in `version` ([`down_translate`]). `/etc/kubernetes/kubeconfig` is not added:
/// mco has no bootstrap credential yet.
pub fn served_config(state: &Projection, keys: &Keys, pool: &str, version: &str) -> Result<Value, McsError> {
    let p = state
        .pools
        .get(pool)
        .ok_or_else(|| McsError::NotFound(format!("could not fetch pool {pool}: not found")))?;
    let name = if p.status.updated_machine_count > 0 || p.status.configuration.name.is_empty() {
        &p.spec.configuration.name
    } else {
        &p.status.configuration.name
    };
    let mc = state
        .machine_configs
        .get(name)
        .ok_or_else(|| McsError::NotFound(format!("could not fetch config {name}: not found")))?;
    let mut mc: MachineConfig = (**mc).clone();
    let mut config = mc.spec.config.clone().unwrap_or_else(|| json!({"ignition": {}}));
    let minor = |v: &str| v.split('.').nth(1).and_then(|m| m.parse::<u64>().ok()).unwrap_or(0);
    if version.starts_with("2.") || minor(version) < 3 {
        if let Some(k) = config.as_object_mut().and_then(|c| c.remove("kernelArguments")) {
            if k["shouldNotExist"].as_array().is_some_and(|a| !a.is_empty()) {
                return Err(McsError::Untranslatable(format!(
                    "kernelArguments.shouldNotExist cannot be expressed in Ignition {version}"
                )));
            }
            for a in k["shouldExist"].as_array().into_iter().flatten() {
                if let Some(a) = a.as_str() {
                    mc.spec.kernel_arguments.push(a.to_string());
                }
            }
        }
    }
    let annotations = json!({
        keys.current_config(): name, keys.desired_config(): name,
        format!("{}/firstPivotConfig", keys.group): name, keys.state(): "Done",
    });
    let mut encapsulated = mc.clone();
    encapsulated.spec.config = Some(json!({"ignition": {"version": version}}));
    let content = serde_json::to_vec_pretty(&mc).expect("serializes");
    let added = [
        added_file(
            "/etc/machine-config-daemon/node-annotations.json",
            annotations.to_string().as_bytes(),
        ),
        added_file("/etc/mcs-machine-config-content.json", &content),
        added_file(
            "/etc/ignition-machine-config-encapsulated.json",
            &serde_json::to_vec(&encapsulated).expect("serializes"),
        ),
    ];
    let files = config["storage"]["files"].as_array().cloned().unwrap_or_default();
    let mut files: Vec<Value> = files
        .into_iter()
        .filter(|f| !added.iter().any(|a| a["path"] == f["path"]))
        .collect();
    files.extend(added);
    config["storage"]["files"] = Value::Array(files);
    down_translate(config, version)
}

/// Writes a rendered 3.4.0 config in `version`: 3.x by its version field (mco's rendered
/// configs hold only files, units with dropins and the core user, which every 3.x carries;
/// a sha256 verification hash needs 3.1), 2.2.0 as ign-converter's `v32tov22` would (files on
/// the `root` filesystem, units with `enabled`, dropins, users). Errors: what the version
/// cannot express (a file without a source or with `overwrite: false` in 2.2.0, sha256 in 3.0.0).
pub fn down_translate(mut config: Value, version: &str) -> Result<Value, McsError> {
    let untranslatable = |m: String| Err(McsError::Untranslatable(m));
    let files = config["storage"]["files"].as_array().cloned().unwrap_or_default();
    if version == "3.0.0" {
        for f in &files {
            if f["contents"]["verification"]["hash"]
                .as_str()
                .is_some_and(|h| h.starts_with("sha256-"))
            {
                return untranslatable(format!(
                    "file {}: a sha256 verification hash cannot be expressed in Ignition 3.0.0",
                    f["path"].as_str().unwrap_or("")
                ));
            }
        }
    }
    if !version.starts_with("2.") {
        config["ignition"]["version"] = json!(version);
        return Ok(config);
    }
    let mut out_files = Vec::new();
    for f in &files {
        let path = f["path"].as_str().unwrap_or("");
        let Some(source) = f["contents"]["source"].as_str() else {
            return untranslatable(format!(
                "file {path} has no contents source, which Ignition 2.2.0 requires"
            ));
        };
        if f["overwrite"] == json!(false) {
            return untranslatable(format!(
                "file {path} has overwrite false, which Ignition 2.2.0 cannot express"
            ));
        }
        let mut o = json!({"filesystem": "root", "path": path, "contents": {"source": source, "verification": {}}});
        for k in ["mode", "user", "group"] {
            if !f[k].is_null() {
                o[k] = f[k].clone();
            }
        }
        if let Some(c) = f["contents"]["compression"].as_str().filter(|c| !c.is_empty()) {
            o["contents"]["compression"] = json!(c);
        }
        if let Some(h) = f["contents"]["verification"]["hash"].as_str() {
            if !h.starts_with("sha512-") {
                return untranslatable(format!(
                    "file {path}: only sha512 verification hashes exist in Ignition 2.2.0"
                ));
            }
            o["contents"]["verification"]["hash"] = json!(h);
        }
        out_files.push(o);
    }
    let units: Vec<Value> = config["systemd"]["units"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|u| {
            let mut o = json!({"name": u["name"]});
            for k in ["enabled", "mask", "contents"] {
                if !u[k].is_null() {
                    o[k] = u[k].clone();
                }
            }
            let dropins: Vec<Value> = u["dropins"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| json!({"name": d["name"], "contents": d["contents"].as_str().unwrap_or("")}))
                .collect();
            if !dropins.is_empty() {
                o["dropins"] = Value::Array(dropins);
            }
            o
        })
        .collect();
    let mut out =
        json!({"ignition": {"version": "2.2.0"}, "storage": {"files": out_files}, "systemd": {"units": units}});
    if let Some(users) = config["passwd"]["users"].as_array().filter(|u| !u.is_empty()) {
        out["passwd"] = json!({"users": users});
    }
    Ok(out)
}

/// The pool the raw (still percent-encoded) rest of a `/config/...` path names (its last
/// non-empty element, Go's `path.Base`, percent-decoded), or why no pool can have that path: a `.` or `..` element
/// (Go's `ServeMux`, in front of MCO's server, never lets one reach it), an element with an
/// encoded `/`, `\` or NUL, or not UTF-8, or a last element that is not a valid object name
/// (no pool can have it). These are client errors (400), never the 500 of a pool that does
/// not exist.
fn pool_in_path(raw: &str) -> Result<String, String> {
    let mut pool = String::new();
    for seg in raw.split('/').filter(|s| !s.is_empty()) {
        let d = percent_encoding::percent_decode_str(seg)
            .decode_utf8()
            .map_err(|_| format!("the path element {seg:?} is not UTF-8"))?;
        if d == "." || d == ".." || d.contains(['/', '\\', '\0']) {
            return Err(format!("the path element {seg:?} cannot be part of a pool's path"));
        }
        pool = d.into_owned();
    }
    if let Some(msg) = crate::model::dns1123_subdomain_errors(&pool).first() {
        return Err(format!("invalid pool name {pool:?}: {msg}"));
    }
    Ok(pool)
}

/// The MCS routes: `/config/{pool}` (GET and HEAD; other methods 405 with `Allow: GET,HEAD`
/// whoever asks, [`super::method_not_allowed`]) and `/healthz`;
/// anything else 404 with an empty body on the separate listener. `/config/...` needs a token
/// as on the API listener (a bootstrap token is enough: [`crate::auth`]).
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/config/{*pool}", get(config_handler))
        .route("/healthz", get(|| async { StatusCode::OK }))
        .fallback(|| async { StatusCode::NOT_FOUND })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            super::auth::authenticate,
        ))
        .method_not_allowed_fallback(super::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            super::limits::limit_headers,
        ))
        .layer(super::support::catch_panics(state.hub.metrics().clone()))
        .with_state(state)
}

/// `GET|HEAD /config/{pool}`: `Content-Type: application/json` and `Content-Length`; errors
/// with MCO's codes and empty bodies (400 bad version, 500 unknown pool), except a config that
/// cannot be written in the requested version: 400 with the reason.
///
/// The pool is the last element of the path, as MCO takes it (`path.Base`, mco-facts 7):
/// `/config/worker`, `/config/worker/` and `/config/a/worker` all serve `worker`. A path no
/// pool can have ([`pool_in_path`]: `/config/../api/v1/nodes`, `/config/worker%2f..`) is 400
/// with the reason.
pub async fn config_handler(State(st): State<ApiState>, uri: axum::http::Uri, headers: HeaderMap) -> Response {
    let raw = uri.path().strip_prefix("/config/").unwrap_or("");
    let pool = match pool_in_path(raw) {
        Ok(p) => p,
        Err(why) => {
            tracing::info!(path = %uri.path(), error = %why, "Machine Config Server: bad path");
            return (StatusCode::BAD_REQUEST, why).into_response();
        }
    };
    let version = match ignition_version_for(super::request::accept(&headers)) {
        Ok(v) => v,
        Err(e) => {
            tracing::info!(%pool, error = %e, "Machine Config Server: bad Accept");
            return StatusCode::BAD_REQUEST.into_response();
        }
    };
    match served_config(&st.hub.state(), st.hub.keys(), &pool, &version) {
        Ok(config) => ([(header::CONTENT_TYPE, "application/json")], config.to_string()).into_response(),
        Err(McsError::Untranslatable(m)) => (StatusCode::BAD_REQUEST, m).into_response(),
        Err(McsError::NotFound(e)) => {
            tracing::info!(%pool, error = %e, "Machine Config Server: no config");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pool_is_the_last_path_element() {
        for (raw, pool) in [
            ("worker", "worker"),
            ("worker/", "worker"),
            ("a/worker", "worker"),
            ("a/worker//", "worker"),
            ("wor%6Ber", "worker"),
        ] {
            assert_eq!(pool_in_path(raw).as_deref(), Ok(pool), "{raw}");
        }
    }

    #[test]
    fn paths_no_pool_can_have_are_refused() {
        for raw in [
            "../api/v1/nodes",
            "worker/..",
            "worker/.",
            "%2e%2e/api/v1/nodes",
            "worker%2f..",
            "a%2fb/worker",
            "%2fetc",
            "worker%5c",
            "worker%00",
            "%ff",
            "Worker",
            "",
            "/",
        ] {
            assert!(pool_in_path(raw).is_err(), "{raw}");
        }
        assert_eq!(
            pool_in_path("worker/..").unwrap_err(),
            "the path element \"..\" cannot be part of a pool's path"
        );
    }

    #[test]
    fn accept_headers_pick_the_version_as_mco() {
        // TestAcceptHeaders (mco-facts 13.17), with mco's 3.4.0 default.
        let t = "application/vnd.coreos.ignition+json";
        for (accept, want) in [
            ("", Ok("3.4.0")),
            ("text/plain", Ok("3.4.0")),
            (t, Ok("3.4.0")),
            (&*format!("{t};version=2.4.0, {t};version=1;q=0.5"), Ok("2.2.0")),
            (&*format!("{t};version=2.2.0"), Ok("2.2.0")),
            (&*format!("{t};version=3.1.0"), Ok("3.1.0")),
            (&*format!("{t};version=3.5.2"), Ok("3.5.0")),
            (
                &*format!("{t};version=3.2.0;q=0.1, {t};version=3.3.0;q=0.9"),
                Ok("3.3.0"),
            ),
            (&*format!("{t};version=3.99.0"), Ok("3.5.0")),
            (&*format!("{t};version=garbage, {t};version=3.0.0"), Ok("3.0.0")),
        ] {
            assert_eq!(
                ignition_version_for(accept).as_deref(),
                want.map(|s: &str| s),
                "{accept}"
            );
        }
        assert!(ignition_version_for(&format!("{t};version=4.0.0")).is_err());
    }

    fn state_with(config: Value) -> Projection {
        let mut st = Projection::default();
        let mut pool = crate::model::MachineConfigPool::default();
        pool.metadata.name = Some("worker".into());
        pool.spec.configuration.name = "rendered-worker-1".into();
        st.pools.insert("worker".into(), pool.into());
        let mc: MachineConfig = serde_json::from_value(json!({"metadata": {"name": "rendered-worker-1"},
            "spec": {"config": config, "kernelArguments": ["a=1"]}}))
        .unwrap();
        st.machine_configs.insert("rendered-worker-1".into(), mc.into());
        st
    }

    fn encapsulated(cfg: &Value) -> Value {
        let f = cfg["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == "/etc/ignition-machine-config-encapsulated.json")
            .unwrap();
        serde_json::from_slice(&crate::ignition::decode_data_url(f["contents"]["source"].as_str().unwrap()).unwrap())
            .unwrap()
    }

    #[test]
    fn kernel_arguments_below_3_3_move_into_the_machine_config() {
        // mco-facts 7: for versions < 3.3 shouldExist joins spec.kernelArguments; shouldNotExist fails.
        let keys = Keys::default();
        let st = state_with(json!({"ignition": {"version": "3.4.0"}, "kernelArguments": {"shouldExist": ["b=2"]}}));
        let old = served_config(&st, &keys, "worker", "3.2.0").unwrap();
        assert!(old.get("kernelArguments").is_none());
        assert_eq!(encapsulated(&old)["spec"]["kernelArguments"], json!(["a=1", "b=2"]));
        assert_eq!(
            encapsulated(&old)["spec"]["config"],
            json!({"ignition": {"version": "3.2.0"}})
        );
        let new = served_config(&st, &keys, "worker", "3.3.0").unwrap();
        assert_eq!(new["kernelArguments"]["shouldExist"], json!(["b=2"]));
        assert_eq!(encapsulated(&new)["spec"]["kernelArguments"], json!(["a=1"]));
        let st = state_with(json!({"ignition": {"version": "3.4.0"}, "kernelArguments": {"shouldNotExist": ["c"]}}));
        assert!(matches!(
            served_config(&st, &keys, "worker", "3.1.0"),
            Err(McsError::Untranslatable(_))
        ));
        assert!(matches!(
            served_config(&st, &keys, "nope", "3.4.0"),
            Err(McsError::NotFound(_))
        ));
    }

    #[test]
    fn spec_2_2_down_translation() {
        let cfg = json!({"ignition": {"version": "3.4.0"},
            "storage": {"files": [{"path": "/etc/a", "mode": 420, "overwrite": true, "contents": {"source": "data:,a", "compression": ""}}]},
            "systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "[Unit]\n", "dropins": [{"name": "x.conf", "contents": "[Service]\n"}]}]},
            "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k"]}]}});
        let out = down_translate(cfg.clone(), "2.2.0").unwrap();
        assert_eq!(
            out,
            json!({"ignition": {"version": "2.2.0"},
                "storage": {"files": [{"filesystem": "root", "path": "/etc/a", "mode": 420, "contents": {"source": "data:,a", "verification": {}}}]},
                "systemd": {"units": [{"name": "a.service", "enabled": true, "contents": "[Unit]\n", "dropins": [{"name": "x.conf", "contents": "[Service]\n"}]}]},
                "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["k"]}]}})
        );
        // and back: the spec-2 input path translates it to the same files and units
        let back = crate::ignition::spec2::translate(&out, "spec.config").unwrap().config;
        assert_eq!(back["storage"]["files"][0]["contents"]["source"], "data:,a");
        assert_eq!(back["systemd"]["units"][0]["enabled"], true);
        let mut no_source = cfg.clone();
        no_source["storage"]["files"][0]["contents"] = json!({});
        assert!(matches!(down_translate(no_source, "2.2.0"), Err(McsError::Untranslatable(m)) if m.contains("/etc/a")));
        assert_eq!(down_translate(cfg, "3.1.0").unwrap()["ignition"]["version"], "3.1.0");
    }
}
