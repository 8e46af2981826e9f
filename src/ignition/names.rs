//! Rules for the names an Ignition config gives to things on a node: node paths, systemd unit
//! and dropin names, file owners (user and group ids and names).
//!
//! Owns the single-value checks; [`super::validate_config`] applies them with field paths and
//! checks how the paths of one config relate to each other. Each rule is Ignition's where
//! Ignition has one, then what the node itself can never accept (Linux path limits, systemd's
//! `unit_name_is_valid`, the uid range, shadow-utils' name rule), so that admission refuses what
//! would otherwise leave a node Degraded. Pure: no IO.

/// The directory units and dropins are written to (MCO `pathSystemd`; Ignition's
/// `config/v3_*/types/config.go` conflict check uses the same prefix).
pub const SYSTEMD_UNIT_DIR: &str = "/etc/systemd/system";

/// Node path of a unit file: `/etc/systemd/system/<name>`.
pub fn unit_path(unit: &str) -> String {
    format!("{SYSTEMD_UNIT_DIR}/{unit}")
}

/// Node path of a dropin: `/etc/systemd/system/<unit>.d/<dropin>`.
pub fn dropin_path(unit: &str, dropin: &str) -> String {
    format!("{SYSTEMD_UNIT_DIR}/{unit}.d/{dropin}")
}

/// Where MCO's daemon writes the `core` user's SSH keys on RHCOS 9 (MCO
/// `constants.RHCOS9SSHKeyPath`; mco's daemon writes the same path).
pub const CORE_SSH_KEYS_PATH: &str = "/home/core/.ssh/authorized_keys.d/ignition";

/// Longest file name component Linux accepts (`NAME_MAX`, `<linux/limits.h>`), in bytes.
pub const NAME_MAX: usize = 255;

/// Linux `PATH_MAX` (`<linux/limits.h>`): a path, including its terminating NUL, in bytes.
pub const PATH_MAX: usize = 4096;

/// systemd `UNIT_NAME_MAX` (`src/basic/unit-name.h`): a unit name is shorter than this, in bytes.
pub const UNIT_NAME_MAX: usize = 256;

/// The largest valid uid or gid: `(uid_t)-1` = 4294967295 means "no change" to `chown(2)`.
pub const MAX_ID: i64 = 4_294_967_294;

/// The suffixes a systemd unit name may end in (Ignition `validateName`,
/// `config/v3_*/types/unit.go`).
pub const UNIT_SUFFIXES: &[&str] = &[
    ".service",
    ".socket",
    ".device",
    ".mount",
    ".automount",
    ".swap",
    ".target",
    ".path",
    ".timer",
    ".snapshot",
    ".slice",
    ".scope",
];

/// Go's `path.Ext`: the suffix from the last `.` of the last `/`-separated element, or `""`.
fn go_ext(name: &str) -> &str {
    let base_start = name.rfind('/').map_or(0, |i| i + 1);
    name[base_start..].rfind('.').map_or("", |i| &name[base_start + i..])
}

/// Checks a node path (a file's `path`).
///
/// Ignition's rules first (`config/v3_*/types/node.go`, `validatePath`): `path not specified`,
/// `path not absolute`, `path is not fully simplified` (Go's `path.Clean(p) != p`). Then what no
/// Linux file can be: the root directory `/`, a NUL byte, a path of 4096 bytes or more
/// (`PATH_MAX` counts the terminating NUL), a component longer than 255 bytes (`NAME_MAX`).
pub fn check_node_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("path not specified".into());
    }
    if !path.starts_with('/') {
        return Err("path not absolute".into());
    }
    let dirty =
        path != "/" && (path.ends_with('/') || path[1..].split('/').any(|c| c.is_empty() || c == "." || c == ".."));
    if dirty {
        return Err("path is not fully simplified".into());
    }
    if path == "/" {
        return Err("path \"/\" is the root directory: a file cannot be written there".into());
    }
    if path.contains('\0') {
        return Err("path contains a NUL byte, which no Linux path can hold".into());
    }
    if path.len() >= PATH_MAX {
        return Err(format!(
            "path is {} bytes long: Linux paths are at most {} bytes (PATH_MAX {PATH_MAX} includes the terminating NUL)",
            path.len(),
            PATH_MAX - 1
        ));
    }
    if let Some(long) = path.split('/').find(|c| c.len() > NAME_MAX) {
        let shown: String = long.chars().take(40).collect();
        return Err(format!(
            "path component \"{shown}...\" is {} bytes long: Linux file names are at most {NAME_MAX} bytes (NAME_MAX)",
            long.len()
        ));
    }
    Ok(())
}

/// Checks a systemd unit name (`systemd.units[i].name`), written to
/// `/etc/systemd/system/<name>` and given to `systemctl`.
///
/// Ignition's rule (`config/v3_*/types/unit.go`): the extension (Go `path.Ext`) is one of
/// [`UNIT_SUFFIXES`], else `invalid systemd unit extension`. Then systemd's
/// `unit_name_is_valid(name, UNIT_NAME_ANY)` (`src/basic/unit-name.c`): shorter than 256 bytes;
/// a non-empty prefix before the suffix; only ASCII letters, digits and `:-_.\` plus `@`; not
/// starting with `@`. `foo.service`, the template `foo@.service` and the instance
/// `foo@bar.service` are valid; `/root/x.service`, `a/../b.service` and `.service` are not
/// (Ignition accepts them, and `systemctl` would then act on paths outside the unit directory).
pub fn check_unit_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("unit name not specified".into());
    }
    if !UNIT_SUFFIXES.contains(&go_ext(name)) {
        return Err(format!(
            "invalid systemd unit extension: {name:?} must end in one of {}",
            UNIT_SUFFIXES.join(" ")
        ));
    }
    let invalid = |why: &str| {
        Err(format!(
            "invalid systemd unit name {name:?}: {why} (systemd unit_name_is_valid; the unit is written to {SYSTEMD_UNIT_DIR}/<name>)"
        ))
    };
    if name.len() >= UNIT_NAME_MAX {
        return invalid(&format!(
            "it is {} bytes long, at most {} are allowed",
            name.len(),
            UNIT_NAME_MAX - 1
        ));
    }
    let dot = name.rfind('.').expect("has a unit suffix");
    let prefix = &name[..dot];
    if prefix.is_empty() {
        return invalid("the name before the suffix is empty");
    }
    if let Some(bad) = prefix
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || ":-_.\\@".contains(*c)))
    {
        return invalid(&format!(
            "character {bad:?} is not allowed: only ASCII letters, digits, ':', '-', '_', '.', '\\' and '@' are"
        ));
    }
    if prefix.starts_with('@') {
        return invalid("the name before '@' is empty");
    }
    Ok(())
}

/// Checks a dropin name (`systemd.units[i].dropins[j].name`), written to
/// `/etc/systemd/system/<unit>.d/<name>`.
///
/// Ignition's rule (`config/v3_*/types/unit.go`): the extension is `.conf`, else `invalid
/// systemd drop-in extension`. Then what systemd can load: a file name, not a path (no `/`), no
/// NUL, at most 255 bytes, and not hidden (systemd skips dropins whose name starts with `.`).
pub fn check_dropin_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("dropin name not specified".into());
    }
    if go_ext(name) != ".conf" {
        return Err(format!("invalid systemd drop-in extension: {name:?} must end in .conf"));
    }
    let where_ = "it is written to /etc/systemd/system/<unit>.d/<name>";
    if name.contains('/') {
        return Err(format!(
            "invalid drop-in name {name:?}: a file name, not a path, is required ({where_})"
        ));
    }
    if name.contains('\0') {
        return Err(format!("invalid drop-in name {name:?}: it contains a NUL byte"));
    }
    if name.len() > NAME_MAX {
        return Err(format!(
            "invalid drop-in name: it is {} bytes long, Linux file names are at most {NAME_MAX} bytes (NAME_MAX)",
            name.len()
        ));
    }
    if name.starts_with('.') {
        return Err(format!(
            "invalid drop-in name {name:?}: systemd ignores hidden files (names starting with '.') in drop-in directories"
        ));
    }
    Ok(())
}

/// Checks a file owner's numeric id (`user.id`, `group.id`): 0 to 4294967294. `-1` and
/// 4294967295 are `(uid_t)-1`, which `chown(2)` reads as "leave unchanged"; larger values do not
/// fit a Linux `uid_t`/`gid_t` (32 bits).
pub fn check_id(id: i64, what: &str) -> Result<(), String> {
    if (0..=MAX_ID).contains(&id) {
        Ok(())
    } else {
        Err(format!(
            "invalid {what} id {id}: Linux {what} ids are 0 to {MAX_ID} ({} is (uid_t)-1, \"no change\" for chown)",
            MAX_ID + 1
        ))
    }
}

/// Checks a file owner's name (`user.name`, `group.name`) with shadow-utils' rule for the names
/// `useradd`/`groupadd` create (`lib/chkname.c`, `is_valid_name`, as RHEL builds it): 1 to 32
/// characters of `[A-Za-z0-9_.-]`, not starting with `-`, optionally ending in `$`, not fully
/// numeric, not `.` or `..`. A name outside the rule cannot be in the node's `/etc/passwd` or
/// `/etc/group`, so the daemon's lookup could only fail.
pub fn check_owner_name(name: &str, what: &str) -> Result<(), String> {
    let body = name.strip_suffix('$').unwrap_or(name);
    let valid = !body.is_empty()
        && name.len() <= 32
        && name != "."
        && name != ".."
        && !body.starts_with('-')
        && body.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        && !name.bytes().all(|b| b.is_ascii_digit());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "invalid {what} name {name:?}: {what} names are 1 to 32 characters of [A-Za-z0-9_.-], not starting with '-', optionally ending in '$', not fully numeric and not \".\" or \"..\" (shadow-utils lib/chkname.c); set the numeric id instead for an owner that has no name"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(f: fn(&str) -> Result<(), String>, input: &str, expected: Result<(), &str>) {
        match (f(input), expected) {
            (Ok(()), Ok(())) => {}
            (Err(msg), Err(want)) => assert!(msg.contains(want), "{input:?}: {msg:?} lacks {want:?}"),
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn node_paths() {
        let p = check_node_path;
        check(p, "/etc/foo", Ok(()));
        check(p, "/etc/foo.d/a b", Ok(()));
        check(p, "", Err("path not specified"));
        check(p, "etc/foo", Err("path not absolute"));
        for dirty in ["/etc//foo", "/etc/./foo", "/etc/../foo", "/etc/foo/", "/..", "//"] {
            check(p, dirty, Err("path is not fully simplified"));
        }
        check(p, "/", Err("root directory"));
        check(p, "/etc/a\0b", Err("NUL byte"));
        let name255 = "a".repeat(255);
        check(p, &format!("/etc/{name255}"), Ok(()));
        check(
            p,
            &format!("/etc/{name255}b"),
            Err("256 bytes long: Linux file names are at most 255 bytes"),
        );
        let deep = format!("/{}", vec!["d".repeat(200); 20].join("/"));
        assert_eq!(deep.len(), 4020);
        check(p, &deep, Ok(()));
        let deep4095 = format!("{deep}/{}", "e".repeat(74));
        assert_eq!(deep4095.len(), 4095);
        check(p, &deep4095, Ok(()));
        check(
            p,
            &format!("{deep4095}e"),
            Err("4096 bytes long: Linux paths are at most 4095 bytes"),
        );
    }

    #[test]
    fn unit_names() {
        let u = check_unit_name;
        for ok in [
            "foo.service",
            "foo@.service",
            "foo@bar.service",
            "postgresql@9.3-main.service",
            "getty@tty1.service",
            "dev-disk-by\\x2duuid-1.swap",
            "a:b_c.timer",
            "foo@bar@baz.service",
            "x.snapshot",
        ] {
            check(u, ok, Ok(()));
        }
        check(u, "", Err("unit name not specified"));
        check(u, "foo.conf", Err("invalid systemd unit extension"));
        check(u, "foo", Err("invalid systemd unit extension"));
        check(u, "foo.service.d", Err("invalid systemd unit extension"));
        check(u, "/root/example.service", Err("character '/' is not allowed"));
        check(u, "a/../b.service", Err("character '/' is not allowed"));
        check(u, "../b.service", Err("character '/' is not allowed"));
        check(u, ".service", Err("the name before the suffix is empty"));
        check(u, "@.service", Err("the name before '@' is empty"));
        check(u, "@foo.service", Err("the name before '@' is empty"));
        check(u, "foo bar.service", Err("character ' ' is not allowed"));
        check(u, "föö.service", Err("character 'ö' is not allowed"));
        let long = format!("{}.service", "a".repeat(247));
        assert_eq!(long.len(), 255);
        check(u, &long, Ok(()));
        check(u, &format!("a{long}"), Err("256 bytes long, at most 255"));
    }

    #[test]
    fn dropin_names() {
        let d = check_dropin_name;
        check(d, "10-foo.conf", Ok(()));
        check(d, "", Err("dropin name not specified"));
        check(d, "foo.txt", Err("invalid systemd drop-in extension"));
        check(d, "foo.conf.bak", Err("invalid systemd drop-in extension"));
        check(d, "x/y.conf", Err("a file name, not a path"));
        check(d, "../../../etc/passwd.conf", Err("a file name, not a path"));
        check(d, ".conf", Err("hidden files"));
        check(d, ".x.conf", Err("hidden files"));
        check(d, &format!("{}.conf", "a".repeat(251)), Err("at most 255 bytes"));
        check(d, &format!("{}.conf", "a".repeat(250)), Ok(()));
    }

    #[test]
    fn ids_and_owner_names() {
        for ok in [0, 1000, 65534, MAX_ID] {
            assert!(check_id(ok, "user").is_ok(), "{ok}");
        }
        for bad in [-1, -2, MAX_ID + 1, 1 << 40] {
            let msg = check_id(bad, "group").unwrap_err();
            assert!(
                msg.contains(&format!("invalid group id {bad}: Linux group ids are 0 to 4294967294")),
                "{msg}"
            );
        }
        let n = |s: &str| check_owner_name(s, "user");
        for ok in [
            "root",
            "core",
            "_chrony",
            "systemd-network",
            "a.b",
            "Admin",
            "machine$",
            "0day",
            "a".repeat(32).as_str(),
        ] {
            assert!(n(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "-x",
            "a b",
            "a:b",
            "a/b",
            "1000",
            "$",
            "a$b",
            "é",
            "a".repeat(33).as_str(),
        ] {
            assert!(n(bad).unwrap_err().contains("invalid user name"), "{bad:?}");
        }
    }
}
