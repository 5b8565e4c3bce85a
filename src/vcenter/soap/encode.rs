//! Request encoding. Requests are small and their shape is fixed by the WSDL (element order
//! matters to real vCenter), so a tiny writer that emits elements in the order the caller writes
//! them is clearer than a serde model.
//!
//! Every text and attribute value goes through [`escape`], so a name, path, group name or
//! extraConfig value arrives at vCenter as exactly the string it was — never as markup. What
//! XML 1.0 cannot carry at all (most control characters) is found by [`unencodable`] and the
//! request is not sent.
use std::borrow::Cow;

use crate::vcenter::model::moref::MoRef;

/// `value` as XML character data, valid in element text and in a double-quoted attribute.
/// Beyond the five markup characters, `\r`, `\n` and `\t` become character references: a
/// parser turns a literal `\r` into `\n` in text and all three into spaces in attributes, which
/// would change a name on its way.
pub fn escape(value: &str) -> Cow<'_, str> {
    let special = |c: char| matches!(c, '&' | '<' | '>' | '"' | '\'' | '\r' | '\n' | '\t');
    if !value.contains(special) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 16);
    for c in value.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#13;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Characters XML 1.0 allows in a document (`Char`): tab, newline, carriage return and
/// everything from U+0020 except U+FFFE and U+FFFF (Rust has no surrogates to exclude).
fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || (c >= ' ' && !matches!(c, '\u{FFFE}' | '\u{FFFF}'))
}

/// Why a request text cannot be sent: the first character XML 1.0 cannot carry, even as a
/// character reference, and the element it is in. Names the element and the code point, never
/// the value (it may be a password).
pub fn unencodable(payload: &str) -> Option<String> {
    let (at, c) = payload.char_indices().find(|(_, c)| !is_xml_char(*c))?;
    let element = payload[..at]
        .rfind('<')
        .map(|open| {
            payload[open + 1..at]
                .split(|c: char| c.is_whitespace() || c == '>' || c == '/')
                .next()
                .unwrap_or_default()
        })
        .unwrap_or_default();
    Some(format!(
        "the text of <{element}> has the character U+{:04X}, which XML 1.0 cannot carry",
        u32::from(c)
    ))
}

/// Wrap a request body in the SOAP envelope, declaring the `xsi` and `xsd` prefixes that
/// polymorphic slots (`xsi:type="ClusterConfigSpecEx"`, `xsi:type="xsd:int"`) rely on.
pub fn envelope(body: &str) -> String {
    format!(
        concat!(
            r#"<?xml version="1.0" encoding="UTF-8"?>"#,
            r#"<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" "#,
            r#"xmlns:xsd="http://www.w3.org/2001/XMLSchema" "#,
            r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">"#,
            r#"<soapenv:Body>{}</soapenv:Body></soapenv:Envelope>"#
        ),
        body
    )
}

/// An append-only XML writer.
#[derive(Default, Debug)]
pub struct Xml(String);

impl Xml {
    pub fn new() -> Self {
        Self::default()
    }

    /// Open the operation element `<Method xmlns="urn:vim25">` followed by `_this`.
    pub fn request(method: &str, this: &MoRef) -> Self {
        let mut x = Self::new();
        x.0.push_str(&format!(r#"<{method} xmlns="urn:vim25">"#));
        x.moref("_this", this);
        x
    }

    /// `<name>text</name>`, text escaped.
    pub fn text(&mut self, name: &str, text: &str) -> &mut Self {
        self.0
            .push_str(&format!("<{name}>{}</{name}>", escape(text)));
        self
    }

    /// `<name type="Kind">value</name>`.
    pub fn moref(&mut self, name: &str, moref: &MoRef) -> &mut Self {
        self.0.push_str(&format!(
            r#"<{name} type="{}">{}</{name}>"#,
            escape(moref.kind.as_str()),
            escape(moref.value.as_str())
        ));
        self
    }

    /// `<name xsi:type="T">text</name>` for polymorphic scalar slots (`xsd:int`, `xsd:string`).
    pub fn typed_text(&mut self, name: &str, xsi_type: &str, text: &str) -> &mut Self {
        self.0.push_str(&format!(
            r#"<{name} xsi:type="{}">{}</{name}>"#,
            escape(xsi_type),
            escape(text)
        ));
        self
    }

    pub fn open(&mut self, name: &str) -> &mut Self {
        self.0.push_str(&format!("<{name}>"));
        self
    }

    /// Open a polymorphic element: `<name xsi:type="T">`.
    pub fn open_typed(&mut self, name: &str, xsi_type: &str) -> &mut Self {
        self.0
            .push_str(&format!(r#"<{name} xsi:type="{}">"#, escape(xsi_type)));
        self
    }

    pub fn close(&mut self, name: &str) -> &mut Self {
        self.0.push_str(&format!("</{name}>"));
        self
    }

    /// Close the operation element and return the body.
    pub fn finish(mut self, method: &str) -> String {
        self.close(method);
        self.0
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_bodies_escape_text_and_carry_this() {
        let mut x = Xml::request(
            "FindByInventoryPath",
            &MoRef::new("SearchIndex", "SearchIndex"),
        );
        x.text("inventoryPath", "DC0/vm/a&b<c>");
        let body = x.finish("FindByInventoryPath");
        assert_eq!(
            body,
            r#"<FindByInventoryPath xmlns="urn:vim25"><_this type="SearchIndex">SearchIndex</_this><inventoryPath>DC0/vm/a&amp;b&lt;c&gt;</inventoryPath></FindByInventoryPath>"#
        );
        let env = envelope(&body);
        assert!(env.contains(r#"xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance""#));
        crate::vcenter::soap::xml::parse(&env).expect("the envelope is well-formed");
    }
}
