//! The short-circuit: how many of the selected machines may be unhealthy before remediation
//! stops, as MAO computes it (percentages floored; unset = 100%; an invalid value allows none).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::api::health_values::parse_max_unhealthy;

/// MAO's `getMaxUnhealthy`: the number of unhealthy machines `maxUnhealthy` tolerates out of
/// `expected`. A percentage rounds down (40% of 5 = 2, 60% of 7 = 4, 20% of 3 = 0 —
/// cluster-api#12904 keeps that floor); unset is 100%. An invalid value is an error (and then
/// no remediation is allowed).
pub fn get_max_unhealthy(
    max_unhealthy: Option<&IntOrString>,
    expected: u64,
) -> Result<u64, String> {
    parse_max_unhealthy(max_unhealthy).map(|m| m.of(expected))
}

/// `expected − healthy`: the machines not started, unhealthy, or about to be.
pub fn unhealthy_count(expected: u64, healthy: u64) -> u64 {
    expected.saturating_sub(healthy)
}

/// MAO's `isAllowedRemediation`: remediation goes ahead iff `expected − healthy ≤ maxUnhealthy`.
pub fn is_allowed_remediation(
    max_unhealthy: Option<&IntOrString>,
    expected: u64,
    healthy: u64,
) -> bool {
    get_max_unhealthy(max_unhealthy, expected)
        .is_ok_and(|max| unhealthy_count(expected, healthy) <= max)
}

/// `status.remediationsAllowed`: `max(0, maxUnhealthy − (expected − healthy))`, 0 when
/// `maxUnhealthy` is invalid.
pub fn remediations_allowed(
    max_unhealthy: Option<&IntOrString>,
    expected: u64,
    healthy: u64,
) -> i32 {
    get_max_unhealthy(max_unhealthy, expected)
        .map(|max| max.saturating_sub(unhealthy_count(expected, healthy)))
        .map_or(0, |n| i32::try_from(n).unwrap_or(i32::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(i: i32) -> IntOrString {
        IntOrString::Int(i)
    }
    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.into())
    }

    /// MAO `TestIsAllowedRemediation` (short circuit if ever more than 2 out of 5 go unhealthy).
    /// Upstream reads expected/healthy from the MHC status; nil values are 0.
    #[test]
    fn test_is_allowed_remediation() {
        let cases: [(&str, Option<IntOrString>, u64, u64, bool); 9] = [
            ("not above maxUnhealthy", Some(int(2)), 5, 3, true),
            ("above maxUnhealthy", Some(int(2)), 5, 2, false),
            // Upstream clamps -2 to 0 (3 unhealthy > 0); ours rejects it as invalid: same verdict.
            ("maxUnhealthy is negative", Some(int(-2)), 5, 2, false),
            (
                "not above maxUnhealthy (percentange)",
                Some(s("40%")),
                5,
                3,
                true,
            ),
            (
                "above maxUnhealthy (percentange)",
                Some(s("40%")),
                5,
                2,
                false,
            ),
            (
                "not above maxUnhealthy (int in string)",
                Some(s("2")),
                5,
                3,
                true,
            ),
            (
                "above maxUnhealthy (int in string)",
                Some(s("2")),
                5,
                2,
                false,
            ),
            ("nil values", Some(s("40%")), 0, 0, true),
            ("invalid string value", Some(s("foo%50")), 0, 0, false),
        ];
        for (name, max, expected, healthy, want) in cases {
            assert_eq!(
                is_allowed_remediation(max.as_ref(), expected, healthy),
                want,
                "{name}"
            );
        }
    }

    /// MAO `TestGetMaxUnhealthy` (the floor cases).
    #[test]
    #[allow(clippy::type_complexity)]
    fn test_get_max_unhealthy() {
        let cases: [(&str, Option<IntOrString>, u64, Result<u64, ()>); 5] = [
            ("when maxUnhealthy is nil", None, 7, Ok(7)),
            (
                "when maxUnhealthy is not an int or percentage",
                Some(s("abcdef")),
                3,
                Err(()),
            ),
            ("when maxUnhealthy is an int", Some(int(3)), 2, Ok(3)),
            (
                "when maxUnhealthy is a 40% (of 5)",
                Some(s("40%")),
                5,
                Ok(2),
            ),
            (
                "when maxUnhealthy is a 60% (of 7)",
                Some(s("60%")),
                7,
                Ok(4),
            ),
        ];
        for (name, max, expected, want) in cases {
            let got = get_max_unhealthy(max.as_ref(), expected).map_err(|_| ());
            assert_eq!(got, want, "{name}");
            // Upstream returns 0 alongside the error: no remediation allowed.
            assert_eq!(
                remediations_allowed(max.as_ref(), expected, expected),
                want.unwrap_or(0) as i32,
                "{name}"
            );
        }
    }

    #[test]
    fn floor_blocks_small_pools_as_upstream() {
        // cluster-api#12904: 20% of 3 is 0, so a single unhealthy machine short-circuits.
        assert_eq!(get_max_unhealthy(Some(&s("20%")), 3), Ok(0));
        assert!(!is_allowed_remediation(Some(&s("20%")), 3, 2));
        assert_eq!(remediations_allowed(Some(&int(1)), 3, 3), 1);
        assert_eq!(remediations_allowed(Some(&int(1)), 3, 1), 0);
    }
}
