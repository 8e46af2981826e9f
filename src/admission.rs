//! Admission of one object of any kind, before the hub turns it into an event: the shape every
//! write relies on ([`check_shape`]), the typed decode that names the offending field, and each
//! kind's semantic validation (MachineConfig and pool rules in [`crate::manifest`], the
//! MachineConfiguration rules in [`crate::disruption`], the generated kinds in
//! [`crate::generate`], the Lease rules in [`crate::model::validate_lease`], MachineConfigNode's in
//! [`crate::model::machine_config_node`]), with the object re-serialized in canonical shape ([`normalize`]).
//! Pure: no store, no hub; [`crate::command::Hub`] calls it on every create and update.

use crate::model::{Kind, MachineConfig, MachineConfigPool, Node};
use crate::validation::{FieldError, Invalid};
use serde_json::{json, Value};

/// Why an object was refused at admission: a body that cannot be handled as its kind
/// (kube-apiserver's 400 BadRequest) or an object that breaks a rule (422 Invalid, naming the
/// field).
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    #[error(transparent)]
    Invalid(#[from] Invalid),
    #[error("{0}")]
    BadRequest(String),
}

/// `metadata.name` of a JSON object, `""` when absent.
pub fn object_name(v: &Value) -> String {
    v["metadata"]["name"].as_str().unwrap_or("").to_string()
}

/// The key `object` of `kind` is stored and addressed under: `<namespace>/<name>` for a
/// namespaced kind ([`crate::model::namespaced_key`]), its name otherwise.
pub fn object_key(kind: Kind, v: &Value) -> String {
    let name = object_name(v);
    if !kind.is_namespaced() {
        return name;
    }
    crate::model::namespaced_key(v["metadata"]["namespace"].as_str().unwrap_or(""), &name)
}

/// Checks the shape every write relies on before it touches the object: a JSON object whose
/// `metadata`, when present and not null, is an object too. Everything deeper is judged by the
/// typed decode ([`normalize`]), which names the field.
///
/// Errors: BadRequest with kube-apiserver's decoding prefix and Go's message, e.g.
/// `MachineConfig in version "v1" cannot be handled as a MachineConfig: json: cannot unmarshal
/// array into Go value of type map[string]interface {}`, or `... into Go struct field
/// MachineConfig.metadata of type v1.ObjectMeta`.
pub fn check_shape(kind: Kind, object: &Value) -> Result<(), AdmissionError> {
    let prefix = || {
        format!(
            "{k} in version \"{v}\" cannot be handled as a {k}",
            k = kind.as_str(),
            v = kind.info().version
        )
    };
    if !object.is_object() {
        return Err(AdmissionError::BadRequest(format!(
            "{}: json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            prefix(),
            crate::validation::json_type(object)
        )));
    }
    match object.get("metadata") {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(m) => Err(AdmissionError::BadRequest(format!(
            "{}: json: cannot unmarshal {} into Go struct field {}.metadata of type v1.ObjectMeta",
            prefix(),
            crate::validation::json_type(m),
            kind.as_str()
        ))),
    }
}

/// Parses `object` as `kind` (type errors name the field), validates it, and re-serializes it
/// in canonical shape with `apiVersion`/`kind` filled in.
pub fn normalize(kind: Kind, object: Value, group: &str) -> Result<Value, AdmissionError> {
    normalize_with(kind, object, group, crate::limits::ContentLimits::default())
}

/// [`normalize`] with the limits of a MachineConfig's files, decoded and decompressed: each
/// ([`crate::limits::Limits::max_file_bytes`]) and together
/// ([`crate::limits::Limits::max_object_contents_bytes`], or the rendered config's limit).
pub fn normalize_with(
    kind: Kind,
    object: Value,
    group: &str,
    max_file_bytes: crate::limits::ContentLimits,
) -> Result<Value, AdmissionError> {
    decode_checked(kind, object, group, Some(max_file_bytes))
}

/// The typed round trip of [`normalize`] without the semantic validation: type errors name the
/// field; unknown fields are dropped (compare with the input to find them).
pub fn decode(kind: Kind, object: Value, group: &str) -> Result<Value, AdmissionError> {
    decode_checked(kind, object, group, None)
}

/// [`decode`], then, with `check` (the file size limit), [`validate`]. The kinds with a typed
/// model (Node, MachineConfig, MachineConfigPool) are validated on the typed object the decode
/// parsed, before it is serialized: one parse per write, not a second one from the result (a
/// node patch, the fleet's commonest write, was parsed twice).
fn decode_checked(
    kind: Kind,
    object: Value,
    group: &str,
    check: Option<crate::limits::ContentLimits>,
) -> Result<Value, AdmissionError> {
    let name = object_name(&object);
    let invalid = |field: String, message: String| Invalid {
        kind: kind.to_string(),
        name: name.clone(),
        causes: vec![FieldError::new(field, message)],
    };
    // A typed kind's own semantic rules (`check` only): any cause refuses the object.
    let refuse_any = |causes: Vec<FieldError>| match causes.is_empty() {
        true => Ok(()),
        false => Err(Invalid {
            kind: kind.to_string(),
            name: name.clone(),
            causes,
        }),
    };
    if let Some(k) = object.get("kind").and_then(Value::as_str) {
        if !k.is_empty() && k != kind.as_str() {
            return Err(AdmissionError::BadRequest(format!("the body is a {k}, not a {kind}")));
        }
    }
    let mut out = match kind {
        Kind::MachineConfig => {
            let mc = parse_typed::<MachineConfig>(object).map_err(|(f, m)| invalid(f, m))?;
            if let Some(max_file_bytes) = check {
                crate::manifest::validate_machine_config_with(&mc, max_file_bytes)?;
            }
            serde_json::to_value(mc)
        }
        Kind::MachineConfigPool => {
            let pool = parse_typed::<MachineConfigPool>(object).map_err(|(f, m)| invalid(f, m))?;
            if check.is_some() {
                crate::manifest::validate_pool(&pool)?;
            }
            serde_json::to_value(pool)
        }
        Kind::Node => {
            let mut node = parse_typed::<Node>(object).map_err(|(f, m)| invalid(f, m))?;
            fill_node_structs(&mut node);
            if check.is_some() {
                // Kubernetes' metadata rules (MachineConfigs and pools get them from their own rules).
                crate::manifest::validate_node(&node)?;
            }
            serde_json::to_value(node)
        }
        Kind::MachineConfiguration => serde_json::to_value(
            parse_typed::<crate::disruption::MachineConfiguration>(object).map_err(|(f, m)| invalid(f, m))?,
        ),
        Kind::Lease => {
            let lease = parse_typed::<crate::model::Lease>(object).map_err(|(f, m)| invalid(f, m))?;
            if check.is_some() {
                refuse_any(crate::model::validate_lease(&lease))?;
            }
            serde_json::to_value(lease)
        }
        Kind::MachineConfigNode => {
            use crate::model::machine_config_node as mcn;
            let m = parse_typed::<mcn::MachineConfigNode>(object).map_err(|(f, m)| invalid(f, m))?;
            if check.is_some() {
                refuse_any(mcn::validate_machine_config_node(&m))?;
            }
            serde_json::to_value(m)
        }
        Kind::RolloutPolicy => {
            let p = parse_typed::<crate::model::RolloutPolicy>(object).map_err(|(f, m)| invalid(f, m))?;
            if check.is_some() {
                refuse_any(crate::rollout::policy::validate(&p))?;
            }
            serde_json::to_value(p)
        }
        Kind::DriftPolicy => {
            let p = parse_typed::<crate::model::DriftPolicy>(object).map_err(|(f, m)| invalid(f, m))?;
            if check.is_some() {
                let causes = crate::drift::validate(&p);
                if !causes.is_empty() {
                    return Err(Invalid {
                        kind: kind.to_string(),
                        name,
                        causes,
                    }
                    .into());
                }
            }
            serde_json::to_value(p)
        }
        k => Ok(crate::generate::decode(k, object).map_err(|(f, m)| invalid(f, m))?),
    }
    .expect("model objects serialize");
    out["apiVersion"] = json!(kind.api_version(group));
    out["kind"] = json!(kind.as_str());
    if check.is_some() {
        validate(kind, &out)?;
    }
    Ok(out)
}

/// Fills in what kube-apiserver always serializes for a Node, because its Go types hold them
/// as structs, not pointers (`k8s.io/api/core/v1` `Node.Spec`, `Node.Status`,
/// `NodeStatus.DaemonEndpoints`, `NodeStatus.NodeInfo`): `spec: {}`, and a status with
/// `daemonEndpoints.kubeletEndpoint.Port` 0 and every `nodeInfo` string, empty until the node
/// reports them. Clients read `node.spec.unschedulable` and `node.status.nodeInfo` without
/// checking for absence (the Python client raises AttributeError on a missing `spec`).
fn fill_node_structs(node: &mut Node) {
    use k8s_openapi::api::core::v1::{DaemonEndpoint, NodeDaemonEndpoints};
    node.spec.get_or_insert_with(Default::default);
    let status = node.status.get_or_insert_with(Default::default);
    let endpoints = status.daemon_endpoints.get_or_insert_with(NodeDaemonEndpoints::default);
    endpoints.kubelet_endpoint.get_or_insert(DaemonEndpoint { port: 0 });
    status.node_info.get_or_insert_with(Default::default);
}

/// The semantic validation of a decoded object of a kind without a typed model in
/// [`decode_checked`] (MachineConfiguration, the generated kinds).
fn validate(kind: Kind, decoded: &Value) -> Result<(), AdmissionError> {
    match kind {
        // Validated on their typed objects by `decode_checked`.
        Kind::MachineConfig
        | Kind::MachineConfigPool
        | Kind::Node
        | Kind::Lease
        | Kind::MachineConfigNode
        | Kind::RolloutPolicy
        | Kind::DriftPolicy => {}
        Kind::MachineConfiguration => {
            crate::disruption::check_action_types(decoded)?;
            let m: crate::disruption::MachineConfiguration =
                serde_json::from_value(decoded.clone()).map_err(|e| AdmissionError::BadRequest(e.to_string()))?;
            crate::disruption::validate_machine_configuration(&m)?;
        }
        k => crate::generate::admit(k, decoded)?,
    }
    Ok(())
}

/// Deserializes `v` as `T`; on failure, the path of the offending field and the message.
/// The object is read directly first and only a refused one is read again through
/// `serde_path_to_error` for the path (its tracking allocates a segment per field read).
fn parse_typed<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, (String, String)> {
    if let Ok(t) = T::deserialize(&v) {
        return Ok(t);
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        (
            if path == "." { String::new() } else { path },
            e.into_inner().to_string(),
        )
    })
}
