//! Cluster host groups, VM groups and VM-host rules: read from `configurationEx` (fetched whole:
//! real vCenter rejects subclass-only sub-paths such as `configurationEx.group`) and changed with
//! `ReconfigureComputeResource_Task` (`modify=true`, incremental). The values are
//! `model::cluster`.
use std::collections::BTreeMap;

use super::client::Client;
use super::model::cluster::{
    ClusterConfig, ClusterGroup, ClusterRule, GroupChange, RuleChange, VmHostRule,
};
use super::model::error::{Error, Result};
use super::model::moref::MoRef;
use super::model::task::TaskRef;
use super::soap::decode::{
    Malformed, expect_type, optional_boolean, optional_number, required, shown,
};
use super::soap::{Node, Xml};

/// Parse a `ClusterConfigInfoEx` value. A group needs its name and morefs as members; a rule's
/// `key`, `enabled` and `mandatory` must decode when present (a misread key would edit or remove
/// the wrong rule).
pub fn parse_config(val: &Node) -> Result<ClusterConfig, Malformed> {
    expect_type(val, &["ClusterConfigInfoEx"], "configurationEx")?;
    let groups = val
        .children_named("group")
        .map(|g| {
            let name = required(g, "name", "cluster group")?.text.clone();
            let what = |tag: &str| format!("{tag} of cluster group {}", shown(&name));
            let members = |tag: &str| {
                g.children_named(tag)
                    .map(|m| MoRef::decode(m, &what(tag)))
                    .collect::<Result<Vec<_>, _>>()
            };
            Ok(match g.xsi_type.as_deref() {
                Some("ClusterHostGroup") => ClusterGroup::Host {
                    hosts: members("host")?,
                    name,
                },
                Some("ClusterVmGroup") => ClusterGroup::Vm {
                    vms: members("vm")?,
                    name,
                },
                other => ClusterGroup::Other {
                    name,
                    type_name: other.unwrap_or("ClusterGroupInfo").to_string(),
                },
            })
        })
        .collect::<Result<Vec<_>, Malformed>>()?;
    let rules = val
        .children_named("rule")
        .map(|r| {
            let name = r.child_text("name").unwrap_or_default().to_string();
            let what = |tag: &str| format!("{tag} of cluster rule {}", shown(&name));
            let key = optional_number(r, "key", &what("key"))?;
            let enabled = optional_boolean(r, "enabled", &what("enabled"))?.unwrap_or(false);
            let opt = |tag: &str| {
                r.child_text(tag)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
            };
            Ok(match r.xsi_type.as_deref() {
                Some("ClusterVmHostRuleInfo") => ClusterRule::VmHost(VmHostRule {
                    key,
                    enabled,
                    mandatory: optional_boolean(r, "mandatory", &what("mandatory"))?
                        .unwrap_or(false),
                    vm_group: opt("vmGroupName").unwrap_or_default(),
                    affine_host_group: opt("affineHostGroupName"),
                    anti_affine_host_group: opt("antiAffineHostGroupName"),
                    name,
                }),
                other => ClusterRule::Other {
                    key,
                    type_name: other.unwrap_or("ClusterRuleInfo").to_string(),
                    enabled,
                    name,
                },
            })
        })
        .collect::<Result<Vec<_>, Malformed>>()?;
    Ok(ClusterConfig { groups, rules })
}

fn write_group(x: &mut Xml, g: &ClusterGroup) {
    match g {
        ClusterGroup::Host { name, hosts } => {
            x.open_typed("info", "ClusterHostGroup");
            x.text("name", name);
            for h in hosts {
                x.moref("host", h);
            }
        }
        ClusterGroup::Vm { name, vms } => {
            x.open_typed("info", "ClusterVmGroup");
            x.text("name", name);
            for v in vms {
                x.moref("vm", v);
            }
        }
        ClusterGroup::Other { name, type_name } => {
            x.open_typed("info", type_name);
            x.text("name", name);
        }
    }
    x.close("info");
}

fn write_rule(x: &mut Xml, r: &VmHostRule) {
    // WSDL order: key, status, enabled, name, mandatory, userCreated, inCompliance, ruleUuid,
    // vmGroupName, affineHostGroupName, antiAffineHostGroupName.
    x.open_typed("info", "ClusterVmHostRuleInfo");
    if let Some(k) = r.key {
        x.text("key", &k.to_string());
    }
    x.text("enabled", if r.enabled { "true" } else { "false" });
    x.text("name", &r.name);
    x.text("mandatory", if r.mandatory { "true" } else { "false" });
    x.text("userCreated", "true");
    x.text("vmGroupName", &r.vm_group);
    if let Some(h) = &r.affine_host_group {
        x.text("affineHostGroupName", h);
    }
    if let Some(h) = &r.anti_affine_host_group {
        x.text("antiAffineHostGroupName", h);
    }
    x.close("info");
}

/// The `ReconfigureComputeResource_Task` body. `rulesSpec` precedes `groupSpec` (WSDL order).
pub fn reconfigure_body(cluster: &MoRef, rules: &[RuleChange], groups: &[GroupChange]) -> String {
    let mut x = Xml::request("ReconfigureComputeResource_Task", cluster);
    x.open_typed("spec", "ClusterConfigSpecEx");
    for r in rules {
        x.open("rulesSpec");
        match r {
            RuleChange::Add(info) => {
                x.text("operation", "add");
                write_rule(&mut x, info);
            }
            RuleChange::Edit(info) => {
                x.text("operation", "edit");
                write_rule(&mut x, info);
            }
            RuleChange::Remove(key) => {
                x.text("operation", "remove");
                x.typed_text("removeKey", "xsd:int", &key.to_string());
            }
        }
        x.close("rulesSpec");
    }
    for g in groups {
        x.open("groupSpec");
        match g {
            GroupChange::Add(info) => {
                x.text("operation", "add");
                write_group(&mut x, info);
            }
            GroupChange::Edit(info) => {
                x.text("operation", "edit");
                write_group(&mut x, info);
            }
            GroupChange::Remove(name) => {
                x.text("operation", "remove");
                x.typed_text("removeKey", "xsd:string", name);
            }
        }
        x.close("groupSpec");
    }
    x.close("spec");
    x.text("modify", "true");
    x.finish("ReconfigureComputeResource_Task")
}

impl Client {
    /// Groups and rules of several clusters in one round trip.
    pub async fn cluster_configs(
        &self,
        clusters: &[MoRef],
    ) -> Result<BTreeMap<MoRef, ClusterConfig>> {
        let contents = self
            .retrieve_objects(clusters, "ClusterComputeResource", &["configurationEx"])
            .await?;
        let mut out = BTreeMap::new();
        for c in contents {
            // Unreadable (NoPermission, …) is not "no groups": deciding on it would re-create
            // what exists.
            if let Some((_, fault)) = c.missing.iter().find(|(p, _)| p == "configurationEx") {
                return Err(Error::Fault {
                    server: self.server(),
                    method: format!("RetrievePropertiesEx({}.configurationEx)", c.moref()),
                    fault: Box::new(fault.clone()),
                });
            }
            let cfg = c
                .props
                .get("configurationEx")
                .map(parse_config)
                .transpose()
                .map_err(|m| {
                    m.within(&c.obj.to_string())
                        .into_error(self.server(), "RetrievePropertiesEx")
                })?
                .unwrap_or_default();
            out.insert(c.obj, cfg);
        }
        Ok(out)
    }

    pub async fn cluster_config(&self, cluster: &MoRef) -> Result<ClusterConfig> {
        Ok(self
            .cluster_configs(std::slice::from_ref(cluster))
            .await?
            .remove(cluster)
            .unwrap_or_default())
    }

    /// Start a reconfiguration of groups and rules.
    pub async fn reconfigure_cluster(
        &self,
        cluster: &MoRef,
        rules: &[RuleChange],
        groups: &[GroupChange],
    ) -> Result<TaskRef> {
        self.start_task(
            "ReconfigureComputeResource_Task",
            &reconfigure_body(cluster, rules, groups),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::soap::xml::parse;

    #[test]
    fn reconfigure_bodies_follow_the_wire_shapes() {
        let c = MoRef::new("ClusterComputeResource", "domain-c7");
        let body = reconfigure_body(
            &c,
            &[RuleChange::Remove(3)],
            &[
                GroupChange::Add(ClusterGroup::Host {
                    name: "capi-hosts".into(),
                    hosts: vec![MoRef::new("HostSystem", "host-34")],
                }),
                GroupChange::Remove("capi-vms".into()),
            ],
        );
        assert!(body.contains(r#"<spec xsi:type="ClusterConfigSpecEx">"#));
        assert!(body.contains(r#"<removeKey xsi:type="xsd:int">3</removeKey>"#));
        assert!(body.contains(r#"<info xsi:type="ClusterHostGroup"><name>capi-hosts</name><host type="HostSystem">host-34</host></info>"#));
        assert!(body.contains(r#"<removeKey xsi:type="xsd:string">capi-vms</removeKey>"#));
        assert!(body.find("rulesSpec").unwrap() < body.find("groupSpec").unwrap());
        assert!(body.ends_with("<modify>true</modify></ReconfigureComputeResource_Task>"));
    }

    #[test]
    fn configuration_ex_parses_groups_and_rules() {
        let doc = r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="ClusterConfigInfoEx">
          <rule xsi:type="ClusterVmHostRuleInfo"><key>1</key><enabled>true</enabled><name>r</name><mandatory>false</mandatory><vmGroupName>vms</vmGroupName><affineHostGroupName>hosts</affineHostGroupName></rule>
          <rule xsi:type="ClusterAntiAffinityRuleSpec"><key>2</key><enabled>false</enabled><name>aa</name></rule>
          <group xsi:type="ClusterHostGroup"><name>hosts</name><host type="HostSystem">host-1</host><host type="HostSystem">host-2</host></group>
          <group xsi:type="ClusterVmGroup"><name>vms</name></group>
          <group><name>bare</name></group>
        </val>"#;
        let cfg = parse_config(&parse(doc).unwrap()).unwrap();
        assert_eq!(cfg.groups.len(), 3);
        assert!(
            matches!(cfg.group("hosts"), Some(ClusterGroup::Host { hosts, .. }) if hosts.len() == 2)
        );
        assert!(matches!(cfg.group("vms"), Some(ClusterGroup::Vm { vms, .. }) if vms.is_empty()));
        assert!(matches!(
            cfg.group("bare"),
            Some(ClusterGroup::Other { .. })
        ));
        let rules: Vec<_> = cfg.vm_host_rules().collect();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].key, Some(1));
        assert_eq!(rules[0].affine_host_group.as_deref(), Some("hosts"));
        assert!(cfg.rule("aa").is_some());
    }

    #[test]
    fn malformed_configurations_are_decode_errors() {
        let cfg = |inner: &str| {
            let doc = format!(
                r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="ClusterConfigInfoEx">{inner}</val>"#
            );
            parse_config(&parse(&doc).unwrap()).map_err(|e| e.to_string())
        };
        let cases = [
            (
                r#"<rule xsi:type="ClusterVmHostRuleInfo"><key>one</key><name>r</name></rule>"#,
                r#"key of cluster rule "r" "one" is not a number in range"#,
            ),
            (
                r#"<rule xsi:type="ClusterVmHostRuleInfo"><key>4294967296</key><name>r</name></rule>"#,
                "is not a number in range",
            ),
            (
                r#"<rule xsi:type="ClusterVmHostRuleInfo"><name>r</name><enabled>yes</enabled></rule>"#,
                r#"enabled of cluster rule "r" "yes" is not a boolean"#,
            ),
            (
                r#"<rule xsi:type="ClusterVmHostRuleInfo"><name>r</name><mandatory>2</mandatory></rule>"#,
                r#"mandatory of cluster rule "r" "2" is not a boolean"#,
            ),
            (
                r#"<group xsi:type="ClusterHostGroup"><host type="HostSystem">host-1</host></group>"#,
                "cluster group without name",
            ),
            (
                r#"<group xsi:type="ClusterHostGroup"><name>hg</name><host>host-1</host></group>"#,
                r#"host of cluster group "hg" is not a managed object reference (no type)"#,
            ),
        ];
        for (inner, expected) in cases {
            let e = cfg(inner).unwrap_err();
            assert!(e.contains(expected), "{inner}: {e}");
        }
        let wrong = parse(r#"<val xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="ArrayOfClusterRuleInfo"/>"#).unwrap();
        assert_eq!(
            parse_config(&wrong).unwrap_err().to_string(),
            "configurationEx is a ArrayOfClusterRuleInfo, not a ClusterConfigInfoEx"
        );
        // vcsim's shapes stay readable: a rule without key, a bare group.
        let ok = cfg(r#"<rule xsi:type="ClusterVmHostRuleInfo"><enabled>false</enabled><name>rule-missing</name></rule><group xsi:type="ClusterGroupInfo"><name>hg-c</name></group>"#).unwrap();
        assert_eq!(ok.vm_host_rules().next().unwrap().key, None);
    }
}
