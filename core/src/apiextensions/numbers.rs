//! Numbers as kube's OpenAPI validator sees them: kube decodes a custom resource's integer
//! literals to Go `int64` and other numbers to `float64`, and checks each in its own type.

use std::fmt;

use serde_json::Value;

/// A JSON number as Go holds it for the validator.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub enum GoNumber {
    Int(i64),
    Float(f64),
}

impl GoNumber {
    /// An integer literal that fits an `int64` is one; any other number a `float64`.
    pub fn of(v: &Value) -> Option<GoNumber> {
        v.as_i64().map(GoNumber::Int).or_else(|| v.as_f64().map(GoNumber::Float))
    }

    /// A bound or factor of the schema (a `float64`) as it is compared with this number: for
    /// an integer, truncated to one (`int64(f)` in Go).
    pub fn like(self, bound: f64) -> GoNumber {
        match self {
            GoNumber::Int(_) => GoNumber::Int(bound as i64),
            GoNumber::Float(_) => GoNumber::Float(bound),
        }
    }

    /// This number converted to the type of `other`, as Go's `reflect.Value.Convert` does.
    pub fn like_value(self, other: GoNumber) -> GoNumber {
        match (self, other) {
            (GoNumber::Int(i), GoNumber::Float(_)) => GoNumber::Float(i as f64),
            (GoNumber::Float(f), GoNumber::Int(_)) => GoNumber::Int(f as i64),
            (n, _) => n,
        }
    }

    pub fn is_positive(self) -> bool {
        match self {
            GoNumber::Int(i) => i > 0,
            GoNumber::Float(f) => f > 0.0,
        }
    }

    /// kube-openapi's `MultipleOf` of a positive factor of the same type: an integer divides
    /// exactly; a float's quotient is an integer within 1e-9 (swag's `IsFloat64AJSONInteger`).
    pub fn is_multiple_of(self, factor: GoNumber) -> bool {
        match (self, factor) {
            (GoNumber::Int(x), GoNumber::Int(f)) => x % f == 0,
            (GoNumber::Float(x), GoNumber::Float(f)) => is_json_integer(if f < 1.0 { 1.0 / f * x } else { x / f }),
            _ => false,
        }
    }

    pub fn value(self) -> Value {
        match self {
            GoNumber::Int(i) => Value::from(i),
            GoNumber::Float(f) => Value::from(f),
        }
    }
}

/// As Go's `%v` prints the number: a `float64` as [`go_float`] writes it.
impl fmt::Display for GoNumber {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match *self {
            GoNumber::Int(i) => write!(f, "{i}"),
            GoNumber::Float(x) => f.write_str(&go_float(x)),
        }
    }
}

/// Go's `strconv.FormatFloat(x, 'g', -1, 64)`, which `%v` uses: the shortest digits that
/// read back as `x`, in exponent form when the exponent is below -4 or from 6 up.
pub fn go_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let scientific = format!("{x:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("an exponent");
    let exponent: i32 = exponent.parse().expect("a decimal exponent");
    if (-4..6).contains(&exponent) {
        return format!("{x}");
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.abs())
}

/// swag's `IsFloat64AJSONInteger`: within ±(2^53-1), an integer, or a positive number within
/// a relative 1e-9 of its integer part.
pub fn is_json_integer(f: f64) -> bool {
    const MAX: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX..=MAX).contains(&f) {
        return false;
    }
    if f == f.trunc() {
        return true;
    }
    let whole = f.trunc();
    f > 0.0 && whole > 0.0 && (f - whole) / (f + whole) < 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_gos_percent_v() {
        for (x, go) in [
            (10.0, "10"),
            (0.5, "0.5"),
            (1e6, "1e+06"),
            (999999.5, "999999.5"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (-2.5e21, "-2.5e+21"),
            (123456.0, "123456"),
        ] {
            assert_eq!(go_float(x), go, "{x}");
        }
    }

    #[test]
    fn json_integers_as_swag_tells_them() {
        assert!(is_json_integer(3.0) && is_json_integer(3.0000000000000004) && is_json_integer(-4.0));
        assert!(!is_json_integer(2.9999999999999996) && !is_json_integer(2.5) && !is_json_integer(0.5) && !is_json_integer(1e300));
    }

    #[test]
    fn integers_are_checked_against_truncated_bounds() {
        let three = GoNumber::Int(3);
        assert_eq!(three.like(2.9), GoNumber::Int(2));
        assert!(three.is_multiple_of(three.like(1.5)));
        assert!(!three.like(0.5).is_positive());
        assert!(GoNumber::Float(0.3).is_multiple_of(GoNumber::Float(0.1)));
        assert_eq!(GoNumber::Float(1.5).like_value(GoNumber::Int(1)), GoNumber::Int(1));
    }
}
