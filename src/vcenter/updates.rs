//! Waiting for changes instead of polling: a PropertyCollector of our own
//! (`CreatePropertyCollector`), a ListView of the watched objects (`CreateListView`, changed
//! with `ModifyListView`), one `PropertyFilter` over the view (`CreateFilter` with a traversal
//! of its `view`), and `WaitForUpdatesEx` long polls that return when a watched property
//! changes (or after `maxWaitSeconds` with no `returnval`). Collectors, views and filters live
//! in the session that created them, so after a re-login they are gone and must be made again. The watcher that drives this is
//! [`super::watcher`]; this module is the wire: request bodies and the `UpdateSet` decoder.
//!
//! Versions are opaque strings; a `truncated` update set is continued with its version at once
//! (real vCenter pages large update sets; vcsim returns version `-` always and pages at 100).
use super::client::Client;
use super::model::error::{Error, Result};
use super::model::fault::Fault;
use super::model::moref::MoRef;
use super::soap::Node;
use super::soap::decode::{Malformed, boolean, required, shown};
use super::soap::encode::Xml;
use super::stats::CallKind;

/// What an object update says happened to the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateKind {
    /// Entered the filter: its full state follows (first wait, new filter, resync).
    Enter,
    Modify,
    /// Left the filter: destroyed, or no longer reachable.
    Leave,
}

/// One changed property.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub name: String,
    /// `assign`, `add`, `remove`, `indirectRemove`.
    pub op: String,
    /// The new value; `None` when unset (vcsim sends a changeSet without `<val>`).
    pub val: Option<Node>,
}

/// One object's update in an [`UpdateSet`].
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectUpdate {
    pub filter: MoRef,
    pub kind: UpdateKind,
    pub obj: MoRef,
    pub changes: Vec<Change>,
    /// Properties the server could not read (`missingSet`), with why.
    pub missing: Vec<(String, Fault)>,
}

impl ObjectUpdate {
    /// The change of `name`, if this update carries one.
    pub fn change(&self, name: &str) -> Option<&Change> {
        self.changes.iter().find(|c| c.name == name)
    }
}

/// A decoded `WaitForUpdatesEx` answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpdateSet {
    /// What to send with the next wait (opaque).
    pub version: String,
    /// More updates are waiting: wait again with `version` at once.
    pub truncated: bool,
    pub objects: Vec<ObjectUpdate>,
    /// Filters whose objects vanished (`PropertyFilterUpdate.missingSet`), by object.
    pub missing_objects: Vec<(MoRef, Fault)>,
}

/// `CreatePropertyCollector` on the service's collector: a collector of our own, whose filters
/// and waits touch nobody else's.
pub(crate) fn create_collector_body(service_collector: &MoRef) -> String {
    Xml::request("CreatePropertyCollector", service_collector).finish("CreatePropertyCollector")
}

/// `CreateFilter` over the objects of a ListView (`view`, not itself reported), reading the
/// `props` (kind, paths) of each, whole updates (`partialUpdates` false). One filter for every
/// watched object: objects join and leave it with `ModifyListView`, one call for any number,
/// instead of a `CreateFilter` and a `DestroyPropertyFilter` each.
pub(crate) fn create_view_filter_body(
    collector: &MoRef,
    view: &MoRef,
    props: &[(&str, &[&str])],
) -> String {
    let mut x = Xml::request("CreateFilter", collector);
    x.open("spec");
    for (kind, paths) in props {
        x.open("propSet");
        x.text("type", kind);
        for p in *paths {
            x.text("pathSet", p);
        }
        x.close("propSet");
    }
    x.open("objectSet");
    x.moref("obj", view);
    x.text("skip", "true");
    x.open_typed("selectSet", "TraversalSpec");
    x.text("name", "view");
    x.text("type", "ListView");
    x.text("path", "view");
    x.text("skip", "false");
    x.close("selectSet");
    x.close("objectSet");
    // A vanished object is reported in the update's missingSet, not as a fault failing every
    // wait of the collector (vcsim faults the whole wait otherwise).
    x.text("reportMissingObjectsInResults", "true");
    x.close("spec");
    x.text("partialUpdates", "false");
    x.finish("CreateFilter")
}

/// `CreateListView` with no objects yet (they are added with `ModifyListView`, which says which
/// it could not find).
pub(crate) fn create_list_view_body(view_manager: &MoRef) -> String {
    Xml::request("CreateListView", view_manager).finish("CreateListView")
}

/// `ModifyListView`: `add` joins the view, `remove` leaves it.
pub(crate) fn modify_list_view_body(view: &MoRef, add: &[MoRef], remove: &[MoRef]) -> String {
    let mut x = Xml::request("ModifyListView", view);
    for o in add {
        x.moref("add", o);
    }
    for o in remove {
        x.moref("remove", o);
    }
    x.finish("ModifyListView")
}

/// `WaitForUpdatesEx` from `version` (`""`: the full state of every filter), returning after at
/// most `max_wait_seconds` (0: one look) with at most `max_object_updates` objects (the server
/// may return fewer, and says `truncated`).
pub(crate) fn wait_body(
    collector: &MoRef,
    version: &str,
    max_wait_seconds: u32,
    max_object_updates: u32,
) -> String {
    let mut x = Xml::request("WaitForUpdatesEx", collector);
    x.text("version", version);
    x.open("options");
    x.text("maxWaitSeconds", &max_wait_seconds.to_string());
    x.text("maxObjectUpdates", &max_object_updates.to_string());
    x.close("options");
    x.finish("WaitForUpdatesEx")
}

/// A method whose only argument is `_this`: `DestroyPropertyFilter`,
/// `DestroyPropertyCollector`, `CancelWaitForUpdates`.
pub(crate) fn this_only_body(method: &str, this: &MoRef) -> String {
    Xml::request(method, this).finish(method)
}

fn decode_kind(n: &Node) -> Result<UpdateKind, Malformed> {
    match n.text.trim() {
        "enter" => Ok(UpdateKind::Enter),
        "modify" => Ok(UpdateKind::Modify),
        "leave" => Ok(UpdateKind::Leave),
        other => Err(Malformed::new(format!(
            "ObjectUpdate kind {} is not enter, modify or leave",
            shown(other)
        ))),
    }
}

fn decode_object_update(filter: &MoRef, n: &Node) -> Result<ObjectUpdate, Malformed> {
    let kind = decode_kind(required(n, "kind", "ObjectUpdate")?)?;
    let obj = MoRef::decode(required(n, "obj", "ObjectUpdate")?, "ObjectUpdate obj")?;
    let mut changes = Vec::new();
    for c in n.children_named("changeSet") {
        let what = format!("changeSet of {obj}");
        let name = required(c, "name", &what)?.text.trim();
        if name.is_empty() {
            return Err(Malformed::new(format!("{what} with an empty name")));
        }
        let op = required(c, "op", &format!("changeSet {name} of {obj}"))?
            .text
            .trim()
            .to_string();
        if !matches!(op.as_str(), "add" | "remove" | "assign" | "indirectRemove") {
            return Err(Malformed::new(format!(
                "changeSet {name} of {obj}: op {} is not add, remove, assign or indirectRemove",
                shown(&op)
            )));
        }
        changes.push(Change {
            name: name.to_string(),
            op,
            val: c.child("val").cloned(),
        });
    }
    let mut missing = Vec::new();
    for m in n.children_named("missingSet") {
        let path = required(m, "path", &format!("missingSet of {obj}"))?
            .text
            .trim()
            .to_string();
        let fault = required(m, "fault", &format!("missingSet {path} of {obj}"))?;
        missing.push((path, Fault::from_localized(fault)));
    }
    Ok(ObjectUpdate {
        filter: filter.clone(),
        kind,
        obj,
        changes,
        missing,
    })
}

/// Decode the response element of `WaitForUpdatesEx`. No `returnval` is `None`: the wait timed
/// out with nothing new. `version` is required; each `filterSet` needs its `filter`, each
/// `objectSet` its `kind` and `obj`, each `changeSet` its `name` and `op`.
pub fn decode_updates(response: &Node) -> Result<Option<UpdateSet>, Malformed> {
    let Some(rv) = response.child("returnval") else {
        return Ok(None);
    };
    let version = required(rv, "version", "UpdateSet")?
        .text
        .trim()
        .to_string();
    let truncated = rv
        .child("truncated")
        .map(|t| boolean(t, "UpdateSet truncated"))
        .transpose()?
        .unwrap_or(false);
    let mut out = UpdateSet {
        version,
        truncated,
        ..UpdateSet::default()
    };
    for (i, f) in rv.children_named("filterSet").enumerate() {
        let within = |e: Malformed| e.within(&format!("filterSet[{i}]"));
        let filter = MoRef::decode(
            required(f, "filter", "PropertyFilterUpdate").map_err(within)?,
            "PropertyFilterUpdate filter",
        )
        .map_err(within)?;
        for (j, o) in f.children_named("objectSet").enumerate() {
            out.objects.push(
                decode_object_update(&filter, o)
                    .map_err(|e| within(e.within(&format!("objectSet[{j}]"))))?,
            );
        }
        for m in f.children_named("missingSet") {
            let obj = MoRef::decode(
                required(m, "obj", "MissingObject").map_err(within)?,
                "MissingObject obj",
            )
            .map_err(within)?;
            let fault = required(m, "fault", &format!("MissingObject {obj}")).map_err(within)?;
            out.missing_objects
                .push((obj, Fault::from_localized(fault)));
        }
    }
    Ok(Some(out))
}

impl Client {
    /// A PropertyCollector of our own (one round trip).
    pub async fn create_property_collector(&self) -> Result<MoRef> {
        let pc = self.service_content().await?.property_collector.clone();
        self.returned_moref("CreatePropertyCollector", &create_collector_body(&pc))
            .await
    }

    /// A filter on `collector` over the objects of the ListView `view` (`props`: kind, paths);
    /// an object's first update is `enter`.
    pub async fn create_view_filter(
        &self,
        collector: &MoRef,
        view: &MoRef,
        props: &[(&str, &[&str])],
    ) -> Result<MoRef> {
        self.returned_moref(
            "CreateFilter",
            &create_view_filter_body(collector, view, props),
        )
        .await
    }

    /// An empty ListView of this session (one round trip).
    pub async fn create_list_view(&self) -> Result<MoRef> {
        let vm = self.view_manager("CreateListView").await?;
        self.returned_moref("CreateListView", &create_list_view_body(&vm))
            .await
    }

    /// Add `add` to the ListView `view` and remove `remove` from it, in one round trip. Returns
    /// the objects of `add` the server could not find (gone: a destroyed VM, an expired task).
    pub async fn modify_list_view(
        &self,
        view: &MoRef,
        add: &[MoRef],
        remove: &[MoRef],
    ) -> Result<Vec<MoRef>> {
        let node = self
            .call(
                "ModifyListView",
                CallKind::Session,
                &modify_list_view_body(view, add, remove),
            )
            .await?;
        node.children_named("returnval")
            .map(|n| {
                MoRef::decode(n, "ModifyListView returnval")
                    .map_err(|m| m.into_error(self.server(), "ModifyListView"))
            })
            .collect()
    }

    /// Destroy a filter (its collector stops reporting its object).
    pub async fn destroy_property_filter(&self, filter: &MoRef) -> Result<()> {
        self.call_this_only("DestroyPropertyFilter", filter).await
    }

    /// Destroy a collector of ours with all its filters.
    pub async fn destroy_property_collector(&self, collector: &MoRef) -> Result<()> {
        self.call_this_only("DestroyPropertyCollector", collector)
            .await
    }

    async fn call_this_only(&self, method: &str, this: &MoRef) -> Result<()> {
        self.call(method, CallKind::Session, &this_only_body(method, this))
            .await
            .map(|_| ())
    }

    /// One `WaitForUpdatesEx`; `None` when `max_wait_seconds` passed with nothing new. The
    /// wait must end before the client's request timeout (30 s by default).
    pub async fn wait_for_updates(
        &self,
        collector: &MoRef,
        version: &str,
        max_wait_seconds: u32,
        max_object_updates: u32,
    ) -> Result<Option<UpdateSet>> {
        let body = wait_body(collector, version, max_wait_seconds, max_object_updates);
        let node = self.call("WaitForUpdatesEx", CallKind::Read, &body).await?;
        decode_updates(&node).map_err(|m| m.into_error(self.server(), "WaitForUpdatesEx"))
    }

    /// The filters a collector holds (its `filter` property): how tests see that none leaked.
    pub async fn collector_filters(&self, collector: &MoRef) -> Result<Vec<MoRef>> {
        self.morefs_of(collector, "filter").await
    }

    /// The objects a ListView holds (tests: what a watcher watches).
    pub async fn list_view_objects(&self, view: &MoRef) -> Result<Vec<MoRef>> {
        self.morefs_of(view, "view").await
    }

    /// A property of `obj` that lists managed objects.
    async fn morefs_of(&self, obj: &MoRef, path: &str) -> Result<Vec<MoRef>> {
        let c = self.retrieve_one(obj, &[path]).await?;
        Ok(c.props
            .get(path)
            .map(|v| v.children.iter().filter_map(MoRef::from_node).collect())
            .unwrap_or_default())
    }

    async fn returned_moref(&self, method: &str, body: &str) -> Result<MoRef> {
        let node = self.call(method, CallKind::Session, body).await?;
        let rv = node.child("returnval").ok_or_else(|| Error::Decode {
            server: self.server(),
            method: method.to_string(),
            reason: format!("{method} response without returnval"),
        })?;
        MoRef::decode(rv, &format!("{method} returnval"))
            .map_err(|m| m.into_error(self.server(), method))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vcenter::soap::xml::parse;

    /// A `WaitForUpdatesExResponse` element around `returnval` content (vcsim's shape).
    pub(crate) fn response(inner: &str) -> Node {
        parse(&format!(
            r#"<WaitForUpdatesExResponse xmlns="urn:vim25" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">{inner}</WaitForUpdatesExResponse>"#
        ))
        .unwrap()
    }

    fn task_update(kind: &str, change: &str) -> String {
        format!(
            r#"<returnval><version>-</version><filterSet><filter type="PropertyFilter">session[1]f1</filter><objectSet><kind>{kind}</kind><obj type="Task">task-7</obj>{change}</objectSet></filterSet></returnval>"#
        )
    }

    #[test]
    fn requests_are_encoded_as_the_wsdl_orders_them() {
        let pc = MoRef::new("PropertyCollector", "session[9]pc");
        let view = MoRef::new("ListView", "session[9]v1");
        let vm_paths: &[&str] = &["runtime.powerState", "guest.ipAddress"];
        assert_eq!(
            create_view_filter_body(
                &pc,
                &view,
                &[("Task", &["info.state"]), ("VirtualMachine", vm_paths)]
            ),
            r#"<CreateFilter xmlns="urn:vim25"><_this type="PropertyCollector">session[9]pc</_this><spec><propSet><type>Task</type><pathSet>info.state</pathSet></propSet><propSet><type>VirtualMachine</type><pathSet>runtime.powerState</pathSet><pathSet>guest.ipAddress</pathSet></propSet><objectSet><obj type="ListView">session[9]v1</obj><skip>true</skip><selectSet xsi:type="TraversalSpec"><name>view</name><type>ListView</type><path>view</path><skip>false</skip></selectSet></objectSet><reportMissingObjectsInResults>true</reportMissingObjectsInResults></spec><partialUpdates>false</partialUpdates></CreateFilter>"#
        );
        assert_eq!(
            modify_list_view_body(
                &view,
                &[
                    MoRef::new("Task", "task-7"),
                    MoRef::new("VirtualMachine", "vm-3")
                ],
                &[MoRef::new("Task", "task-5")]
            ),
            r#"<ModifyListView xmlns="urn:vim25"><_this type="ListView">session[9]v1</_this><add type="Task">task-7</add><add type="VirtualMachine">vm-3</add><remove type="Task">task-5</remove></ModifyListView>"#
        );
        assert_eq!(
            create_list_view_body(&MoRef::new("ViewManager", "ViewManager")),
            r#"<CreateListView xmlns="urn:vim25"><_this type="ViewManager">ViewManager</_this></CreateListView>"#
        );
        assert_eq!(
            wait_body(&pc, "", 15, 100),
            r#"<WaitForUpdatesEx xmlns="urn:vim25"><_this type="PropertyCollector">session[9]pc</_this><version></version><options><maxWaitSeconds>15</maxWaitSeconds><maxObjectUpdates>100</maxObjectUpdates></options></WaitForUpdatesEx>"#
        );
        assert_eq!(
            this_only_body(
                "DestroyPropertyFilter",
                &MoRef::new("PropertyFilter", "session[9]f1")
            ),
            r#"<DestroyPropertyFilter xmlns="urn:vim25"><_this type="PropertyFilter">session[9]f1</_this></DestroyPropertyFilter>"#
        );
        assert_eq!(
            create_collector_body(&MoRef::new("PropertyCollector", "propertyCollector")),
            r#"<CreatePropertyCollector xmlns="urn:vim25"><_this type="PropertyCollector">propertyCollector</_this></CreatePropertyCollector>"#
        );
    }

    #[test]
    fn enter_modify_and_leave_updates_decode() {
        let enter = decode_updates(&response(&task_update(
            "enter",
            r#"<changeSet><name>info.state</name><op>assign</op><val xsi:type="TaskInfoState">running</val></changeSet>"#,
        )))
        .unwrap()
        .unwrap();
        assert_eq!(enter.version, "-");
        assert!(!enter.truncated);
        let u = &enter.objects[0];
        assert_eq!(u.kind, UpdateKind::Enter);
        assert_eq!(u.obj, MoRef::new("Task", "task-7"));
        assert_eq!(u.filter, MoRef::new("PropertyFilter", "session[1]f1"));
        assert_eq!(
            u.change("info.state").unwrap().val.as_ref().unwrap().text,
            "running"
        );
        let modify = decode_updates(&response(&task_update(
            "modify",
            "<changeSet><name>guest.ipAddress</name><op>assign</op></changeSet>",
        )))
        .unwrap()
        .unwrap();
        let c = modify.objects[0].change("guest.ipAddress").unwrap();
        assert_eq!(modify.objects[0].kind, UpdateKind::Modify);
        assert_eq!(c.val, None, "a changeSet without <val> is an unset value");
        let leave = decode_updates(&response(&task_update("leave", "")))
            .unwrap()
            .unwrap();
        assert_eq!(leave.objects[0].kind, UpdateKind::Leave);
        assert!(leave.objects[0].changes.is_empty());
    }

    #[test]
    fn timeouts_truncation_and_missing_objects_decode() {
        assert_eq!(decode_updates(&response("")).unwrap(), None, "timed out");
        let t = decode_updates(&response(
            r#"<returnval><version>12_3</version><filterSet><filter type="PropertyFilter">f</filter><missingSet><obj type="VirtualMachine">vm-9</obj><fault><fault xsi:type="ManagedObjectNotFound"><obj type="VirtualMachine">vm-9</obj></fault><localizedMessage>gone</localizedMessage></fault></missingSet></filterSet><truncated>true</truncated></returnval>"#,
        ))
        .unwrap()
        .unwrap();
        assert!(t.truncated);
        assert_eq!(t.version, "12_3");
        assert_eq!(t.missing_objects[0].0, MoRef::new("VirtualMachine", "vm-9"));
    }

    #[test]
    fn malformed_update_sets_name_the_element() {
        let cases = [
            ("<returnval></returnval>", "UpdateSet without version"),
            (
                "<returnval><version>1</version><truncated>maybe</truncated></returnval>",
                r#"UpdateSet truncated "maybe" is not a boolean"#,
            ),
            (
                "<returnval><version>1</version><filterSet><objectSet/></filterSet></returnval>",
                "filterSet[0]: PropertyFilterUpdate without filter",
            ),
            (
                &task_update("stay", ""),
                r#"filterSet[0]: objectSet[0]: ObjectUpdate kind "stay" is not enter"#,
            ),
            (
                &task_update("modify", "").replace(r#"<obj type="Task">task-7</obj>"#, ""),
                "filterSet[0]: objectSet[0]: ObjectUpdate without obj",
            ),
            (
                &task_update("modify", "<changeSet><op>assign</op></changeSet>"),
                "changeSet of Task:task-7 without name",
            ),
            (
                &task_update("modify", "<changeSet><name>x</name></changeSet>"),
                "changeSet x of Task:task-7 without op",
            ),
            (
                &task_update(
                    "modify",
                    "<changeSet><name>x</name><op>set</op></changeSet>",
                ),
                r#"op "set" is not add"#,
            ),
            (
                &task_update("modify", "<missingSet><path>x</path></missingSet>"),
                "missingSet x of Task:task-7 without fault",
            ),
        ];
        for (inner, expected) in cases {
            let e = decode_updates(&response(inner)).unwrap_err().to_string();
            assert!(e.contains(expected), "{inner}: {e}");
        }
    }
}
