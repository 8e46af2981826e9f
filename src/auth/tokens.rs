//! Tokens: the identity a bearer token carries ([`identity`]), the labels a node token may
//! carry, and secret generation and hashing.

use super::{TokenKind, AUTHENTICATED, BOOTSTRAPPERS, BOOTSTRAP_PREFIX, MASTERS, NODES, NODE_PREFIX, READERS};
use sha2::Digest;

/// Errors of [`identity`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("a node token needs --node NAME")]
    NodeMissing,
    #[error("--node is only for node tokens")]
    NodeNotAllowed,
    #[error("--name is not for node or bootstrap tokens: their identity is fixed (system:node:<node>, system:bootstrap:<id>)")]
    NameNotAllowed,
    #[error("--label is only for node tokens (the labels its node registers with)")]
    LabelsNotAllowed,
    #[error("invalid {what} {value:?}: {message}")]
    Invalid {
        what: &'static str,
        value: String,
        message: String,
    },
}

/// The identity (user name, groups) of a new token of `kind` with id `id`: admin `name` (or
/// `admin`) in `system:masters`; reader `name` (or `reader`) in `mco:readers`;
/// `system:node:<node>` in `system:nodes`; `system:bootstrap:<id>` in `system:bootstrappers`.
/// Every identity is also in `system:authenticated`.
///
/// Errors: a node token without a node; a node for another kind; a name for node or bootstrap
/// tokens; a node that is not a valid object name; a name with other characters than letters,
/// digits and `._@:-` (a comma or `=` would break history's `actor=` selector), or naming a
/// system user, a controller or the server itself (whose actor names the history shows:
/// a token must not be able to pass for them).
pub fn identity(
    kind: TokenKind,
    id: &str,
    node: Option<&str>,
    name: Option<&str>,
) -> Result<(String, Vec<String>), TokenError> {
    let name = name.filter(|n| !n.is_empty());
    if let Some(n) = name {
        if matches!(kind, TokenKind::Node | TokenKind::Bootstrap) {
            return Err(TokenError::NameNotAllowed);
        }
        let charset_ok = n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '@' | ':' | '-'));
        // The default names belong to their kinds: a reader called "admin" would read as the
        // admin in the history and in 403 messages.
        let other_default = (n == "admin" && kind != TokenKind::Admin) || (n == "reader" && kind != TokenKind::Reader);
        let reserved = n.starts_with("system:") || n.starts_with("controller:") || n == "mco-server" || other_default;
        if !charset_ok || reserved || n.len() > 253 {
            return Err(TokenError::Invalid {
                what: "--name",
                value: n.to_string(),
                message: "must be at most 253 characters of letters, digits, '.', '_', '@', ':' and '-', and not \
                          name a system user (\"system:...\"), a controller (\"controller:...\"), \"mco-server\", or the \
                          default name of another kind (\"admin\", \"reader\")"
                    .into(),
            });
        }
    }
    if node.is_some() && kind != TokenKind::Node {
        return Err(TokenError::NodeNotAllowed);
    }
    let (user, group) = match kind {
        TokenKind::Admin => (name.unwrap_or("admin").to_string(), MASTERS),
        TokenKind::Reader => (name.unwrap_or("reader").to_string(), READERS),
        TokenKind::Node => {
            let n = node.filter(|n| !n.is_empty()).ok_or(TokenError::NodeMissing)?;
            let errs = crate::model::dns1123_subdomain_errors(n);
            if let Some(msg) = errs.first() {
                return Err(TokenError::Invalid {
                    what: "--node",
                    value: n.to_string(),
                    message: msg.clone(),
                });
            }
            (format!("{NODE_PREFIX}{n}"), NODES)
        }
        TokenKind::Bootstrap => (format!("{BOOTSTRAP_PREFIX}{id}"), BOOTSTRAPPERS),
    };
    Ok((user, vec![group.to_string(), AUTHENTICATED.to_string()]))
}

/// Checks the labels of a new token of `kind` ([`TokenRecord::labels`]): only node tokens
/// have them, and each is a valid Kubernetes label (a qualified key, a label value).
///
/// Errors: [`TokenError::LabelsNotAllowed`]; [`TokenError::Invalid`] naming the label and
/// apimachinery's message.
pub fn check_token_labels(
    kind: TokenKind,
    labels: &std::collections::BTreeMap<String, String>,
) -> Result<(), TokenError> {
    if labels.is_empty() {
        return Ok(());
    }
    if kind != TokenKind::Node {
        return Err(TokenError::LabelsNotAllowed);
    }
    for (k, v) in labels {
        let errs = crate::model::qualified_name_errors(k);
        let (value, errs) = if errs.is_empty() {
            (v, crate::model::label_value_errors(v))
        } else {
            (k, errs)
        };
        if let Some(msg) = errs.first() {
            return Err(TokenError::Invalid {
                what: "--label",
                value: value.clone(),
                message: msg.clone(),
            });
        }
    }
    Ok(())
}

/// A new secret: 256 bits from the OS random source, as 64 lower-case hex digits, with the
/// `mco_` prefix secret scanners can match.
///
/// Panics if the OS has no random source (no safe fallback exists).
pub fn new_secret() -> String {
    format!("mco_{}", hex::encode(random_bytes::<32>()))
}

/// A new token id: 48 random bits as 12 hex digits.
pub fn new_id() -> String {
    hex::encode(random_bytes::<6>())
}

pub(super) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the OS random source works");
    b
}

/// Lower-case hex SHA-256 of a secret: what the log stores and requests are looked up by.
pub fn hash(secret: &str) -> String {
    hex::encode(sha2::Sha256::digest(secret.as_bytes()))
}
