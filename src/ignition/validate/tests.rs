//! Unit tests of [`super`]: one `check(config, expected)` per rule area.

use super::*;
use crate::ignition::{File, CORE_SSH_KEYS_PATH, UNIT_SUFFIXES};
use serde_json::json;
use sha2::Digest;
use std::io::Write;

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn b64(data: &[u8]) -> String {
    // Minimal encoder for test data (standard alphabet, padded).
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in data.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, &b)| acc | (b as u32) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[test]
fn file_contents_decodes_and_gunzips() {
    let plain: File = serde_json::from_value(json!({"path": "/a", "contents": {"source": "data:,x%0A"}})).unwrap();
    assert_eq!(file_contents(&plain).unwrap(), b"x\n");
    let source = format!("data:;base64,{}", b64(&gzip(b"zipped\n")));
    let gz: File =
        serde_json::from_value(json!({"path": "/a", "contents": {"source": source, "compression": "gzip"}})).unwrap();
    assert_eq!(file_contents(&gz).unwrap(), b"zipped\n");
    let empty: File = serde_json::from_value(json!({"path": "/a"})).unwrap();
    assert_eq!(file_contents(&empty).unwrap(), b"");
    let bad: File =
        serde_json::from_value(json!({"path": "/a", "contents": {"source": "data:,x", "compression": "gzip"}}))
            .unwrap();
    assert!(file_contents(&bad).unwrap_err().contains("gzip"));
}

/// Parses `config` at prefix `spec.config`; `expected` lists `(field, message substring)`
/// pairs that must all be present, and nothing else; empty means accepted.
fn check(config: Value, expected: &[(&str, &str)]) {
    let got = match parse_config(&config, "spec.config") {
        Ok(_) => Vec::new(),
        Err(errors) => errors,
    };
    for (field, msg) in expected {
        assert!(
            got.iter().any(|e| e.field == *field && e.message.contains(msg)),
            "missing {field}: {msg}\nin {got:#?}\nfor {config}"
        );
    }
    assert_eq!(got.len(), expected.len(), "unexpected errors {got:#?} for {config}");
}

fn files(files: Value) -> Value {
    json!({"ignition": {"version": "3.2.0"}, "storage": {"files": files}})
}

fn units(units: Value) -> Value {
    json!({"ignition": {"version": "3.4.0"}, "systemd": {"units": units}})
}

const SUPPORTED: &str = "Supported spec versions: 2.2,3.0,3.1,3.2,3.3,3.4,3.5";

#[test]
fn versions() {
    check(json!({}), &[]);
    check(Value::Null, &[]);
    // go-semver reads numbers with Go's ParseInt (leading zeros) and drops an empty
    // pre-release or build suffix: Ignition accepts these spellings of 3.4.0.
    for v in [
        "3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0", "03.4.0", "3.04.00", "3.4.0-", "3.4.0+",
    ] {
        check(json!({"ignition": {"version": v}}), &[]);
    }
    let field = "spec.config.ignition.version";
    // Spec 2.0-2.2 is translated as MCO does (ign-converter), then validated as spec 3 with
    // the user's field paths.
    check(json!({"ignition": {"version": "2.2.0"}}), &[]);
    check(json!({"ignition": {"version": "2.0.0"}}), &[]);
    check(
        json!({"ignition": {"version": "2.2.0"}, "storage": {"files": [
            {"filesystem": "root", "path": "/etc/a", "mode": 420},
            {"filesystem": "root", "path": "/etc/b", "mode": 2541}]}}),
        &[("spec.config.storage.files[1].mode", "cannot exceed 0777")],
    );
    check(
        json!({"ignition": {"version": "2.2.0"}, "storage": {"directories": [{"filesystem": "root", "path": "/etc/d"}]}}),
        &[(
            "spec.config.storage.directories",
            "mco does not manage storage.directories",
        )],
    );
    check(
        json!({"ignition": {"version": "2.2.0"}, "passwd": {"users": [{"name": "core", "homeDir": "/home/x"}]}}),
        &[("spec.config.passwd.users[0].homeDir", "")],
    );
    // Not a semantic version: Ignition's ErrInvalidVersion (config/util GetConfigVersion).
    let invalid = format!("parsing Ignition config failed: invalid version. {SUPPORTED}");
    for v in [
        "",
        "3.2",
        "badversion",
        "3",
        "v3.4.0",
        "3.4.0.1",
        " 3.4.0",
        "3.4.x",
        "3.4.0-a..b",
        "3.4.0+b_1",
        "-3.4.0",
        "+3.4.0",
        "3.-4.0",
        "3.+4.0",
    ] {
        check(json!({"ignition": {"version": v}}), &[(field, &invalid)]);
    }
    check(json!({"storage": {"files": []}}), &[(field, &invalid)]);
    check(
        json!({"ignition": {"version": null}, "storage": {}}),
        &[(field, &invalid)],
    );
    // Well-formed but not a version mco knows: ErrUnknownVersion (ParseCompatibleVersion).
    let unknown = format!("parsing Ignition config failed: unknown version. {SUPPORTED}");
    for v in [
        "3.99.0",
        "4.0.0",
        "3.5.0-experimental",
        "3.4.0-experimental",
        "3.6.0",
        "3.4.1",
        "3.4.0+build1",
        "1.0.0",
        "2.3.0",
        "2.2.1",
        "0.0.0",
    ] {
        check(json!({"ignition": {"version": v}}), &[(field, &unknown)]);
    }
    check(json!({"ignition": {"version": 3.2}}), &[(field, "must be a string")]);
    check(json!("text"), &[("spec.config", "expected an object")]);
}

#[test]
fn modes() {
    check(files(json!([{"path": "/etc/foo", "mode": 420}])), &[]);
    check(files(json!([{"path": "/etc/foo", "mode": 0o777}])), &[]);
    check(
        files(json!([{"path": "/etc/foo", "mode": 644}])),
        &[(
            "spec.config.storage.files[0].mode",
            "invalid mode 01204 for /etc/foo, cannot exceed 0777",
        )],
    );
    // setuid/setgid/sticky: within Ignition's range, refused by MCO.
    check(
        files(json!([{"path": "/etc/foo", "mode": 0o4755}])),
        &[(
            "spec.config.storage.files[0].mode",
            "invalid mode 04755 for /etc/foo, cannot exceed 0777",
        )],
    );
    check(
        files(json!([{"path": "/etc/foo", "mode": 0o7777}])),
        &[(
            "spec.config.storage.files[0].mode",
            "invalid mode 07777 for /etc/foo, cannot exceed 0777",
        )],
    );
    // Outside Ignition's 0..=07777: Ignition's own error comes first.
    for mode in [-1, 0o10000, 0o100644] {
        check(
            files(json!([{"path": "/etc/foo", "mode": mode}])),
            &[("spec.config.storage.files[0].mode", "illegal file mode")],
        );
    }
    check(
        files(json!([{"path": "/etc/foo", "mode": "0644"}])),
        &[("spec.config.storage.files[0].mode", "invalid type: string \"0644\"")],
    );
}

#[test]
fn type_errors_name_each_entry() {
    check(
        files(json!([{"path": "/a", "mode": "x"}, {"path": "/b"}, {"path": "/c", "overwrite": "yes"}])),
        &[
            ("spec.config.storage.files[0].mode", "invalid type"),
            ("spec.config.storage.files[2].overwrite", "invalid type"),
        ],
    );
    check(
        units(json!([{"name": "a.service", "enabled": "yes"}])),
        &[("spec.config.systemd.units[0].enabled", "invalid type")],
    );
    check(
        json!({"ignition": {"version": "3.2.0"}, "storage": {"files": [{"path": "/a", "contents": {"_REDACTED": "x", "length": 3, "source": 5}}]}}),
        &[("spec.config.storage.files[0].contents.source", "invalid type")],
    );
}

#[test]
fn file_rules() {
    let f = |i: usize, rest: &str| format!("spec.config.storage.files[{i}].{rest}");
    check(files(json!([{"mode": 420}])), &[(&f(0, "path"), "path not specified")]);
    check(
        files(json!([{"path": "etc/foo"}])),
        &[(&f(0, "path"), "path not absolute")],
    );
    for p in ["/etc//foo", "/etc/./foo", "/etc/../foo", "/etc/foo/"] {
        check(
            files(json!([{"path": p}])),
            &[(&f(0, "path"), "path is not fully simplified")],
        );
    }
    check(
        files(json!([{"path": "/a"}, {"path": "/b"}, {"path": "/a"}])),
        &[(&f(2, "path"), "duplicate entry defined")],
    );
    check(
        files(json!([{"path": "/a", "overwrite": true}])),
        &[(&f(0, "overwrite"), "overwrite must be false if source is unspecified")],
    );
    check(files(json!([{"path": "/a", "overwrite": false}])), &[]);
    check(
        files(json!([{"path": "/a", "user": {"id": 0, "name": "root"}}])),
        &[(&f(0, "user"), "cannot set both id and name")],
    );
    check(
        files(json!([{"path": "/a", "group": {"id": 0, "name": "root"}}])),
        &[(&f(0, "group"), "cannot set both id and name")],
    );
    check(
        files(json!([{"path": "/a", "user": {"name": "root"}, "group": {"id": 0}}])),
        &[],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "data:,x", "compression": "bzip2"}}])),
        &[(&f(0, "contents.compression"), "invalid compression method \"bzip2\"")],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "data:,x", "compression": ""}}])),
        &[],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "https://example.com/a"}}])),
        &[(
            &f(0, "contents.source"),
            "unsupported source scheme \"https\": mco serves only embedded data (data: URLs); mco does not fetch remote content",
        )],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "data:,%zz"}}])),
        &[(
            &f(0, "contents.source"),
            "rfc2396: invalid char 0x25 in unescape sequence",
        )],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "data:;base64,YQ="}}])),
        &[(&f(0, "contents.source"), "illegal base64 data at input byte 3")],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "data:,notgzip", "compression": "gzip"}}])),
        &[(&f(0, "contents.source"), "gzip contents do not decompress")],
    );
    let gz = format!("data:;base64,{}", b64(&gzip(b"ok")));
    check(
        files(json!([{"path": "/a", "contents": {"source": gz, "compression": "gzip"}}])),
        &[],
    );
    check(
        files(json!([{"path": "/a", "append": [{"source": "data:,x"}]}])),
        &[(&f(0, "append"), "ignition file /a includes append")],
    );
    check(files(json!([{"path": "/a", "append": []}])), &[]);
    check(
        files(json!([{"path": DAEMON_FORCE_FILE}])),
        &[(
            &f(0, "path"),
            "cannot create /run/machine-config-daemon-force via Ignition",
        )],
    );
    // All errors are collected, not only the first.
    check(
        files(json!([{"path": "rel", "mode": 644}, {"path": "/b", "overwrite": true}])),
        &[
            (&f(0, "path"), "not absolute"),
            (&f(0, "mode"), "cannot exceed 0777"),
            (&f(1, "overwrite"), "overwrite must be false"),
        ],
    );
}

#[test]
fn verification() {
    let f = "spec.config.storage.files[0].contents.verification.hash";
    let sha512_a = hex::encode(sha2::Sha512::digest(b"a"));
    let sha256_a = hex::encode(sha2::Sha256::digest(b"a"));
    let with_hash = |version: &str, source: Option<&str>, hash: String, gzip: bool| {
        let mut contents = json!({"verification": {"hash": hash}});
        if let Some(s) = source {
            contents["source"] = json!(s);
        }
        if gzip {
            contents["compression"] = json!("gzip");
        }
        json!({"ignition": {"version": version}, "storage": {"files": [{"path": "/a", "contents": contents}]}})
    };
    let v32 = |source: Option<&str>, hash: String| with_hash("3.2.0", source, hash, false);
    check(v32(Some("data:,a"), format!("sha512-{sha512_a}")), &[]);
    check(v32(Some("data:,a"), format!("sha512-{}", sha512_a.to_uppercase())), &[]);
    check(v32(Some("data:;base64,YQ=="), format!("sha256-{sha256_a}")), &[]);
    check(
        v32(Some("data:,b"), format!("sha512-{sha512_a}")),
        &[(
            f,
            &format!(
                "hash verification failed (calculated {} but expected {sha512_a})",
                hex::encode(sha2::Sha512::digest(b"b"))
            ),
        )],
    );
    // Ignition's messages (config/shared/errors/errors.go), with a short explanation after.
    check(
        v32(Some("data:,a"), "md5-abc".into()),
        &[(f, "unrecognized hash function")],
    );
    check(
        v32(Some("data:,a"), "SHA512-abc".into()),
        &[(f, "unrecognized hash function")],
    );
    check(
        v32(Some("data:,a"), "sha512-abc".into()),
        &[(f, "incorrect size for hash sum")],
    );
    check(
        v32(Some("data:,a"), "sha256-abc".into()),
        &[(f, "incorrect size for hash sum")],
    );
    check(
        v32(Some("data:,a"), "nodash".into()),
        &[(f, "malformed hash specifier")],
    );
    check(v32(Some("data:,a"), String::new()), &[(f, "malformed hash specifier")]);
    // Right length, not hex: Ignition only finds out when it fetches; mco says it at once.
    check(
        v32(Some("data:,a"), format!("sha512-{}", "z".repeat(128))),
        &[(f, "hash verification failed")],
    );
    check(
        v32(None, format!("sha512-{sha512_a}")),
        &[(f, "source must be specified if verification is specified")],
    );
    // sha256 arrived with spec 3.1.0.
    check(
        with_hash("3.0.0", Some("data:,a"), format!("sha256-{sha256_a}"), false),
        &[(f, "unrecognized hash function")],
    );
    check(
        with_hash("3.1.0", Some("data:,a"), format!("sha256-{sha256_a}"), false),
        &[],
    );
    check(
        with_hash("3.0.0", Some("data:,a"), format!("sha512-{sha512_a}"), false),
        &[],
    );
    // The hash is over the decompressed contents, as Ignition hashes what it writes
    // (internal/resource/url.go, decompressCopyHashAndVerify).
    let zipped = format!("data:;base64,{}", b64(&gzip(b"hello\n")));
    let sha512_hello = hex::encode(sha2::Sha512::digest(b"hello\n"));
    check(
        with_hash("3.4.0", Some(&zipped), format!("sha512-{sha512_hello}"), true),
        &[],
    );
    let file: File = serde_json::from_value(
        with_hash("3.4.0", Some(&zipped), format!("sha512-{sha512_hello}"), true)["storage"]["files"][0].clone(),
    )
    .unwrap();
    assert_eq!(file_contents(&file).unwrap(), b"hello\n");
    // The digest of the compressed bytes is not what Ignition checks.
    let sha512_zipped = hex::encode(sha2::Sha512::digest(gzip(b"hello\n")));
    check(
        with_hash("3.4.0", Some(&zipped), format!("sha512-{sha512_zipped}"), true),
        &[(f, "the hash is over the decompressed contents")],
    );
}

#[test]
fn unit_rules() {
    let u = |i: usize, rest: &str| format!("spec.config.systemd.units[{i}].{rest}");
    for suffix in UNIT_SUFFIXES {
        check(units(json!([{"name": format!("x{suffix}"), "enabled": true}])), &[]);
    }
    check(
        units(json!([{"name": "x.conf"}])),
        &[(&u(0, "name"), "invalid systemd unit extension")],
    );
    check(
        units(json!([{"name": ""}])),
        &[(&u(0, "name"), "unit name not specified")],
    );
    check(
        units(json!([{"name": "a.service"}, {"name": "a.service"}])),
        &[(&u(1, "name"), "duplicate entry defined")],
    );
    // systemd's unit_name_is_valid: templates and instances yes, paths no.
    for ok in [
        "foo@.service",
        "foo@bar.service",
        "postgresql@9.3-main.service",
        "a:b\\x2dc.mount",
    ] {
        check(units(json!([{"name": ok, "enabled": true}])), &[]);
    }
    for (bad, rule) in [
        ("/root/example.service", "character '/' is not allowed"),
        ("../../etc/x.service", "character '/' is not allowed"),
        ("a/b.service", "character '/' is not allowed"),
        (".service", "the name before the suffix is empty"),
        ("@x.service", "the name before '@' is empty"),
        ("foo bar.service", "character ' ' is not allowed"),
    ] {
        check(units(json!([{"name": bad, "enabled": true}])), &[(&u(0, "name"), rule)]);
    }
    let long = format!("{}.service", "a".repeat(248));
    check(
        units(json!([{"name": long}])),
        &[(&u(0, "name"), "at most 255 are allowed")],
    );
    for (bad, rule) in [
        ("x/y.conf", "a file name, not a path"),
        ("../x.conf", "a file name, not a path"),
        (".conf", "hidden files"),
        ("", "dropin name not specified"),
    ] {
        check(
            units(json!([{"name": "a.service", "dropins": [{"name": bad, "contents": "[Service]\nX=1"}]}])),
            &[(&u(0, "dropins[0].name"), rule)],
        );
    }
    let good = "# comment\n; other\n\n[Unit]\nDescription=x\n[Service]\nExecStart=/bin/sh -c \\\n  'echo [not a section]'\nEnvironment=A=b\n";
    check(units(json!([{"name": "a.service", "contents": good}])), &[]);
    check(units(json!([{"name": "a.service", "contents": ""}])), &[]);
    check(
        units(json!([{"name": "a.service", "contents": "Description=x\n[Unit]\n"}])),
        &[(&u(0, "contents"), "outside any [Section]")],
    );
    check(
        units(json!([{"name": "a.service", "contents": "[Unit\n"}])),
        &[(&u(0, "contents"), "section header not closed")],
    );
    check(
        units(json!([{"name": "a.service", "contents": "[Unit]\njunk\n"}])),
        &[(&u(0, "contents"), "expected Key=value")],
    );
    check(
        units(
            json!([{"name": "a.service", "dropins": [{"name": "10-a.conf", "contents": "[Service]\nX=1"}, {"name": "10-a.conf"}, {"name": "b.txt"}, {"name": "c.conf", "contents": "X=1"}]}]),
        ),
        &[
            (&u(0, "dropins[1].name"), "duplicate entry defined"),
            (&u(0, "dropins[2].name"), "invalid systemd drop-in extension"),
            (&u(0, "dropins[3].contents"), "outside any [Section]"),
        ],
    );
}

#[test]
fn passwd_rules() {
    let cfg = |users: Value| json!({"ignition": {"version": "3.2.0"}, "passwd": {"users": users}});
    check(
        cfg(json!([{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"], "passwordHash": "$6$x"}])),
        &[],
    );
    check(cfg(json!(null)), &[]);
    check(
        cfg(json!([{"name": "admin"}])),
        &[(
            "spec.config.passwd.users[0].name",
            "ignition passwd user section contains unsupported changes: non-core user (\"admin\"",
        )],
    );
    check(
        cfg(json!([{"name": "core", "homeDir": "/home/x", "uid": 1000, "groups": ["wheel"], "shell": null}])),
        &[
            (
                "spec.config.passwd.users[0].homeDir",
                "user field homeDir is not supported",
            ),
            ("spec.config.passwd.users[0].uid", "user field uid is not supported"),
            (
                "spec.config.passwd.users[0].groups",
                "user field groups is not supported",
            ),
        ],
    );
    check(
        cfg(json!([{"name": "core"}, {"name": "core"}])),
        &[("spec.config.passwd.users[1].name", "duplicate entry defined")],
    );
}

#[test]
fn refused_sections() {
    let v = json!({"version": "3.4.0"});
    for (section, pointer_value, field) in [
        (
            "passwd.groups",
            json!({"ignition": v, "passwd": {"groups": [{"name": "g"}]}}),
            "spec.config.passwd.groups",
        ),
        (
            "storage.directories",
            json!({"ignition": v, "storage": {"directories": [{"path": "/d"}]}}),
            "spec.config.storage.directories",
        ),
        (
            "storage.links",
            json!({"ignition": v, "storage": {"links": [{"path": "/l", "target": "/t"}]}}),
            "spec.config.storage.links",
        ),
        (
            "storage.disks",
            json!({"ignition": v, "storage": {"disks": [{"device": "/dev/sdb"}]}}),
            "spec.config.storage.disks",
        ),
        (
            "storage.raid",
            json!({"ignition": v, "storage": {"raid": [{"name": "r"}]}}),
            "spec.config.storage.raid",
        ),
        (
            "storage.filesystems",
            json!({"ignition": v, "storage": {"filesystems": [{"path": "/var"}]}}),
            "spec.config.storage.filesystems",
        ),
        (
            "storage.luks",
            json!({"ignition": v, "storage": {"luks": [{"name": "root"}]}}),
            "spec.config.storage.luks",
        ),
        (
            "storage.trees",
            json!({"ignition": v, "storage": {"trees": [{"local": "x"}]}}),
            "spec.config.storage.trees",
        ),
        (
            "kernelArguments",
            json!({"ignition": v, "kernelArguments": {"shouldExist": ["a=b"]}}),
            "spec.config.kernelArguments",
        ),
    ] {
        check(pointer_value, &[(field, &format!("mco does not manage {section}"))]);
    }
    check(
        json!({"ignition": v, "storage": {"directories": [], "links": null, "disks": []}, "passwd": {"groups": []}, "kernelArguments": {"shouldExist": [], "shouldNotExist": null}}),
        &[],
    );
    check(
        json!({"ignition": {"version": "3.2.0", "config": {"replace": {"verification": {}}}}}),
        &[],
    );
    check(
        json!({"ignition": {"version": "3.2.0", "config": {"replace": {"source": "https://x/y.ign"}}}}),
        &[(
            "spec.config.ignition.config.replace.source",
            "remote Ignition configs are not supported",
        )],
    );
    check(
        json!({"ignition": {"version": "3.2.0", "config": {"merge": [{"source": null}, {"source": "data:,{}"}]}}}),
        &[(
            "spec.config.ignition.config.merge[1].source",
            "remote Ignition configs are not supported",
        )],
    );
}

#[test]
fn paths_ids_and_owner_names() {
    let f = |i: usize, rest: &str| format!("spec.config.storage.files[{i}].{rest}");
    check(
        files(json!([{"path": "/", "contents": {"source": "data:,x"}}])),
        &[(&f(0, "path"), "root directory")],
    );
    check(files(json!([{"path": "/etc/a\u{0}b"}])), &[(&f(0, "path"), "NUL byte")]);
    let long = format!("/etc/{}", "n".repeat(256));
    check(
        files(json!([{"path": long}])),
        &[(&f(0, "path"), "Linux file names are at most 255 bytes")],
    );
    let deep = format!("/{}", vec!["d".repeat(254); 17].join("/"));
    check(
        files(json!([{"path": deep}])),
        &[(&f(0, "path"), "Linux paths are at most 4095 bytes")],
    );
    // Linux uid_t/gid_t: 0..=4294967294.
    check(
        files(json!([{"path": "/a", "user": {"id": 4294967294u64}, "group": {"id": 0}}])),
        &[],
    );
    check(
        files(json!([{"path": "/a", "user": {"id": -1}}])),
        &[(&f(0, "user.id"), "invalid user id -1")],
    );
    check(
        files(json!([{"path": "/a", "group": {"id": 4294967295u64}}])),
        &[(
            &f(0, "group.id"),
            "invalid group id 4294967295: Linux group ids are 0 to 4294967294",
        )],
    );
    check(
        files(json!([{"path": "/a", "user": {"name": "root"}, "group": {"name": "wheel"}}])),
        &[],
    );
    check(files(json!([{"path": "/a", "user": {"name": ""}}])), &[]);
    check(
        files(json!([{"path": "/a", "user": {"name": "bad name"}}])),
        &[(&f(0, "user.name"), "invalid user name \"bad name\"")],
    );
    check(
        files(json!([{"path": "/a", "group": {"name": "a:b"}}])),
        &[(&f(0, "group.name"), "invalid group name")],
    );
    check(
        files(json!([{"path": "/a", "user": {"id": -1, "name": "x y"}}])),
        &[
            (&f(0, "user"), "cannot set both id and name"),
            (&f(0, "user.id"), "invalid user id -1"),
            (&f(0, "user.name"), "invalid user name"),
        ],
    );
    // Source schemes: Ignition's messages, mco's refusal of remote content.
    check(
        files(json!([{"path": "/a", "contents": {"source": "foo:bar"}}])),
        &[(&f(0, "contents.source"), "invalid url scheme")],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "/etc/x"}}])),
        &[(&f(0, "contents.source"), "invalid url scheme")],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "s3://b/k"}}])),
        &[(&f(0, "contents.source"), "mco does not fetch remote content")],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "DATA:,x"}}])),
        &[(&f(0, "contents.source"), "missing data prefix")],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "data:;base64,aGk"}}])),
        &[(&f(0, "contents.source"), "illegal base64 data at input byte 0")],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "data:,x", "httpHeaders": [{"name": "a", "value": "b"}]}}])),
        &[(
            &f(0, "contents.httpHeaders"),
            "cannot use HTTP headers with this source scheme",
        )],
    );
    check(
        files(json!([{"path": "/a", "overwrite": false, "contents": {"httpHeaders": [{"name": "a", "value": "b"}]}}])),
        &[(&f(0, "contents.httpHeaders"), "unable to parse url")],
    );
    check(
        files(json!([{"path": "/a", "contents": {"source": "data:,", "compression": "gzip"}}])),
        &[(&f(0, "contents.source"), "gzip contents do not decompress: EOF")],
    );
}

#[test]
fn paths_of_different_sections() {
    let cfg = |files: Value, units: Value| json!({"ignition": {"version": "3.4.0"}, "storage": {"files": files}, "systemd": {"units": units}});
    let file = |path: &str| json!({"path": path, "contents": {"source": "data:,x"}});
    let f0 = "spec.config.storage.files[0].path";
    // Ignition 3.1+ (config/v3_*/types/config.go): units and dropins with contents count.
    check(
        cfg(json!([file("/etc/systemd/system/foo.service")]), json!([{"name": "foo.service", "contents": "[Unit]\n"}])),
        &[(f0, "path conflicts with systemd unit or dropin: /etc/systemd/system/foo.service is written from spec.config.systemd.units[0].name")],
    );
    check(
        cfg(
            json!([file("/etc/systemd/system/foo.service.d/10-x.conf")]),
            json!([{"name": "foo.service", "dropins": [{"name": "10-x.conf", "contents": "[Service]\n"}]}]),
        ),
        &[(f0, "path conflicts with systemd unit or dropin")],
    );
    // Without contents they write nothing there (Ignition's non-conflicting cases).
    check(
        cfg(
            json!([
                file("/etc/systemd/system/foo.service"),
                file("/etc/systemd/system/bar.service.d/x.conf")
            ]),
            json!([{"name": "foo.service", "enabled": true}, {"name": "bar.service", "dropins": [{"name": "x.conf"}]}, {"name": "baz.service", "contents": ""}]),
        ),
        &[],
    );
    // A masked unit is a symlink to /dev/null at the unit's path.
    check(
        cfg(
            json!([file("/etc/systemd/system/foo.service")]),
            json!([{"name": "foo.service", "mask": true}]),
        ),
        &[(f0, "spec.config.systemd.units[0].name is masked")],
    );
    // The core user's SSH keys file.
    let mut keys = cfg(json!([file(CORE_SSH_KEYS_PATH)]), json!([]));
    keys["passwd"] = json!({"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]});
    check(keys.clone(), &[(f0, "path conflicts with the core user's SSH keys")]);
    keys["storage"]["files"][0]["path"] = json!("/home/core/.ssh");
    check(
        keys,
        &[(
            f0,
            "path /home/core/.ssh is a file here and a directory of spec.config.passwd.users[0].sshAuthorizedKeys",
        )],
    );
    // A file cannot be the directory of another file, unit or dropin.
    check(
        cfg(json!([file("/etc/a"), file("/etc/a/b"), file("/etc/a/c")]), json!([])),
        &[(
            f0,
            "path /etc/a is a file here and a directory of spec.config.storage.files[1].path (/etc/a/b)",
        )],
    );
    check(
        cfg(
            json!([file("/etc/systemd/system/foo.service.d")]),
            json!([{"name": "foo.service", "dropins": [{"name": "x.conf", "contents": "[Service]\n"}]}]),
        ),
        &[(
            f0,
            "is a file here and a directory of spec.config.systemd.units[0].dropins[0].name",
        )],
    );
    check(cfg(json!([file("/etc/a"), file("/etc/ab/c")]), json!([])), &[]);
}

/// The render controller validates the merged config: a clash of two MachineConfigs that
/// are each valid is found by `validate_config` alone.
#[test]
fn merged_configs_are_checked_by_validate_config() {
    let merged: Config = serde_json::from_value(json!({
        "ignition": {"version": "3.4.0"},
        "storage": {"files": [{"path": "/etc/systemd/system/foo.service", "overwrite": true, "contents": {"source": "data:,x"}}]},
        "systemd": {"units": [{"name": "foo.service", "contents": "[Unit]\n"}]}
    }))
    .unwrap();
    let errors = validate_config(&merged, "spec.config");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].field, "spec.config.storage.files[0].path");
    assert!(errors[0]
        .message
        .starts_with("path conflicts with systemd unit or dropin"));
}
