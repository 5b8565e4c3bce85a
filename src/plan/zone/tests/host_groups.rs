//! HostGroup zones: host group, VM group and the VM-host rule binding them.
use super::*;

pub(super) fn hg_fd(auto: bool) -> VSphereFailureDomain {
    fd(
        side(
            "region-a",
            FailureDomainType::Datacenter,
            "k8s-region",
            false,
        ),
        side("rack-1", FailureDomainType::HostGroup, "k8s-zone", auto),
        Topology {
            datacenter: "DC0".into(),
            compute_cluster: Some("C0".into()),
            hosts: Some(FailureDomainHosts {
                vm_group_name: "vms".into(),
                host_group_name: "hosts".into(),
            }),
            ..Topology::default()
        },
    )
}

pub(super) fn hg_world(cfg: ClusterConfig, tagged_hosts: &[&str]) -> World {
    let hosts: Vec<MoRef> = tagged_hosts.iter().map(|h| m("HostSystem", h)).collect();
    World::new()
        .category("cat-r", "k8s-region")
        .category("cat-z", "k8s-zone")
        .tag("t-r", "region-a", "cat-r", &[m("Datacenter", "dc-1")])
        .tag("t-z", "rack-1", "cat-z", &hosts)
        .config("c-0", cfg)
}

pub(super) fn rule(enabled: bool, mandatory: bool) -> ClusterRule {
    ClusterRule::VmHost(VmHostRule {
        key: Some(1),
        name: "r".into(),
        enabled,
        mandatory,
        vm_group: "vms".into(),
        affine_host_group: Some("hosts".into()),
        anti_affine_host_group: None,
    })
}

pub(super) fn groups(hosts: &[&str]) -> Vec<ClusterGroup> {
    vec![
        ClusterGroup::Host {
            name: "hosts".into(),
            hosts: hosts.iter().map(|h| m("HostSystem", h)).collect(),
        },
        ClusterGroup::Vm {
            name: "vms".into(),
            vms: vec![],
        },
    ]
}

#[test]
fn auto_configure_builds_the_host_group_from_tagged_hosts() {
    let w = hg_world(ClusterConfig::default(), &["h-1"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    let shown: Vec<String> = v.steps.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        shown,
        [
            "create host group hosts in /DC0/host/C0 with 1 host(s)",
            "create VM group vms in /DC0/host/C0",
            "create VM-host rule vms-hosts-affinity in /DC0/host/C0: VMs of vms must run on hosts of hosts",
        ]
    );
    assert!(
        matches!(&v.steps[0], Step::CreateHostGroup { hosts, .. } if hosts == &[m("HostSystem", "h-1")])
    );
    // Nobody tagged: nothing to build from, said so.
    let w = hg_world(ClusterConfig::default(), &[]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    let (r1, r2, msg) = failed_reason(&v.failure_domain);
    assert_eq!((r1, r2), ("HostsMisconfigured", "HostsMisconfigured"));
    assert!(
        msg.contains("no host of /DC0/host/C0 carries zone tag rack-1"),
        "{msg}"
    );
}

#[test]
fn auto_configure_tags_the_hosts_of_an_existing_group() {
    let cfg = ClusterConfig {
        groups: groups(&["h-0", "h-1"]),
        rules: vec![rule(true, true)],
    };
    let w = hg_world(cfg, &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    assert_eq!(
        v.steps,
        [Step::AttachTag {
            category: "k8s-zone".into(),
            tag: "rack-1".into(),
            object: m("HostSystem", "h-1"),
            object_path: "/DC0/host/C0/h1".into(),
        }]
    );
}

#[test]
fn host_group_rules_disabled_missing_or_soft_are_reported() {
    let ready_cfg = |r: Vec<ClusterRule>| ClusterConfig {
        groups: groups(&["h-0"]),
        rules: r,
    };
    let w = hg_world(ready_cfg(vec![rule(true, true)]), &["h-0"]);
    assert!(plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view)).ready());

    let w = hg_world(ready_cfg(vec![rule(true, false)]), &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    assert!(v.ready());
    assert!(
        matches!(&v.failure_domain, Check::Ok { message } if message.contains("not mandatory"))
    );

    let w = hg_world(ready_cfg(vec![rule(false, true)]), &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    let (r1, r2, msg) = failed_reason(&v.failure_domain);
    assert_eq!((r1, r2), ("HostsMisconfigured", "HostsMisconfigured"));
    assert!(
        msg.contains("VM-host rule r") && msg.contains("is disabled"),
        "{msg}"
    );
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    assert!(matches!(&v.steps[..], [Step::EnableVmHostRule { rule, .. }] if rule == "r"));

    let w = hg_world(ready_cfg(vec![]), &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    let (r1, r2, msg) = failed_reason(&v.failure_domain);
    assert_eq!((r1, r2), ("HostsMisconfigured", "HostsMisconfigured"));
    assert!(
        msg.contains("vm host affinity rule does not exist"),
        "{msg}"
    );

    let w = hg_world(ClusterConfig::default(), &["h-0"]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    let (r1, r2, msg) = failed_reason(&v.failure_domain);
    assert_eq!((r1, r2), ("HostsMisconfigured", "HostsMisconfigured"));
    assert!(
        msg.contains("host group hosts not found") && msg.contains("VM group vms not found"),
        "{msg}"
    );
}

/// The host group of a case, as the cluster holds it.
#[derive(Clone, Copy, Debug)]
enum HostGroupState {
    Missing,
    WithHosts,
    Empty,
    /// `hosts` names a VM group.
    WrongKind,
}

/// The VM group of a case, as the cluster holds it.
#[derive(Clone, Copy, Debug)]
enum VmGroupState {
    Missing,
    Present,
    /// `vms` names a host group.
    WrongKind,
}

/// The VM-host rules of a case.
#[derive(Clone, Copy, Debug)]
enum RuleState {
    None,
    Enabled,
    Disabled,
    /// A rule named as we would name ours binds other groups.
    NameTaken,
}

fn case_config(h: HostGroupState, v: VmGroupState, r: RuleState) -> ClusterConfig {
    let mut groups = Vec::new();
    match h {
        HostGroupState::Missing => {}
        HostGroupState::WithHosts => groups.push(ClusterGroup::Host {
            name: "hosts".into(),
            hosts: vec![m("HostSystem", "h-0")],
        }),
        HostGroupState::Empty => groups.push(ClusterGroup::Host {
            name: "hosts".into(),
            hosts: vec![],
        }),
        HostGroupState::WrongKind => groups.push(ClusterGroup::Vm {
            name: "hosts".into(),
            vms: vec![],
        }),
    }
    match v {
        VmGroupState::Missing => {}
        VmGroupState::Present => groups.push(ClusterGroup::Vm {
            name: "vms".into(),
            vms: vec![],
        }),
        VmGroupState::WrongKind => groups.push(ClusterGroup::Host {
            name: "vms".into(),
            hosts: vec![m("HostSystem", "h-1")],
        }),
    }
    let rules = match r {
        RuleState::None => vec![],
        RuleState::Enabled => vec![rule(true, true)],
        RuleState::Disabled => vec![rule(false, true)],
        RuleState::NameTaken => vec![ClusterRule::VmHost(VmHostRule {
            key: Some(2),
            name: rule_name("vms", "hosts"),
            enabled: true,
            mandatory: true,
            vm_group: "other-vms".into(),
            affine_host_group: Some("other-hosts".into()),
            anti_affine_host_group: None,
        })],
    };
    ClusterConfig { groups, rules }
}

/// Every rule step names a VM group and a host group (with hosts) that the cluster holds or
/// that a step of the same plan creates: the invariant the rule steps are planned by.
fn rule_groups_available(cfg: &ClusterConfig, steps: &[Step]) -> Result<(), String> {
    let host_group = |name: &str| {
        matches!(cfg.group(name), Some(ClusterGroup::Host { hosts, .. }) if !hosts.is_empty())
            || steps.iter().any(|s| {
                matches!(s, Step::CreateHostGroup { name: n, hosts, .. } if n == name && !hosts.is_empty())
            })
    };
    let vm_group = |name: &str| {
        matches!(cfg.group(name), Some(ClusterGroup::Vm { .. }))
            || steps
                .iter()
                .any(|s| matches!(s, Step::CreateVmGroup { name: n, .. } if n == name))
    };
    for s in steps {
        let (vg, hg) = match s {
            Step::CreateVmHostRule {
                vm_group,
                host_group,
                ..
            } => (vm_group.clone(), host_group.clone()),
            Step::EnableVmHostRule { rule, .. } => {
                let r = cfg
                    .vm_host_rules()
                    .find(|r| r.name == *rule)
                    .ok_or_else(|| format!("{s}: no such rule"))?;
                (
                    r.vm_group.clone(),
                    r.affine_host_group.clone().unwrap_or_default(),
                )
            }
            _ => continue,
        };
        if !host_group(&hg) || !vm_group(&vg) {
            return Err(format!(
                "{s}: VM group {vg} or host group {hg} is not there"
            ));
        }
    }
    Ok(())
}

#[test]
fn rule_steps_only_name_groups_that_exist_or_are_created_in_the_same_plan() {
    use HostGroupState as H;
    use RuleState as R;
    use VmGroupState as V;
    let mut rules_planned = 0;
    for h in [H::Missing, H::WithHosts, H::Empty, H::WrongKind] {
        for v in [V::Missing, V::Present, V::WrongKind] {
            for r in [R::None, R::Enabled, R::Disabled, R::NameTaken] {
                for tagged in [&[][..], &["h-0"][..], &["h-0", "h-1"][..]] {
                    for auto in [false, true] {
                        let cfg = case_config(h, v, r);
                        let w = hg_world(cfg.clone(), tagged);
                        let plan = plan_zone(&dz(None, None), Some(&hg_fd(auto)), Ok(&w.view));
                        let case = format!("{h:?} {v:?} {r:?} tagged {tagged:?} auto {auto}");
                        rule_groups_available(&cfg, &plan.steps)
                            .unwrap_or_else(|e| panic!("{case}: {e}"));
                        rules_planned += plan
                            .steps
                            .iter()
                            .filter(|s| matches!(s, Step::CreateVmHostRule { .. }))
                            .count();
                        if !auto {
                            assert!(plan.steps.iter().all(|s| s.phase() < 3), "{case}");
                        }
                    }
                }
            }
        }
    }
    // The invariant is not met by planning no rule at all.
    assert!(rules_planned > 0);
}

#[test]
fn a_host_group_that_cannot_be_built_gets_no_rule_and_says_what_to_do() {
    let w = hg_world(ClusterConfig::default(), &[]);
    let v = plan_zone(&dz(None, None), Some(&hg_fd(true)), Ok(&w.view));
    // The VM group is still made; the rule waits for the host group.
    assert_eq!(
        v.steps,
        [Step::CreateVmGroup {
            cluster: m("ClusterComputeResource", "c-0"),
            cluster_path: "/DC0/host/C0".into(),
            name: "vms".into(),
        }]
    );
    assert!(!v.ready());
    let (r1, r2, msg) = failed_reason(&v.failure_domain);
    assert_eq!((r1, r2), ("HostsMisconfigured", "HostsMisconfigured"));
    assert_eq!(
        msg,
        "host group hosts not found in /DC0/host/C0, and no host of /DC0/host/C0 carries zone tag rack-1 \
         (category k8s-zone) to build it from: tag hosts of /DC0/host/C0 with zone tag rack-1 \
         (category k8s-zone), or create host group hosts in /DC0/host/C0; VM-host rule \
         vms-hosts-affinity is created once the group exists"
    );

    // Without autoConfigure the same zone names the group and both ways to make it.
    let v = plan_zone(&dz(None, None), Some(&hg_fd(false)), Ok(&w.view));
    let (_, _, msg) = failed_reason(&v.failure_domain);
    assert!(
        msg.contains(
            "host group hosts not found in /DC0/host/C0: create host group hosts in /DC0/host/C0 \
             with the zone's hosts, or tag hosts of /DC0/host/C0 with zone tag rack-1 (category \
             k8s-zone) and set zone.autoConfigure to build it"
        ),
        "{msg}"
    );
}

/// Applies the group and rule steps of a plan to the cluster as the executor would; `phases`
/// says which ran before a crash.
fn apply(cfg: &mut ClusterConfig, steps: &[Step], phases: std::ops::RangeInclusive<u8>) {
    for s in steps.iter().filter(|s| phases.contains(&s.phase())) {
        match (s.new_group(), s.new_rule()) {
            (Some(g), _) => cfg.groups.push(g),
            (_, Some(r)) => cfg.rules.push(ClusterRule::VmHost(r)),
            _ => panic!("not a group or rule step: {s}"),
        }
    }
}

#[test]
fn tagging_a_host_later_builds_the_group_then_the_rule_once_even_after_a_crash() {
    let fd = hg_fd(true);
    let plan = |cfg: &ClusterConfig, tagged: &[&str]| {
        plan_zone(
            &dz(None, None),
            Some(&fd),
            Ok(&hg_world(cfg.clone(), tagged).view),
        )
    };
    // Untagged: only the VM group.
    let mut cfg = ClusterConfig::default();
    let first = plan(&cfg, &[]);
    apply(&mut cfg, &first.steps, 3..=4);
    assert!(cfg.rules.is_empty());
    let idle = plan(&cfg, &[]);
    assert!(idle.steps.is_empty() && !idle.ready(), "{:?}", idle.steps);

    // An admin tags h-1: group and rule in one plan. Crash after the group phase.
    let tagged = plan(&cfg, &["h-1"]);
    let shown: Vec<String> = tagged.steps.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        shown,
        [
            "create host group hosts in /DC0/host/C0 with 1 host(s)",
            "create VM-host rule vms-hosts-affinity in /DC0/host/C0: VMs of vms must run on hosts of hosts",
        ]
    );
    apply(&mut cfg, &tagged.steps, 3..=3);
    // The re-run finds the group and plans the rule, once.
    let rerun = plan(&cfg, &["h-1"]);
    assert!(
        matches!(&rerun.steps[..], [Step::CreateVmHostRule { name, host_group, .. }]
            if name == "vms-hosts-affinity" && host_group == "hosts"),
        "{:?}",
        rerun.steps
    );
    apply(&mut cfg, &rerun.steps, 3..=4);
    let done = plan(&cfg, &["h-1"]);
    assert!(done.steps.is_empty(), "{:?}", done.steps);
    assert!(done.ready(), "{:?}", done.failure_domain);
    assert_eq!(cfg.rules.len(), 1);
}
