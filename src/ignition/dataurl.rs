//! `data:` URLs decoded exactly as Ignition and MCO decode them.
//!
//! Owns the one decoder of file contents ([`decode_data_url`]): admission uses it to refuse what a
//! new node would refuse, and the daemon writes what it returns. Ignition validates a source with
//! Go's `net/url.Parse` and then `dataurl.DecodeString` (Ignition `config/v3_*/types/url.go`),
//! fetches it with `dataurl.DecodeString` again (`internal/resource/url.go`), and MCO's daemon
//! decodes it with `dataurl.DecodeString` (`DecodeIgnitionFileContents`,
//! `pkg/controller/common/helpers.go`). `github.com/vincent-petithory/dataurl` v1.0.0 is a small
//! RFC 2397 lexer, Go's `encoding/base64` `StdEncoding` and an RFC 2396 unescaper; this module
//! follows their rules and their error texts (the texts users will search for):
//!
//! - the URL starts with `data:` in lower case (`missing data prefix`);
//! - an optional media type `type/subtype` of RFC 2045 token characters, where the type is an
//!   `x-` extension or starts with `text`, `image`, `audio`, `video`, `application`, `message` or
//!   `multipart` (`invalid media type`);
//! - `;attribute=value` parameters of token characters (values may be `"quoted"` with Go escapes,
//!   or `%xx`-escaped), then an optional final `;base64`, exactly in lower case
//!   (`expected base64, got BASE64`), then the mandatory `,`;
//! - base64 data: the standard alphabet with `=` padding, strictly (`aGk` is refused with
//!   `illegal base64 data at input byte 0`; unused trailing bits are ignored, as Go's non-strict
//!   `StdEncoding` does);
//! - other data: printable ASCII except space and `<>#"{}|\^[]` backquote (`invalid data
//!   character`), with `%xx` escapes of two hex digits (`rfc2396: ...`); `+` stays `+`;
//! - no control character anywhere, newlines included (`net/url` refuses them, so Ignition says
//!   `unable to parse url`);
//! - a `#` is refused in the data (it would start a URL fragment) and inside a quoted parameter
//!   value (Ignition re-escapes the fragment before decoding, so the node would see other text).
//!
//! Pure: no IO.

/// Decodes a `data:` URL into the bytes it carries (before any gzip decompression).
///
/// `source` must be the whole `contents.source` string. Errors are the message Ignition or its
/// libraries give for the first problem, sometimes followed by a short explanation in
/// parentheses, e.g. `illegal base64 data at input byte 0 (...)` or `invalid data character`.
pub fn decode_data_url(source: &str) -> Result<Vec<u8>, String> {
    if let Some(i) = source.bytes().position(|b| b < 0x20 || b == 0x7f) {
        return Err(format!(
            "unable to parse url: net/url: invalid control character in URL (byte {i}; newlines, tabs and other control characters must be %-escaped or base64-encoded)"
        ));
    }
    if let Some((_, fragment)) = source.split_once('#') {
        check_fragment_escapes(fragment)?;
    }
    let parsed = lex(source)?;
    if parsed.base64 {
        go_base64_decode(parsed.data.as_bytes()).map_err(|at| {
            format!(
                "illegal base64 data at input byte {at} (Ignition decodes standard base64: padded with '=' to a multiple of 4 characters, no whitespace)"
            )
        })
    } else {
        unescape(parsed.data)
    }
}

/// `net/url.Parse` unescapes the fragment after the first `#` and fails on a bad `%` escape.
fn check_fragment_escapes(fragment: &str) -> Result<(), String> {
    let b = fragment.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let ok = i + 2 < b.len() && b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit();
            if !ok {
                let end = (i + 3).min(b.len());
                return Err(format!(
                    "unable to parse url: invalid URL escape {:?}",
                    String::from_utf8_lossy(&b[i..end])
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// What the lexer found: whether `;base64` was given, and the raw data after the comma.
struct Parsed<'a> {
    base64: bool,
    data: &'a str,
}

/// RFC 2045 token character (dataurl `isTokenRune`): ASCII, not a control, not a space, not a
/// tspecial.
fn is_token(c: char) -> bool {
    c.is_ascii() && !c.is_ascii_control() && c != ' ' && !"()<>@,;:\\\"/[]?=".contains(c)
}

/// Characters allowed in non-base64 data (dataurl `isURLCharRune`).
fn is_url_char(c: char) -> bool {
    c.is_ascii() && !c.is_ascii_control() && !" <>#\"{}|\\^[]`".contains(c)
}

/// Characters allowed in base64 data (dataurl `isBase64Rune`; `\n` never gets past the control
/// character check).
fn is_base64_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "+/=\n".contains(c)
}

/// dataurl `isDiscreteType` / `isCompositeType`: a prefix test, as the library does it.
fn is_known_type(t: &str) -> bool {
    ["text", "image", "audio", "video", "application", "message", "multipart"]
        .iter()
        .any(|p| t.starts_with(p))
}

/// A cursor over the URL, one character at a time (the library lexes runes).
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
    width: usize,
}

impl<'a> Cursor<'a> {
    fn next(&mut self) -> Option<char> {
        let c = self.s[self.pos..].chars().next();
        self.width = c.map_or(0, char::len_utf8);
        self.pos += self.width;
        c
    }
    fn backup(&mut self) {
        self.pos -= self.width;
    }
}

/// The dataurl lexer and parser in one pass: the same states, the same first error.
fn lex(s: &str) -> Result<Parsed<'_>, String> {
    let err = |m: &str| Err(m.to_string());
    if !s.starts_with("data:") {
        return err("missing data prefix");
    }
    let mut c = Cursor { s, pos: 5, width: 0 };
    let mut base64 = false;
    // A quoted empty value leaves the parser's "unquote the next value" flag set.
    let mut unquote_next = false;
    // After the prefix: a media type, the parameters, or the comma.
    let mut at_params = match c.next() {
        Some(';') => {
            c.backup();
            true
        }
        Some(',') => {
            c.backup();
            false
        }
        None => return err("missing comma before data"),
        Some(first) if first == 'x' || first == 'X' || is_token(first) => {
            let start = 5;
            let x_token = (first == 'x' || first == 'X') && c.next() == Some('-');
            loop {
                match c.next() {
                    Some('/') => {
                        c.backup();
                        if !x_token && !is_known_type(&s[start..c.pos]) {
                            return err("invalid media type");
                        }
                        break;
                    }
                    None => return err("missing media type slash"),
                    Some(ch) if is_token(ch) => {}
                    Some(_) => return err("invalid character for media type"),
                }
            }
            c.next(); // the '/'
            loop {
                match c.next() {
                    Some(';') | Some(',') => {
                        c.backup();
                        break;
                    }
                    None => return err("incomplete media type"),
                    Some(ch) if is_token(ch) => {}
                    Some(_) => return err("invalid character for media subtype"),
                }
            }
            match c.next() {
                Some(';') => {
                    c.backup();
                    true
                }
                Some(',') => {
                    c.backup();
                    false
                }
                None => return err("missing comma before data"),
                Some(_) => return err("expected semicolon or comma"),
            }
        }
        Some(_) => return err("invalid character after data prefix"),
    };
    while at_params {
        c.next(); // the ';'
        let start = c.pos;
        match c.next() {
            None | Some('=') | Some(',') => return err("unterminated parameter sequence"),
            Some(ch) if is_token(ch) => c.backup(),
            Some(_) => return err("invalid character for parameter attribute"),
        }
        // The attribute, ended by '=' (a parameter) or ',' (must be `base64`).
        let has_value = loop {
            match c.next() {
                Some('=') => {
                    c.backup();
                    break true;
                }
                Some(',') => {
                    c.backup();
                    break false;
                }
                None => return err("unterminated parameter sequence"),
                Some(ch) if is_token(ch) => {}
                Some(_) => return err("invalid character for parameter attribute"),
            }
        };
        if !has_value {
            let attr = &s[start..c.pos];
            if attr != "base64" {
                return Err(format!("expected base64, got {attr}"));
            }
            base64 = true;
            break;
        }
        c.next(); // the '='
        let value_start = c.pos;
        match c.next() {
            Some('"') => {
                let quoted_start = c.pos;
                loop {
                    match c.next() {
                        None => return err("unclosed quoted string"),
                        Some('\\') => {
                            // The escaped character must be ASCII (end of input falls through to
                            // "unclosed quoted string", as in the library).
                            if let Some(e) = c.next() {
                                if !e.is_ascii() {
                                    return err("invalid escaped character");
                                }
                            }
                        }
                        Some('"') => {
                            c.backup();
                            break;
                        }
                        Some(ch) if ch.is_ascii() => {}
                        Some(_) => return err("invalid character for parameter value"),
                    }
                }
                let value = &s[quoted_start..c.pos];
                if value.contains('#') {
                    return err("invalid character for parameter value ('#' starts a URL fragment: Ignition re-escapes it before decoding; use %23 outside quotes)");
                }
                if value.is_empty() {
                    unquote_next = true;
                } else {
                    go_unquote(value)?;
                    unquote_next = false;
                }
                c.next(); // the closing '"'
            }
            None => return err("missing comma before data"),
            Some(ch) if is_token(ch) => {
                loop {
                    match c.next() {
                        Some(';') | Some(',') => {
                            c.backup();
                            break;
                        }
                        None => return err("missing comma before data"),
                        Some(ch) if is_token(ch) => {}
                        Some(_) => return err("invalid character for parameter value"),
                    }
                }
                let value = &s[value_start..c.pos];
                if unquote_next {
                    go_unquote(value)?;
                    unquote_next = false;
                } else {
                    unescape(value)?;
                }
            }
            Some(_) => return err("invalid character for parameter value"),
        }
        at_params = match c.next() {
            Some(';') => {
                c.backup();
                true
            }
            Some(',') => {
                c.backup();
                false
            }
            None => return err("missing comma before data"),
            Some(_) => return err("expected semicolon or comma"),
        };
    }
    c.next(); // the ','
    let data = &s[c.pos..];
    let valid = if base64 { is_base64_char } else { is_url_char };
    if !data.chars().all(valid) {
        return err("invalid data character");
    }
    Ok(Parsed { base64, data })
}

/// RFC 2396 unescaping as dataurl's `Unescape` does it (its error texts, including the
/// library's habit of always naming `0x25`, the `%`).
fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            if !b[i].is_ascii() {
                return Err("rfc2396: non-ASCII char detected".to_string());
            }
            out.push(b[i]);
            i += 1;
            continue;
        }
        let hex = |j: usize| -> Result<u8, String> {
            match b.get(j) {
                None => Err("rfc2396: unexpected end of unescape sequence".to_string()),
                Some(c) => (*c as char)
                    .to_digit(16)
                    .map(|d| d as u8)
                    .ok_or_else(|| "rfc2396: invalid char 0x25 in unescape sequence".to_string()),
            }
        };
        let hi = hex(i + 1)?;
        let lo = hex(i + 2)?;
        out.push(hi * 16 + lo);
        i += 3;
    }
    Ok(out)
}

/// Go's `strconv.Unquote` of `"` + `value` + `"`: only checks that it would succeed (the value
/// is a media-type parameter, not part of the file). Error: `invalid syntax`.
fn go_unquote(value: &str) -> Result<(), String> {
    let b = value.as_bytes();
    // The length of the escape sequence starting at `i` (a backslash), if Go accepts it.
    let escape = |i: usize| -> Option<usize> {
        let hex = |n: usize| -> Option<u32> {
            let d = b.get(i + 2..i + 2 + n)?;
            if !d.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            u32::from_str_radix(std::str::from_utf8(d).ok()?, 16).ok()
        };
        match *b.get(i + 1)? {
            b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'\\' | b'"' => Some(2),
            b'x' => hex(2).map(|_| 4),
            b'u' => hex(4).and_then(char::from_u32).map(|_| 6),
            b'U' => hex(8).and_then(char::from_u32).map(|_| 10),
            b'0'..=b'7' => {
                let d = b.get(i + 1..i + 4)?;
                let octal = d.iter().all(|c| (b'0'..=b'7').contains(c));
                let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c.wrapping_sub(b'0')));
                (octal && v <= 255).then_some(4)
            }
            _ => None,
        }
    };
    let mut i = 0;
    while i < b.len() {
        i += match b[i] {
            b'"' => None,
            b'\\' => escape(i),
            _ => Some(1),
        }
        .ok_or_else(|| "invalid syntax".to_string())?;
    }
    Ok(())
}

/// Go's `base64.StdEncoding.DecodeString` (padded, non-strict): the decoded bytes, or the input
/// offset Go's `CorruptInputError` names. `\r` and `\n` are skipped as Go skips them.
fn go_base64_decode(src: &[u8]) -> Result<Vec<u8>, usize> {
    fn value(c: u8) -> Option<u8> {
        match c {
            b'A'..=b'Z' => Some(c - b'A'),
            b'a'..=b'z' => Some(c - b'a' + 26),
            b'0'..=b'9' => Some(c - b'0' + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let newline = |c: u8| c == b'\n' || c == b'\r';
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    loop {
        let mut quantum = [0u8; 4];
        let mut len = 4;
        let mut last = false;
        let mut j = 0;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // Padding is mandatory: a short final quantum is corrupt.
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = value(c) {
                quantum[j] = v;
                j += 1;
                continue;
            }
            if newline(c) {
                continue;
            }
            if c != b'=' || j < 2 {
                return Err(si - 1);
            }
            if j == 2 {
                // "==" expected: the second '=' may follow newlines.
                while si < src.len() && newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Err(src.len());
                }
                if src[si] != b'=' {
                    return Err(si - 1);
                }
                si += 1;
            }
            while si < src.len() && newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                return Err(si);
            }
            len = j;
            last = true;
            break;
        }
        let v = u32::from(quantum[0]) << 18
            | u32::from(quantum[1]) << 12
            | u32::from(quantum[2]) << 6
            | u32::from(quantum[3]);
        let bytes = [(v >> 16) as u8, (v >> 8) as u8, v as u8];
        out.extend_from_slice(&bytes[..len - 1]);
        if last {
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expected`: `Ok(bytes)` or `Err(exact message, or its start before " (")`.
    fn check(input: &str, expected: Result<&[u8], &str>) {
        let got = decode_data_url(input);
        match (&got, expected) {
            (Ok(bytes), Ok(want)) => assert_eq!(bytes.as_slice(), want, "{input}"),
            (Err(msg), Err(want)) => {
                let head = msg.split(" (").next().unwrap();
                assert_eq!(head, want, "{input}: {msg}");
            }
            _ => panic!("{input}: got {got:?}, want {expected:?}"),
        }
    }

    #[test]
    fn base64_is_go_std_encoding() {
        check("data:;base64,aGk=", Ok(b"hi"));
        check("data:;base64,aGVsbG8K", Ok(b"hello\n"));
        check("data:;base64,", Ok(b""));
        check("data:;base64,YQ==", Ok(b"a"));
        // Unused trailing bits are ignored (StdEncoding is not Strict).
        check("data:;base64,YR==", Ok(b"a"));
        // Padding is mandatory; Go names the start of the short quantum.
        check("data:;base64,aGk", Err("illegal base64 data at input byte 0"));
        check("data:;base64,YQ", Err("illegal base64 data at input byte 0"));
        check("data:;base64,aGVsbG8Ka", Err("illegal base64 data at input byte 8"));
        check("data:;base64,YQ=", Err("illegal base64 data at input byte 3"));
        check("data:;base64,Y===", Err("illegal base64 data at input byte 1"));
        check("data:;base64,=", Err("illegal base64 data at input byte 0"));
        check("data:;base64,YQ==YQ==", Err("illegal base64 data at input byte 4"));
        check("data:;base64,YQ=a", Err("illegal base64 data at input byte 2"));
        // Outside the alphabet: refused by the lexer before decoding.
        check("data:;base64,!!!!", Err("invalid data character"));
        check("data:;base64,YQ%3D%3D", Err("invalid data character"));
        check("data:;base64,aGk=#x", Err("invalid data character"));
        // Whitespace: spaces are not base64 characters, newlines are control characters.
        check("data:;base64,aG k=", Err("invalid data character"));
        check(
            "data:;base64,aGk=\n",
            Err("unable to parse url: net/url: invalid control character in URL"),
        );
        check(
            "data:;base64,aGk=\r\n",
            Err("unable to parse url: net/url: invalid control character in URL"),
        );
        // The encoding name is exact and last.
        check("data:;BASE64,aGk=", Err("expected base64, got BASE64"));
        check(
            "data:;base64;a=b,aGk=",
            Err("invalid character for parameter attribute"),
        );
    }

    #[test]
    fn plain_data_is_rfc2396() {
        check("data:,", Ok(b""));
        check("data:,hello%20world%0A", Ok(b"hello world\n"));
        check("data:,a+b", Ok(b"a+b"));
        check("data:,%23!/bin/sh", Ok(b"#!/bin/sh"));
        check("data:,%e2%82%ac", Ok("€".as_bytes()));
        check("data:,100%", Err("rfc2396: unexpected end of unescape sequence"));
        check("data:,trailing%2", Err("rfc2396: unexpected end of unescape sequence"));
        check(
            "data:,bad%zzescape",
            Err("rfc2396: invalid char 0x25 in unescape sequence"),
        );
        check(
            "data:,bad%2zescape",
            Err("rfc2396: invalid char 0x25 in unescape sequence"),
        );
        // The lexer runs over all the data before it is unescaped.
        check("data:,%zz ", Err("invalid data character"));
        for bad in [" ", "<", ">", "\"", "{", "}", "|", "\\", "^", "[", "]", "`", "é"] {
            check(&format!("data:,a{bad}b"), Err("invalid data character"));
        }
        // '#' would start a fragment: refused, not kept and not cut.
        check("data:,a#b", Err("invalid data character"));
        check("data:,a#%zz", Err("unable to parse url: invalid URL escape \"%zz\""));
        check(
            "data:,a\tb",
            Err("unable to parse url: net/url: invalid control character in URL"),
        );
        check(
            "data:,a\u{7f}b",
            Err("unable to parse url: net/url: invalid control character in URL"),
        );
    }

    #[test]
    fn media_types_and_parameters() {
        check("data:text/plain,x", Ok(b"x"));
        check("data:text/plain;charset=utf-8,x", Ok(b"x"));
        check("data:text/plain;charset=utf-8;base64,YQ==", Ok(b"a"));
        check("data:application/octet-stream;base64,YQ==", Ok(b"a"));
        check("data:x-custom/thing,x", Ok(b"x"));
        check("data:image/svg+xml-im.a.fake;base64,YQ==", Ok(b"a"));
        check("data:text/,x", Ok(b"x"));
        check("data:;charset=utf-8,x", Ok(b"x"));
        check(
            r#"data:application/json;foo="b\"<@>\"r";style=a%20b;base64,YQ=="#,
            Ok(b"a"),
        );
        check(r#"data:text/plain;a="",x"#, Ok(b"x"));
        check("data:xxx;base64,YQ==", Err("invalid character for media type"));
        check("data:foo/bar,x", Err("invalid media type"));
        check("data:Text/plain,x", Err("invalid media type"));
        check("data:text,x", Err("invalid character for media type"));
        check("data:text", Err("missing media type slash"));
        check("data:text/plain", Err("incomplete media type"));
        check("data:text/pl ain,x", Err("invalid character for media subtype"));
        check("data:/plain,x", Err("invalid character after data prefix"));
        check("data:", Err("missing comma before data"));
        check("data:;", Err("unterminated parameter sequence"));
        check("data:;,x", Err("unterminated parameter sequence"));
        check("data:;=a,x", Err("unterminated parameter sequence"));
        check("data:;charset", Err("unterminated parameter sequence"));
        check("data:;charset=utf-8", Err("missing comma before data"));
        check("data:;charset=,x", Err("invalid character for parameter value"));
        check("data:;charset=a b,x", Err("invalid character for parameter value"));
        check(
            "data:;charset=a%zz,x",
            Err("rfc2396: invalid char 0x25 in unescape sequence"),
        );
        check(
            "data:;charset;base64,YQ==",
            Err("invalid character for parameter attribute"),
        );
        check("data:;a=\"b,x", Err("unclosed quoted string"));
        check("data:;a=\"b\"c,x", Err("expected semicolon or comma"));
        check("data:;a=\"b\\q\",x", Err("invalid syntax"));
        check("data:;a=\"b\\'\",x", Err("invalid syntax"));
        check("data:;a=\"\\x4\",x", Err("invalid syntax"));
        check("data:;a=\"\\x41\\101\\u00e9\",x", Ok(b"x"));
        check("data:;a=\"é\",x", Err("invalid character for parameter value"));
        check("data:;a=\"b#c\",x", Err("invalid character for parameter value"));
        check("DATA:,x", Err("missing data prefix"));
        check("https://example.com/x", Err("missing data prefix"));
    }
}
