//! Kubernetes quantities (`500m`, `12Ti`, `1e3`) as exact milli-units, and Go durations (`30s`).
//!
//! Written here because k8s-openapi's `Quantity` is an unparsed string and no maintained crate parses
//! the grammar exactly; the grammar is small and fixed (apimachinery `resource.ParseQuantity`).

/// A value from a blueprint as a message shows it: at most 80 characters, so a hostile value
/// cannot flood a terminal, a CI log or a PR comment.
fn shown(text: &str) -> String {
    crate::blueprint::yaml::shorten(text)
}

/// Parses a quantity into milli-units (`1` -> 1000, `500m` -> 500, `1Ki` -> 1_024_000).
pub fn parse_milli(text: &str) -> Result<i128, String> {
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
    // value = digits / 10^frac_len, scaled by the suffix, times 1000 for milli-units.
    let digits: String = format!("{int_part}{frac_part}");
    let mantissa: i128 = digits.parse().map_err(|_| bad())?;
    let mut scale10: i32 = 3 - frac_part.len() as i32;
    let mut scale2: u32 = 0;
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
        "Ki" => scale2 = 10,
        "Mi" => scale2 = 20,
        "Gi" => scale2 = 30,
        "Ti" => scale2 = 40,
        "Pi" => scale2 = 50,
        "Ei" => scale2 = 60,
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..].parse().map_err(|_| bad())?;
            if !(-30..=30).contains(&exp) {
                return Err(bad());
            }
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
        // Kubernetes rounds sub-milli amounts up.
        v = (v + d - 1) / d;
    }
    Ok(sign * v)
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
