//! IP addresses and CIDRs as `k8s.io/utils/net` parses them "sloppily" for the `ipv4` and
//! `cidr` formats: Go 1.16's parser, which took leading zeros (`010.1.1.1`) as decimal.

/// The address's length in bytes (4 or 16) when `s` is an IPv4 or IPv6 address: IPv4 when
/// a `.` comes before any `:`, as Go decides.
pub fn parse_ip_sloppy(s: &str) -> Option<usize> {
    match s.bytes().find(|b| *b == b'.' || *b == b':')? {
        b'.' => parse_v4(s).map(|_| 4),
        _ => parse_v6(s).map(|_| 16),
    }
}

/// `address/bits`, an IPv4 (up to 32 bits) or else IPv6 (up to 128) address and a decimal
/// prefix length; host bits may be set.
pub fn parse_cidr_sloppy(s: &str) -> bool {
    let Some((addr, mask)) = s.split_once('/') else { return false };
    let len = if parse_v4(addr).is_some() {
        4
    } else if parse_v6(addr).is_some() {
        16
    } else {
        return false;
    };
    matches!(decimal(mask), Some((n, used)) if used == mask.len() && n <= 8 * len)
}

/// Go's `dtoi`: the leading decimal number of `s` and the bytes it took; none without a
/// digit or from 0xFFFFFF up.
fn decimal(s: &str) -> Option<(usize, usize)> {
    let mut n = 0usize;
    let mut used = 0;
    for b in s.bytes().take_while(u8::is_ascii_digit) {
        n = n * 10 + usize::from(b - b'0');
        if n >= 0xFF_FFFF {
            return None;
        }
        used += 1;
    }
    (used > 0).then_some((n, used))
}

/// Go's `xtoi`: the leading hexadecimal number of `s` and the bytes it took.
fn hex(s: &str) -> Option<(usize, usize)> {
    let mut n = 0usize;
    let mut used = 0;
    for b in s.bytes().take_while(u8::is_ascii_hexdigit) {
        n = n * 16 + (b as char).to_digit(16).expect("a hex digit") as usize;
        if n >= 0xFF_FFFF {
            return None;
        }
        used += 1;
    }
    (used > 0).then_some((n, used))
}

fn parse_v4(mut s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    for (i, octet) in out.iter_mut().enumerate() {
        if i > 0 {
            s = s.strip_prefix('.')?;
        }
        let (n, used) = decimal(s)?;
        *octet = u8::try_from(n).ok()?;
        s = &s[used..];
    }
    s.is_empty().then_some(out)
}

fn parse_v6(mut s: &str) -> Option<[u8; 16]> {
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if let Some(rest) = s.strip_prefix("::") {
        ellipsis = Some(0);
        s = rest;
        if s.is_empty() {
            return Some(ip);
        }
    }
    let mut i = 0;
    while i < 16 {
        let (n, used) = hex(s)?;
        if s.as_bytes().get(used) == Some(&b'.') {
            // A trailing IPv4 address, in the last four bytes (or before an ellipsis' zeros).
            if (ellipsis.is_none() && i != 12) || i + 4 > 16 {
                return None;
            }
            ip[i..i + 4].copy_from_slice(&parse_v4(s)?);
            s = "";
            i += 4;
            break;
        }
        let group = u16::try_from(n).ok()?;
        ip[i..i + 2].copy_from_slice(&group.to_be_bytes());
        i += 2;
        s = &s[used..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') || s.len() == 1 {
            return None;
        }
        s = &s[1..];
        if let Some(rest) = s.strip_prefix(':') {
            if ellipsis.is_some() {
                return None;
            }
            ellipsis = Some(i);
            s = rest;
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return None;
    }
    match ellipsis {
        Some(at) if i < 16 => {
            let n = 16 - i;
            ip.copy_within(at..i, at + n);
            ip[at..at + n].fill(0);
        }
        None if i < 16 => return None,
        Some(_) => return None,
        None => {}
    }
    Some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_as_go_1_16_did() {
        assert_eq!(parse_v6("1::2"), Some([0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]));
        assert_eq!(parse_v6("::ffff:1.2.3.4"), Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4]));
        assert_eq!(parse_v6("1:2:3:4:5:6:7::"), Some([0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 0]));
        assert_eq!(parse_v6("1:2:3:4:5:6:7:8::"), None);
        assert_eq!(parse_v6("1:2:3:4:5:6:7:8"), Some([0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8]));
        assert_eq!(parse_v6("00001::"), Some([0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(parse_v6(":1::"), None);
        assert_eq!(parse_v4("001.002.003.004"), Some([1, 2, 3, 4]));
        assert_eq!(parse_v4("1.2.3.256"), None);
        assert_eq!(parse_ip_sloppy("1.2.3.4"), Some(4));
        assert_eq!(parse_ip_sloppy("abc"), None);
    }
}
