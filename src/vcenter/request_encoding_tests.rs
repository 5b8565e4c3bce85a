//! Every SOAP request that carries a value (a VM or folder name, an inventory path, group and
//! rule names, extraConfig keys and values, credentials, UUIDs, server-given tokens and morefs)
//! carries it as exactly that value: the XML a server parses has the same elements as the
//! request built with a marker, and the value where the marker was. A value XML 1.0 cannot
//! carry at all is refused before sending ([`unencodable`]), never sent broken.
use proptest::prelude::*;

use super::client::{login_body, session_is_active_body};
use super::cluster::reconfigure_body;
use super::model::cluster::{ClusterGroup, GroupChange, RuleChange, VmHostRule};
use super::model::moref::MoRef;
use super::model::vm::{CloneSpec, DiskInfo, NicBacking, NicChange};
use super::property::continue_body;
use super::search::{find_by_inventory_path_body, find_vm_by_uuid_body};
use super::soap::encode::{Xml, envelope, unencodable};
use super::soap::{Node, xml};
use super::vm::{clone_body, extra_config_body, power_on_multi_body};

const MARK: &str = "\u{2603}MARK\u{2603}";

fn moref(kind: &str, value: &str) -> MoRef {
    MoRef::new(kind, value)
}

fn clone_spec(v: &str) -> CloneSpec {
    CloneSpec {
        name: v.into(),
        folder: moref("Folder", v),
        datastore: Some(moref("Datastore", v)),
        pool: Some(moref("ResourcePool", v)),
        host: Some(moref("HostSystem", v)),
        instance_uuid: Some(v.into()),
        annotation: Some(v.into()),
        num_cpus: Some(2),
        num_cores_per_socket: None,
        memory_mb: Some(4096),
        extra_config: vec![(v.into(), v.into()), ("guestinfo.k".into(), v.into())],
        nics: vec![
            NicChange::Add(NicBacking::Network {
                name: v.into(),
                network: moref("Network", v),
            }),
            NicChange::Add(NicBacking::PortGroup {
                switch_uuid: v.into(),
                portgroup_key: v.into(),
            }),
        ],
        disk_resize: Some((
            DiskInfo {
                key: 2000,
                label: v.into(),
                controller_key: Some(1000),
                unit_number: Some(0),
                capacity_kb: 1,
                backing_type: "VirtualDiskFlatVer2BackingInfo".into(),
                file_name: v.into(),
                disk_mode: Some(v.into()),
            },
            2,
        )),
        data_disks: Vec::new(),
        linked_clone: Some(moref("VirtualMachineSnapshot", v)),
        power_on: true,
    }
}

fn rule(v: &str) -> VmHostRule {
    VmHostRule {
        key: Some(3),
        name: v.into(),
        enabled: true,
        mandatory: false,
        vm_group: v.into(),
        affine_host_group: Some(v.into()),
        anti_affine_host_group: Some(v.into()),
    }
}

/// A request body built around one value.
type Build = fn(&str) -> String;

/// Every request kind with a value in it, by name: the body with `v` everywhere a value goes.
fn requests() -> Vec<(&'static str, Build)> {
    vec![
        ("Login", |v| login_body(&moref("SessionManager", v), v, v)),
        ("SessionIsActive", |v| {
            session_is_active_body(&moref("SessionManager", "SessionManager"), v, v)
        }),
        ("FindByInventoryPath", |v| {
            find_by_inventory_path_body(&moref("SearchIndex", "SearchIndex"), v)
        }),
        ("FindByUuid", |v| {
            find_vm_by_uuid_body("FindByUuid", &moref("SearchIndex", "SearchIndex"), v, true)
        }),
        ("ContinueRetrievePropertiesEx", |v| {
            continue_body(&moref("PropertyCollector", "propertyCollector"), v)
        }),
        ("CloneVM_Task", |v| {
            clone_body(&moref("VirtualMachine", v), &clone_spec(v))
        }),
        ("ReconfigVM_Task", |v| {
            extra_config_body(&moref("VirtualMachine", v), &[(v.into(), v.into())])
        }),
        ("PowerOnMultiVM_Task", |v| {
            power_on_multi_body(&moref("Datacenter", v), &[moref("VirtualMachine", v)])
        }),
        ("ReconfigureComputeResource_Task", |v| {
            reconfigure_body(
                &moref("ClusterComputeResource", v),
                &[RuleChange::Add(rule(v)), RuleChange::Edit(rule(v))],
                &[
                    GroupChange::Add(ClusterGroup::Host {
                        name: v.into(),
                        hosts: vec![moref("HostSystem", v)],
                    }),
                    GroupChange::Edit(ClusterGroup::Vm {
                        name: v.into(),
                        vms: vec![moref("VirtualMachine", v)],
                    }),
                    GroupChange::Remove(v.into()),
                ],
            )
        }),
        // The writer itself: a moref's type attribute and text, plain and typed text.
        ("writer", |v| {
            let mut x = Xml::request("M", &moref(v, v));
            x.text("t", v);
            x.typed_text("u", "xsd:string", v);
            x.moref("m", &moref(v, v));
            x.finish("M")
        }),
    ]
}

/// The request element of a whole envelope.
fn request_element(payload: &str) -> Node {
    let root = xml::parse(payload).expect("well-formed");
    let body = root.child("Body").expect("a SOAP Body").clone();
    body.children.into_iter().next().expect("a request element")
}

/// `got` is `reference` with `value` wherever the marker was, and nothing else changed.
fn same_but_value(reference: &Node, got: &Node, value: &str, at: &str) -> Result<(), String> {
    let here = format!("{at}/{}", reference.name);
    let put = |s: &str| s.replace(MARK, value);
    if reference.name != got.name
        || reference.xsi_type != got.xsi_type
        || reference.type_attr.as_deref().map(put) != got.type_attr
        || put(&reference.text) != got.text
        || reference.children.len() != got.children.len()
    {
        return Err(format!(
            "{here}: expected {reference:?} with {value:?}, got {got:?}"
        ));
    }
    reference
        .children
        .iter()
        .zip(&got.children)
        .try_for_each(|(r, g)| same_but_value(r, g, value, &here))
}

fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && !matches!(c, '\u{FFFE}' | '\u{FFFF}'))
}

/// Values made of what breaks naive XML writers, besides arbitrary text.
fn hostile() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "<",
        ">",
        "&",
        "]]>",
        "\"",
        "'",
        "\r",
        "\r\n",
        "\n",
        "\t",
        "&amp;",
        "&#60;",
        "<![CDATA[x]]>",
        "</name><name>",
        "<?xml?>",
        "\u{0}",
        "\u{1}",
        "\u{b}",
        "\u{1f}",
        "\u{7f}",
        "\u{fffe}",
        "\u{ffff}",
        "\u{10ffff}",
        "é",
        " ",
        "/",
        "DC0/vm",
    ])
    .prop_map(str::to_string);
    let piece = prop_oneof![fixed, any::<String>()];
    prop::collection::vec(piece, 0..6).prop_map(|v| v.concat())
}

/// The value a request carries for `v`: vCenter ignores a leading `/` of an inventory path, so
/// the writer drops it.
fn carried<'a>(name: &str, v: &'a str) -> &'a str {
    if name == "FindByInventoryPath" {
        v.trim_start_matches('/')
    } else {
        v
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_soap_request_carries_any_value_exactly_or_is_refused(v in hostile()) {
        for (name, build) in requests() {
            let reference = request_element(&envelope(&build(MARK)));
            let payload = envelope(&build(&v));
            match unencodable(&payload) {
                Some(why) => {
                    prop_assert!(v.chars().any(|c| !is_xml_char(c)), "{name}: {why}");
                    prop_assert!(why.starts_with("the text of <"), "{why}");
                    prop_assert!(why.contains("which XML 1.0 cannot carry"), "{why}");
                }
                None => {
                    prop_assert!(v.chars().all(is_xml_char), "{name}: {v:?} passed");
                    let got = request_element(&payload);
                    if let Err(e) = same_but_value(&reference, &got, carried(name, &v), "") {
                        prop_assert!(false, "{name}: {e}");
                    }
                }
            }
        }
    }
}

#[test]
fn markup_in_names_stays_text() {
    let v = r#"a<b>&c]]>"d'e</name><injected/>"#;
    let body = extra_config_body(&moref("VirtualMachine", "vm-1"), &[("k".into(), v.into())]);
    assert!(body.contains(
        "<value xsi:type=\"xsd:string\">a&lt;b&gt;&amp;c]]&gt;&quot;d&apos;e&lt;/name&gt;&lt;injected/&gt;</value>"
    ));
    let got = request_element(&envelope(&body));
    assert_eq!(got.at("spec/extraConfig/value").unwrap().text, v);
    // A carriage return survives a parser's line-end normalisation; a tab in an attribute
    // survives attribute normalisation.
    let body = find_vm_by_uuid_body(
        "FindByUuid",
        &moref("Search\tIndex", "x"),
        "a\r\nb\rc",
        true,
    );
    let got = request_element(&envelope(&body));
    assert_eq!(got.child_text("uuid"), Some("a\r\nb\rc"));
    assert_eq!(
        got.child("_this").unwrap().type_attr.as_deref(),
        Some("Search\tIndex")
    );
}

#[test]
fn a_control_character_is_named_with_its_element_never_shown() {
    let body = login_body(
        &moref("SessionManager", "SessionManager"),
        "admin",
        "p\u{1}ss",
    );
    assert_eq!(
        unencodable(&envelope(&body)).as_deref(),
        Some("the text of <password> has the character U+0001, which XML 1.0 cannot carry")
    );
    let body = find_by_inventory_path_body(&moref("SearchIndex", "SearchIndex"), "DC0/vm/\u{ffff}");
    assert_eq!(
        unencodable(&envelope(&body)).as_deref(),
        Some("the text of <inventoryPath> has the character U+FFFF, which XML 1.0 cannot carry")
    );
    assert_eq!(
        unencodable(&envelope(&login_body(&moref("S", "S"), "a", "b"))),
        None
    );
}
