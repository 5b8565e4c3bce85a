//! Cluster API machines (`VSphereMachine`): from a CAPI Machine, its VSphereMachine and the
//! failure domain it is placed in to the VM to clone — the same provider-spec shape the
//! OpenShift Machine planners consume, so there is one clone/group/power/destroy path.
//!
//! * [`actuated`] — a VSphereVM as the OpenShift Machine the shared actuator acts on, and back;
//! * [`resolve`] — Machine + Cluster + VSphereMachine + failure domain → the VSphereVM spec and
//!   the provider spec the placement resolver reads, or why the machine waits;
//! * [`machine`] — one VSphereMachine pass: the VSphereVM to create or delete, the status, when next;
//! * [`capi_play`] — what local mode plays of Cluster API (Cluster readiness, MachineDeployment
//!   expansion, Machine ↔ VSphereMachine copies);
//! * [`bootstrap`] — the bootstrap data Secret and cloud-init metadata → guestinfo keys;
//! * [`status`] — the VSphereMachine's finalizer, providerID, ready, addresses and conditions;
//! * [`naming`] — the VM's name (`spec.namingStrategy.template`, the Windows 15-character cut);
//! * [`vmx_keys`] — the `customVMXKeys` refused (isolation, devices, identity, the provider's own).
pub mod actuated;
pub mod bootstrap;
pub mod capi_play;
pub mod machine;
pub mod naming;
pub mod pause;
pub mod resolve;
pub mod status;
pub mod vmx_keys;
