//! The string formats kube checks in custom resources: the 24 of kube-openapi's `strfmt.Default`
//! registry that apiextensions v1.33 keeps (`pkg/apiserver/validation/formats.go`), each
//! accepting what its Go check accepts. Any other format is dropped from the schema and checks
//! nothing; names are compared with their `-`s removed (`date-time` is `datetime`).

mod email;
mod network;
mod uri;

pub use uri::is_request_uri;

use std::sync::LazyLock;

use regex::Regex;

use network::{parse_cidr_sloppy, parse_ip_sloppy};

/// The formats kube checks, as normalized names (`date-time` is `datetime`).
pub const CHECKED: [&str; 24] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

fn normalized(format: &str) -> String {
    format.replace('-', "")
}

/// Whether kube checks values against `format` (as written in a schema).
pub fn is_checked(format: &str) -> bool {
    !format.is_empty() && CHECKED.contains(&normalized(format).as_str())
}

/// Whether `s` is a valid value of the checked `format`; `true` for formats kube does not check.
pub fn accepts(format: &str, s: &str) -> bool {
    match normalized(format).as_str() {
        "bsonobjectid" => s.len() == 24 && s.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => uri::is_request_uri(s),
        "email" => email::is_address(s),
        "hostname" => is_hostname(s),
        "ipv4" => parse_ip_sloppy(s).is_some() && s.contains('.'),
        "ipv6" => s.contains(':') && s.parse::<core::net::Ipv6Addr>().is_ok(),
        "cidr" => parse_cidr_sloppy(s),
        "mac" => is_mac(s),
        "uuid" => matches(&UUID, s),
        "uuid3" => matches(&UUID3, s),
        "uuid4" => matches(&UUID4, s),
        "uuid5" => matches(&UUID5, s),
        "isbn" => is_isbn10(s) || is_isbn13(s),
        "isbn10" => is_isbn10(s),
        "isbn13" => is_isbn13(s),
        "creditcard" => is_credit_card(s),
        "ssn" => s.len() == 11 && matches(&SSN, s),
        "hexcolor" => matches(&HEX_COLOR, s),
        "rgbcolor" => matches(&RGB_COLOR, s),
        "byte" => matches(&BASE64, s),
        "date" => is_date(s),
        "duration" => is_duration(s),
        "datetime" => is_date_time(s),
        _ => true,
    }
}

fn matches(re: &LazyLock<Regex>, s: &str) -> bool {
    re.is_match(s)
}

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the formats' patterns compile")
}

static UUID: LazyLock<Regex> = LazyLock::new(|| regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Regex> = LazyLock::new(|| regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID4: LazyLock<Regex> = LazyLock::new(|| regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"));
static UUID5: LazyLock<Regex> = LazyLock::new(|| regex("(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"));
static SSN: LazyLock<Regex> = LazyLock::new(|| regex("^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$"));
static HEX_COLOR: LazyLock<Regex> = LazyLock::new(|| regex("^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
/// Go's `\s` and `\d` are ASCII: spelled out here, as Rust's are Unicode.
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    let n = "(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])";
    let s = "[\t\n\x0c\r ]*";
    regex(&format!("^rgb\\({s}{n}{s},{s}{n}{s},{s}{n}{s}\\)$"))
});
static BASE64: LazyLock<Regex> = LazyLock::new(|| regex("^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"));
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    let c = r"a-zA-Z0-9\p{S}\p{L}";
    regex(&format!(r"^([{c}]((-?[{c}]{{0,62}})?)|([{c}](([{c}-]{{0,61}}[{c}])?)(\.)){{1,}}([a-zA-Z\p{{L}}]){{2,63}})$"))
});
static CREDIT_CARD: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        "^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$",
    )
});
static DATE_TIME: LazyLock<Regex> = LazyLock::new(|| regex("^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"));
/// strfmt's fallback for durations Go cannot parse: a number and a unit, anywhere.
static DURATION_PART: LazyLock<Regex> = LazyLock::new(|| regex("(([0-9]+)[\t\n\x0c\r ]*([A-Za-zµ]+))"));

/// govalidator's `IsHostname`: its pattern, at most 255 bytes, labels of at most 63.
fn is_hostname(s: &str) -> bool {
    matches(&HOSTNAME, s) && s.len() <= 255 && s.split('.').all(|label| label.len() <= 63)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx:..`, `xx-xx-..` or `xxxx.xxxx.xxxx`.
fn is_mac(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 14 {
        return false;
    }
    let hex2 = |i: usize| b[i].is_ascii_hexdigit() && b[i + 1].is_ascii_hexdigit();
    let octets = if b[2] == b':' || b[2] == b'-' {
        if !(b.len() + 1).is_multiple_of(3) {
            return false;
        }
        let sep = b[2];
        let n = (b.len() + 1) / 3;
        if !(0..n).all(|i| hex2(3 * i) && (i == n - 1 || b[3 * i + 2] == sep)) {
            return false;
        }
        n
    } else if b[4] == b'.' {
        if !(b.len() + 1).is_multiple_of(5) {
            return false;
        }
        let groups = (b.len() + 1) / 5;
        if !(0..groups).all(|i| hex2(5 * i) && hex2(5 * i + 2) && (i == groups - 1 || b[5 * i + 4] == b'.')) {
            return false;
        }
        2 * groups
    } else {
        return false;
    };
    matches!(octets, 6 | 8 | 20)
}

/// The digits of an ISBN with its spaces and dashes (ASCII whitespace and `-`) removed.
fn isbn_digits(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ' | '-')).collect()
}

fn is_isbn10(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    let shape = b.len() == 10 && b[..9].iter().all(u8::is_ascii_digit) && (b[9].is_ascii_digit() || b[9] == b'X');
    shape && b.iter().enumerate().map(|(i, c)| (i as u32 + 1) * if *c == b'X' { 10 } else { u32::from(c - b'0') }).sum::<u32>() % 11 == 0
}

fn is_isbn13(s: &str) -> bool {
    let d = isbn_digits(s);
    let b = d.as_bytes();
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = b[..12].iter().enumerate().map(|(i, c)| u32::from(c - b'0') * if i % 2 == 0 { 1 } else { 3 }).sum();
    u32::from(b[12] - b'0') == (10 - sum % 10) % 10
}

/// govalidator's `IsCreditCard`: the digits (everything else removed) of a known issuer's
/// number, passing Luhn's check.
fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !matches(&CREDIT_CARD, &digits) {
        return false;
    }
    let sum: u32 = digits
        .bytes()
        .rev()
        .enumerate()
        .map(|(i, c)| {
            let d = u32::from(c - b'0');
            if i % 2 == 1 { if d * 2 > 9 { d * 2 - 9 } else { d * 2 } } else { d }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Go's `time.Parse("2006-01-02", s)`: four digits of year, two of month (1-12), two of a day
/// the month has, nothing else.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || ![0, 1, 2, 3, 5, 6, 8, 9].iter().all(|i| b[*i].is_ascii_digit()) {
        return false;
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<u32>().unwrap_or(0);
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// strfmt's `IsDateTime`: a date, `t` (either case), a time of day with a zone.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else { return false };
    if !is_date(date) {
        return false;
    }
    DATE_TIME.captures(time).is_some_and(|m| &m[1] <= "23" && &m[2] <= "59" && &m[3] <= "59")
}

/// strfmt's `ParseDuration` succeeds: Go's `time.ParseDuration`, or else some number followed by
/// a unit strfmt knows (`3 days`, `2wk`), whatever surrounds it.
fn is_duration(s: &str) -> bool {
    if go_duration(s).is_some() {
        return true;
    }
    const UNITS: [&[&str]; 8] =
        [&["ns", "nano"], &["us", "µs", "micro"], &["ms", "milli"], &["s", "sec"], &["m", "min"], &["h", "hr", "hour"], &["d", "day"], &["w", "wk", "week"]];
    let mut known = false;
    for m in DURATION_PART.captures_iter(s) {
        if m[2].parse::<i64>().is_err() {
            return false;
        }
        let unit = m[3].to_lowercase();
        known |= UNITS
            .iter()
            .any(|variants| variants.iter().enumerate().any(|(i, v)| (i == variants.len() - 1 && unit.starts_with(v)) || unit.eq_ignore_ascii_case(v)));
    }
    known
}

/// The nanoseconds of `s` where Go's `time.ParseDuration` accepts it:
/// `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+` with Go's units, or `0`, within the range of an `int64`.
pub fn go_duration(s: &str) -> Option<i64> {
    const UNITS: [(&str, u64); 8] =
        [("ns", 1), ("us", 1_000), ("µs", 1_000), ("μs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000), ("m", 60_000_000_000), ("h", 3_600_000_000_000)];
    const LIMIT: u64 = 1 << 63;
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for c in rest[..int_len].bytes() {
            if whole > LIMIT / 10 {
                return None;
            }
            whole = whole * 10 + u64::from(c - b'0');
            if whole > LIMIT {
                return None;
            }
        }
        rest = &rest[int_len..];
        let (mut fraction, mut scale) = (0u64, 1f64);
        if let Some(after) = rest.strip_prefix('.') {
            let frac_len = after.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflowed = false;
            for c in after[..frac_len].bytes() {
                if overflowed || fraction > (LIMIT - 1) / 10 {
                    overflowed = true;
                    continue;
                }
                fraction = fraction * 10 + u64::from(c - b'0');
                scale *= 10.0;
            }
            if int_len == 0 && frac_len == 0 {
                return None;
            }
            rest = &after[frac_len..];
        } else if int_len == 0 {
            return None;
        }
        let unit_len = rest.bytes().take_while(|c| *c != b'.' && !c.is_ascii_digit()).count();
        let (_, per) = UNITS.iter().find(|(name, _)| *name == &rest[..unit_len])?;
        rest = &rest[unit_len..];
        if whole > LIMIT / per {
            return None;
        }
        whole *= per;
        if fraction > 0 {
            whole += (fraction as f64 * (*per as f64 / scale)) as u64;
            if whole > LIMIT {
                return None;
            }
        }
        // Go adds in a uint64: two halves of the range wrap to zero, and Go takes that.
        total = total.wrapping_add(whole);
        if total > LIMIT {
            return None;
        }
    }
    if negative { Some((-(i128::from(total))) as i64) } else { (total < LIMIT).then_some(total as i64) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_accept_what_kubes_checks_accept() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                "uri",
                &["https://example.com/a?b#c", "mailto:a@b", "/just/a/path", "urn:isbn:0451450523"],
                &["", "a/b", "http://exa mple.com", "http://a/%zz", "http://[::1"],
            ),
            (
                "email",
                &["a@b", "Bob <bob@example.com>", "\"a b\"@example.com", "a@[127.0.0.1]", "a@b (Bob)"],
                &["", "a", "a@", "@b", "a@b c", "a..b@c", "<a@b"],
            ),
            ("hostname", &["a.com", "x-y", "localhost", "ex=ample.com"], &["my-host", "1.1.1.1", "a.b.c.d", "-a.com", "a.com."]),
            ("ipv4", &["1.2.3.4", "010.1.1.1", "::ffff:1.2.3.4"], &["1.2.3", "256.1.1.1", "::1", "1.2.3.4.5"]),
            ("ipv6", &["::1", "2001:db8::1", "::ffff:1.2.3.4"], &["1.2.3.4", "::1%eth0", "1:2:3:4:5:6:7:8:9", "12345::1"]),
            ("cidr", &["10.0.0.1/8", "::/0", "010.0.0.0/08"], &["10.0.0.0", "10.0.0.0/33", "::/129", "a/8"]),
            (
                "mac",
                &["01:23:45:67:89:ab", "01-23-45-67-89-ab", "0123.4567.89ab", "01:23:45:67:89:ab:cd:ef"],
                &["01:23:45:67:89", "01:23-45:67:89:ab", "0123.4567.89"],
            ),
            (
                "uuid",
                &["123e4567-e89b-12d3-a456-426614174000", "123E4567E89B12D3A456426614174000"],
                &["123e4567-e89b-12d3-a456-42661417400", "x23e4567-e89b-12d3-a456-426614174000"],
            ),
            ("uuid4", &["123e4567-e89b-42d3-a456-426614174000"], &["123e4567-e89b-12d3-a456-426614174000"]),
            ("isbn", &["0-306-40615-2", "978-0-306-40615-7", "080442957X"], &["0-306-40615-3", "978-0-306-40615-8"]),
            ("creditcard", &["4111 1111 1111 1111", "5500-0000-0000-0004"], &["4111 1111 1111 1112", "1234"]),
            ("ssn", &["123-45-6789", "123 45 6789"], &["123456789", "123-45-678"]),
            ("hexcolor", &["#fff", "A0B1C2"], &["#ffff", "#ggg"]),
            ("rgbcolor", &["rgb(0, 128, 255)", "rgb(1,2,3)"], &["rgb(256,0,0)", "RGB(1,2,3)"]),
            ("byte", &["aGVsbG8=", "YQ=="], &["", "aGVsbG8", "a-_b"]),
            ("password", &["", "anything"], &[]),
            ("bsonobjectid", &["507f1f77bcf86cd799439011"], &["507f1f77bcf86cd79943901", "507f1f77bcf86cd79943901z"]),
            ("date", &["2024-02-29", "0000-01-01"], &["2023-02-29", "2024-13-01", "2024-1-01", "2024-01-01T00:00:00Z", "2024-01-00"]),
            (
                "date-time",
                &["2014-12-15T08:00:00Z", "2014-12-15t08:00:00.5+01:00", "2014-12-15T08:00:00x5z"],
                &["2014-12-15T08:00:00", "2014-12-15 08:00:00Z", "2014-12-15T24:00:00Z", "2014-12-15T23:59:60Z"],
            ),
            (
                "duration",
                &["1h30m", "-1.5h", "300ms", "0", "3 days", "foo 3 days bar", "-5 days", "2wk", ".5s", "9223372036854775808ns9223372036854775808ns"],
                &["", "12 parsecs", "12 y", "yada", "-", "99999999999999999999 days"],
            ),
        ];
        for (format, good, bad) in cases {
            assert!(is_checked(format), "{format}");
            for s in *good {
                assert!(accepts(format, s), "{format} should accept {s:?}");
            }
            for s in *bad {
                assert!(!accepts(format, s), "{format} should refuse {s:?}");
            }
        }
        assert!(!is_checked("int32") && !is_checked("k8s-short-name") && !is_checked(""));
        assert!(is_checked("date-time") && is_checked("u-u-i-d"));
    }
}
