//! No value takes a REST request out of its API prefix, in either dialect, whatever it is.
use percent_encoding::percent_decode_str;
use proptest::prelude::*;
use url::Url;

use super::*;
use crate::vcenter::model::moref::MoRef;
use crate::vcenter::rest::tagging::requests::{self, Association};
use crate::vcenter::rest::{Dialect, RestRequest};

const MARK: &str = "MARKXVALUE";

fn endpoint() -> Endpoint {
    Endpoint::parse("https://vc.example.test").unwrap()
}

/// A request built around one value.
type Build = fn(&str) -> RestRequest;

/// Every tagging request that carries a value in its URL, by name.
fn requests_with_a_value() -> Vec<(&'static str, Build)> {
    fn vm() -> MoRef {
        MoRef::new("VirtualMachine", "vm-42")
    }
    vec![
        ("get_category", requests::get_category),
        ("update_category_types", |v| {
            requests::update_category_types(v, &["VirtualMachine".into()])
        }),
        ("list_tags_for_category", requests::list_tags_for_category),
        ("get_tag", requests::get_tag),
        ("attach", |v| {
            requests::association(Association::Attach, v, &vm())
        }),
        ("detach", |v| {
            requests::association(Association::Detach, v, &vm())
        }),
        ("list_attached_objects", requests::list_attached_objects),
    ]
}

/// The path segments as a server reads them: the URL parsed again from its text, each segment
/// percent-decoded.
fn decoded_segments(url: &Url) -> Vec<String> {
    let reparsed = Url::parse(url.as_str()).unwrap();
    assert_eq!(
        reparsed.path(),
        url.path(),
        "the text parses back to the same path"
    );
    reparsed
        .path_segments()
        .unwrap()
        .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
        .collect()
}

/// What a server sees of `value` in request `build`, compared with the same request carrying a
/// marker: the same segments (the value in place of the marker, as one segment) and the same
/// query — or a refusal, only for a value that is not id-shaped.
fn assert_stays_in_place(name: &str, build: Build, value: &str) {
    let ep = endpoint();
    for dialect in [Dialect::Api, Dialect::Rest] {
        let reference = build(MARK).url(&ep, dialect).unwrap();
        let expected: Vec<String> = decoded_segments(&reference)
            .into_iter()
            .map(|s| s.replace(MARK, value))
            .collect();
        let prefix: Vec<&str> = dialect.prefix().to_vec();
        assert_eq!(&expected[..prefix.len()], &prefix[..]);
        match build(value).url(&ep, dialect) {
            Ok(url) => {
                assert_eq!(
                    decoded_segments(&url),
                    expected,
                    "{name} {dialect:?} with {value:?}: {url}"
                );
                assert_eq!(url.query(), reference.query(), "{name} {dialect:?}: {url}");
                assert_eq!(url.fragment(), None);
                assert_eq!(url.host_str(), Some("vc.example.test"));
                for s in decoded_segments(&url) {
                    assert!(!matches!(s.as_str(), "." | ".."), "{url}");
                    assert!(!s.contains(['/', '\\', ';', '?', '#']), "{url}");
                }
            }
            Err(why) => {
                assert!(
                    check_value(value).is_err(),
                    "{name}: {value:?} refused: {why}"
                );
                assert!(why.contains("is not a vCenter id"), "{why}");
            }
        }
    }
}

/// Strings made of the pieces path tricks are made of, besides arbitrary text.
fn hostile() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "..",
        ".",
        "/",
        "\\",
        "?",
        "#",
        "%2e",
        "%2F",
        "%",
        ";",
        "\t",
        "\n",
        " ",
        "&action=stop",
        "urn:vmomi:InventoryServiceTag:bd0346ac-2b03-4125-8ad6-2ddb3d0ec350:GLOBAL",
    ])
    .prop_map(str::to_string);
    let piece = prop_oneof![fixed, "[a-z0-9:_~-]{0,6}", any::<String>()];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_value_leaves_its_place_in_the_path(value in hostile()) {
        for (name, build) in requests_with_a_value() {
            assert_stays_in_place(name, build, &value);
        }
    }

    #[test]
    fn every_tag_and_category_id_vcenter_emits_is_sent(
        kind in prop_oneof![Just("InventoryServiceTag"), Just("InventoryServiceCategory")],
        uuid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    ) {
        let id = format!("urn:vmomi:{kind}:{uuid}:GLOBAL");
        for (name, build) in requests_with_a_value() {
            for dialect in [Dialect::Api, Dialect::Rest] {
                let url = build(&id).url(&endpoint(), dialect);
                prop_assert!(url.is_ok(), "{name} {dialect:?}: {url:?}");
                // Sent as is where the path carries it: nothing in an id needs encoding.
                let in_path = build(MARK).url(&endpoint(), dialect).unwrap().path().contains(MARK);
                prop_assert_eq!(url.unwrap().path().ends_with(&id), in_path);
            }
        }
    }
}

#[test]
fn the_reviews_injection_is_refused_and_real_urls_are_unchanged() {
    let ep = endpoint();
    let tag = "urn:vmomi:InventoryServiceTag:11111111-2222-3333-4444-555555555555:GLOBAL";
    let vm = MoRef::new("VirtualMachine", "vm-42");
    let attach = requests::association(Association::Attach, tag, &vm);
    assert_eq!(
        attach.url(&ep, Dialect::Api).unwrap().as_str(),
        format!("https://vc.example.test/api/cis/tagging/tag-association/{tag}?action=attach")
    );
    assert_eq!(
        attach.url(&ep, Dialect::Rest).unwrap().as_str(),
        format!(
            "https://vc.example.test/rest/com/vmware/cis/tagging/tag-association/id:{tag}?~action=attach"
        )
    );
    let evil = format!("{tag}/../../../../vcenter/vm/vm-42/power?action=stop&x=");
    let err = requests::association(Association::Attach, &evil, &vm)
        .url(&ep, Dialect::Api)
        .unwrap_err();
    assert!(err.contains("is not a vCenter id (it has '/'"), "{err}");
    let list = requests::list_attached_tags(&vm);
    assert_eq!(
        list.url(&ep, Dialect::Rest).unwrap().as_str(),
        "https://vc.example.test/rest/com/vmware/cis/tagging/tag-association?~action=list-attached-tags"
    );
}

/// Why a value is checked before `PathSegmentsMut` takes it: the url crate skips a `..` segment
/// but strips tabs and newlines only afterwards, so `.\t.` pops the segment before it
/// (`tagging` here).
#[test]
fn path_segments_mut_alone_would_let_a_dot_segment_through() {
    let mut url = Url::parse("https://vc.example.test/").unwrap();
    url.path_segments_mut()
        .unwrap()
        .extend(["api", "cis", "tagging", ".\t.", "x"]);
    assert_eq!(url.path(), "/api/cis//x");
    for v in [".\t.", "..", ".", "", "a;b", "..;"] {
        assert!(check_value(v).is_err(), "{v:?}");
    }
    assert!(check_value(&"a".repeat(MAX_SEGMENT_LEN + 1)).is_err());
}
