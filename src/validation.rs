//! Field-level validation errors shared by manifests, Ignition and the API.
//!
//! An [`Invalid`] names the object and carries one [`FieldError`] per bad field, with the field's
//! path as Kubernetes prints it (`spec.config.storage.files[2].mode`). The API turns it into a
//! `Status` with reason `Invalid` and one cause per field; the CLI prints it as text.

use std::fmt;

/// The JSON type of `v` as Go's `encoding/json` names it in its errors (`json: cannot
/// unmarshal array into Go value of type ...`): `array`, `string`, `number`, `bool`, `object`;
/// and `null`.
pub fn json_type(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// One bad field: its path from the object root and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path such as `spec.config.storage.files[2].mode`.
    pub field: String,
    /// Human message naming the rule, e.g. `invalid mode 01204 for /etc/foo, cannot exceed 0777`
    /// (MCO's text: Go's `%#o` prints octal with a leading `0`).
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// An object refused as a whole, with every bad field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// `MachineConfig`, `MachineConfigPool`, ...
    pub kind: String,
    /// Object name (may be empty when the name itself is missing).
    pub name: String,
    pub causes: Vec<FieldError>,
}

impl fmt::Display for Invalid {
    /// Kubernetes' wording: `MachineConfig "x" is invalid: spec.config...: msg, other: msg`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {:?} is invalid: ", self.kind, self.name)?;
        for (i, c) in self.causes.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{c}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Invalid {}
