//! `/openapi/v2`: one Swagger 2.0 document with the definitions of every kind the OpenAPI v3
//! documents describe, in the form each client asks for: protobuf (gnostic's
//! `openapi.v2.Document`, `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), which
//! is what kubectl asks for and the only form it decodes (client-go `DiscoveryClient.
//! OpenAPISchema` unmarshals the body as that message), or JSON.
//!
//! kubectl needs it to apply a `List` (`kubectl get -o yaml` of several objects): its
//! field-validation check answers "unsupported" for the kind `v1/List`
//! (`k8s.io/cli-runtime/pkg/resource/query_param_verifier_v3.go` `HasSupport`), so kubectl
//! validates a List on the client with the v2 schemas (`k8s.io/kubectl/pkg/validation/schema.go`
//! `validateList`), and without `/openapi/v2` every such apply fails unless
//! `--validate=false`. Schemas are the v3 ones converted to v2: `#/definitions/` references,
//! no `nullable` or `anyOf`, and a subtree that preserves unknown fields left untyped (v2 cannot
//! say so; kubectl then checks nothing inside it, as for CRDs).

use serde_json::{json, Map, Value};

/// The v2 protobuf media types a client may ask for: client-go's `openAPIV2mimePb` (with an
/// `@`, which is not a valid media type character) and kube-openapi's `subTypeProtobuf`.
pub const PROTOBUF_ACCEPTED: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];

/// The Content-Type of the protobuf answer, as kube-openapi's handler sets it
/// (`k8s.io/kube-openapi/pkg/handler/handler.go`: `"application/" + subTypeProtobuf`); the
/// `@` form would not parse (Go's `mime.ParseMediaType`, which client-go's REST client runs on
/// every answer's Content-Type).
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Every definition of the v3 documents listed in `index` (`/openapi/v3`) plus the core one.
fn definitions(configured: &str, groups: &[String]) -> Map<String, Value> {
    let mut docs = vec![super::openapi_kinds::core_document()];
    let index = super::openapi_kinds::index(groups, configured);
    for key in index["paths"].as_object().into_iter().flat_map(|m| m.keys()) {
        if let Some((group, version)) = key.strip_prefix("apis/").and_then(|r| r.split_once('/')) {
            docs.extend(super::openapi_kinds::any_group_document(group, version, configured));
        }
    }
    let mut out = Map::new();
    for d in docs {
        for (name, schema) in d["components"]["schemas"].as_object().into_iter().flatten() {
            out.insert(name.clone(), to_v2(schema));
        }
    }
    out
}

/// A v3 schema in v2's terms. A field that is one other schema (kube-openapi's v3 `allOf` of
/// one `$ref`, beside the field's own description) is that `$ref` with the description, as
/// kube-openapi writes it in v2.
fn to_v2(v: &Value) -> Value {
    let Some(m) = v.as_object() else {
        return v.clone();
    };
    let mut out = Map::new();
    if let Some([one]) = m.get("allOf").and_then(Value::as_array).map(Vec::as_slice) {
        if one.get("$ref").is_some() {
            let mut flat = m.clone();
            flat.remove("allOf");
            flat.extend(
                one.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            return to_v2(&Value::Object(flat));
        }
    }
    let preserve = m.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    for (k, val) in m {
        match k.as_str() {
            "$ref" => {
                let r = val
                    .as_str()
                    .unwrap_or("")
                    .replace("#/components/schemas/", "#/definitions/");
                out.insert(k.clone(), json!(r));
            }
            "nullable" | "anyOf" => {}
            "type" | "properties" | "items" | "additionalProperties" | "required" if preserve => {}
            "properties" => {
                let props = val
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(n, s)| (n.clone(), to_v2(s)))
                    .collect();
                out.insert(k.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" => {
                out.insert(k.clone(), to_v2(val));
            }
            _ => {
                out.insert(k.clone(), val.clone());
            }
        }
    }
    Value::Object(out)
}

/// The Swagger 2.0 document as JSON.
pub fn json_document(configured: &str, groups: &[String]) -> Value {
    json!({"swagger": "2.0", "info": {"title": "mco", "version": env!("CARGO_PKG_VERSION")},
        "paths": {}, "definitions": definitions(configured, groups)})
}

/// The document as gnostic's `openapi.v2.Document` protobuf.
pub fn protobuf_document(configured: &str, groups: &[String]) -> Vec<u8> {
    let mut info = Vec::new();
    string(&mut info, 1, "mco");
    string(&mut info, 2, env!("CARGO_PKG_VERSION"));
    let mut defs = Vec::new();
    for (name, schema) in &definitions(configured, groups) {
        message(&mut defs, 1, &named(name, &encode_schema(schema)));
    }
    let mut doc = Vec::new();
    string(&mut doc, 1, "2.0");
    message(&mut doc, 2, &info);
    message(&mut doc, 8, &[]);
    message(&mut doc, 9, &defs);
    doc
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A length-delimited field (wire type 2).
fn message(out: &mut Vec<u8>, field: u32, body: &[u8]) {
    varint(out, u64::from(field) << 3 | 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    message(out, field, s.as_bytes());
}

fn int(out: &mut Vec<u8>, field: u32, n: i64) {
    varint(out, u64::from(field) << 3);
    varint(out, n as u64);
}

fn boolean(out: &mut Vec<u8>, field: u32, b: bool) {
    varint(out, u64::from(field) << 3);
    varint(out, u64::from(b));
}

/// `NamedSchema` / `NamedAny`: name 1, value 2.
fn named(name: &str, value: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    string(&mut m, 1, name);
    message(&mut m, 2, value);
    m
}

/// `Any` holding `v` as YAML (JSON text is YAML).
fn any(v: &Value) -> Vec<u8> {
    let mut m = Vec::new();
    string(&mut m, 2, &v.to_string());
    m
}

/// gnostic's `openapi.v2.Schema` (field numbers of `openapiv2/OpenAPIv2.proto`).
fn encode_schema(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let Some(m) = v.as_object() else {
        return out;
    };
    for (k, val) in m {
        match (k.as_str(), val) {
            ("$ref", Value::String(s)) => string(&mut out, 1, s),
            ("format", Value::String(s)) => string(&mut out, 2, s),
            ("description", Value::String(s)) => string(&mut out, 4, s),
            ("maxLength", Value::Number(n)) => int(&mut out, 11, n.as_i64().unwrap_or(0)),
            ("maxItems", Value::Number(n)) => int(&mut out, 14, n.as_i64().unwrap_or(0)),
            ("uniqueItems", Value::Bool(b)) => boolean(&mut out, 16, *b),
            ("required", Value::Array(a)) => {
                for r in a.iter().filter_map(Value::as_str) {
                    string(&mut out, 19, r);
                }
            }
            ("enum", Value::Array(a)) => {
                for e in a {
                    message(&mut out, 20, &any(e));
                }
            }
            ("additionalProperties", Value::Bool(b)) => {
                let mut item = Vec::new();
                boolean(&mut item, 2, *b);
                message(&mut out, 21, &item);
            }
            ("additionalProperties", s @ Value::Object(_)) => {
                let mut item = Vec::new();
                message(&mut item, 1, &encode_schema(s));
                message(&mut out, 21, &item);
            }
            ("type", Value::String(t)) => {
                let mut item = Vec::new();
                string(&mut item, 1, t);
                message(&mut out, 22, &item);
            }
            ("items", s @ Value::Object(_)) => {
                let mut item = Vec::new();
                message(&mut item, 1, &encode_schema(s));
                message(&mut out, 23, &item);
            }
            ("properties", Value::Object(props)) => {
                let mut p = Vec::new();
                for (name, s) in props {
                    message(&mut p, 1, &named(name, &encode_schema(s)));
                }
                message(&mut out, 25, &p);
            }
            (x, val) if x.starts_with("x-") => message(&mut out, 31, &named(x, &any(val))),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_in_v2_terms() {
        let v3 = json!({"type": "object", "properties": {
            "metadata": {"$ref": "#/components/schemas/M"},
            "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"a": {"type": "string"}}},
            "n": {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": true, "nullable": true}}});
        assert_eq!(
            to_v2(&v3),
            json!({"type": "object", "properties": {
                "metadata": {"$ref": "#/definitions/M"},
                "config": {"x-kubernetes-preserve-unknown-fields": true},
                "n": {"x-kubernetes-int-or-string": true}}})
        );
        let field = json!({"allOf": [{"$ref": "#/components/schemas/T"}], "description": "d"});
        assert_eq!(to_v2(&field), json!({"$ref": "#/definitions/T", "description": "d"}));
    }

    #[test]
    fn protobuf_fields() {
        // Schema{type: TypeItem{value: "string"}, description: "d"} as protoc encodes it.
        let s = encode_schema(&json!({"type": "string", "description": "d"}));
        assert_eq!(
            s,
            [0xb2, 0x01, 0x08, 0x0a, 0x06, b's', b't', b'r', b'i', b'n', b'g', 0x22, 0x01, b'd']
        );
    }
}
