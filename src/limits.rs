//! Bounded inputs: the limits every untrusted input is held to, as settings with defaults, and
//! the small pure checks that enforce them without first building what they bound.
//!
//! Owns [`Limits`] (carried by the server's [`crate::command::Hub`], set from
//! [`crate::server::ServerConfig::limits`] and the `mco server` / `mco up` flags), the JSON
//! nesting scan ([`check_json_depth`]), the YAML reading budget that refuses alias expansion
//! ("billion laughs") before it happens ([`yaml_options`]) and the capped, streaming gzip
//! decoder ([`gunzip_capped`]) that refuses a gzip bomb after at most `cap + 1` bytes of
//! output. Where each limit is answered with which Kubernetes `Status` is the API's business
//! (`api::limits`); this module only decides and words the refusal.
//!
//! Pure: no IO, no clock. It must not parse manifests or validate objects (manifest, ignition
//! and command do, calling these checks).

use std::io::Read;

/// kube-apiserver's `maxJSONPatchOperations` (`staging/src/k8s.io/apiserver/pkg/endpoints/
/// handlers/patch.go`): a JSON patch with more operations is answered 413.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Default of [`Limits::max_json_depth`].
///
/// kube-apiserver decodes JSON with Go's `encoding/json`, whose scanner refuses more than
/// 10,000 nested arrays and objects (`maxNestingDepth`, "exceeded max depth"). `serde_json`,
/// which mco decodes with, refuses 128 levels ("recursion limit exceeded"), so mco cannot
/// reproduce 10,000; it refuses earlier, with a message naming its own limit. No MachineConfig,
/// pool or Node nests deeper than about 12.
pub const DEFAULT_MAX_JSON_DEPTH: usize = 100;

/// Default of [`Limits::max_documents`]: objects per `mco apply` (documents of the files plus
/// `kind: List` items) and per server-side preview. kubectl has no such limit; 1,000 is far
/// above any real set of MachineConfigs and pools.
pub const DEFAULT_MAX_DOCUMENTS: usize = 1_000;

/// Default of [`Limits::max_file_bytes`]: 16 MiB, the size of one file's contents once its
/// `data:` URL is decoded and, with `compression: gzip`, decompressed. MCO has no such limit
/// (its only bound is the 1.5 MiB object, which gzip multiplies by up to about 1,000); mco
/// adds one because a 1.4 MB gzip bomb would otherwise make every node write a 1 GiB file.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Default of [`Limits::max_rendered_bytes`]: MCO's `MaxMachineConfigSize`
/// (`pkg/controller/render/render_controller.go`), the JSON of a rendered MachineConfig.
pub const DEFAULT_MAX_RENDERED_BYTES: usize = 1_572_864;

/// Default of [`Limits::max_object_contents_bytes`]: 64 MiB, the files' contents of one
/// MachineConfig added up once decoded and decompressed. MCO and Ignition have no such limit
/// (MCO's bound is the 1.5 MiB object, which gzip multiplies by up to about 1,000: 60 files of
/// 15 MiB of zeros fit in it, about 900 MiB written on every node of the pool); mco adds one so
/// that the cost of one object is bounded, not only the cost of each of its files.
pub const DEFAULT_MAX_OBJECT_CONTENTS_BYTES: u64 = 64 * 1024 * 1024;

/// Default of [`Limits::max_rendered_contents_bytes`]: 128 MiB, the files' contents of one
/// rendered MachineConfig (the merge of every MachineConfig a pool selects) added up once
/// decoded and decompressed: what each node of the pool writes at most.
pub const DEFAULT_MAX_RENDERED_CONTENTS_BYTES: u64 = 128 * 1024 * 1024;

/// The limits on the files of one Ignition config ([`crate::ignition::validate_config_with`]):
/// each file's contents and their sum, decoded and decompressed, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentLimits {
    /// Bytes of one file's contents ([`Limits::max_file_bytes`]).
    pub max_file_bytes: u64,
    /// Bytes of all the files' contents together ([`Limits::max_object_contents_bytes`] for
    /// a MachineConfig, [`Limits::max_rendered_contents_bytes`] for a rendered config).
    pub max_total_bytes: u64,
    /// Whether the config is a rendered one (for the wording of the refusal).
    pub rendered: bool,
}

impl Default for ContentLimits {
    /// A MachineConfig's, with the default limits.
    fn default() -> Self {
        Limits::default().object_contents()
    }
}

impl ContentLimits {
    /// The refusal of files whose contents add up past [`ContentLimits::max_total_bytes`], in
    /// Kubernetes' `field.TooLong` wording, naming the limit and its flag.
    pub fn total_refusal(&self) -> String {
        let (what, flag) = if self.rendered {
            ("per rendered config", "--max-rendered-contents-bytes")
        } else {
            ("per MachineConfig", "--max-object-contents-bytes")
        };
        format!(
            "Too long: the files' contents may not add up to more than {} bytes once decoded and \
             decompressed (the limit of all files' contents {what}, {flag})",
            self.max_total_bytes
        )
    }
}

/// Default of [`Limits::max_yaml_alias_events`]: YAML nodes an alias (`*ref`) may replay in
/// one request or manifest file.
pub const DEFAULT_MAX_YAML_ALIAS_EVENTS: usize = 100_000;

/// Default of [`Limits::max_watches_per_client`].
pub const DEFAULT_MAX_WATCHES_PER_CLIENT: usize = 100;

/// Default of [`Limits::max_header_bytes`]: Go's `http.DefaultMaxHeaderBytes` (1 MiB), which
/// kube-apiserver serves with (`net/http`'s `Server.MaxHeaderBytes` unset).
pub const DEFAULT_MAX_HEADER_BYTES: usize = 1024 * 1024;

/// The most [`Limits::max_header_bytes`] can be: a connection's read buffer is sized from it,
/// and a request whose line and headers do not fit the buffer is refused by the HTTP layer
/// with a bare `431` before any handler sees it.
pub const MAX_HEADER_BYTES_CEILING: usize = 16 * 1024 * 1024;

/// Bytes of a request line and its headers as they were sent (`METHOD URI HTTP/1.1\r\n` and
/// `name: value\r\n` each), which [`Limits::max_header_bytes`] bounds; the URL counts in it.
pub fn header_bytes(method: &str, uri: &str, headers: impl Iterator<Item = (usize, usize)>) -> usize {
    method.len() + 1 + uri.len() + " HTTP/1.1\r\n".len() + headers.map(|(n, v)| n + 2 + v + 2).sum::<usize>()
}

/// The input limits of one server. Every violation is refused before anything is appended,
/// with a Kubernetes `Status` naming the limit (README "Bounded inputs" lists them with the
/// Status each gives).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of arrays and objects in a JSON request body (400 BadRequest).
    pub max_json_depth: usize,
    /// Objects in one `mco apply` (CLI) or one preview request (413 RequestEntityTooLarge).
    pub max_documents: usize,
    /// Bytes of one file's contents, decoded and decompressed (422 Invalid, at
    /// `spec.config.storage.files[N].contents.source`).
    pub max_file_bytes: u64,
    /// Bytes of a rendered MachineConfig's JSON (the pool goes RenderDegraded; no node gets it).
    pub max_rendered_bytes: usize,
    /// Bytes of all the files' contents of one MachineConfig, decoded and decompressed (422
    /// Invalid, at `spec.config.storage.files`).
    pub max_object_contents_bytes: u64,
    /// Bytes of all the files' contents of one rendered config, decoded and decompressed (the
    /// pool goes RenderDegraded naming the limit; no node gets it).
    pub max_rendered_contents_bytes: u64,
    /// YAML nodes replayed through aliases in one request body or manifest (400 BadRequest).
    pub max_yaml_alias_events: usize,
    /// Watches one client (identity) may hold open at once (429 TooManyRequests).
    pub max_watches_per_client: usize,
    /// Bytes of a request's line (the URL included) and headers, [`header_bytes`]
    /// (431 RequestHeaderFieldsTooLarge); at most [`MAX_HEADER_BYTES_CEILING`].
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_documents: DEFAULT_MAX_DOCUMENTS,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_rendered_bytes: DEFAULT_MAX_RENDERED_BYTES,
            max_object_contents_bytes: DEFAULT_MAX_OBJECT_CONTENTS_BYTES,
            max_rendered_contents_bytes: DEFAULT_MAX_RENDERED_CONTENTS_BYTES,
            max_yaml_alias_events: DEFAULT_MAX_YAML_ALIAS_EVENTS,
            max_watches_per_client: DEFAULT_MAX_WATCHES_PER_CLIENT,
            max_header_bytes: DEFAULT_MAX_HEADER_BYTES,
        }
    }
}

impl Limits {
    /// The file limits of a MachineConfig: [`Limits::max_file_bytes`] each,
    /// [`Limits::max_object_contents_bytes`] together.
    pub fn object_contents(&self) -> ContentLimits {
        ContentLimits {
            max_file_bytes: self.max_file_bytes,
            max_total_bytes: self.max_object_contents_bytes,
            rendered: false,
        }
    }

    /// The file limits of a rendered config: [`Limits::max_file_bytes`] each,
    /// [`Limits::max_rendered_contents_bytes`] together.
    pub fn rendered_contents(&self) -> ContentLimits {
        ContentLimits {
            max_file_bytes: self.max_file_bytes,
            max_total_bytes: self.max_rendered_contents_bytes,
            rendered: true,
        }
    }
}

/// Checks that `json` nests arrays and objects at most `limit` deep, scanning bytes (strings
/// and their escapes skipped) without building anything, so a body of a million `[` costs one
/// pass and no stack.
///
/// Errors: `the JSON nests deeper than the limit of N levels (at byte B)`.
pub fn check_json_depth(json: &[u8], limit: usize) -> Result<(), String> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in json.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Err(format!(
                        "the JSON nests deeper than the limit of {limit} levels (at byte {i})"
                    ));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// The serde-saphyr options mco reads YAML with: `legacy_octal_numbers` and `strict_booleans`
/// (see [`crate::manifest`]), structural depth bounded by `limits.max_json_depth`, and alias
/// replay bounded by `limits.max_yaml_alias_events`.
///
/// serde-saphyr expands an alias by replaying the anchored events, counting them against
/// `alias_limits.max_total_replayed_events` (1,000,000 by default) and refusing once over it,
/// before building more: a "billion laughs" document of a few hundred bytes (nine levels of ten
/// aliases each) stops after `max_yaml_alias_events` replayed events with `alias replay limit
/// exceeded`. Its budget's ratio heuristic (more than 10 aliases per anchor, from 100 aliases)
/// stays on. go-yaml, which kube-apiserver reads YAML with, refuses the same documents with
/// `yaml: document contains excessive aliasing` (a ratio of decoded to aliased nodes).
pub fn yaml_options(limits: &Limits) -> serde_saphyr::Options {
    serde_saphyr::options! {
        legacy_octal_numbers: true,
        strict_booleans: true,
        budget: serde_saphyr::budget! {
            max_depth: limits.max_json_depth,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: limits.max_yaml_alias_events,
        },
    }
}

/// The serde-saphyr options of YAML request bodies: serde-saphyr's defaults (the API server
/// keeps its YAML 1.1-ish reading of booleans) with depth and alias replay bounded as in
/// [`yaml_options`].
pub fn yaml_budget_options(limits: &Limits) -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: limits.max_json_depth,
        },
        alias_limits: serde_saphyr::alias_limits! {
            max_total_replayed_events: limits.max_yaml_alias_events,
        },
    }
}

/// One line saying why a YAML text was refused: serde-saphyr's message without its source
/// snippet, naming the setting when a limit of `limits` refused it (`... nests deeper than the
/// limit of 100 levels (--max-json-depth)`, `... (--max-yaml-alias-events)`).
pub fn yaml_error_message(e: &serde_saphyr::Error, limits: &Limits) -> String {
    let text = e.without_snippet().to_string();
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.contains("budget breached: Depth") || line.contains("recursion limit exceeded") {
        format!(
            "{line}: the YAML nests deeper than the limit of {} levels (--max-json-depth)",
            limits.max_json_depth
        )
    } else if line.contains("alias replay limit") {
        format!(
            "{line}: aliases replay more than the limit of {} nodes (--max-yaml-alias-events)",
            limits.max_yaml_alias_events
        )
    } else {
        line
    }
}

/// Runs `parse` (a YAML parse bounded by a depth budget of `max_depth`) on a thread whose
/// stack fits that depth: serde-saphyr recurses once or more per nesting level while it
/// builds a value, and in a debug build about 100 flow mappings (`{a: {a: ...}}`) overflow a
/// 2 MiB tokio worker's stack, which aborts the whole process, before the budget can refuse
/// the 101st level. The thread gets 256 KiB per level (at least 16 MiB, at most 1 GiB) of
/// address space, touched only as deep as the input goes.
pub fn on_yaml_stack<T: Send>(max_depth: usize, parse: impl FnOnce() -> T + Send) -> T {
    let stack = max_depth.saturating_mul(256 * 1024).clamp(16 << 20, 1 << 30);
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("yaml-parse".into())
            .stack_size(stack)
            .spawn_scoped(scope, parse)
            .expect("a parser thread starts")
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Why [`gunzip_capped`] refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GunzipError {
    /// More than `cap` bytes would come out (a gzip bomb, or simply too large a file).
    TooLarge { cap: u64 },
    /// Not gzip, truncated, a bad checksum, or empty (the message of Go's `compress/gzip`
    /// where it has one).
    Corrupt(String),
}

impl std::fmt::Display for GunzipError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GunzipError::TooLarge { cap } => write!(
                f,
                "Too long: may not be more than {cap} bytes once decompressed (the limit of one file's contents, --max-file-bytes)"
            ),
            GunzipError::Corrupt(m) => write!(f, "gzip contents do not decompress: {m}"),
        }
    }
}

/// Decompresses gzip as Go's `compress/gzip` reader does for Ignition and MCO (every member of
/// a multi-member stream, checksums verified, empty input refused), producing at most `cap`
/// bytes: decompression streams and stops as soon as byte `cap + 1` would come out, so a gzip
/// bomb costs at most `cap` bytes of memory and the CPU to inflate them.
pub fn gunzip_capped(bytes: &[u8], cap: u64) -> Result<Vec<u8>, GunzipError> {
    if bytes.is_empty() {
        return Err(GunzipError::Corrupt("EOF (the source is empty)".to_string()));
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(bytes)
        .take(cap.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| GunzipError::Corrupt(e.to_string()))?;
    if out.len() as u64 > cap {
        return Err(GunzipError::TooLarge { cap });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn json_depth_counts_brackets_outside_strings() {
        let check = |s: &str, limit| check_json_depth(s.as_bytes(), limit);
        assert_eq!(check(r#"{"a":[1,{"b":2}]}"#, 3), Ok(()));
        assert_eq!(
            check(r#"{"a":[1,{"b":2}]}"#, 2),
            Err("the JSON nests deeper than the limit of 2 levels (at byte 8)".into())
        );
        // Brackets inside strings, escaped quotes included, do not count.
        assert_eq!(check(r#"{"a":"[[[\"[[[{{{"}"#, 1), Ok(()));
        let deep = "[".repeat(1_000_000);
        assert!(check(&deep, DEFAULT_MAX_JSON_DEPTH)
            .unwrap_err()
            .contains("limit of 100 levels (at byte 100)"));
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_cap() {
        // 64 MiB of zeros compress to about 64 KiB.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 100_000, "{}", bomb.len());
        let t = std::time::Instant::now();
        assert_eq!(
            gunzip_capped(&bomb, 1 << 20),
            Err(GunzipError::TooLarge { cap: 1 << 20 })
        );
        // Inflating 1 MiB, not 64: well under a second even unoptimised.
        assert!(t.elapsed() < std::time::Duration::from_secs(2), "{:?}", t.elapsed());
        assert_eq!(
            GunzipError::TooLarge { cap: 1 << 20 }.to_string(),
            "Too long: may not be more than 1048576 bytes once decompressed (the limit of one file's contents, --max-file-bytes)"
        );
        // At the cap exactly: accepted.
        assert_eq!(gunzip_capped(&gzip(&[7u8; 1000]), 1000).unwrap(), vec![7u8; 1000]);
        assert_eq!(
            gunzip_capped(&gzip(&[7u8; 1001]), 1000),
            Err(GunzipError::TooLarge { cap: 1000 })
        );
        assert!(matches!(gunzip_capped(b"", 10), Err(GunzipError::Corrupt(_))));
        assert!(matches!(gunzip_capped(b"not gzip", 10), Err(GunzipError::Corrupt(_))));
    }

    /// Nine levels of ten aliases: 10⁹ nodes if expanded. Refused quickly, with a message.
    #[test]
    fn billion_laughs_is_refused_without_expanding() {
        let mut doc =
            String::from("a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
        for i in 1..10 {
            let p = i - 1;
            doc.push_str(&format!(
                "a{i}: &a{i} [*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p},*a{p}]\n"
            ));
        }
        assert!(doc.len() < 1000);
        let t = std::time::Instant::now();
        let err = serde_saphyr::from_str_with_options::<serde_json::Value>(&doc, yaml_options(&Limits::default()))
            .unwrap_err()
            .to_string();
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(err.to_lowercase().contains("alias"), "{err}");
        // A few aliases are fine.
        let ok = "base: &b {x: 1}\none: *b\ntwo: *b\n";
        let v: serde_json::Value = serde_saphyr::from_str_with_options(ok, yaml_options(&Limits::default())).unwrap();
        assert_eq!(v["two"]["x"], 1);
    }
}
