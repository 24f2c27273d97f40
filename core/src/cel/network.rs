//! kube's IP, CIDR and URL libraries (k8s.io/apiserver/pkg/cel/library `ip.go`, `cidr.go`,
//! `urls.go`): `ip(s)`, `isIP(s)`, `ip.isCanonical(s)` and of an IP `family()`,
//! `isUnspecified()`, `isLoopback()`, `isLinkLocalMulticast()`, `isLinkLocalUnicast()`,
//! `isGlobalUnicast()`; `cidr(s)`, `isCIDR(s)` and of a CIDR `containsIP(ip | s)`,
//! `containsCIDR(cidr | s)`, `ip()`, `masked()`, `prefixLength()`; `string()` of either;
//! `url(s)`, `isURL(s)` and of a URL `getScheme()`, `getHost()`, `getHostname()`,
//! `getPort()`, `getEscapedPath()`, `getQuery()`. Addresses are Go's `netip` ones: no zone,
//! no IPv4-mapped IPv6 address.

use core::net::IpAddr;
use std::collections::HashMap;
use std::sync::Arc;

use cel::common::types::{STRING_TYPE, Type};
use cel::common::value::CowVal;
use cel::objects::{Key, Opaque};
use cel::{DeclarationError, Env, ExecutionError, Value};

use super::library::{answer, subject, values};
use crate::apiextensions::is_request_uri;

const IP: &str = "net.IP";
const CIDR: &str = "net.IPPrefix";
const URL: &str = "kubernetes.URL";

#[derive(Debug, PartialEq, Eq)]
struct Ip(IpAddr);

/// An address and a prefix length (the address as written, host bits kept).
#[derive(Debug, PartialEq, Eq)]
struct Cidr(IpAddr, u8);

#[derive(Debug, PartialEq, Eq)]
struct Url(String);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        IP
    }
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        CIDR
    }
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        URL
    }
}

type Function = for<'b, 'v> fn(Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError>;

/// Registers the libraries on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    let (ip, cidr) = (|| Type::new_opaque_type(IP), || Type::new_opaque_type(CIDR));
    let globals: [(&str, &str, Vec<Type>, Function); 9] = [
        ("ip", "string_to_ip", vec![STRING_TYPE], to_ip),
        ("isIP", "is_ip", vec![STRING_TYPE], is_ip),
        ("ip.isCanonical", "ip_is_canonical", vec![STRING_TYPE], is_canonical),
        ("cidr", "string_to_cidr", vec![STRING_TYPE], to_cidr),
        ("isCIDR", "is_cidr", vec![STRING_TYPE], is_cidr),
        ("url", "string_to_url", vec![STRING_TYPE], to_url),
        ("isURL", "is_url_string", vec![STRING_TYPE], is_url),
        ("string", "ip_to_string", vec![ip()], to_string),
        ("string", "cidr_to_string", vec![cidr()], to_string),
    ];
    for (name, id, args, f) in globals {
        env.add_overload(name, id, args, f)?;
    }
    let members: [(&str, &str, &'static str, Vec<Type>, Function); 19] = [
        ("family", "ip_family", IP, vec![], family),
        ("isUnspecified", "ip_is_unspecified", IP, vec![], is_unspecified),
        ("isLoopback", "ip_is_loopback", IP, vec![], is_loopback),
        ("isLinkLocalMulticast", "ip_is_link_local_multicast", IP, vec![], is_link_local_multicast),
        ("isLinkLocalUnicast", "ip_is_link_local_unicast", IP, vec![], is_link_local_unicast),
        ("isGlobalUnicast", "ip_is_global_unicast", IP, vec![], is_global_unicast),
        ("containsIP", "cidr_contains_ip_ip", CIDR, vec![ip()], contains_ip),
        ("containsIP", "cidr_contains_ip_string", CIDR, vec![STRING_TYPE], contains_ip),
        ("containsCIDR", "cidr_contains_cidr", CIDR, vec![cidr()], contains_cidr),
        ("containsCIDR", "cidr_contains_cidr_string", CIDR, vec![STRING_TYPE], contains_cidr),
        ("ip", "cidr_ip", CIDR, vec![], cidr_ip),
        ("masked", "cidr_masked", CIDR, vec![], masked),
        ("prefixLength", "cidr_prefix_length", CIDR, vec![], prefix_length),
        ("getScheme", "url_get_scheme", URL, vec![], get_scheme),
        ("getHost", "url_get_host", URL, vec![], get_host),
        ("getHostname", "url_get_hostname", URL, vec![], get_hostname),
        ("getPort", "url_get_port", URL, vec![], get_port),
        ("getEscapedPath", "url_get_escaped_path", URL, vec![], get_escaped_path),
        ("getQuery", "url_get_query", URL, vec![], get_query),
    ];
    for (name, id, target, args, f) in members {
        env.add_member_overload(name, id, Type::new_opaque_type(target), args, f)?;
    }
    Ok(())
}

/// An address as Go's `netip.ParseAddr` reads it, refused as kube refuses it with a zone or
/// as an IPv4-mapped IPv6 address.
fn parse_ip(s: &str) -> Result<IpAddr, String> {
    let addr: IpAddr = s.parse().map_err(|_| format!("IP Address {s:?} parse error during conversion from string: ParseAddr({s:?}): unable to parse IP"))?;
    if let IpAddr::V6(v6) = addr
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address {s:?} is not allowed"));
    }
    Ok(addr)
}

fn parse_cidr(s: &str) -> Result<Cidr, String> {
    let refused = || format!("network address {s:?} parse error during conversion from string: netip.ParsePrefix({s:?}): invalid prefix");
    let (addr, bits) = s.split_once('/').ok_or_else(refused)?;
    let addr = parse_ip(addr).map_err(|_| refused())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let bits: u8 = bits.parse().ok().filter(|b| *b <= max && !bits.starts_with('+') && (bits == "0" || !bits.starts_with('0'))).ok_or_else(refused)?;
    Ok(Cidr(addr, bits))
}

fn error(function: &str, e: String) -> ExecutionError {
    ExecutionError::function_error(function, e)
}

fn opaque<'b, 'v>(o: impl Opaque) -> Result<CowVal<'b, 'v>, ExecutionError> {
    answer(Value::Opaque(Arc::new(o)))
}

fn to_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    opaque(Ip(parse_ip(&subject("ip", &s)?).map_err(|e| error("ip", e))?))
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    answer(Value::Bool(parse_ip(&subject("isIP", &s)?).is_ok()))
}

fn is_canonical<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    let text = subject("ip.isCanonical", &s)?;
    let addr = parse_ip(&text).map_err(|e| error("ip.isCanonical", e))?;
    answer(Value::Bool(addr.to_string() == *text))
}

fn to_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    opaque(parse_cidr(&subject("cidr", &s)?).map_err(|e| error("cidr", e))?)
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    answer(Value::Bool(parse_cidr(&subject("isCIDR", &s)?).is_ok()))
}

fn to_string<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [v] = values(args)?;
    let text = match &v {
        Value::Opaque(o) => match (o.downcast_ref::<Ip>(), o.downcast_ref::<Cidr>()) {
            (Some(ip), _) => ip.0.to_string(),
            (_, Some(c)) => format!("{}/{}", c.0, c.1),
            _ => return Err(error("string", "not an IP or CIDR".into())),
        },
        _ => return Err(error("string", "not an IP or CIDR".into())),
    };
    answer(Value::String(Arc::new(text)))
}

fn ip_of(function: &str, v: &Value) -> Result<IpAddr, ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Ip>().map(|ip| ip.0).ok_or_else(|| error(function, "not an IP".into())),
        Value::String(s) => parse_ip(s).map_err(|e| error(function, e)),
        _ => Err(error(function, "not an IP".into())),
    }
}

fn cidr_of(function: &str, v: &Value) -> Result<(IpAddr, u8), ExecutionError> {
    match v {
        Value::Opaque(o) => o.downcast_ref::<Cidr>().map(|c| (c.0, c.1)).ok_or_else(|| error(function, "not a CIDR".into())),
        Value::String(s) => parse_cidr(s).map(|c| (c.0, c.1)).map_err(|e| error(function, e)),
        _ => Err(error(function, "not a CIDR".into())),
    }
}

fn ip_test<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>, test: fn(IpAddr) -> bool) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [v] = values(args)?;
    answer(Value::Bool(test(ip_of(function, &v)?)))
}

fn family<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [v] = values(args)?;
    answer(Value::Int(if ip_of("family", &v)?.is_ipv4() { 4 } else { 6 }))
}

fn is_unspecified<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_test("isUnspecified", args, |ip| ip.is_unspecified())
}

fn is_loopback<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_test("isLoopback", args, |ip| ip.is_loopback())
}

fn link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

fn link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_link_local_multicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_test("isLinkLocalMulticast", args, link_local_multicast)
}

fn is_link_local_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_test("isLinkLocalUnicast", args, link_local_unicast)
}

/// Go's `IsGlobalUnicast`: none of the special addresses (private ones are global unicast).
fn is_global_unicast<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    ip_test("isGlobalUnicast", args, |ip| {
        let broadcast = matches!(ip, IpAddr::V4(v4) if v4.is_broadcast());
        !(ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() || broadcast || link_local_unicast(ip))
    })
}

/// The address with all but its first `bits` bits zero.
fn mask(ip: IpAddr, bits: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let m = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            IpAddr::V4((u32::from(v4) & m).into())
        }
        IpAddr::V6(v6) => {
            let m = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            IpAddr::V6((u128::from(v6) & m).into())
        }
    }
}

fn contains(net: (IpAddr, u8), ip: IpAddr) -> bool {
    net.0.is_ipv4() == ip.is_ipv4() && mask(net.0, net.1) == mask(ip, net.1)
}

fn contains_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [net, ip] = values(args)?;
    answer(Value::Bool(contains(cidr_of("containsIP", &net)?, ip_of("containsIP", &ip)?)))
}

fn contains_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [net, other] = values(args)?;
    let (outer, inner) = (cidr_of("containsCIDR", &net)?, cidr_of("containsCIDR", &other)?);
    answer(Value::Bool(inner.1 >= outer.1 && contains(outer, inner.0)))
}

fn cidr_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [net] = values(args)?;
    opaque(Ip(cidr_of("ip", &net)?.0))
}

fn masked<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [net] = values(args)?;
    let (ip, bits) = cidr_of("masked", &net)?;
    opaque(Cidr(mask(ip, bits), bits))
}

fn prefix_length<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [net] = values(args)?;
    answer(Value::Int(i64::from(cidr_of("prefixLength", &net)?.1)))
}

fn to_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    let text = subject("url", &s)?;
    if !is_request_uri(&text) {
        return Err(error("url", format!("URL parse error during conversion from string: parse {text:?}: invalid URI for request")));
    }
    opaque(Url(text.to_string()))
}

fn is_url<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [s] = values(args)?;
    answer(Value::Bool(is_request_uri(&subject("isURL", &s)?)))
}

/// A URL's parts as Go's `url.Parse` splits them.
struct Parts<'a> {
    scheme: &'a str,
    host: &'a str,
    path: &'a str,
    query: &'a str,
}

fn parts(url: &str) -> Parts<'_> {
    let url = url.split_once('#').map_or(url, |(before, _)| before);
    let (scheme, rest) = match url.split_once(':') {
        Some((scheme, rest)) if !scheme.is_empty() && !scheme.contains('/') => (scheme, rest),
        _ => ("", url),
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (host, path) = match rest.strip_prefix("//") {
        Some(after) => after.find('/').map_or((after, ""), |i| after.split_at(i)),
        None => ("", rest),
    };
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    Parts { scheme, host, path, query }
}

fn url_part<'b, 'v>(function: &str, args: Vec<CowVal<'b, 'v>>, part: fn(&Parts) -> String) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [u] = values(args)?;
    let Value::Opaque(o) = &u else { return Err(error(function, "not a URL".into())) };
    let url = o.downcast_ref::<Url>().ok_or_else(|| error(function, "not a URL".into()))?;
    answer(Value::String(Arc::new(part(&parts(&url.0)))))
}

/// The host without its port (and an IPv6 literal without its brackets).
fn hostname(host: &str) -> &str {
    if let Some(inner) = host.strip_prefix('[') {
        return inner.split_once(']').map_or(inner, |(h, _)| h);
    }
    host.rsplit_once(':').map_or(host, |(h, _)| h)
}

fn port(host: &str) -> &str {
    let after = if host.starts_with('[') { host.split_once(']').map_or("", |(_, rest)| rest) } else { host };
    after.rsplit_once(':').map_or("", |(_, p)| p)
}

fn get_scheme<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    url_part("getScheme", args, |p| p.scheme.to_string())
}

fn get_host<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    url_part("getHost", args, |p| p.host.to_string())
}

fn get_hostname<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    url_part("getHostname", args, |p| hostname(p.host).to_string())
}

fn get_port<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    url_part("getPort", args, |p| port(p.host).to_string())
}

fn get_escaped_path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    url_part("getEscapedPath", args, |p| p.path.to_string())
}

/// `%XX` escapes and `+` (a space) decoded, as Go's `QueryUnescape` does.
fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match s.get(i + 1..i + 3).filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit())) {
                Some(hex) => {
                    out.push(u8::from_str_radix(hex, 16).unwrap_or_default());
                    i += 2;
                }
                None => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The query's values by key, in order (Go's `url.Values`).
fn get_query<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [u] = values(args)?;
    let Value::Opaque(o) = &u else { return Err(error("getQuery", "not a URL".into())) };
    let url = o.downcast_ref::<Url>().ok_or_else(|| error("getQuery", "not a URL".into()))?;
    let mut query: HashMap<String, Vec<Value>> = HashMap::new();
    for pair in parts(&url.0).query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        query.entry(unescape(k)).or_default().push(Value::String(Arc::new(unescape(v))));
    }
    let map: HashMap<Key, Value> = query.into_iter().map(|(k, v)| (Key::from(k), Value::List(Arc::new(v)))).collect();
    answer(Value::Map(map.into()))
}
