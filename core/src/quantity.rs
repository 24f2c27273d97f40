//! `resource.Quantity`: parsing and the canonical form kube-apiserver stores (`0.5` -> `500m`,
//! `1000` -> `1k`, `1024Mi` -> `1Gi`, `1.5Gi` -> `1536Mi`).

use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

/// An exact value `mantissa * 10^scale` and the suffix style it was written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    scale: i32,
    pub format: Format,
}

const BINARY: [(&str, u32); 6] = [("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4), ("Pi", 5), ("Ei", 6)];
const DECIMAL: [(&str, i32); 10] = [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18)];
/// Largest magnitude kept exactly; kube caps quantities far below this.
const LIMIT: i128 = 10i128.pow(36);

impl Quantity {
    pub fn parse(s: &str) -> Option<Quantity> {
        let b = s.as_bytes();
        let mut i = 0;
        let negative = match b.first() {
            Some(b'-') => {
                i = 1;
                true
            }
            Some(b'+') => {
                i = 1;
                false
            }
            _ => false,
        };
        let mut mantissa: i128 = 0;
        let mut scale = 0i32;
        let mut digits = 0;
        let mut seen_dot = false;
        while i < b.len() {
            match b[i] {
                c @ b'0'..=b'9' => {
                    if mantissa < LIMIT {
                        mantissa = mantissa * 10 + (c - b'0') as i128;
                        if seen_dot {
                            scale -= 1;
                        }
                    } else if !seen_dot {
                        scale += 1;
                    }
                    digits += 1;
                }
                b'.' if !seen_dot => seen_dot = true,
                _ => break,
            }
            i += 1;
        }
        if digits == 0 {
            return None;
        }
        let suffix = &s[i..];
        let format = if let Some((_, pow)) = BINARY.iter().find(|(n, _)| *n == suffix) {
            mantissa = mantissa.checked_mul(1024i128.pow(*pow))?;
            Format::BinarySI
        } else if let Some((_, e)) = DECIMAL.iter().find(|(n, _)| *n == suffix) {
            scale += e;
            Format::DecimalSI
        } else if let Some(exp) = suffix.strip_prefix(['e', 'E']) {
            let e: i32 = exp.parse().ok()?;
            if !(-1000..=1000).contains(&e) {
                return None;
            }
            scale += e;
            Format::DecimalExponent
        } else {
            return None;
        };
        if negative {
            mantissa = -mantissa;
        }
        Some(Quantity { mantissa, scale, format }.rounded_to_nano())
    }

    /// Values below a nano are rounded up (away from zero), as kube does.
    fn rounded_to_nano(mut self) -> Self {
        while self.scale < -9 {
            let rem = self.mantissa % 10;
            self.mantissa /= 10;
            if rem > 0 {
                self.mantissa += 1;
            } else if rem < 0 {
                self.mantissa -= 1;
            }
            self.scale += 1;
        }
        self
    }

    /// The value as an integer, if it is one.
    fn as_integer(&self) -> Option<i128> {
        if self.scale >= 0 {
            self.mantissa.checked_mul(10i128.checked_pow(self.scale as u32)?)
        } else {
            let d = 10i128.checked_pow((-self.scale) as u32)?;
            (self.mantissa % d == 0).then(|| self.mantissa / d)
        }
    }

    /// The value as an `i64`, if it is an integer that fits (kube's `AsInt64`).
    pub fn as_i64(&self) -> Option<i64> {
        self.as_integer().and_then(|v| i64::try_from(v).ok())
    }

    /// The value as the nearest `f64` (kube's `AsApproximateFloat64`).
    pub fn as_f64(&self) -> f64 {
        self.mantissa as f64 * 10f64.powi(self.scale)
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        self.mantissa.signum() as i64
    }

    /// The sum, in this quantity's format; `None` past the largest magnitude kept exactly.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        let s = self.scale.min(other.scale);
        let a = self.mantissa.checked_mul(10i128.checked_pow((self.scale - s) as u32)?)?;
        let b = other.mantissa.checked_mul(10i128.checked_pow((other.scale - s) as u32)?)?;
        let mantissa = a.checked_add(b).filter(|m| m.abs() < LIMIT)?;
        Some(Quantity { mantissa, scale: s, format: self.format })
    }

    /// The quantity of the opposite sign.
    pub fn negated(&self) -> Quantity {
        Quantity { mantissa: -self.mantissa, ..*self }
    }

    /// An integer as a quantity, in `format`.
    pub fn from_i64(v: i64, format: Format) -> Quantity {
        Quantity { mantissa: i128::from(v), scale: 0, format }
    }

    /// The value rounded up to a whole unit (kube's `RoundUp(0)`).
    pub fn round_up(&self) -> Quantity {
        if self.scale >= 0 {
            return *self;
        }
        let d = 10i128.pow((-self.scale).min(38) as u32);
        let q = self.mantissa / d;
        let mantissa = if self.mantissa % d > 0 { q + 1 } else { q };
        Quantity { mantissa, scale: 0, format: self.format }
    }

    /// The value in milli-units, rounded up (kube's `MilliValue`).
    pub fn milli_value(&self) -> i128 {
        let shifted = Quantity { scale: self.scale + 3, ..*self };
        match shifted.as_integer() {
            Some(v) => v,
            // Past what an i128 holds.
            None if shifted.scale >= 0 => i128::MAX * shifted.mantissa.signum(),
            None => {
                let d = 10i128.pow((-shifted.scale) as u32);
                let q = shifted.mantissa / d;
                if shifted.mantissa % d > 0 { q + 1 } else { q }
            }
        }
    }

    /// kube's canonical serialization.
    pub fn canonical(&self) -> String {
        if self.mantissa == 0 {
            return "0".into();
        }
        if self.format == Format::BinarySI
            && let Some(v) = self.as_integer().filter(|v| v.abs() >= 1024)
        {
            let mut n = 0;
            let mut m = v;
            while n < 6 && m % 1024 == 0 {
                m /= 1024;
                n += 1;
            }
            let suffix = if n == 0 { "" } else { BINARY[n - 1].0 };
            return format!("{m}{suffix}");
        }
        // Decimal forms: strip trailing zeros, then settle on an exponent that is a multiple of 3.
        let (mut m, mut e) = (self.mantissa, self.scale);
        while m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        let r = e.rem_euclid(3);
        if r != 0 {
            m *= 10i128.pow(r as u32);
            e -= r;
        }
        if self.format == Format::DecimalExponent {
            return if e == 0 { m.to_string() } else { format!("{m}e{e}") };
        }
        // DecimalSI suffixes stop at E; larger exponents keep digits in the mantissa (in
        // exponent form past what the mantissa holds).
        while e > 18 {
            match m.checked_mul(1000) {
                Some(bigger) => m = bigger,
                None => return format!("{m}e{e}"),
            }
            e -= 3;
        }
        let suffix = DECIMAL.iter().find(|(_, x)| *x == e).map(|(n, _)| *n).unwrap_or("");
        format!("{m}{suffix}")
    }
}

impl Quantity {
    /// The sum, or past the largest magnitude kept exactly, that magnitude with the sum's sign
    /// (more than any limit a quota sets).
    pub fn saturating_add(&self, other: &Quantity) -> Quantity {
        self.checked_add(other).unwrap_or_else(|| {
            let sign = if magnitude_cmp(self, other) == Ordering::Less { other.mantissa.signum() } else { self.mantissa.signum() };
            Quantity { mantissa: sign * (LIMIT - 1), scale: self.scale.max(other.scale).max(0), format: self.format }
        })
    }
}

/// The number of decimal digits of `m` (0 for 0).
fn digits(m: i128) -> i64 {
    let mut m = m.unsigned_abs();
    let mut n = 0;
    while m > 0 {
        m /= 10;
        n += 1;
    }
    n
}

/// Compares two quantities' absolute values, whatever their scales.
fn magnitude_cmp(a: &Quantity, b: &Quantity) -> Ordering {
    match (a.mantissa == 0, b.mantissa == 0) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Less,
        (false, true) => return Ordering::Greater,
        _ => {}
    }
    let (oa, ob) = (digits(a.mantissa) + i64::from(a.scale), digits(b.mantissa) + i64::from(b.scale));
    if oa != ob {
        return oa.cmp(&ob);
    }
    // Of one order of magnitude: aligned, each has at most as many digits as a mantissa.
    let s = a.scale.min(b.scale);
    let x = a.mantissa.unsigned_abs() * 10u128.pow((a.scale - s) as u32);
    let y = b.mantissa.unsigned_abs() * 10u128.pow((b.scale - s) as u32);
    x.cmp(&y)
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        let (sa, sb) = (self.mantissa.signum(), other.mantissa.signum());
        Some(match sa.cmp(&sb) {
            Ordering::Equal if sa < 0 => magnitude_cmp(self, other).reverse(),
            Ordering::Equal => magnitude_cmp(self, other),
            unequal => unequal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s} parses")).canonical()
    }

    #[test]
    fn quantities_of_any_scale_compare_and_huge_sums_saturate() {
        let q = |s: &str| Quantity::parse(s).unwrap();
        assert!(q("1e37") > q("10"));
        assert!(q("1e-9") < q("1e30"));
        assert!(q("-1e37") < q("-5"));
        assert!(q("1500m") > q("1"));
        assert_eq!(q("1e37").partial_cmp(&q("10000000000000000000000000000000000000")), Some(Ordering::Equal));
        let huge = q("0").saturating_add(&q("1e37"));
        assert!(huge > q("1e30") && huge.canonical().len() < 60);
        assert!(q("1e40").milli_value() > 0);
        assert_eq!(Quantity::from_i64(1, Format::DecimalSI).saturating_add(&q("2")).canonical(), "3");
    }

    #[test]
    fn canonical_forms_match_kube() {
        for (input, want) in [
            ("0.5", "500m"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("1000m", "1"),
            ("100Mi", "100Mi"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("512", "512"),
            ("0.1", "100m"),
            ("5e9", "5e9"),
            ("1E3", "1e3"),
            ("128974848", "128974848"),
            ("129e6", "129e6"),
            ("129M", "129M"),
            ("-1.5", "-1500m"),
            ("0.0000000001", "1n"),
            ("0", "0"),
            ("0Mi", "0"),
        ] {
            assert_eq!(canon(input), want, "{input}");
        }
    }

    #[test]
    fn rejects_what_kube_rejects() {
        for bad in ["", "abc", "1.2.3", "1Q", "Mi", "1e", "--1"] {
            assert!(Quantity::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn compares_and_converts_to_milli() {
        assert!(Quantity::parse("500m").unwrap() < Quantity::parse("1").unwrap());
        assert_eq!(Quantity::parse("1.5").unwrap().milli_value(), 1500);
        assert_eq!(Quantity::parse("1Ki").unwrap().milli_value(), 1_024_000);
    }
}
