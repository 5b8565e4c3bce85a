//! PropertyCollector reads: `RetrievePropertiesEx` with the `ContinueRetrievePropertiesEx` token
//! loop (real vCenter pages large results; vcsim never does), and container views.
use std::collections::BTreeMap;

use super::client::Client;
use super::model::error::{Error, Result};
use super::model::fault::Fault;
use super::model::moref::MoRef;
use super::soap::{Node, Xml};
use super::stats::CallKind;

/// One object's properties as returned by the collector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ObjectContent {
    pub obj: Option<MoRef>,
    /// Property path → the `val` element (its `xsi_type` says what it holds).
    pub props: BTreeMap<String, Node>,
    /// Properties the server could not read, with why.
    pub missing: Vec<(String, Fault)>,
}

impl ObjectContent {
    pub fn moref(&self) -> &MoRef {
        self.obj.as_ref().expect("object content always has an obj")
    }

    pub fn text(&self, path: &str) -> Option<&str> {
        self.props.get(path).map(|n| n.text.as_str())
    }

    pub fn moref_prop(&self, path: &str) -> Option<MoRef> {
        self.props.get(path).and_then(MoRef::from_node)
    }

    pub fn bool_prop(&self, path: &str) -> Option<bool> {
        self.props.get(path).map(Node::is_true)
    }

    fn from_node(n: &Node) -> Self {
        let mut out = ObjectContent {
            obj: n.child("obj").and_then(MoRef::from_node),
            ..Self::default()
        };
        for p in n.children_named("propSet") {
            if let (Some(name), Some(val)) = (p.child_text("name"), p.child("val")) {
                out.props.insert(name.to_string(), val.clone());
            }
        }
        for m in n.children_named("missingSet") {
            let path = m.child_text("path").unwrap_or_default().to_string();
            if let Some(f) = m.child("fault") {
                out.missing.push((path, Fault::from_localized(f)));
            }
        }
        out
    }
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
    /// the read once from the beginning.
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
        let mut response = self
            .call("RetrievePropertiesEx", CallKind::Read, &body)
            .await
            .map_err(|e| (e, false))?;
        let mut last_token: Option<String> = None;
        loop {
            let token = self
                .collect_page(&response, &mut out)
                .map_err(|e| (e, true))?;
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
            let mut x = Xml::request("ContinueRetrievePropertiesEx", &pc);
            x.text("token", &token);
            last_token = Some(token);
            response = self
                .call(
                    "ContinueRetrievePropertiesEx",
                    CallKind::Read,
                    &x.finish("ContinueRetrievePropertiesEx"),
                )
                .await
                .map_err(|e| (e, true))?;
        }
        Ok(out)
    }

    fn collect_page(
        &self,
        response: &Node,
        out: &mut Vec<ObjectContent>,
    ) -> Result<Option<String>> {
        let Some(rv) = response.child("returnval") else {
            return Ok(None);
        };
        for o in rv.children_named("objects") {
            let content = ObjectContent::from_node(o);
            if content.obj.is_none() {
                return Err(Error::Decode {
                    server: self.server(),
                    method: "RetrievePropertiesEx".into(),
                    reason: "an object without obj".into(),
                });
            }
            out.push(content);
        }
        Ok(rv
            .child_text("token")
            .filter(|t| !t.is_empty())
            .map(str::to_string))
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
        Ok(v.pop().unwrap_or_else(|| ObjectContent {
            obj: Some(obj.clone()),
            ..ObjectContent::default()
        }))
    }

    /// Create a container view of `types` under `container`.
    pub async fn create_container_view(
        &self,
        container: &MoRef,
        types: &[&str],
        recursive: bool,
    ) -> Result<MoRef> {
        let vm = self
            .service_content()
            .await?
            .view_manager
            .clone()
            .ok_or_else(|| Error::Decode {
                server: self.server(),
                method: "CreateContainerView".into(),
                reason: "this server has no ViewManager".into(),
            })?;
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
mod tests {
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

    #[test]
    fn object_content_keeps_props_and_missing() {
        let doc = r#"<objects xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance"><obj type="VirtualMachine">vm-58</obj><propSet><name>name</name><val XMLSchema-instance:type="xsd:string">DC0_H0_VM0</val></propSet><missingSet><path>bogusProp</path><fault><fault XMLSchema-instance:type="InvalidProperty"><name>bogusProp</name></fault></fault></missingSet></objects>"#;
        let node = crate::vcenter::soap::xml::parse(doc).unwrap();
        let c = ObjectContent::from_node(&node);
        assert_eq!(c.moref(), &MoRef::new("VirtualMachine", "vm-58"));
        assert_eq!(c.text("name"), Some("DC0_H0_VM0"));
        assert_eq!(c.missing.len(), 1);
        assert_eq!(c.missing[0].0, "bogusProp");
    }
}
