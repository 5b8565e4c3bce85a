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
