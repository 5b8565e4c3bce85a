//! Virtual machine lifecycle: clone, power, destroy. Each returns a [`TaskRef`] at once.
use super::client::Client;
use super::error::Result;
use super::moref::MoRef;
use super::soap::Xml;
use super::task::TaskRef;

/// Where and how to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloneSpec {
    pub name: String,
    /// Required by `CloneVM_Task` (vcsim panics without it).
    pub folder: MoRef,
    pub datastore: Option<MoRef>,
    /// Required when the source is a template.
    pub pool: Option<MoRef>,
    pub host: Option<MoRef>,
    /// Set our own instance UUID so a crash between clone and status write can find the VM again.
    pub instance_uuid: Option<String>,
    pub annotation: Option<String>,
    pub num_cpus: Option<i32>,
    pub num_cores_per_socket: Option<i32>,
    pub memory_mb: Option<i64>,
    pub extra_config: Vec<(String, String)>,
    pub power_on: bool,
}

/// The `CloneVM_Task` body; element order follows the WSDL (`VirtualMachineRelocateSpec`:
/// folder, datastore, diskMoveType, pool, host; `VirtualMachineConfigSpec`: instanceUuid,
/// annotation, numCPUs, numCoresPerSocket, memoryMB, extraConfig).
pub fn clone_body(source: &MoRef, spec: &CloneSpec) -> String {
    let mut x = Xml::request("CloneVM_Task", source);
    x.moref("folder", &spec.folder);
    x.text("name", &spec.name);
    x.open("spec");
    x.open("location");
    if let Some(d) = &spec.datastore {
        x.moref("datastore", d);
    }
    if let Some(p) = &spec.pool {
        x.moref("pool", p);
    }
    if let Some(h) = &spec.host {
        x.moref("host", h);
    }
    x.close("location");
    x.text("template", "false");
    let has_config = spec.instance_uuid.is_some()
        || spec.annotation.is_some()
        || spec.num_cpus.is_some()
        || spec.num_cores_per_socket.is_some()
        || spec.memory_mb.is_some()
        || !spec.extra_config.is_empty();
    if has_config {
        x.open("config");
        if let Some(u) = &spec.instance_uuid {
            x.text("instanceUuid", u);
        }
        if let Some(a) = &spec.annotation {
            x.text("annotation", a);
        }
        if let Some(n) = spec.num_cpus {
            x.text("numCPUs", &n.to_string());
        }
        if let Some(n) = spec.num_cores_per_socket {
            x.text("numCoresPerSocket", &n.to_string());
        }
        if let Some(m) = spec.memory_mb {
            x.text("memoryMB", &m.to_string());
        }
        for (k, v) in &spec.extra_config {
            x.open("extraConfig");
            x.text("key", k);
            x.typed_text("value", "xsd:string", v);
            x.close("extraConfig");
        }
        x.close("config");
    }
    x.text("powerOn", if spec.power_on { "true" } else { "false" });
    x.close("spec");
    x.finish("CloneVM_Task")
}

impl Client {
    pub async fn clone_vm(&self, source: &MoRef, spec: &CloneSpec) -> Result<TaskRef> {
        self.start_task("CloneVM_Task", &clone_body(source, spec))
            .await
    }

    pub async fn power_on_vm(&self, vm: &MoRef) -> Result<TaskRef> {
        let body = Xml::request("PowerOnVM_Task", vm).finish("PowerOnVM_Task");
        self.start_task("PowerOnVM_Task", &body).await
    }

    pub async fn power_off_vm(&self, vm: &MoRef) -> Result<TaskRef> {
        let body = Xml::request("PowerOffVM_Task", vm).finish("PowerOffVM_Task");
        self.start_task("PowerOffVM_Task", &body).await
    }

    /// Destroy a VM (it must be powered off).
    pub async fn destroy(&self, entity: &MoRef) -> Result<TaskRef> {
        let body = Xml::request("Destroy_Task", entity).finish("Destroy_Task");
        self.start_task("Destroy_Task", &body).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clone_bodies_keep_wsdl_order() {
        let body = clone_body(
            &MoRef::new("VirtualMachine", "vm-1"),
            &CloneSpec {
                name: "m-0".into(),
                folder: MoRef::new("Folder", "f-1"),
                datastore: Some(MoRef::new("Datastore", "ds-1")),
                pool: Some(MoRef::new("ResourcePool", "rp-1")),
                host: None,
                instance_uuid: Some("uuid-1".into()),
                extra_config: vec![("guestinfo.x".into(), "a<b".into())],
                power_on: true,
                annotation: None,
                num_cpus: None,
                num_cores_per_socket: None,
                memory_mb: None,
            },
        );
        let pos = |s: &str| {
            body.find(s)
                .unwrap_or_else(|| panic!("{s} missing in {body}"))
        };
        assert!(pos("<folder") < pos("<name>m-0</name>"));
        assert!(pos("<datastore") < pos("<pool"));
        assert!(pos("</location>") < pos("<template>false</template>"));
        assert!(pos("<template>") < pos("<config>"));
        assert!(pos("<instanceUuid>uuid-1") < pos("<extraConfig>"));
        assert!(pos("</config>") < pos("<powerOn>true</powerOn>"));
        assert!(body.contains(r#"<value xsi:type="xsd:string">a&lt;b</value>"#));
    }
}
