//! A small namespace-aware XML tree for SOAP responses.
//!
//! vSphere responses are deeply polymorphic (`xsi:type` decides what an element holds), so we parse
//! into a generic tree first and extract typed values from it, instead of one serde struct per
//! response. The one subtle rule is how `xsi:type` is recognised: by the attribute's *namespace*,
//! not its prefix, because vcsim 0.24.2 writes `XMLSchema-instance:type` with a locally declared
//! prefix while real vCenter writes `xsi:type` (vcenter-wire.md §4). An unprefixed `type` attribute
//! is a managed object reference type, never a schema type.
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use quick_xml::reader::NsReader;

/// The XML Schema instance namespace that carries `type`.
pub const XSI_NS: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// The most elements a reply may have. The tree costs about 150 bytes per element (measured on
/// `<a/>` repeated: 4 bytes of text each), so a reply within the byte cap
/// (`http::DEFAULT_MAX_REPLY_BYTES`) made of tiny elements would otherwise become a tree of
/// 600 MB. At this bound the tree stays under about 80 MB, and a real reply of the byte cap
/// (vCenter's elements average over 30 bytes) still fits.
pub const MAX_ELEMENTS: usize = 1 << 19;

/// The deepest element nesting accepted. vSphere replies nest a few dozen levels at most; a
/// deeper document is refused before it is built, because the tree is dropped, cloned and
/// searched recursively and a hostile depth would overflow the stack (an abort, not a panic).
pub const MAX_DEPTH: usize = 256;

/// One element: local name, the `xsi:type` (prefix stripped), the unprefixed `type` attribute,
/// its text and its children in document order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub xsi_type: Option<String>,
    pub type_attr: Option<String>,
    pub text: String,
    pub children: Vec<Node>,
}

/// A malformed response body.
#[derive(Debug, thiserror::Error)]
#[error("malformed XML at byte {position}: {message}")]
pub struct ParseError {
    pub position: u64,
    pub message: String,
}

impl Node {
    /// The first child with this local name.
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    /// All children with this local name.
    pub fn children_named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// Text of the first child with this name.
    pub fn child_text(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.as_str())
    }

    /// Follow a path of child names (`returnval/about/apiVersion`).
    pub fn at(&self, path: &str) -> Option<&Node> {
        path.split('/')
            .filter(|p| !p.is_empty())
            .try_fold(self, |node, part| node.child(part))
    }

    /// Text at a path of child names.
    pub fn text_at(&self, path: &str) -> Option<&str> {
        self.at(path).map(|n| n.text.as_str())
    }

    /// Depth-first search for the first element with this local name.
    pub fn find(&self, name: &str) -> Option<&Node> {
        if self.name == name {
            return Some(self);
        }
        self.children.iter().find_map(|c| c.find(name))
    }

    /// Whether the element's text parses as an XML Schema boolean true.
    pub fn is_true(&self) -> bool {
        matches!(self.text.trim(), "true" | "1")
    }
}

/// Parse a whole document and return its root element.
pub fn parse(doc: &str) -> Result<Node, ParseError> {
    let mut reader = NsReader::from_str(doc);
    let mut stack: Vec<Node> = Vec::new();
    let mut root: Option<Node> = None;
    let mut elements = 0usize;
    loop {
        let event = reader.read_event().map_err(|e| ParseError {
            position: reader.buffer_position(),
            message: e.to_string(),
        })?;
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                elements += 1;
                if elements > MAX_ELEMENTS {
                    return Err(ParseError {
                        position: reader.buffer_position(),
                        message: format!("more than {MAX_ELEMENTS} elements"),
                    });
                }
                let mut node = Node {
                    name: e.local_name().as_ref().to_string(),
                    ..Node::default()
                };
                for attr in e.attributes().with_checks(false).flatten() {
                    let (ns, local) = reader.resolver().resolve_attribute(attr.key);
                    if local.as_ref() != "type" {
                        continue;
                    }
                    let value = attr
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .map(|v| v.into_owned())
                        .unwrap_or_default();
                    let is_xsi = match ns {
                        ResolveResult::Bound(ns) => ns.as_ref() == XSI_NS,
                        // Fault details in some servers use `xsi:` without declaring it.
                        ResolveResult::Unknown(prefix) => prefix == "xsi",
                        ResolveResult::Unbound => false,
                    };
                    if is_xsi {
                        let bare = value.rsplit(':').next().unwrap_or(&value).to_string();
                        node.xsi_type = Some(bare);
                    } else if attr.key.prefix().is_none() {
                        node.type_attr = Some(value);
                    }
                }
                if matches!(event, Event::Empty(_)) {
                    attach(&mut stack, &mut root, node);
                } else {
                    if stack.len() >= MAX_DEPTH {
                        return Err(ParseError {
                            position: reader.buffer_position(),
                            message: format!("elements nested deeper than {MAX_DEPTH}"),
                        });
                    }
                    stack.push(node);
                }
            }
            Event::End(_) => {
                if let Some(node) = stack.pop() {
                    attach(&mut stack, &mut root, node);
                }
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(t) => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&t);
                }
            }
            Event::GeneralRef(r) => {
                if let Some(top) = stack.last_mut() {
                    let resolved = match r.resolve_char_ref() {
                        Ok(Some(ch)) => Some(ch.to_string()),
                        _ => {
                            let name: &str = &r;
                            resolve_predefined_entity(name).map(str::to_string)
                        }
                    };
                    match resolved {
                        Some(s) => top.text.push_str(&s),
                        None => {
                            return Err(ParseError {
                                position: reader.buffer_position(),
                                message: format!("unknown entity &{};", &*r),
                            });
                        }
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if let Some(open) = stack.last() {
        return Err(ParseError {
            position: reader.buffer_position(),
            message: format!("unexpected end of document inside <{}>", open.name),
        });
    }
    root.ok_or(ParseError {
        position: 0,
        message: "empty document".into(),
    })
}

fn attach(stack: &mut [Node], root: &mut Option<Node>, node: Node) {
    match stack.last_mut() {
        Some(parent) => parent.children.push(node),
        None => *root = Some(node),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xsi_type_is_recognised_by_namespace_not_prefix() {
        let doc = r#"<r xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
            <val xmlns:XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" XMLSchema-instance:type="xsd:string">DC0</val>
            <val xsi:type="ManagedObjectReference" type="Folder">group-d1</val>
            <val xmlns:_XMLSchema-instance="http://www.w3.org/2001/XMLSchema-instance" _XMLSchema-instance:type="xsd:int">3</val>
            <obj type="Datacenter">datacenter-2</obj>
        </r>"#;
        let root = parse(doc).unwrap();
        let vals: Vec<_> = root.children_named("val").collect();
        assert_eq!(vals[0].xsi_type.as_deref(), Some("string"));
        assert_eq!(vals[0].type_attr, None);
        assert_eq!(vals[1].xsi_type.as_deref(), Some("ManagedObjectReference"));
        assert_eq!(vals[1].type_attr.as_deref(), Some("Folder"));
        assert_eq!(vals[2].xsi_type.as_deref(), Some("int"));
        let obj = root.child("obj").unwrap();
        assert_eq!(
            obj.xsi_type, None,
            "an unprefixed type attribute is a moref type"
        );
        assert_eq!(obj.type_attr.as_deref(), Some("Datacenter"));
    }

    #[test]
    fn entities_and_char_refs_are_decoded() {
        let root = parse("<a>x &amp; y &lt;z&gt; &#47;&#x41;</a>").unwrap();
        assert_eq!(root.text, "x & y <z> /A");
    }

    #[test]
    fn truncated_documents_are_errors() {
        assert!(parse("<a><b>").is_err());
        assert!(parse("").is_err());
    }

    #[test]
    fn nesting_deeper_than_the_limit_is_an_error_not_a_stack_overflow() {
        // Under quick-xml's own limit (65535): without ours, dropping this tree overflowed the
        // test thread's stack and aborted the process.
        let deep = 60_000;
        let doc = format!("{}{}", "<a>".repeat(deep), "</a>".repeat(deep));
        let e = parse(&doc).unwrap_err();
        assert!(e.message.contains("nested deeper"), "{e}");
        let ok = format!("{}{}", "<a>".repeat(MAX_DEPTH), "</a>".repeat(MAX_DEPTH));
        parse(&ok).unwrap();
    }

    #[test]
    fn a_reply_of_tiny_elements_past_the_limit_is_an_error_not_a_huge_tree() {
        let doc = |n: usize| format!("<r>{}</r>", "<a/>".repeat(n));
        assert_eq!(
            parse(&doc(MAX_ELEMENTS - 1)).unwrap().children.len(),
            MAX_ELEMENTS - 1
        );
        let e = parse(&doc(MAX_ELEMENTS)).unwrap_err();
        assert_eq!(e.message, format!("more than {MAX_ELEMENTS} elements"));
    }
}
