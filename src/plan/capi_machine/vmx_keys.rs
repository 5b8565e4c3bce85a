//! Which `customVMXKeys` a VSphereMachine, VSphereMachineTemplate or VSphereVM may set on its VM.
//!
//! The keys go into the clone's extraConfig, written with the account the cluster acts as
//! (often the manager's), so a tenant could otherwise set anything that account's
//! `VirtualMachine.Config.AdvancedConfig` privilege allows: the VM's isolation from its host,
//! its virtual devices, its identity, and the guestinfo keys the provider itself writes. Those
//! classes are refused ([`DENIED`], each with its reason; docs/vmx-keys.md lists them for users);
//! any other key passes, so the settings users commonly give (`disk.EnableUUID`,
//! `pciPassthru.use64bitMMIO`, `numa.*`, their own `guestinfo.*`) keep working.
//!
//! VMX keys are case-insensitive, so matching is too. A key must also be spelled in the VMX key
//! alphabet (letters, digits, `.`, `_`, `-`, `:`): anything else could be read by vSphere as
//! another key than the one checked here.
//!
//! Refused twice: at admission (`webhook::vsphere_machine`, naming
//! `spec.customVMXKeys[<key>]`), and where the clone's extraConfig is made
//! (`plan::machine::user_data`), for objects stored before the rule (in the API server or a
//! local-mode state file).
use std::collections::BTreeMap;

/// How a rule's pattern matches a key (both lowercase).
#[derive(Clone, Copy, Debug)]
enum Match {
    /// The key starts with the pattern (patterns ending in `.` name a namespace).
    Prefix,
    /// The key is the pattern, or the pattern followed by a digit, `.`, `:` or `_` (a device
    /// family: `ethernet0.virtualDev`, `usb.present`, `usb_xhci.present`, `ide0:0.fileName`).
    Family,
    /// The pattern followed by a digit: one device instance (`pciPassthru0.id`), where the
    /// family's own options (`pciPassthru.use64bitMMIO`) stay allowed.
    Instance,
}

/// One class of refused keys.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// As written in the docs (`isolation.`, `ethernet`); matched lowercase.
    pub pattern: &'static str,
    how: Match,
    /// Why the key is refused, for the admission message and the machine's condition.
    pub reason: &'static str,
}

const PROVIDER: &str = "the provider writes this key itself (bootstrap data, metadata, network, or the marker saying which object owns the VM)";
const ISOLATION: &str = "it changes the VM's isolation from its host or from other VMs";
const DEVICE: &str = "it adds or changes a virtual device (a disk, network card, controller or port can reach files, networks or hardware outside the VM)";
const IDENTITY: &str = "it changes the VM's identity or firmware (the provider and Kubernetes find the VM and its Node by its UUIDs)";
const FILES: &str = "it places VM files (logs, swap, suspend state) or changes their limits on datastores the VM shares with others";
const ANSWERS: &str =
    "it answers vSphere's questions about the VM (whether it was moved or copied) in its stead";

const fn rule(pattern: &'static str, how: Match, reason: &'static str) -> Rule {
    Rule {
        pattern,
        how,
        reason,
    }
}

/// The refused keys, by class. docs/vmx-keys.md says the same for users: change both.
pub const DENIED: &[Rule] = &[
    // Keys the provider writes.
    rule("vsphere-provider.", Match::Prefix, PROVIDER),
    rule("guestinfo.userdata", Match::Family, PROVIDER),
    rule("guestinfo.metadata", Match::Family, PROVIDER),
    rule("guestinfo.ignition", Match::Family, PROVIDER),
    rule("guestinfo.afterburn", Match::Family, PROVIDER),
    rule("guestinfo.hostname", Match::Family, PROVIDER),
    // Isolation from the host and other VMs.
    rule("isolation.", Match::Prefix, ISOLATION),
    rule("tools.", Match::Prefix, ISOLATION),
    rule("vmci", Match::Family, ISOLATION),
    rule("sharedFolder", Match::Family, ISOLATION),
    rule("RemoteDisplay.", Match::Prefix, ISOLATION),
    rule("mks.", Match::Prefix, ISOLATION),
    rule("svga", Match::Family, ISOLATION),
    rule("vhv.", Match::Prefix, ISOLATION),
    rule("monitor.", Match::Prefix, ISOLATION),
    rule("monitor_control.", Match::Prefix, ISOLATION),
    rule("hypervisor.cpuid.", Match::Prefix, ISOLATION),
    rule("cpuid.", Match::Prefix, ISOLATION),
    rule("featMask.", Match::Prefix, ISOLATION),
    rule("smbios.", Match::Prefix, ISOLATION),
    rule("sched.mem.pshare.", Match::Prefix, ISOLATION),
    rule("disk.locking", Match::Family, ISOLATION),
    rule("devices.", Match::Prefix, ISOLATION),
    rule("vmx.", Match::Prefix, ISOLATION),
    // Virtual devices.
    rule("ethernet", Match::Family, DEVICE),
    rule("scsi", Match::Family, DEVICE),
    rule("sata", Match::Family, DEVICE),
    rule("nvme", Match::Family, DEVICE),
    rule("ide", Match::Family, DEVICE),
    rule("usb", Match::Family, DEVICE),
    rule("ehci", Match::Family, DEVICE),
    rule("serial", Match::Family, DEVICE),
    rule("parallel", Match::Family, DEVICE),
    rule("floppy", Match::Family, DEVICE),
    rule("sound", Match::Family, DEVICE),
    rule("pciBridge", Match::Family, DEVICE),
    rule("pciPassthru", Match::Instance, DEVICE),
    rule("hpet", Match::Family, DEVICE),
    rule("nvdimm", Match::Family, DEVICE),
    rule("vtpm", Match::Family, DEVICE),
    rule("virtualHW.", Match::Prefix, DEVICE),
    // Identity and firmware.
    rule("uuid.", Match::Prefix, IDENTITY),
    rule("vc.", Match::Prefix, IDENTITY),
    rule("bios.", Match::Prefix, IDENTITY),
    rule("firmware", Match::Family, IDENTITY),
    rule("uefi.", Match::Prefix, IDENTITY),
    rule("efi.", Match::Prefix, IDENTITY),
    rule("nvram", Match::Family, IDENTITY),
    // Files on shared datastores.
    rule("log.", Match::Prefix, FILES),
    rule("checkpoint.", Match::Prefix, FILES),
    rule("suspend.", Match::Prefix, FILES),
    rule("workingDir", Match::Family, FILES),
    rule("sched.swap.dir", Match::Family, FILES),
    rule("mainMem.", Match::Prefix, FILES),
    rule("snapshot.", Match::Prefix, FILES),
    // Answers to vSphere's questions.
    rule("answer.", Match::Prefix, ANSWERS),
    rule("msg.", Match::Prefix, ANSWERS),
];

/// The longest key accepted.
const MAX_KEY: usize = 256;

const SPELLING: &str = "a VMX key is letters, digits, '.', '_', '-' and ':' (at most 256)";

impl Rule {
    fn matches(&self, key: &str) -> bool {
        let pattern = self.pattern.to_ascii_lowercase();
        let Some(rest) = key.strip_prefix(pattern.as_str()) else {
            return false;
        };
        let next = rest.chars().next();
        match self.how {
            Match::Prefix => true,
            Match::Family => {
                next.is_none_or(|c| c.is_ascii_digit() || matches!(c, '.' | ':' | '_'))
            }
            Match::Instance => next.is_some_and(|c| c.is_ascii_digit()),
        }
    }
}

/// Why `key` may not be set, or `None` if it may.
pub fn refusal(key: &str) -> Option<&'static str> {
    let spelled = !key.is_empty()
        && key.len() <= MAX_KEY
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'));
    if !spelled {
        return Some(SPELLING);
    }
    let lower = key.to_ascii_lowercase();
    DENIED.iter().find(|r| r.matches(&lower)).map(|r| r.reason)
}

/// The refused keys of `keys` with why, in key order.
pub fn refused(keys: &BTreeMap<String, String>) -> Vec<(&str, &'static str)> {
    keys.keys()
        .filter_map(|k| refusal(k).map(|why| (k.as_str(), why)))
        .collect()
}

/// The message for a refused key: the reason and where the list is.
pub fn message(reason: &str) -> String {
    format!("this key may not be set: {reason} (docs/vmx-keys.md)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One key of each refused class, as users might spell it (VMX keys ignore case).
    const REFUSED: &[&str] = &[
        "vsphere-provider.machine",
        "guestinfo.userdata",
        "guestinfo.userdata.encoding",
        "guestinfo.metadata",
        "GuestInfo.Ignition.Config.Data",
        "guestinfo.afterburn.initrd.network-kargs",
        "guestinfo.hostname",
        "isolation.tools.copy.disable",
        "ISOLATION.device.connectable.disable",
        "tools.guestlib.enableHostInfo",
        "vmci0.unrestricted",
        "sharedFolder0.present",
        "RemoteDisplay.vnc.enabled",
        "mks.enable3d",
        "svga.present",
        "vhv.enable",
        "monitor_control.restrict_backdoor",
        "hypervisor.cpuid.v0",
        "cpuid.coresPerSocket",
        "featMask.vm.cpuid.MDCLEAR",
        "smbios.reflectHost",
        "sched.mem.pshare.salt",
        "disk.locking",
        "devices.hotplug",
        "vmx.buildType",
        "ethernet0.virtualDev",
        "scsi0:1.fileName",
        "sata0.present",
        "nvme0:0.fileName",
        "ide1:0.deviceType",
        "usb.present",
        "usb_xhci.present",
        "serial0.fileName",
        "parallel0.present",
        "floppy0.present",
        "sound.present",
        "pciBridge0.present",
        "pciPassthru0.id",
        "hpet0.present",
        "nvdimm0.present",
        "vtpm.present",
        "virtualHW.version",
        "uuid.bios",
        "vc.uuid",
        "bios.bootOrder",
        "firmware",
        "uefi.secureBoot.enabled",
        "efi.serialconsole.enabled",
        "nvram",
        "log.rotateSize",
        "checkpoint.vmState",
        "suspend.directory",
        "workingDir",
        "sched.swap.dir",
        "mainMem.useNamedFile",
        "snapshot.redoNotWithParent",
        "answer.msg.uuid.altered",
        "msg.autoAnswer",
        // Not in the VMX key alphabet.
        "",
        "isolation.tools.copy.disable ",
        "guestinfo.x\nisolation.tools.copy.disable",
        "disk.EnableUUID=TRUE",
    ];

    /// Settings users commonly give, which change nothing above.
    const ALLOWED: &[&str] = &[
        "disk.EnableUUID",
        "DISK.enableuuid",
        "pciPassthru.use64bitMMIO",
        "pciPassthru.64bitMMIOSizeGB",
        "sched.swap.vmxSwapEnabled",
        "sched.cpu.latencySensitivity",
        "numa.nodeAffinity",
        "guestinfo.mytool.config",
        "ctkEnabled",
        "stealclock.enable",
        "time.synchronize.continue",
        "identity.x",
        "serialNumberOfMine",
    ];

    #[test]
    fn every_refused_class_is_refused_whatever_its_case() {
        for key in REFUSED {
            assert!(refusal(key).is_some(), "{key:?} passed");
            assert!(
                refusal(&key.to_ascii_uppercase()).is_some(),
                "{key:?} upper"
            );
        }
    }

    #[test]
    fn common_settings_pass() {
        for key in ALLOWED {
            assert_eq!(refusal(key), None, "{key:?}");
        }
    }

    #[test]
    fn the_refusal_says_why() {
        assert_eq!(refusal("isolation.tools.copy.disable"), Some(ISOLATION));
        assert_eq!(refusal("ethernet1.present"), Some(DEVICE));
        assert_eq!(refusal("guestinfo.metadata.encoding"), Some(PROVIDER));
        assert_eq!(refusal("uuid.bios"), Some(IDENTITY));
        assert_eq!(refusal("a b"), Some(SPELLING));
        let keys: BTreeMap<String, String> = [
            ("disk.EnableUUID".to_string(), "TRUE".to_string()),
            ("vc.uuid".to_string(), "x".to_string()),
        ]
        .into();
        assert_eq!(refused(&keys), vec![("vc.uuid", IDENTITY)]);
        assert!(message(IDENTITY).contains("docs/vmx-keys.md"));
    }

    /// docs/vmx-keys.md lists every pattern refused here.
    #[test]
    fn the_docs_list_every_pattern() {
        let doc = include_str!("../../../docs/vmx-keys.md");
        for r in DENIED {
            assert!(
                doc.contains(&format!("`{}", r.pattern)),
                "docs/vmx-keys.md does not list {}",
                r.pattern
            );
        }
    }
}
