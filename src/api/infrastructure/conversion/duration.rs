//! Go's `time.Duration` text (`metav1.Duration` in v1beta1 specs), as far as a conversion to
//! whole seconds needs it. Written for this provider from Go's documented grammar.

/// Whole seconds of a Go duration (`"5m"`, `"1h2m3.5s"`, `"-1.5h"`), truncated towards zero as
/// CAPV's conversion does; what truncation loses the caller keeps.
pub(super) fn parse_seconds(text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} is not a duration (e.g. \"300s\", \"5m\", \"1h30m\")");
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    // Nanoseconds, exactly: a u128 holds more than any i64 duration.
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .ok_or_else(bad)?;
        let (number, tail) = rest.split_at(digits_end);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || number.matches('.').count() > 1 {
            return Err(bad());
        }
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_end);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad())?
        };
        let mut part = whole.checked_mul(scale).ok_or_else(bad)?;
        let mut place = scale;
        for d in fraction.chars() {
            place /= 10;
            part += u128::from(d.to_digit(10).ok_or_else(bad)?) * place;
        }
        total = total.checked_add(part).ok_or_else(bad)?;
        if total > i64::MAX as u128 {
            return Err(format!("{text:?} is longer than a Go duration can be"));
        }
        rest = next;
    }
    let seconds = (total / 1_000_000_000) as i64;
    Ok(if negative { -seconds } else { seconds })
}

/// Whole seconds as Go prints a duration (`300` → `"5m0s"`), which is how v1beta1 clients
/// written in Go see the value.
pub(super) fn format_seconds(seconds: i64) -> String {
    let sign = if seconds < 0 { "-" } else { "" };
    let s = seconds.unsigned_abs();
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{sign}{h}h{m}m{s}s")
    } else if m > 0 {
        format!("{sign}{m}m{s}s")
    } else {
        format!("{sign}{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        for (text, seconds) in [
            ("0", 0),
            ("300s", 300),
            ("5m", 300),
            ("1h2m3s", 3723),
            ("1.5h", 5400),
            ("2.9s", 2),
            ("-90s", -90),
            ("1500ms", 1),
            (".5m", 30),
        ] {
            assert_eq!(parse_seconds(text), Ok(seconds), "{text}");
        }
        for bad in ["", "5", "m", "1x", "1..2s", "-", "1h 2m", "99999999999h"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        assert_eq!(format_seconds(300), "5m0s");
        assert_eq!(format_seconds(3600), "1h0m0s");
        assert_eq!(format_seconds(5), "5s");
        assert_eq!(format_seconds(0), "0s");
        assert_eq!(format_seconds(-61), "-1m1s");
    }
}
