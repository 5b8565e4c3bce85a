//! Cluster API machines (`VSphereMachine`): from a CAPI Machine, its VSphereMachine and the
//! failure domain it is placed in to the VM to clone — the same provider-spec shape the
//! OpenShift Machine planners consume, so there is one clone/group/power/destroy path.
//!
//! * [`naming`] — the VM's name (`spec.namingStrategy.template`, the Windows 15-character cut).
pub mod naming;
