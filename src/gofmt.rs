//! Go's renderings of values inside MCO's messages, so mco's reasons and conditions read
//! character for character as MCO's do: `%q` of a string ([`quote`]) and the text of a `*os.PathError`
//! ([`path_error`]), e.g. `lstat /etc/foo: no such file or directory`.
//!
//! Pure formatting; it must not decide what a message says (that is the caller's, next to the MCO
//! source it reproduces).

use crate::host::HostError;

/// Go's `strconv.Quote` (the `%q` verb) of `s`: double quotes; `\"` and `\\`; `\a \b \f \n \r \t
/// \v`; other control characters as `\xHH` (below U+0080) or `\uHHHH`; Unicode characters Go
/// does not consider printable (non-ASCII spaces, format characters such as U+200B or U+FEFF)
/// as `\uHHHH`; everything else as is. E.g. `a"b` -> `"a\"b"`, `é` -> `"é"`, NUL -> `"\x00"`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if !printable(c) => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `unicode.IsPrint` for the characters that occur in paths and unit names: ASCII space is
/// printable, other spaces, controls and format characters (Cf) are not.
fn printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(c,
        '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2064}'
        | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
        | '\u{e000}'..='\u{f8ff}' | '\u{f0000}'..='\u{10ffff}')
}

/// The text of Go's `*os.PathError` for a failed filesystem call: `<op> <node path>: <errno
/// text>`, the errno text lower-cased as Go's `syscall.Errno` prints it (`no such file or
/// directory`, `permission denied`). `op` is Go's operation (`lstat`, `open`, `remove`,
/// `symlink`), which may differ from the one the host recorded (a read fails in Go's `open`).
/// Other host errors are shown as they are.
pub fn path_error(op: &str, e: &HostError) -> String {
    match e {
        HostError::Io { err, path, .. } => {
            let text = match err.raw_os_error() {
                Some(code) => {
                    let desc = nix::errno::Errno::from_raw(code).desc();
                    let mut c = desc.chars();
                    c.next()
                        .map(|f| f.to_lowercase().chain(c).collect())
                        .unwrap_or_default()
                }
                None => err.to_string(),
            };
            format!("{op} {path}: {text}")
        }
        other => other.to_string(),
    }
}

/// Go's `*exec.ExitError` text for a failed command: `exit status <n>`; the error itself when the
/// command could not run or has no exit status.
pub fn exit_error(e: &HostError) -> String {
    match e {
        HostError::Command { exit: Some(n), .. } => format!("exit status {n}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_is_go_strconv_quote() {
        for (input, want) in [
            ("/etc/foo", r#""/etc/foo""#),
            ("a\"b\\c", r#""a\"b\\c""#),
            ("tab\there\nnl", r#""tab\there\nnl""#),
            ("\u{0}\u{1b}\u{7f}", r#""\x00\x1b\x7f""#),
            ("é ü 日本", "\"é ü 日本\""),
            ("nb\u{a0}sp\u{200b}\u{feff}", r#""nb\u00a0sp\u200b\ufeff""#),
            ("\u{7}\u{8}\u{c}\u{b}\r", r#""\a\b\f\v\r""#),
        ] {
            assert_eq!(quote(input), want, "{input:?}");
        }
    }

    #[test]
    fn path_errors_read_as_go_prints_them() {
        let e = HostError::Io {
            op: "read",
            path: "/etc/x".into(),
            err: std::io::Error::from_raw_os_error(2),
        };
        assert_eq!(path_error("open", &e), "open /etc/x: no such file or directory");
        let e = HostError::Command {
            command: "systemctl disable a".into(),
            detail: "boom".into(),
            exit: Some(1),
        };
        assert_eq!(exit_error(&e), "exit status 1");
    }
}
