//! PropertyCollector reads: `RetrievePropertiesEx` with the `ContinueRetrievePropertiesEx` token
//! loop (real vCenter pages large results; vcsim never does), and container views.
use std::collections::BTreeMap;

use super::client::Client;
use super::model::error::{Error, ReadLimit, Result};
use super::model::fault::Fault;
use super::model::moref::MoRef;
use super::soap::decode::{Malformed, expect_type, required};
use super::soap::{Node, Xml};
use super::stats::CallKind;

/// One object's properties as returned by the collector.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectContent {
    /// Required on the wire (`ObjectContent.obj`): a reply without it does not decode.
    pub obj: MoRef,
    /// Property path → the `val` element (its `xsi_type` says what it holds).
    pub props: BTreeMap<String, Node>,
    /// Properties the server could not read, with why.
    pub missing: Vec<(String, Fault)>,
}

impl ObjectContent {
    /// An object with no properties read.
    pub fn new(obj: MoRef) -> Self {
        Self {
            obj,
            props: BTreeMap::new(),
            missing: Vec::new(),
        }
    }

    pub fn moref(&self) -> &MoRef {
        &self.obj
    }

    /// The raw text of a property, whatever its type.
    pub fn text(&self, path: &str) -> Option<&str> {
        self.props.get(path).map(|n| n.text.as_str())
    }

    /// A string-valued property (`xsd:string`, or an enum such as `VirtualMachinePowerState`
    /// when named in `enums`); another `xsi:type` is an error.
    pub fn string_prop(&self, path: &str, enums: &[&str]) -> Result<Option<&str>, Malformed> {
        let Some(n) = self.props.get(path) else {
            return Ok(None);
        };
        let mut allowed = vec!["string"];
        allowed.extend_from_slice(enums);
        expect_type(n, &allowed, &self.what(path))?;
        Ok(Some(n.text.as_str()))
    }

    /// The value of an `OptionValue` property (a keyed `config.extraConfig["k"]` read); a value
    /// of another type is an error.
    pub fn option_value_prop(&self, path: &str) -> Result<Option<&str>, Malformed> {
        let Some(n) = self.props.get(path) else {
            return Ok(None);
        };
        let what = self.what(path);
        expect_type(n, &["OptionValue"], &what)?;
        Ok(n.child_text("value"))
    }

    /// A moref-valued property; a value that is not a moref is an error.
    pub fn moref_prop(&self, path: &str) -> Result<Option<MoRef>, Malformed> {
        self.props
            .get(path)
            .map(|n| MoRef::decode(n, &self.what(path)))
            .transpose()
    }

    /// An `xsd:boolean` property; another type or text is an error.
    pub fn bool_prop(&self, path: &str) -> Result<Option<bool>, Malformed> {
        let Some(n) = self.props.get(path) else {
            return Ok(None);
        };
        let what = self.what(path);
        expect_type(n, &["boolean"], &what)?;
        super::soap::decode::boolean(n, &what).map(Some)
    }

    /// About how many bytes this object holds in memory: what [`MAX_READ_BYTES`] counts. The
    /// property map allocates whole B-tree nodes of 11 entries (at least 5 used past the first
    /// node), so an object with one small property holds about 1.6 KiB: counting texts alone
    /// would let a server sending many small objects hold several times the cap.
    pub fn retained_bytes(&self) -> u64 {
        use std::mem::size_of;
        let entry = size_of::<String>() + size_of::<Node>();
        let map_nodes = self.props.len().div_ceil(5);
        let props = map_nodes * (11 * entry + 64)
            + self
                .props
                .iter()
                .map(|(k, v)| k.capacity() + node_heap_bytes(v))
                .sum::<usize>();
        let missing = self.missing.capacity() * size_of::<(String, Fault)>()
            + self
                .missing
                .iter()
                .map(|(p, f)| p.capacity() + f.to_string().len())
                .sum::<usize>();
        let own = size_of::<Self>() + self.obj.kind.capacity() + self.obj.value.capacity();
        u64::try_from(own + props + missing).unwrap_or(u64::MAX)
    }

    /// `path of Kind:value`, for errors.
    fn what(&self, path: &str) -> String {
        format!("{path} of {}", self.obj)
    }

    /// Decode one `ObjectContent` element: `obj` is required, as are each `propSet`'s `name`
    /// and `val` and each `missingSet`'s `path` and `fault`.
    pub fn decode(n: &Node) -> Result<Self, Malformed> {
        let obj = MoRef::decode(required(n, "obj", "ObjectContent")?, "ObjectContent obj")?;
        let mut out = Self::new(obj);
        for p in n.children_named("propSet") {
            let name = required(p, "name", "propSet")?.text.trim();
            if name.is_empty() {
                return Err(Malformed::new(format!(
                    "propSet of {} with an empty name",
                    out.obj
                )));
            }
            let val = required(p, "val", &format!("propSet {name} of {}", out.obj))?;
            out.props.insert(name.to_string(), val.clone());
        }
        for m in n.children_named("missingSet") {
            let path = required(m, "path", "missingSet")?.text.trim().to_string();
            let fault = required(m, "fault", &format!("missingSet {path} of {}", out.obj))?;
            out.missing.push((path, Fault::from_localized(fault)));
        }
        Ok(out)
    }
}

/// The most objects one property read holds, over all its continuation pages. vSphere's
/// configuration maximums (vSphere 7 and 8: 45,000 registered VMs and 2,500 hosts per
/// vCenter) put the largest read the provider makes — the whole inventory: VMs, hosts,
/// clusters, pools, folders, networks, datastores — below about 60,000 objects on the largest
/// vCenter there can be, and at about 11,000 on an estate of 10,000 VMs. Twice the former leaves
/// room for whatever else an estate holds; past it the server is not a vCenter answering this
/// read but one paging without end, and each object kept costs memory the manager shares with
/// every tenant.
pub const MAX_READ_OBJECTS: usize = 120_000;

/// The most bytes of decoded objects one property read holds, over all its continuation pages
/// ([`ObjectContent::retained_bytes`]: texts, names, nodes and the maps holding them). The
/// whole-inventory read holds about 3.8 KiB per VM (1,174,933 bytes for 300 VMs and 19 other
/// objects of vcsim), so an estate of 10,000 VMs about 37 MiB and 96 MiB about 25,000 VMs.
/// Above that, the manager's 256 MiB memory limit is the bound: 96 MiB kept, one reply being
/// parsed (up to about 110 MiB at the 16 MiB reply cap) and the process itself (about 20 MiB)
/// fit under it, where a server sending fewer but larger objects than a vCenter, or pages
/// without end, would otherwise take the manager down with every tenant.
pub const MAX_READ_BYTES: u64 = 96 << 20;

/// One page of a `RetrievePropertiesEx` / `ContinueRetrievePropertiesEx` answer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    pub objects: Vec<ObjectContent>,
    /// The continuation token, when more pages follow.
    pub token: Option<String>,
}

/// The heap bytes a decoded node holds besides its own fixed size: its texts, and its
/// children with theirs.
fn node_heap_bytes(n: &Node) -> usize {
    n.name.capacity()
        + n.text.capacity()
        + n.xsi_type.as_ref().map_or(0, String::capacity)
        + n.type_attr.as_ref().map_or(0, String::capacity)
        + n.children.capacity() * std::mem::size_of::<Node>()
        + n.children.iter().map(node_heap_bytes).sum::<usize>()
}

/// What one read has kept so far, against [`MAX_READ_OBJECTS`] and [`MAX_READ_BYTES`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReadBudget {
    max_objects: usize,
    max_bytes: u64,
    objects: usize,
    bytes: u64,
}

impl ReadBudget {
    pub(crate) fn new(max_objects: usize, max_bytes: u64) -> Self {
        Self {
            max_objects,
            max_bytes,
            objects: 0,
            bytes: 0,
        }
    }

    /// Count a page's objects in; the cap passed, if this page passes one.
    pub(crate) fn take(&mut self, objects: &[ObjectContent]) -> Result<(), ReadLimit> {
        self.objects = self.objects.saturating_add(objects.len());
        if self.objects > self.max_objects {
            return Err(ReadLimit::Objects(self.max_objects));
        }
        for o in objects {
            self.bytes = self.bytes.saturating_add(o.retained_bytes());
        }
        if self.bytes > self.max_bytes {
            return Err(ReadLimit::Bytes(self.max_bytes));
        }
        Ok(())
    }
}

/// The `ContinueRetrievePropertiesEx` request for a page token (the server's own text).
pub(crate) fn continue_body(property_collector: &MoRef, token: &str) -> String {
    let mut x = Xml::request("ContinueRetrievePropertiesEx", property_collector);
    x.text("token", token);
    x.finish("ContinueRetrievePropertiesEx")
}

/// Decode the response element of `RetrievePropertiesEx` or `ContinueRetrievePropertiesEx`.
/// No `returnval` is an empty result (real vCenter omits it; vcsim sends an empty one).
pub fn decode_page(response: &Node) -> Result<Page, Malformed> {
    let Some(rv) = response.child("returnval") else {
        return Ok(Page::default());
    };
    let objects = rv
        .children_named("objects")
        .enumerate()
        .map(|(i, o)| ObjectContent::decode(o).map_err(|e| e.within(&format!("objects[{i}]"))))
        .collect::<Result<Vec<_>, _>>()?;
    let token = rv
        .child_text("token")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    Ok(Page { objects, token })
}

/// What to read: property paths per managed object type, and where to start.
#[derive(Clone, Debug, Default)]
pub struct PropertyFilter {
    prop_sets: Vec<(String, Vec<String>)>,
    object_sets: Vec<String>,
}

impl PropertyFilter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Read `paths` of every collected object of `kind` (and its subtypes).
    pub fn props(mut self, kind: &str, paths: &[&str]) -> Self {
        self.prop_sets.push((
            kind.to_string(),
            paths.iter().map(|s| s.to_string()).collect(),
        ));
        self
    }

    /// Collect exactly these objects.
    pub fn objects<'a>(mut self, objs: impl IntoIterator<Item = &'a MoRef>) -> Self {
        for o in objs {
            let mut x = Xml::new();
            x.open("objectSet");
            x.moref("obj", o);
            x.text("skip", "false");
            x.close("objectSet");
            self.object_sets.push(x.as_str().to_string());
        }
        self
    }

    /// Start from `root` and follow a raw `selectSet` traversal (XML), skipping the root itself
    /// when `skip` is set.
    pub fn traverse(mut self, root: &MoRef, skip: bool, select_set: &str) -> Self {
        let mut x = Xml::new();
        x.open("objectSet");
        x.moref("obj", root);
        x.text("skip", if skip { "true" } else { "false" });
        let mut s = x.as_str().to_string();
        s.push_str(select_set);
        s.push_str("</objectSet>");
        self.object_sets.push(s);
        self
    }

    fn spec_set(&self) -> String {
        let mut x = Xml::new();
        x.open("specSet");
        for (kind, paths) in &self.prop_sets {
            x.open("propSet");
            x.text("type", kind);
            if paths.is_empty() {
                x.text("all", "true");
            }
            for p in paths {
                x.text("pathSet", p);
            }
            x.close("propSet");
        }
        let mut s = x.as_str().to_string();
        for o in &self.object_sets {
            s.push_str(o);
        }
        s.push_str("</specSet>");
        s
    }
}

impl Client {
    /// Read properties, following continuation tokens until the result is complete.
    /// An empty result is an empty list (real vCenter omits `returnval`; vcsim sends an empty one).
    /// A failure on a continuation page (the token dies with a re-established session) restarts
    /// the read once from the beginning. A read that passes [`MAX_READ_OBJECTS`] or
    /// [`MAX_READ_BYTES`] over its pages fails with [`Error::ReadTooLarge`] and is not read
    /// again: the caller backs off as for any other vCenter failure.
    pub async fn retrieve(&self, filter: &PropertyFilter) -> Result<Vec<ObjectContent>> {
        match self.retrieve_pages(filter).await {
            Err((e, true)) => {
                tracing::debug!(server = %self.server(), error = %e, "paged read failed midway; reading again");
                self.retrieve_pages(filter).await.map_err(|(e, _)| e)
            }
            other => other.map_err(|(e, _)| e),
        }
    }

    /// The pages of one read; on error, whether it happened after the first page.
    async fn retrieve_pages(
        &self,
        filter: &PropertyFilter,
    ) -> Result<Vec<ObjectContent>, (Error, bool)> {
        let pc = self
            .service_content()
            .await
            .map_err(|e| (e, false))?
            .property_collector
            .clone();
        let mut x = Xml::request("RetrievePropertiesEx", &pc);
        let mut body = x.as_str().to_string();
        body.push_str(&filter.spec_set());
        // No maxObjects: "unset means no maximum", so the server pages only as its own policy
        // requires (fewest round trips); the token loop below follows whatever it does.
        x = Xml::new();
        x.open("options");
        x.close("options");
        x.close("RetrievePropertiesEx");
        body.push_str(x.as_str());

        let mut out = Vec::new();
        let mut budget = ReadBudget::new(MAX_READ_OBJECTS, MAX_READ_BYTES);
        let mut response = self
            .call("RetrievePropertiesEx", CallKind::Read, &body)
            .await
            .map_err(|e| (e, false))?;
        let mut last_token: Option<String> = None;
        loop {
            let method = if last_token.is_some() {
                "ContinueRetrievePropertiesEx"
            } else {
                "RetrievePropertiesEx"
            };
            let token = self.collect_page(method, &response, &mut budget, &mut out)?;
            let Some(token) = token else { break };
            if last_token.as_deref() == Some(token.as_str()) {
                return Err((
                    Error::Decode {
                        server: self.server(),
                        method: "ContinueRetrievePropertiesEx".into(),
                        reason: "the server returned the same continuation token twice".into(),
                    },
                    true,
                ));
            }
            let body = continue_body(&pc, &token);
            last_token = Some(token);
            response = self
                .call("ContinueRetrievePropertiesEx", CallKind::Read, &body)
                .await
                .map_err(|e| (e, true))?;
        }
        Ok(out)
    }

    /// Decode one page into `out`; on error, whether the read is worth starting again (a
    /// page that does not decode may come from a token that died; a read past its cap is not).
    fn collect_page(
        &self,
        method: &str,
        response: &Node,
        budget: &mut ReadBudget,
        out: &mut Vec<ObjectContent>,
    ) -> Result<Option<String>, (Error, bool)> {
        let page =
            decode_page(response).map_err(|m| (m.into_error(self.server(), method), true))?;
        if let Err(limit) = budget.take(&page.objects) {
            tracing::warn!(server = %self.server(), method, %limit, "a property read passed its cap; dropped");
            return Err((
                Error::ReadTooLarge {
                    server: self.server(),
                    method: method.to_string(),
                    limit,
                },
                false,
            ));
        }
        out.extend(page.objects);
        Ok(page.token)
    }

    /// Read properties of known objects.
    pub async fn retrieve_objects(
        &self,
        objs: &[MoRef],
        kind: &str,
        paths: &[&str],
    ) -> Result<Vec<ObjectContent>> {
        if objs.is_empty() {
            return Ok(Vec::new());
        }
        self.retrieve(&PropertyFilter::new().props(kind, paths).objects(objs))
            .await
    }

    /// Read properties of one object; a missing object is a `ManagedObjectNotFound` fault.
    pub async fn retrieve_one(&self, obj: &MoRef, paths: &[&str]) -> Result<ObjectContent> {
        let mut v = self
            .retrieve_objects(std::slice::from_ref(obj), &obj.kind, paths)
            .await?;
        Ok(v.pop().unwrap_or_else(|| ObjectContent::new(obj.clone())))
    }

    /// The ViewManager, for `method`; a server without one (not a vCenter) is an error naming it.
    pub(crate) async fn view_manager(&self, method: &str) -> Result<MoRef> {
        self.service_content()
            .await?
            .view_manager
            .clone()
            .ok_or_else(|| Error::Decode {
                server: self.server(),
                method: method.into(),
                reason: "this server has no ViewManager".into(),
            })
    }

    /// Create a container view of `types` under `container`.
    pub async fn create_container_view(
        &self,
        container: &MoRef,
        types: &[&str],
        recursive: bool,
    ) -> Result<MoRef> {
        let vm = self.view_manager("CreateContainerView").await?;
        let mut x = Xml::request("CreateContainerView", &vm);
        x.moref("container", container);
        for t in types {
            x.text("type", t);
        }
        x.text("recursive", if recursive { "true" } else { "false" });
        let node = self
            .call(
                "CreateContainerView",
                CallKind::Read,
                &x.finish("CreateContainerView"),
            )
            .await?;
        node.child("returnval")
            .and_then(MoRef::from_node)
            .ok_or_else(|| Error::Decode {
                server: self.server(),
                method: "CreateContainerView".into(),
                reason: "no view in the answer".into(),
            })
    }

    pub async fn destroy_view(&self, view: &MoRef) -> Result<()> {
        let body = Xml::request("DestroyView", view).finish("DestroyView");
        self.call("DestroyView", CallKind::Read, &body)
            .await
            .map(drop)
    }

    /// Objects of `types` under `container` with `paths`, through a temporary container view
    /// (3 round trips; used when a traversal cannot express the scope).
    pub async fn retrieve_view(
        &self,
        container: &MoRef,
        types: &[&str],
        kind: &str,
        paths: &[&str],
    ) -> Result<Vec<ObjectContent>> {
        let view = self.create_container_view(container, types, true).await?;
        let select = r#"<selectSet xsi:type="TraversalSpec"><name>view</name><type>ContainerView</type><path>view</path><skip>false</skip></selectSet>"#;
        let result = self
            .retrieve(
                &PropertyFilter::new()
                    .props(kind, paths)
                    .traverse(&view, true, select),
            )
            .await;
        let destroyed = self.destroy_view(&view).await;
        let out = result?;
        destroyed?;
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn filters_emit_prop_and_object_sets_in_wsdl_order() {
        let f = PropertyFilter::new()
            .props("ManagedEntity", &["name", "parent"])
            .objects([&MoRef::new("Folder", "group-d1")]);
        assert_eq!(
            f.spec_set(),
            r#"<specSet><propSet><type>ManagedEntity</type><pathSet>name</pathSet><pathSet>parent</pathSet></propSet><objectSet><obj type="Folder">group-d1</obj><skip>false</skip></objectSet></specSet>"#
        );
    }

    /// A whole `RetrievePropertiesEx` answer around `returnval`'s content, as vcsim writes it.
    pub(crate) fn reply(returnval: &str) -> String {
        format!(
            r#"<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><RetrievePropertiesExResponse xmlns="urn:vim25"><returnval>{returnval}</returnval></RetrievePropertiesExResponse></soapenv:Body></soapenv:Envelope>"#
        )
    }

    /// Decode an answer the way `Client::retrieve` does.
    pub(crate) fn read(body: &str) -> Result<Page> {
        let node = crate::vcenter::client::decode_reply(
            "https://vc.test",
            "user",
            "RetrievePropertiesEx",
            reqwest::StatusCode::OK,
            body,
        )?;
        decode_page(&node)
            .map_err(|m| m.into_error("https://vc.test".into(), "RetrievePropertiesEx"))
    }

    fn decode_reason(body: &str) -> String {
        match read(body) {
            Err(Error::Decode { reason, .. }) => reason,
            other => panic!("expected a decode error, got {other:?}"),
        }
    }

    #[test]
    fn an_object_without_obj_is_a_decode_error_naming_obj() {
        // The task read of the machine sweep: one object, its `info`, and no `obj`.
        let body = reply(
            r#"<objects><propSet><name>info</name><val xsi:type="TaskInfo"><state>success</state></val></propSet></objects>"#,
        );
        let reason = decode_reason(&body);
        assert_eq!(reason, "objects[0]: ObjectContent without obj");
    }

    #[test]
    fn malformed_and_partial_pages_are_decode_errors_not_panics() {
        let obj = r#"<obj type="Task">task-1</obj>"#;
        let cases = [
            // Truncated in the middle of an object.
            (
                reply(&format!("<objects>{obj}<propSet><name>info")).replace("</returnval>", ""),
                "malformed XML",
            ),
            (reply("")[..120].to_string(), "malformed XML"),
            (String::new(), "empty document"),
            (
                reply(r#"<objects><obj>task-1</obj></objects>"#),
                "ObjectContent obj is not a managed object reference (no type)",
            ),
            (
                reply(r#"<objects><obj type="Task">  </obj></objects>"#),
                "ObjectContent obj has no value",
            ),
            (
                reply(r#"<objects><obj xsi:type="xsd:string" type="Task">task-1</obj></objects>"#),
                "ObjectContent obj is a string, not a ManagedObjectReference",
            ),
            (
                reply(&format!(
                    "<objects>{obj}<propSet><val>x</val></propSet></objects>"
                )),
                "propSet without name",
            ),
            (
                reply(&format!(
                    "<objects>{obj}<propSet><name>info</name></propSet></objects>"
                )),
                "propSet info of Task:task-1 without val",
            ),
            (
                reply(&format!(
                    "<objects>{obj}<missingSet><fault/></missingSet></objects>"
                )),
                "missingSet without path",
            ),
            (
                reply(&format!(
                    "<objects>{obj}<missingSet><path>info</path></missingSet></objects>"
                )),
                "missingSet info of Task:task-1 without fault",
            ),
            (
                r#"<Envelope><Header/></Envelope>"#.to_string(),
                "no SOAP Body",
            ),
            (
                r#"<Envelope><Body/></Envelope>"#.to_string(),
                "empty SOAP Body",
            ),
        ];
        for (body, expected) in cases {
            let reason = decode_reason(&body);
            assert!(reason.contains(expected), "{body}\n→ {reason}");
        }
        // The second object is the bad one, and the error says so.
        let body = reply(&format!(
            "<objects>{obj}</objects><objects><obj/></objects>"
        ));
        assert!(decode_reason(&body).starts_with("objects[1]: "));
    }

    #[test]
    fn a_read_budget_stops_at_either_cap() {
        let objs: Vec<ObjectContent> = (0..3)
            .map(|i| ObjectContent::new(MoRef::new("VirtualMachine", format!("vm-{i}"))))
            .collect();
        let mut b = ReadBudget::new(5, u64::MAX);
        assert_eq!(b.take(&objs), Ok(()));
        assert_eq!(b.take(&objs), Err(ReadLimit::Objects(5)));
        let one = objs[0].retained_bytes();
        let mut b = ReadBudget::new(100, 4 * one);
        assert_eq!(b.take(&objs), Ok(()));
        assert_eq!(b.take(&objs), Err(ReadLimit::Bytes(4 * one)));
        // One property costs a whole map node, not just its text.
        let page = read(&reply(
            r#"<objects><obj type="VirtualMachine">vm-1</obj><propSet><name>name</name><val xsi:type="xsd:string">a</val></propSet></objects>"#,
        ))
        .unwrap();
        assert!(page.objects[0].retained_bytes() > 1500);
    }

    #[test]
    fn pages_keep_objects_and_the_continuation_token() {
        let page = read(&reply(
            r#"<token> tok-1 </token><objects><obj type="Task">task-1</obj></objects><objects><obj type="Task">task-2</obj></objects>"#,
        ))
        .unwrap();
        assert_eq!(page.objects.len(), 2);
        assert_eq!(page.token.as_deref(), Some("tok-1"));
        let empty = read(&reply("")).unwrap();
        assert!(empty.objects.is_empty() && empty.token.is_none());
    }

    #[test]
    fn typed_properties_refuse_values_of_another_type() {
        let page = read(&reply(
            r#"<objects><obj type="VirtualMachine">vm-1</obj>
            <propSet><name>parent</name><val xsi:type="xsd:string">group-v3</val></propSet>
            <propSet><name>config.template</name><val xsi:type="xsd:boolean">yes</val></propSet>
            <propSet><name>name</name><val xsi:type="ManagedObjectReference" type="Folder">f</val></propSet>
            <propSet><name>runtime.host</name><val xsi:type="ManagedObjectReference" type="HostSystem">host-1</val></propSet>
            </objects>"#,
        ))
        .unwrap();
        let c = &page.objects[0];
        assert_eq!(
            c.moref_prop("parent").unwrap_err().to_string(),
            "parent of VirtualMachine:vm-1 is a string, not a ManagedObjectReference"
        );
        assert_eq!(
            c.bool_prop("config.template").unwrap_err().to_string(),
            r#"config.template of VirtualMachine:vm-1 "yes" is not a boolean"#
        );
        assert!(c.string_prop("name", &[]).is_err());
        assert_eq!(
            c.moref_prop("runtime.host").unwrap(),
            Some(MoRef::new("HostSystem", "host-1"))
        );
        assert_eq!(c.moref_prop("resourcePool").unwrap(), None);
    }

    #[test]
    fn object_content_keeps_props_and_missing() {
        let doc = r#"<objects xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance"><obj type="VirtualMachine">vm-58</obj><propSet><name>name</name><val XMLSchema-instance:type="xsd:string">DC0_H0_VM0</val></propSet><missingSet><path>bogusProp</path><fault><fault XMLSchema-instance:type="InvalidProperty"><name>bogusProp</name></fault></fault></missingSet></objects>"#;
        let node = crate::vcenter::soap::xml::parse(doc).unwrap();
        let c = ObjectContent::decode(&node).unwrap();
        assert_eq!(c.moref(), &MoRef::new("VirtualMachine", "vm-58"));
        assert_eq!(c.text("name"), Some("DC0_H0_VM0"));
        assert_eq!(c.missing.len(), 1);
        assert_eq!(c.missing[0].0, "bogusProp");
    }
}
