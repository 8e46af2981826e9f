//! Go's renderings of values inside MCO's messages, so mco's reasons and conditions read
//! character for character as MCO's do: `%q` of a string ([`quote`]) and the text of a `*os.PathError`
//! ([`os_path_error`]), e.g. `lstat /etc/foo: no such file or directory`.
//!
//! Pure formatting; it must not decide what a message says (that is the caller's, next to the MCO
//! source it reproduces).

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

/// The text of Go's `*os.PathError` for a failed filesystem call on `path`: `<op> <path>: <errno
/// text>`, the errno text lower-cased as Go's `syscall.Errno` prints it (`no such file or
/// directory`, `permission denied`); an error with no errno is shown as it is.
pub fn os_path_error(op: &str, path: &str, err: &std::io::Error) -> String {
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

/// kubectl's `HumanDuration` (k8s.io/apimachinery/pkg/util/duration): `45s`, `3m2s`, `4h42m`, `5d`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubectl() {
        for (s, want) in [
            (0, "0s"),
            (45, "45s"),
            (119, "119s"),
            (120, "2m"),
            (182, "3m2s"),
            (600, "10m"),
            (16920, "4h42m"),
            (3 * 3600, "3h"),
            (30 * 3600, "30h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
        ] {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }

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
    fn os_path_errors_read_as_go_prints_them() {
        let e = std::io::Error::from_raw_os_error(13);
        assert_eq!(os_path_error("lstat", "/etc/x", &e), "lstat /etc/x: permission denied");
        let e = std::io::Error::other("odd");
        assert_eq!(os_path_error("open", "/etc/x", &e), "open /etc/x: odd");
    }
}
