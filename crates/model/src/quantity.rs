//! Kubernetes quantities (`500m`, `12Ti`, `1e3`) as exact milli-units, and Go durations (`30s`).
//!
//! Written here because k8s-openapi's `Quantity` is an unparsed string and no maintained crate parses
//! the grammar exactly; the grammar is small and fixed (apimachinery `resource.ParseQuantity`).

/// A value from a blueprint as a message shows it: at most 80 characters, so a hostile value
/// cannot flood a terminal, a CI log or a PR comment.
fn shown(text: &str) -> String {
    crate::blueprint::yaml::shorten(text)
}

/// How Kubernetes writes a quantity: chosen by the suffix it was parsed with, kept when it is
/// written again (apimachinery `resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `12e6`: an `e`/`E` exponent.
    DecimalExponent,
    /// `12Mi`: a binary suffix (`Ki` ... `Ei`).
    BinarySI,
    /// `12M`, `500m`, `8`: a decimal suffix or none.
    DecimalSI,
}

/// A quantity as Kubernetes holds it: its value in nano-units (apimachinery keeps nine decimal
/// places and rounds finer amounts up) and the format it is written back in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    /// Value x 10^9.
    pub nano: i128,
    /// How it is written.
    pub format: Format,
}

const NANO: i128 = 1_000_000_000;

/// apimachinery caps a binary-suffixed quantity at the largest int64 (`9Ei` is stored as
/// `9223372036854775807`).
const BINARY_MAX_NANO: i128 = (i64::MAX as i128) * NANO;

/// Parses a quantity (apimachinery `resource.ParseQuantity`): `8`, `500m`, `1.5`, `12Ti`, `1e3`.
pub fn parse(text: &str) -> Result<Quantity, String> {
    let bad = || {
        format!(
            "`{}` is not a Kubernetes quantity (examples: `8`, `500m`, `1.5`, `12Ti`, `64Gi`)",
            shown(text)
        )
    };
    let t = text.trim();
    if t.is_empty() || t.len() > 64 {
        return Err(bad());
    }
    let (sign, rest) = match t.as_bytes()[0] {
        b'-' => (-1i128, &t[1..]),
        b'+' => (1, &t[1..]),
        _ => (1, t),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(bad());
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    // value = digits / 10^frac_len, scaled by the suffix, times 10^9 for nano-units.
    let digits: String = format!("{int_part}{frac_part}");
    let mantissa: i128 = digits.parse().map_err(|_| bad())?;
    let mut scale10: i32 = 9 - frac_part.len() as i32;
    let mut scale2: u32 = 0;
    let mut format = Format::DecimalSI;
    match suffix {
        "" => {}
        "n" => scale10 -= 9,
        "u" => scale10 -= 6,
        "m" => scale10 -= 3,
        "k" => scale10 += 3,
        "M" => scale10 += 6,
        "G" => scale10 += 9,
        "T" => scale10 += 12,
        "P" => scale10 += 15,
        "E" => scale10 += 18,
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            format = Format::BinarySI;
            scale2 = 10 * (1 + "KMGTPE".find(&suffix[..1]).unwrap_or_default() as u32);
        }
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..].parse().map_err(|_| bad())?;
            if !(-30..=30).contains(&exp) {
                return Err(bad());
            }
            format = Format::DecimalExponent;
            scale10 += exp;
        }
        _ => return Err(bad()),
    }
    let mut v = mantissa.checked_mul(1i128 << scale2).ok_or_else(bad)?;
    if scale10 >= 0 {
        v = v
            .checked_mul(10i128.checked_pow(scale10 as u32).ok_or_else(bad)?)
            .ok_or_else(bad)?;
    } else {
        let d = 10i128.checked_pow((-scale10) as u32).ok_or_else(bad)?;
        // Kubernetes rounds amounts finer than a nano-unit up (away from zero).
        v = v.div_euclid(d) + i128::from(v.rem_euclid(d) != 0);
    }
    if format == Format::BinarySI {
        v = v.min(BINARY_MAX_NANO);
        // Below one, a binary suffix cannot be written back: apimachinery switches to decimal.
        if v > 0 && v < NANO {
            format = Format::DecimalSI;
        }
    }
    Ok(Quantity {
        nano: sign * v,
        format,
    })
}

impl Quantity {
    /// The canonical form apimachinery writes (`Quantity.String`, `CanonicalizeBytes`), which the
    /// API server stores for built-in objects and Kueue's webhooks write back for its own: `1000`
    /// is `1k`, `1.5` is `1500m`, `1024Mi` is `1Gi`, `1e14` is `100e12`. The number is whole, its
    /// decimal exponent a multiple of 3 as large as it can be without losing precision; a binary
    /// suffix only for an exact multiple of 1024 of at least 1Ki, else decimal.
    pub fn canonical(&self) -> String {
        if self.nano == 0 {
            return "0".into();
        }
        let mut format = self.format;
        if format == Format::BinarySI && (self.nano.abs() < 1024 * NANO || self.nano % NANO != 0) {
            format = Format::DecimalSI;
        }
        if format == Format::BinarySI {
            let (mut units, mut exp) = (self.nano / NANO, 0usize);
            while units.abs() >= 1024 && units % 1024 == 0 && exp < 6 {
                units /= 1024;
                exp += 1;
            }
            let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][exp];
            return format!("{units}{suffix}");
        }
        let (mut m, mut exp) = (self.nano, -9i32);
        while m.abs() >= 10 && m % 10 == 0 {
            m /= 10;
            exp += 1;
        }
        // The exponent goes down to a multiple of 3 (`10e3` is written `10k`, not `1e4`).
        while exp.rem_euclid(3) != 0 {
            m *= 10;
            exp -= 1;
        }
        let suffix = match (format, exp) {
            (_, 0) => String::new(),
            (Format::DecimalExponent, e) => format!("e{e}"),
            (_, -9) => "n".into(),
            (_, -6) => "u".into(),
            (_, -3) => "m".into(),
            (_, 3) => "k".into(),
            (_, 6) => "M".into(),
            (_, 9) => "G".into(),
            (_, 12) => "T".into(),
            (_, 15) => "P".into(),
            (_, 18) => "E".into(),
            // Above `E` apimachinery has no decimal suffix (it would print the bare number and
            // lose the exponent): write the exponent, which keeps the value.
            (_, e) => format!("e{e}"),
        };
        format!("{m}{suffix}")
    }
}

/// `text` in Kubernetes' canonical form ([`Quantity::canonical`]), or `text` as written when it
/// is not a quantity (validation reports that).
pub fn canonical(text: &str) -> String {
    parse(text).map_or_else(|_| text.to_string(), |q| q.canonical())
}

/// Whether two JSON values are the same quantity written two ways (`"1000"`, `1k`, `1e3`, the
/// number 1000): what the API server and Kueue's webhooks store is the value, in a form of their
/// choosing.
pub fn same_value(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    match (text(a), text(b)) {
        (Some(x), Some(y)) => {
            x == y || matches!((parse(&x), parse(&y)), (Ok(p), Ok(q)) if p.nano == q.nano)
        }
        _ => false,
    }
}

/// Parses a quantity into milli-units (`1` -> 1000, `500m` -> 500, `1Ki` -> 1_024_000), amounts
/// finer than a milli-unit rounded up.
pub fn parse_milli(text: &str) -> Result<i128, String> {
    let nano = parse(text)?.nano;
    let milli = nano.abs() / 1_000_000 + i128::from(nano.abs() % 1_000_000 != 0);
    Ok(nano.signum() * milli)
}

/// A non-negative quantity in milli-units: quotas, limits, borrowing and lending limits, weights.
/// The API server, Kueue and Volcano reject negative amounts, so a blueprint must not carry one.
pub fn parse_nonneg_milli(text: &str) -> Result<i128, String> {
    let m = parse_milli(text)?;
    if m < 0 {
        return Err(format!("`{text}` is negative; amounts are at least 0"));
    }
    Ok(m)
}

/// A whole, non-negative count (GPU amounts), or why not.
pub fn parse_count(text: &str) -> Result<u64, String> {
    let milli = parse_milli(text)?;
    if milli < 0 || milli % 1000 != 0 {
        return Err(format!("`{text}` is not a whole, non-negative number"));
    }
    u64::try_from(milli / 1000).map_err(|_| format!("`{text}` is too large"))
}

/// Parses a Go duration (`100ms`, `30s`, `1m30s`, `2h`) into milliseconds.
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "`{}` is not a duration (examples: `100ms`, `30s`, `30m`, `1h30m`)",
            shown(text)
        )
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    if rest == "0" {
        return Ok(0);
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let n: f64 = rest[..n_end].parse().map_err(|_| bad())?;
        rest = &rest[n_end..];
        let u_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let factor = match &rest[..u_end] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            _ => return Err(bad()),
        };
        total += n * factor;
        rest = &rest[u_end..];
    }
    if !total.is_finite() || total > 1e15 {
        return Err(bad());
    }
    Ok(total.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_milli("1"), Ok(1000));
        assert_eq!(parse_milli("500m"), Ok(500));
        assert_eq!(parse_milli("1.5"), Ok(1500));
        assert_eq!(parse_milli("1Ki"), Ok(1_024_000));
        assert_eq!(parse_milli("12Ti"), Ok(12 * (1i128 << 40) * 1000));
        assert_eq!(parse_milli("1e3"), Ok(1_000_000));
        assert_eq!(parse_milli("2k"), Ok(2_000_000));
        for bad in [
            "",
            "abc",
            "1.2.3",
            "12TB",
            "1Ki2",
            ".",
            "--1",
            "9".repeat(80).as_str(),
        ] {
            assert!(parse_milli(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_count("8"), Ok(8));
        assert!(parse_count("0.5").is_err());
        assert!(parse_count("-1").is_err());
    }

    /// apimachinery v0.35.4 `pkg/api/resource/quantity_test.go`: `TestQuantityString` (each
    /// canonical form, and the alternate spelling that must print as it), `TestQuantityParseEmit`,
    /// and values of `TestQuantityParse`; every one negated too.
    #[test]
    fn canonical_form_is_apimachinerys() {
        let table = [
            // TestQuantityString: (canonical, alternate spelling or "")
            ("1Gi", "1024Mi"),
            ("300Mi", "307200Ki"),
            ("6Ki", ""),
            ("1001Gi", "1025024Mi"),
            ("1Ti", "1024Gi"),
            ("5", "5000m"),
            ("500m", "0.5"),
            ("1G", "1000M"),
            ("1G", "0.001T"),
            ("1m", "1000u"),
            ("80m", ""),
            ("1080m", "1.08"),
            ("1080m", "1080000000n"),
            ("300M", ""),
            ("1T", ""),
            ("1234567M", ""),
            ("1234567m", ""),
            ("3k", ""),
            ("1025", ""),
            ("0", "00"),
            ("1e9", ".001e12"),
            ("1e-3", "0.001e0"),
            ("1e-9", "1000e-12"),
            ("80e-3", ""),
            ("300e6", ""),
            ("1e12", ""),
            ("1e3", ""),
            ("3e3", ""),
            ("1n", ""),
            ("80n", ""),
            ("1080n", ""),
            ("1u", ""),
            ("80u", ""),
            ("1080u", ""),
            // TestQuantityParseEmit: (canonical, input)
            ("1Ki", "1Ki"),
            ("1Gi", "1024Mi"),
            ("1G", "1000M"),
            ("1024m", ".001Ki"),
            ("1024u", ".000001Ki"),
            ("1024n", ".000000001Ki"),
            ("2n", ".000000000001Ki"),
            // TestQuantityParse values, written back
            ("1k", "1000"),
            ("50k", "50k"),
            ("100035", "100.035k"),
            ("10035k", "10.035M"),
            ("1200", "1.2e3"),
            ("1300e3", "1.3E+6"),
            ("100e12", "1e14"),
            ("10e12", "1e13"),
            ("4n", "3.001n"),
            ("1n", "0.0000000001"),
            ("124n", "0.00000012345"),
            ("2e-9", "1.1E-9"),
            ("512Ki", "0.5Mi"),
            ("102435840m", "100.035Ki"),
            ("9223372036854775807", "9Ei"),
            ("12E", "12E"),
            ("1G", "1.G"),
            ("1", "1."),
            ("1m", ".001"),
            // The generated benchmark blueprint's cpu quota, and YAML's float 1000.0 (issue 26).
            ("1k", "1000"),
            ("1k", "1000.0"),
            ("1", "+1"),
            ("1", "01"),
            ("1020", ""),
            // A decimal number stays decimal: the format is the input's.
            ("1024", ""),
            ("1k", "1k"),
            ("2Ti", "2Ti"),
        ];
        for (canonical, alternate) in table {
            for input in [canonical, alternate].into_iter().filter(|s| !s.is_empty()) {
                assert_eq!(parse(input).unwrap().canonical(), canonical, "{input}");
                if canonical != "0" {
                    let negated = parse(&format!("-{}", input.trim_start_matches('+')))
                        .unwrap()
                        .canonical();
                    assert_eq!(negated, format!("-{canonical}"), "-{input}");
                }
            }
        }
        // Above `E` apimachinery has no suffix and would print the bare mantissa; the exponent
        // form keeps the value.
        assert_eq!(parse("1000E").unwrap().canonical(), "1e21");
        assert_eq!(canonical("not-a-quantity"), "not-a-quantity");
    }

    #[test]
    fn same_value_across_spellings() {
        use serde_json::json;
        let thousand = [
            json!("1000"),
            json!("1k"),
            json!("1e3"),
            json!(1000),
            json!(1000.0),
        ];
        for a in &thousand {
            for b in &thousand {
                assert!(same_value(a, b), "{a} {b}");
            }
        }
        assert!(same_value(&json!("1Gi"), &json!("1024Mi")));
        assert!(same_value(&json!("1.5"), &json!("1500m")));
        assert!(!same_value(&json!("1k"), &json!("1Ki")));
        assert!(!same_value(&json!("1500u"), &json!("2m")));
        assert!(!same_value(&json!("1.10"), &json!(true)));
        assert!(!same_value(&json!("v1"), &json!("v1.0")));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("100ms"), Ok(100));
        assert_eq!(parse_duration_ms("30s"), Ok(30_000));
        assert_eq!(parse_duration_ms("1m30s"), Ok(90_000));
        assert_eq!(parse_duration_ms("0"), Ok(0));
        for bad in ["", "30", "1x", "ms", "1e400s"] {
            assert!(parse_duration_ms(bad).is_err(), "{bad}");
        }
    }
}
