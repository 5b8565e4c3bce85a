//! The two string-typed MachineHealthCheck values, parsed: Go durations (`nodeStartupTimeout`,
//! unhealthy-condition `timeout`) and `maxUnhealthy`.
//!
//! They live with the API types, not in the webhook, because admission and the health planner
//! must read them the same way: a value the webhook admits is one the planner can act on.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Parses a Go duration (`300ms`, `1.5h`, `2h45m`, `0`) without sign, as Go's
/// `time.ParseDuration` does for the unsigned forms upstream's CRD patterns allow. Returns
/// nanoseconds.
pub fn parse_go_duration(s: &str) -> Result<u128, String> {
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s.starts_with(['-', '+']) {
        return Err("must not be signed".into());
    }
    let mut rest = s;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_len];
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(format!("invalid duration {s:?}"));
        }
        let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        let scale: f64 = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(format!("missing unit in duration {s:?}")),
            u => return Err(format!("unknown unit {u:?} in duration {s:?}")),
        };
        total += n * scale;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > 9.2e18 {
        return Err(format!("duration {s:?} is too large"));
    }
    Ok(total as u128)
}

/// `maxUnhealthy`, parsed: how many selected machines may be unhealthy before remediation stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxUnhealthy {
    /// An absolute number of machines.
    Count(u64),
    /// A percentage (0 to 100) of the selected machines.
    Percent(u8),
}

impl MaxUnhealthy {
    /// The number of machines this allows out of `total`. A percentage rounds down, as upstream
    /// (`intstr.GetScaledValueFromIntOrPercent` with `roundUp` false): 40% of 3 machines is 1.
    pub fn of(self, total: u64) -> u64 {
        match self {
            MaxUnhealthy::Count(n) => n,
            MaxUnhealthy::Percent(p) => total * u64::from(p) / 100,
        }
    }
}

/// The text of the error for an invalid `maxUnhealthy`.
pub const MAX_UNHEALTHY_MESSAGE: &str =
    "must be a non-negative integer or a percentage between 0% and 100% (e.g. 1, 40%)";

/// Parses `maxUnhealthy` (`^((100|[0-9]{1,2})%|[0-9]+)$` for strings; a non-negative integer).
/// `None` (unset) is upstream's default, `100%`.
pub fn parse_max_unhealthy(value: Option<&IntOrString>) -> Result<MaxUnhealthy, String> {
    match value {
        None => Ok(MaxUnhealthy::Percent(100)),
        Some(IntOrString::Int(i)) => u64::try_from(*i)
            .map(MaxUnhealthy::Count)
            .map_err(|_| MAX_UNHEALTHY_MESSAGE.to_string()),
        Some(IntOrString::String(s)) => parse_max_unhealthy_str(s),
    }
}

fn parse_max_unhealthy_str(s: &str) -> Result<MaxUnhealthy, String> {
    let digits = |d: &str| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit());
    if let Some(pct) = s.strip_suffix('%') {
        if pct == "100" || (digits(pct) && pct.len() <= 2) {
            return pct
                .parse()
                .map(MaxUnhealthy::Percent)
                .map_err(|_| MAX_UNHEALTHY_MESSAGE.to_string());
        }
        return Err(MAX_UNHEALTHY_MESSAGE.to_string());
    }
    if digits(s) {
        return s
            .parse()
            .map(MaxUnhealthy::Count)
            .map_err(|_| format!("{s:?} is too large"));
    }
    Err(MAX_UNHEALTHY_MESSAGE.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_go_duration("0"), Ok(0));
        assert_eq!(parse_go_duration("10m"), Ok(600_000_000_000));
        assert_eq!(parse_go_duration("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_go_duration("2h45m"), Ok(9_900_000_000_000));
        assert_eq!(parse_go_duration("300ms"), Ok(300_000_000));
        assert_eq!(parse_go_duration("0s"), Ok(0));
        for bad in ["", "10", "-1m", "1x", "abc10m", "0abc", "1..5s", "m"] {
            assert!(parse_go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn max_unhealthy_values() {
        let s = |v: &str| parse_max_unhealthy(Some(&IntOrString::String(v.into())));
        assert_eq!(parse_max_unhealthy(None), Ok(MaxUnhealthy::Percent(100)));
        assert_eq!(s("40%"), Ok(MaxUnhealthy::Percent(40)));
        assert_eq!(s("100%"), Ok(MaxUnhealthy::Percent(100)));
        assert_eq!(s("0%"), Ok(MaxUnhealthy::Percent(0)));
        assert_eq!(s("3"), Ok(MaxUnhealthy::Count(3)));
        assert_eq!(
            parse_max_unhealthy(Some(&IntOrString::Int(2))),
            Ok(MaxUnhealthy::Count(2))
        );
        for bad in [
            "101%",
            "1.5",
            "abc",
            "-1",
            "%",
            "",
            "99999999999999999999999",
        ] {
            assert!(s(bad).is_err(), "{bad}");
        }
        assert!(parse_max_unhealthy(Some(&IntOrString::Int(-1))).is_err());
        // Percentages round down, as upstream.
        assert_eq!(MaxUnhealthy::Percent(40).of(3), 1);
        assert_eq!(MaxUnhealthy::Percent(100).of(3), 3);
        assert_eq!(MaxUnhealthy::Count(2).of(5), 2);
    }
}
