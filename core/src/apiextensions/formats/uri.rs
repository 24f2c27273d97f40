//! The `uri` format: what Go's `url.ParseRequestURI` accepts (govalidator's `IsRequestURI`).

/// Whether Go's `url.ParseRequestURI` accepts `s`: an absolute URI (`scheme:...`, opaque or
/// hierarchical) or an absolute path, without control bytes, with well-formed `%` escapes
/// and, after `scheme://`, a valid authority. No fragment is split off.
pub fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return false;
    }
    if s == "*" {
        return true;
    }
    let Some((scheme, rest)) = scheme(s) else { return false };
    let rest = match rest.strip_suffix('?') {
        Some(without) if !without.contains('?') => without,
        _ => rest.split_once('?').map_or(rest, |(before, _)| before),
    };
    if !rest.starts_with('/') {
        // An opaque URI (`mailto:a@b`) needs its scheme; a relative reference is no request.
        return !scheme.is_empty();
    }
    let mut path = rest;
    if !scheme.is_empty()
        && let Some(after) = rest.strip_prefix("//")
    {
        let (authority, after_authority) = after.find('/').map_or((after, ""), |i| after.split_at(i));
        if !valid_authority(authority) {
            return false;
        }
        path = after_authority;
    }
    unescapes(path, Part::Path)
}

/// Go's `getScheme`: the scheme and what follows its colon; `None` for a colon first.
fn scheme(s: &str) -> Option<(&str, &str)> {
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return None,
            b':' => return Some((&s[..i], &s[i + 1..])),
            _ => return Some(("", s)),
        }
    }
    Some(("", s))
}

#[derive(Clone, Copy, PartialEq)]
enum Part {
    Path,
    UserInfo,
    Host,
    Zone,
}

/// `userinfo@host:port`, as Go's `parseAuthority` checks it.
fn valid_authority(authority: &str) -> bool {
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    if !valid_host(host) {
        return false;
    }
    let Some(userinfo) = userinfo else { return true };
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._:~!$&'()*+,;=%@".contains(c);
    userinfo.chars().all(allowed) && unescapes(userinfo, Part::UserInfo)
}

/// Go's `parseHost`: a bracketed IPv6 literal (with an optional `%25` zone) or a name, each
/// with an optional numeric port.
fn valid_host(host: &str) -> bool {
    if host.starts_with('[') {
        let Some(close) = host.rfind(']') else { return false };
        if !valid_port(&host[close + 1..]) {
            return false;
        }
        return match host[..close].find("%25") {
            Some(zone) => unescapes(&host[..zone], Part::Host) && unescapes(&host[zone..close], Part::Zone) && unescapes(&host[close..], Part::Host),
            None => unescapes(host, Part::Host),
        };
    }
    if let Some(colon) = host.rfind(':')
        && !valid_port(&host[colon..])
    {
        return false;
    }
    unescapes(host, Part::Host)
}

fn valid_port(port: &str) -> bool {
    port.is_empty() || port.strip_prefix(':').is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether Go's `unescape` takes `s` as a part of a URL: every `%` followed by two hex digits;
/// in a host, escapes only of non-ASCII bytes (or `%25`) and only the characters a host may
/// have; in a zone, escapes only of what a host may have (or a space).
fn unescapes(s: &str, part: Part) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                return false;
            }
            let escaped = &s[i..i + 3];
            let value = u8::from_str_radix(&escaped[1..], 16).expect("two hex digits");
            if part == Part::Host && value < 0x80 && escaped != "%25" {
                return false;
            }
            if part == Part::Zone && escaped != "%25" && value != b' ' && !host_may_have(value) {
                return false;
            }
            i += 3;
            continue;
        }
        if matches!(part, Part::Host | Part::Zone) && b[i] < 0x80 && !host_may_have(b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// The ASCII bytes Go's URL parser lets a host have unescaped.
fn host_may_have(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!$&'()*+,;=:[]<>\"-_.~".contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_uris_as_go_parses_them() {
        for good in ["http://a.b/c", "http://user:pw@host:8080/p?q", "urn:x", "/", "*", "http://[fe80::1%25en0]:80/", "HTTP://A/%41", "http://a/b#frag ment"] {
            assert!(is_request_uri(good), "{good}");
        }
        for bad in ["", "a", "a/b", ":x", "http://a:b/", "http://a%41/", "http://a b/", "http://[::1/", "http://us er@a/", "/%4", "/a\tb"] {
            assert!(!is_request_uri(bad), "{bad}");
        }
    }
}
