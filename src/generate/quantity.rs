//! Kubernetes resource quantities (`k8s.io/apimachinery/pkg/api/resource` `Quantity`) as MCO's
//! ContainerRuntimeConfig rules read them: the parse, `Value()` (rounded up to an integer) and
//! `String()` (the canonical form, or the text as written when that is already canonical),
//! so MCO's messages (`invalid LogSizeMax "8Ki", ...`) and the values it writes come out the
//! same.

/// The CRD pattern of a quantity string (`x-kubernetes-int-or-string` fields).
pub const PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

/// A parsed quantity: the exact value `mantissa × 10^exp` (rounded up to nano units, as Go
/// does), its format, and the text Go keeps as its string when it is canonical.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    mantissa: i128,
    exp: i32,
    format: Format,
    cached: Option<String>,
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

impl Quantity {
    /// `resource.ParseQuantity`.
    ///
    /// Errors: the text is not a quantity (Go's `ErrFormatWrong`, `ErrSuffix`, `ErrNumeric`),
    /// or too large to hold here.
    pub fn parse(s: &str) -> Result<Quantity, String> {
        let bad = || format!("quantities must match the regular expression '{PATTERN}'");
        if s.is_empty() {
            return Err(bad());
        }
        if s == "0" {
            return Ok(Quantity {
                mantissa: 0,
                exp: 0,
                format: Format::DecimalSI,
                cached: Some(s.into()),
            });
        }
        let (negative, rest) = match s.as_bytes()[0] {
            b'-' => (true, &s[1..]),
            b'+' => (false, &s[1..]),
            _ => (false, s),
        };
        let num_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let num = &rest[..num_end];
        let mut rest = &rest[num_end..];
        let mut denom = "";
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
            denom = &r[..end];
            rest = &r[end..];
        }
        if num.is_empty() && denom.is_empty() {
            return Err(bad());
        }
        let (format, base2, exp) = match rest {
            "" => (Format::DecimalSI, 0, 0),
            "n" => (Format::DecimalSI, 0, -9),
            "u" => (Format::DecimalSI, 0, -6),
            "m" => (Format::DecimalSI, 0, -3),
            "k" => (Format::DecimalSI, 0, 3),
            "M" => (Format::DecimalSI, 0, 6),
            "G" => (Format::DecimalSI, 0, 9),
            "T" => (Format::DecimalSI, 0, 12),
            "P" => (Format::DecimalSI, 0, 15),
            "E" => (Format::DecimalSI, 0, 18),
            "Ki" => (Format::BinarySI, 10, 0),
            "Mi" => (Format::BinarySI, 20, 0),
            "Gi" => (Format::BinarySI, 30, 0),
            "Ti" => (Format::BinarySI, 40, 0),
            "Pi" => (Format::BinarySI, 50, 0),
            "Ei" => (Format::BinarySI, 60, 0),
            e if e.starts_with(['e', 'E']) => {
                let n: i32 = e[1..].parse().map_err(|_| bad())?;
                if !e[1..]
                    .trim_start_matches(['+', '-'])
                    .chars()
                    .all(|c| c.is_ascii_digit())
                {
                    return Err(bad());
                }
                (Format::DecimalExponent, 0, n)
            }
            _ => return Err(bad()),
        };
        let digits = format!("{num}{denom}");
        let too_large = || "the quantity is too large".to_string();
        let mut mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| too_large())?
        };
        mantissa = mantissa.checked_mul(1i128 << base2).ok_or_else(too_large)?;
        let mut exp = exp - denom.len() as i32;
        // Non-zero values are rounded up (away from zero) to nano units.
        if exp < -9 {
            let div = pow10((-9 - exp) as u32).ok_or_else(too_large)?;
            mantissa = mantissa / div + i128::from(mantissa % div != 0);
            exp = -9;
        }
        if negative {
            mantissa = -mantissa;
        }
        // ParseQuantity's fast path keeps the text when it is already canonical.
        let scale = exp;
        let cached = match format {
            Format::BinarySI => {
                let precision = 15 - num.len() as i32 - (base2 as f32 * 3.0 / 10.0) as i32 - 1;
                let value: i128 = num.parse().unwrap_or(0);
                (denom.is_empty() && precision >= 0 && base2 % 10 == 0 && value & 7 != 0).then(|| s.to_string())
            }
            _ => {
                let precision = 18 - (num.len() + denom.len()) as i32;
                (precision >= 0 && scale % 3 == 0 && !digits.ends_with("000") && !digits.starts_with('0'))
                    .then(|| s.to_string())
            }
        };
        Ok(Quantity {
            mantissa,
            exp,
            format,
            cached,
        })
    }

    /// `Quantity.Value()`: the value rounded up to an integer (saturating).
    pub fn value(&self) -> i128 {
        if self.exp >= 0 {
            pow10(self.exp as u32)
                .and_then(|p| self.mantissa.checked_mul(p))
                .unwrap_or(if self.mantissa < 0 { i128::MIN } else { i128::MAX })
        } else {
            let div = pow10((-self.exp) as u32).unwrap_or(i128::MAX);
            let q = self.mantissa / div;
            q + i128::from(self.mantissa % div > 0)
        }
    }

    /// `Quantity.IsZero()`.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    fn is_integer(&self) -> bool {
        self.exp >= 0 || pow10((-self.exp) as u32).is_some_and(|d| self.mantissa % d == 0)
    }
}

impl std::fmt::Display for Quantity {
    /// `Quantity.String()`: the text as written when canonical, else `CanonicalizeBytes`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(s) = &self.cached {
            return f.write_str(s);
        }
        if self.mantissa == 0 {
            return f.write_str("0");
        }
        let mut format = self.format;
        if format == Format::BinarySI {
            let v = self.value();
            if (-1023..=1023).contains(&v) && self.is_integer() || !self.is_integer() {
                format = Format::DecimalSI;
            } else {
                let (mut m, mut k) = (v, 0);
                while m % 1024 == 0 && k < 6 {
                    m /= 1024;
                    k += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][k];
                return write!(f, "{m}{suffix}");
            }
        }
        // AsCanonicalBytes: factors of ten out of the mantissa, the exponent lowered to a
        // multiple of three.
        let (mut m, mut e) = (self.mantissa, self.exp);
        while m % 10 == 0 {
            m /= 10;
            e += 1;
        }
        match e.rem_euclid(3) {
            1 => {
                m *= 10;
                e -= 1;
            }
            2 => {
                m *= 100;
                e -= 2;
            }
            _ => {}
        }
        let suffix = match format {
            Format::DecimalExponent if e == 0 => String::new(),
            Format::DecimalExponent => format!("e{e}"),
            _ => match e {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                18 => "E",
                _ => "",
            }
            .to_string(),
        };
        write!(f, "{m}{suffix}")
    }
}

/// A quantity field's JSON (`x-kubernetes-int-or-string`): a number's text or the string.
pub fn parse_json(v: &serde_json::Value) -> Result<Quantity, String> {
    match v {
        serde_json::Value::String(s) => Quantity::parse(s.trim()),
        serde_json::Value::Number(n) => Quantity::parse(&n.to_string()),
        _ => Err("a quantity is a string or a number".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    /// apimachinery's `ParseQuantity`, `Value` and `String`: canonical text kept as written,
    /// other text canonicalised.
    #[test]
    fn go_quantities() {
        for (text, value, string) in [
            ("8192", 8192, "8192"),
            ("8Ki", 8192, "8Ki"),
            ("4Ki", 4096, "4Ki"),
            ("8k", 8000, "8k"),
            ("8000", 8000, "8k"),
            ("7.5k", 7500, "7500"),
            ("1.5", 2, "1500m"),
            ("0.5Ki", 512, "512"),
            ("64Ki", 65536, "64Ki"),
            ("-1", -1, "-1"),
            ("0", 0, "0"),
            ("1e3", 1000, "1e3"),
            ("12e2", 1200, "1200"),
            ("100m", 1, "100m"),
            ("10G", 10_000_000_000, "10G"),
            ("16Gi", 17_179_869_184, "16Gi"),
            ("1024", 1024, "1024"),
        ] {
            let v = q(text);
            assert_eq!((v.value(), v.to_string()), (value, string.to_string()), "{text}");
        }
        for bad in ["", "abc", "1x", "1.2.3", "Ki", "--1"] {
            assert!(Quantity::parse(bad).is_err(), "{bad}");
        }
        assert!(q("-0.5").value() == 0 && !q("-0.5").is_zero());
    }
}
