//! The limits kube-apiserver puts on a request before its handler runs: the request's deadline
//! (`WithRequestDeadline`: the `timeout` query parameter, capped by `--request-timeout`) and
//! the number of requests in flight (`WithMaxInFlightLimit`: `--max-requests-inflight`,
//! `--max-mutating-requests-inflight`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use jiff::SignedDuration;

use super::{Head, RequestInfo};
use crate::status::ApiError;

/// kube-apiserver's `--max-requests-inflight` default.
pub const DEFAULT_MAX_READONLY_IN_FLIGHT: usize = 400;
/// kube-apiserver's `--max-mutating-requests-inflight` default.
pub const DEFAULT_MAX_MUTATING_IN_FLIGHT: usize = 200;

/// kube-apiserver's `BasicLongRunningRequestCheck`: watches, proxies and the connect
/// subresources run for as long as they run, outside the request timeout and the in-flight
/// limits.
pub fn is_long_running(info: &RequestInfo) -> bool {
    matches!(info.verb.as_str(), "watch" | "proxy")
        || (info.is_resource_request && matches!(info.subresource.as_str(), "attach" | "exec" | "proxy" | "log" | "portforward"))
}

/// The deadline a request asks for with `timeout` (a Go duration): `None` without one, or for
/// `0` or anything not below `max` (the server's own limit then applies), as kube does.
pub fn requested_timeout(value: Option<&str>, max: SignedDuration) -> Result<Option<SignedDuration>, ApiError> {
    let Some(value) = value.filter(|v| !v.is_empty()) else { return Ok(None) };
    let t = parse_go_duration(value).map_err(|e| ApiError::bad_request(format!("invalid timeout specified in the request URL - {e}")))?;
    Ok((t.is_positive() && t < max).then_some(t))
}

/// Go's `time.ParseDuration`, with its error messages: `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, units
/// ns, us (µs, μs), ms, s, m, h.
pub fn parse_go_duration(orig: &str) -> Result<SignedDuration, String> {
    let quoted = format!("{orig:?}");
    let invalid = || format!("time: invalid duration {quoted}");
    let mut s = orig;
    let negative = s.starts_with('-');
    if let Some(rest) = s.strip_prefix(['-', '+']) {
        s = rest;
    }
    if s == "0" {
        return Ok(SignedDuration::ZERO);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: i128 = 0;
    while !s.is_empty() {
        if !(s.starts_with('.') || s.starts_with(|c: char| c.is_ascii_digit())) {
            return Err(invalid());
        }
        let int_len = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        let (int, rest) = s.split_at(int_len);
        s = rest;
        let mut frac = "";
        if let Some(rest) = s.strip_prefix('.') {
            let frac_len = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            (frac, s) = rest.split_at(frac_len);
            if int.is_empty() && frac.is_empty() {
                return Err(invalid());
            }
        }
        let unit_len = s.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(s.len());
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        if unit.is_empty() {
            return Err(format!("time: missing unit in duration {quoted}"));
        }
        let nanos_per: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(format!("time: unknown unit {unit:?} in duration {quoted}")),
        };
        let whole: i128 = if int.is_empty() { 0 } else { int.parse().map_err(|_| invalid())? };
        let mut part = whole.checked_mul(nanos_per).ok_or_else(invalid)?;
        // The fraction, to the nanosecond (Go keeps about as much precision).
        let mut scale = nanos_per;
        for d in frac.bytes().take(30) {
            scale /= 10;
            part += i128::from(d - b'0') * scale;
        }
        total = total.checked_add(part).filter(|t| *t <= i128::from(i64::MAX)).ok_or_else(invalid)?;
    }
    let nanos = if negative { -total } else { total };
    Ok(SignedDuration::from_nanos(nanos as i64))
}

/// A duration as Go's `Duration.String` prints it (`1m0s`, `30s`, `1.5ms`, `0s`).
pub fn go_duration_string(d: SignedDuration) -> String {
    let nanos = d.as_nanos();
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    // `n` in units of 10^-`digits`, its fraction's trailing zeros dropped.
    let decimal = |n: u128, digits: u32| {
        let scale = 10u128.pow(digits);
        let frac = format!("{:0width$}", n % scale, width = digits as usize);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() { (n / scale).to_string() } else { format!("{}.{frac}", n / scale) }
    };
    let text = match n {
        0 => return "0s".into(),
        n if n < 1_000 => format!("{n}ns"),
        n if n < 1_000_000 => format!("{}µs", decimal(n, 3)),
        n if n < 1_000_000_000 => format!("{}ms", decimal(n, 6)),
        n => {
            let (hours, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
            let (minutes, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
            let seconds = format!("{}s", decimal(rest, 9));
            match (hours, minutes) {
                (0, 0) => seconds,
                (0, m) => format!("{m}m{seconds}"),
                (h, m) => format!("{h}h{m}m{seconds}"),
            }
        }
    };
    format!("{sign}{text}")
}

/// The seats of one kind of request (read-only or mutating); `max` 0 is no limit.
#[derive(Debug, Default)]
struct Seats {
    max: usize,
    taken: AtomicUsize,
}

/// Requests in flight, shared by every request machine of a server.
#[derive(Debug, Default)]
pub struct InFlight {
    readonly: Arc<Seats>,
    mutating: Arc<Seats>,
}

impl InFlight {
    pub fn new(max_readonly: usize, max_mutating: usize) -> InFlight {
        InFlight {
            readonly: Arc::new(Seats { max: max_readonly, ..Default::default() }),
            mutating: Arc::new(Seats { max: max_mutating, ..Default::default() }),
        }
    }

    /// A seat for a request that is not long-running, or kube's 429 when its kind's are all
    /// taken. Members of `system:masters` always get in (kube: "a super-admin or a loopback
    /// connection"), and so does every request of a kind without a limit.
    pub fn admit(&self, info: &RequestInfo, groups: &[String]) -> Result<Option<Seat>, TooManyRequests> {
        if is_long_running(info) {
            return Ok(None);
        }
        let seats = if matches!(info.verb.as_str(), "get" | "list" | "watch") { &self.readonly } else { &self.mutating };
        if seats.max == 0 {
            return Ok(None);
        }
        let taken = seats.taken.fetch_add(1, Ordering::AcqRel);
        if taken < seats.max {
            return Ok(Some(Seat(seats.clone())));
        }
        seats.taken.fetch_sub(1, Ordering::AcqRel);
        if groups.iter().any(|g| g == "system:masters") {
            return Ok(None);
        }
        Err(TooManyRequests)
    }
}

/// All seats taken: kube answers with Go's `http.Error`, plain text rather than a `Status`, and
/// asks the client to come back in a second.
#[derive(Debug, PartialEq, Eq)]
pub struct TooManyRequests;

impl TooManyRequests {
    pub fn response(&self) -> (Head, Bytes) {
        let mut head = Head::new(429, "text/plain; charset=utf-8");
        head.headers.push(("Retry-After".into(), "1".into()));
        head.headers.push(("X-Content-Type-Options".into(), "nosniff".into()));
        (head, Bytes::from_static(b"Too many requests, please try again later.\n"))
    }
}

/// A request's place among those in flight, given back when the request's machine is dropped.
#[derive(Debug)]
pub struct Seat(Arc<Seats>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.taken.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_printed() {
        let s = |text: &str| go_duration_string(parse_go_duration(text).unwrap());
        assert_eq!(s("0"), "0s");
        assert_eq!(s("60s"), "1m0s");
        assert_eq!(s("30s"), "30s");
        assert_eq!(s("1.5ms"), "1.5ms");
        assert_eq!(s("90m"), "1h30m0s");
        assert_eq!(s("-5m"), "-5m0s");
        assert_eq!(s("1500us"), "1.5ms");
        assert_eq!(s("12ns"), "12ns");
        assert_eq!(s("2.25s"), "2.25s");
    }

    #[test]
    fn go_durations_and_their_errors() {
        let ok = |s: &str| parse_go_duration(s).unwrap();
        assert_eq!(ok("5s"), SignedDuration::from_secs(5));
        assert_eq!(ok("1m30s"), SignedDuration::from_secs(90));
        assert_eq!(ok("1.5s"), SignedDuration::from_millis(1500));
        assert_eq!(ok("300ms"), SignedDuration::from_millis(300));
        assert_eq!(ok(".5m"), SignedDuration::from_secs(30));
        assert_eq!(ok("-2h"), SignedDuration::from_hours(-2));
        assert_eq!(ok("0"), SignedDuration::ZERO);
        assert_eq!(parse_go_duration("abc").unwrap_err(), "time: invalid duration \"abc\"");
        assert_eq!(parse_go_duration("5").unwrap_err(), "time: missing unit in duration \"5\"");
        assert_eq!(parse_go_duration("5x").unwrap_err(), "time: unknown unit \"x\" in duration \"5x\"");
        assert_eq!(parse_go_duration(".s").unwrap_err(), "time: invalid duration \".s\"");
        assert_eq!(parse_go_duration("99999999999999h").unwrap_err(), "time: invalid duration \"99999999999999h\"");
    }

    #[test]
    fn a_timeout_at_or_over_the_limit_or_zero_leaves_the_servers_own() {
        let max = SignedDuration::from_secs(60);
        assert_eq!(requested_timeout(Some("5s"), max).unwrap(), Some(SignedDuration::from_secs(5)));
        assert_eq!(requested_timeout(Some("0s"), max).unwrap(), None);
        assert_eq!(requested_timeout(Some("2m"), max).unwrap(), None);
        assert_eq!(requested_timeout(None, max).unwrap(), None);
        let e = requested_timeout(Some("soon"), max).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (400, "invalid timeout specified in the request URL - time: invalid duration \"soon\""));
    }

    #[test]
    fn seats_are_limited_per_kind_and_given_back() {
        let limits = InFlight::new(1, 1);
        let get = RequestInfo { verb: "get".into(), ..Default::default() };
        let create = RequestInfo { verb: "create".into(), ..Default::default() };
        let watch = RequestInfo { verb: "watch".into(), ..Default::default() };
        let seat = limits.admit(&get, &[]).unwrap();
        assert!(seat.is_some());
        assert_eq!(limits.admit(&get, &[]).unwrap_err(), TooManyRequests);
        assert!(limits.admit(&get, &["system:masters".into()]).unwrap().is_none());
        assert!(limits.admit(&watch, &[]).unwrap().is_none());
        let _write = limits.admit(&create, &[]).unwrap();
        drop(seat);
        assert!(limits.admit(&get, &[]).unwrap().is_some());
    }
}
