//! The one shape of a vSphere tag ID: `urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL`, the form
//! real vCenter and vcsim both emit (vcenter-wire.md §9, the vcsim REST transcript). Tag IDs come
//! from tenants (`tagIDs` of machines) and end up in a REST path, so anything else is refused
//! before it can carry `/`, `?`, `#`, `%`, `..` or whitespace there: by every webhook taking
//! `tagIDs` and again by the client before it sends a request.
//!
//! Upstream (machine-api-operator) accepts any scope in place of `GLOBAL` (`[^:]+`), which lets
//! `/`, `?` and `.` through; no vCenter emits another scope, so nothing real is lost.

/// The format, as error messages name it.
pub const TAG_ID_FORMAT: &str = "urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL";

const PREFIX: &str = "urn:vmomi:InventoryServiceTag:";
const SUFFIX: &str = ":GLOBAL";

/// Whether `id` is a tag ID in [`TAG_ID_FORMAT`]: the UUID in its 8-4-4-4-12 hex form (either
/// case: vCenter writes lower case, hand-written manifests sometimes upper).
pub fn is_tag_id(id: &str) -> bool {
    id.strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_suffix(SUFFIX))
        .is_some_and(is_uuid)
}

fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, len)| g.len() == len && g.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The reason a string is not a tag ID, quoting it (shortened: it may be anything).
pub fn tag_id_error(id: &str) -> String {
    let shown: String = id.chars().take(120).collect();
    let more = if id.chars().count() > 120 { "…" } else { "" };
    format!("tag ID {shown:?}{more} is not in the format {TAG_ID_FORMAT}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_vcenter_and_vcsim_emit_are_accepted() {
        for id in [
            // vcsim (tests/fixtures/vcsim-wire/rest_transcript.txt)
            "urn:vmomi:InventoryServiceTag:bd0346ac-2b03-4125-8ad6-2ddb3d0ec350:GLOBAL",
            // real vCenter, and a hand-written upper-case UUID
            "urn:vmomi:InventoryServiceTag:5736bf56-49f5-4667-b38c-b97e09dc9578:GLOBAL",
            "urn:vmomi:InventoryServiceTag:5736BF56-49F5-4667-B38C-B97E09DC9578:GLOBAL",
        ] {
            assert!(is_tag_id(id), "{id}");
        }
    }

    #[test]
    fn anything_that_could_leave_a_url_segment_is_refused() {
        let good = "urn:vmomi:InventoryServiceTag:bd0346ac-2b03-4125-8ad6-2ddb3d0ec350:GLOBAL";
        for bad in [
            "",
            "tag-1",
            "urn:vmomi:InventoryServiceCategory:bd0346ac-2b03-4125-8ad6-2ddb3d0ec350:GLOBAL",
            "urn:vmomi:InventoryServiceTag:bd0346ac-2b03-4125-8ad6-2ddb3d0ec350:LOCAL",
            "urn:vmomi:InventoryServiceTag:bd0346ac2b0341258ad62ddb3d0ec350:GLOBAL",
            "urn:vmomi:InventoryServiceTag:bd0346ac-2b03-4125-8ad6-2ddb3d0ec35g:GLOBAL",
            "urn:vmomi:InventoryServiceTag:nope:GLOBAL",
            &format!("{good}/../../vcenter/vm/vm-42/power?action=stop&x="),
            &format!("{good}?action=detach"),
            &format!("{good}#x"),
            &format!("{good}%2F"),
            &format!("{good} "),
            &format!(" {good}"),
            &format!("{good}\n"),
            &good.replace("GLOBAL", "GLOBAL/.."),
            &good.replace("-2b03-", "-2b0/-"),
            // A multi-byte character where a hex digit belongs (no byte-length confusion).
            &good.replace("bd0346ac", "bd0346é"),
        ] {
            assert!(!is_tag_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_error_quotes_a_shortened_value_and_the_format() {
        assert_eq!(
            tag_id_error("a/b"),
            "tag ID \"a/b\" is not in the format urn:vmomi:InventoryServiceTag:<UUID>:GLOBAL"
        );
        let long = "x".repeat(500);
        assert!(tag_id_error(&long).contains(&format!("{:?}…", "x".repeat(120))));
    }
}
