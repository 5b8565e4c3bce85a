//! REST request URLs, built so that no value can take a request out of its API prefix
//! (`/api/cis/tagging/...`, `/rest/com/vmware/cis/tagging/...`). A tag ID pasted into a path
//! string once turned an attach into a POST anywhere on vCenter (`..` and `?` in the ID).
//!
//! * Fixed segments are `&'static str` written in code; a value (an id) is always exactly one
//!   segment, pushed through [`url::PathSegmentsMut`], which percent-encodes `/`, `\`, `?`, `#`,
//!   `%` and whitespace.
//! * That is not enough on its own: `PathSegmentsMut` silently *drops* a segment that is `.` or
//!   `..`, and strips tabs and newlines from a segment *after* that check, so `.\t.` becomes
//!   `..` and pops the segment before it. Servers differ too (Tomcat reads `..;` as `..`). So a
//!   value must also look like a vCenter id — letters, digits and `: . _ ~ -`, not `.` or `..` —
//!   or no request is sent at all.
//! * The query is one constant pair. It is percent-encoded by RFC 3986 rather than by
//!   `form_urlencoded` (`query_pairs_mut`), which would send `~action` as `%7Eaction`: govmomi
//!   and vcsim use `~action` literally, and no real vCenter was at hand to prove the other form.
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use url::Url;

use crate::vcenter::model::endpoint::Endpoint;

/// The longest value sent as a segment: ids are about 70 characters.
const MAX_SEGMENT_LEN: usize = 256;

/// What RFC 3986 leaves unencoded in a query component besides letters and digits.
const QUERY_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A REST path below a dialect's prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RestPath {
    segments: Vec<Segment>,
    query: Option<(&'static str, &'static str)>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Fixed(&'static str),
    Value(String),
}

impl RestPath {
    /// The fixed part, `/`-separated (`cis/tagging/tag-association`).
    pub(crate) fn new(fixed: &'static str) -> Self {
        Self {
            segments: fixed
                .split('/')
                .filter(|s| !s.is_empty())
                .map(Segment::Fixed)
                .collect(),
            query: None,
        }
    }

    /// One value (an id, or `id:<id>` on `/rest`) as exactly one segment.
    pub(crate) fn value(mut self, value: impl Into<String>) -> Self {
        self.segments.push(Segment::Value(value.into()));
        self
    }

    /// The query, a constant pair (`action=attach`).
    pub(crate) fn query(mut self, key: &'static str, value: &'static str) -> Self {
        self.query = Some((key, value));
        self
    }

    /// The URL on `endpoint` under `prefix` (`["api"]`, `["rest", "com", "vmware"]`), or why
    /// a value cannot be sent.
    pub(crate) fn url(&self, endpoint: &Endpoint, prefix: &[&'static str]) -> Result<Url, String> {
        for s in &self.segments {
            if let Segment::Value(v) = s {
                check_value(v)?;
            }
        }
        let mut url = endpoint.join("");
        {
            let Ok(mut path) = url.path_segments_mut() else {
                return Err(format!("{endpoint} cannot carry a path"));
            };
            path.clear().extend(prefix.iter().copied());
            path.extend(self.segments.iter().map(|s| match s {
                Segment::Fixed(f) => *f,
                Segment::Value(v) => v.as_str(),
            }));
        }
        if let Some((key, value)) = self.query {
            let key = utf8_percent_encode(key, QUERY_COMPONENT);
            let value = utf8_percent_encode(value, QUERY_COMPONENT);
            url.set_query(Some(&format!("{key}={value}")));
        }
        Ok(url)
    }
}

/// Whether a value may be a path segment: what vCenter ids are made of (URNs such as
/// `urn:vmomi:InventoryServiceTag:<uuid>:GLOBAL`), and not a dot segment.
fn check_value(v: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '~' | '-');
    if v.is_empty() || v.len() > MAX_SEGMENT_LEN || matches!(v, "." | "..") {
        return Err(format!("{} is not a vCenter id", shown(v)));
    }
    match v.chars().find(|c| !ok_char(*c)) {
        None => Ok(()),
        Some(c) => Err(format!(
            "{} is not a vCenter id (it has {c:?}; ids are letters, digits and : . _ ~ -)",
            shown(v)
        )),
    }
}

/// A value quoted for an error message, shortened.
fn shown(v: &str) -> String {
    let s: String = v.chars().take(120).collect();
    if v.chars().count() > 120 {
        format!("{s:?}…")
    } else {
        format!("{s:?}")
    }
}

#[cfg(test)]
mod tests;
