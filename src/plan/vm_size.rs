//! A machine's VM size: `numCPUs`, `numCoresPerSocket`, `memoryMiB` and `diskGiB`, the same
//! four fields in a CAPV clone spec and an OpenShift provider spec.
//!
//! Unset and 0 are one value, "the template's": both CAPV and machine-api-operator declare these
//! fields as Go integers with `omitempty`, so a 0 is never even sent, and manifests written for
//! them say 0 to mean "as the template". A negative size means nothing; it used to be dropped
//! silently (the VM got the template's size). It is refused, naming the field, by admission
//! (and the CRD schema's `minimum: 0`) and again by the planners, which see objects stored
//! before either existed.

use crate::api::infrastructure::v1beta2::clone_spec::VirtualMachineCloneSpec;
use crate::api::machine::VSphereMachineProviderSpec;

/// Why a negative size is refused, and what the allowed values mean.
pub const NEGATIVE: &str = "must be 0 or more (0 or unset: the template's value)";

/// The four size fields, as read from a clone spec or a provider spec.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VmSize {
    pub num_cpus: Option<i32>,
    pub num_cores_per_socket: Option<i32>,
    pub memory_mib: Option<i64>,
    pub disk_gib: Option<i32>,
}

impl VmSize {
    /// Each field under its JSON name, with its value.
    fn fields(&self) -> [(&'static str, Option<i64>); 4] {
        [
            ("numCPUs", self.num_cpus.map(i64::from)),
            (
                "numCoresPerSocket",
                self.num_cores_per_socket.map(i64::from),
            ),
            ("memoryMiB", self.memory_mib),
            ("diskGiB", self.disk_gib.map(i64::from)),
        ]
    }

    /// Every negative field: its JSON name and value, in the fields' order.
    pub fn negative(&self) -> Vec<(&'static str, i64)> {
        self.fields()
            .into_iter()
            .filter_map(|(f, v)| Some((f, v.filter(|n| *n < 0)?)))
            .collect()
    }

    /// What to ask vCenter for: a 0 is the template's value, so it is not asked for at all.
    /// Negative values are kept: refusing them is [`VmSize::negative`]'s.
    pub fn asked(&self) -> VmSize {
        VmSize {
            num_cpus: self.num_cpus.filter(|n| *n != 0),
            num_cores_per_socket: self.num_cores_per_socket.filter(|n| *n != 0),
            memory_mib: self.memory_mib.filter(|n| *n != 0),
            disk_gib: self.disk_gib.filter(|n| *n != 0),
        }
    }
}

impl From<&VirtualMachineCloneSpec> for VmSize {
    fn from(c: &VirtualMachineCloneSpec) -> Self {
        VmSize {
            num_cpus: c.num_cpus,
            num_cores_per_socket: c.num_cores_per_socket,
            memory_mib: c.memory_mib,
            disk_gib: c.disk_gib,
        }
    }
}

impl From<&VSphereMachineProviderSpec> for VmSize {
    fn from(s: &VSphereMachineProviderSpec) -> Self {
        VmSize {
            num_cpus: s.num_cpus,
            num_cores_per_socket: s.num_cores_per_socket,
            memory_mib: s.memory_mib,
            disk_gib: s.disk_gib,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_the_templates_and_negative_is_named() {
        let s = VmSize {
            num_cpus: Some(-2),
            num_cores_per_socket: Some(0),
            memory_mib: Some(4096),
            disk_gib: Some(-1),
        };
        assert_eq!(s.negative(), vec![("numCPUs", -2), ("diskGiB", -1)]);
        assert_eq!(
            s.asked(),
            VmSize {
                num_cpus: Some(-2),
                num_cores_per_socket: None,
                memory_mib: Some(4096),
                disk_gib: Some(-1),
            }
        );
        assert!(VmSize::default().negative().is_empty());
    }
}
