//! A located document tree: every YAML/JSON node with the line and column it came from.
//!
//! The spec is first read into this tree (with duplicate mapping keys passed through, so that they can be
//! reported with both locations), then converted to the typed model by [`crate::parse`], collecting every
//! error instead of stopping at the first one.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A position in the spec file, 1-based. `line == 0` means unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// Line, 1-based (0 when unknown).
    pub line: u64,
    /// Column, 1-based (0 when unknown).
    pub column: u64,
}

impl Pos {
    /// A position at `line`, `column`.
    pub fn new(line: u64, column: u64) -> Self {
        Pos { line, column }
    }
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One node of the document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) value: NodeValue,
    pub(crate) pos: Pos,
}

/// The value of a node.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Entries in document order, duplicates included.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// A short description of the node's type for error messages (`a string`, `a list`, ...).
    pub(crate) fn type_name(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) | NodeValue::UInt(_) => "an integer",
            NodeValue::Float(_) => "a number",
            NodeValue::Str(_) => "a string",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
        }
    }

    /// The string value, if the node is a string.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The node as a JSON value (mapping keys rendered as strings; later duplicates win).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::from(*i),
            NodeValue::UInt(u) => Value::from(*u),
            NodeValue::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => {
                Value::Object(entries.iter().map(|(k, v)| (k.key_text(), v.to_json())).collect())
            }
        }
    }

    /// The text of a node used as a mapping key.
    pub(crate) fn key_text(&self) -> String {
        match &self.value {
            NodeValue::Str(s) => s.clone(),
            NodeValue::Null => "null".to_string(),
            NodeValue::Bool(b) => b.to_string(),
            NodeValue::Int(i) => i.to_string(),
            NodeValue::UInt(u) => u.to_string(),
            NodeValue::Float(f) => f.to_string(),
            NodeValue::Seq(_) | NodeValue::Map(_) => self.to_json().to_string(),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<NodeValue>::deserialize(deserializer)?;
        Ok(Node { value: spanned.value, pos: Pos::new(spanned.referenced.line(), spanned.referenced.column()) })
    }
}

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = NodeValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_unit<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_none<E>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<NodeValue, D::Error> {
        NodeValue::deserialize(deserializer)
    }

    fn visit_bool<E>(self, v: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Int(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<NodeValue, E> {
        Ok(NodeValue::UInt(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<NodeValue, E> {
        Ok(NodeValue::Float(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(NodeValue::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeValue, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry::<Node, Node>()? {
            entries.push(entry);
        }
        Ok(NodeValue::Map(entries))
    }
}

/// Reads `text` into a located tree. Duplicate mapping keys are kept (the caller reports them); only the
/// YAML 1.2 core booleans are booleans (`yes`, `y`, `on` stay strings).
///
/// # Errors
/// A syntax error with its location (unknown location → `Pos::default()`).
pub(crate) fn read_tree(text: &str) -> Result<Node, (Pos, String)> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::PassThrough,
        strict_booleans: true,
    };
    serde_saphyr::from_str_with_options::<Node>(text, options).map_err(|e| {
        let pos = e.location().map(|l| Pos::new(l.line(), l.column())).unwrap_or_default();
        (pos, syntax_message(&e))
    })
}

/// The plain message of a YAML error, without the snippet and without a trailing ` at line L, column C`
/// (the location is printed in front of every error instead).
fn syntax_message(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let text = match text.rfind(" at line ") {
        Some(i) if text[i..].contains(", column ") => text[..i].to_string(),
        _ => text,
    };
    text.trim().to_string()
}

/// A hint for the YAML syntax errors a hand-written spec meets most, which name neither the cause nor the
/// fix: a tab in the indentation, a line indented more or less than its mapping or list, a key without its
/// `: `. `message` is [`read_tree`]'s, `pos` where the parser stopped.
pub(crate) fn syntax_hint(message: &str, pos: Pos) -> Option<String> {
    let line = pos.line;
    if line == 0 {
        return None;
    }
    const INDENTATION: &[&str] = &[
        "did not find expected key",
        "did not find expected '-'",
        "mapping values are not allowed",
        "block sequence entries are not allowed",
        "invalid indentation",
    ];
    if message.contains("tabs disallowed") {
        Some(format!("YAML indents with spaces, never tabs; replace the tabs in the indentation of line {line}"))
    } else if INDENTATION.iter().any(|m| message.contains(m)) {
        let quote = if message.contains("mapping values are not allowed") {
            ", or quote its value if it contains `: `"
        } else {
            ""
        };
        Some(format!(
            "YAML indents with spaces; check the indentation of line {line} against the lines above it{quote}"
        ))
    } else if message.contains("expected ':'") {
        Some(format!("a mapping entry is `key: value`, with a space after the colon; check line {line}"))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_duplicates_and_positions() {
        let tree = read_tree("a: 1\nb: [x, y]\na: yes\n").expect("parses");
        let NodeValue::Map(entries) = &tree.value else { panic!("not a map") };
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[2].0.key_text(), "a");
        assert_eq!(entries[2].0.pos, Pos::new(3, 1));
        assert_eq!(entries[2].1.value, NodeValue::Str("yes".into()));
        assert_eq!(entries[1].1.pos, Pos::new(2, 4));
    }

    #[test]
    fn syntax_error_is_located() {
        let (pos, msg) = read_tree("a: [1, 2\n").expect_err("fails");
        assert_eq!(pos, Pos::new(1, 4));
        assert!(msg.contains("unclosed bracket"), "{msg}");
        assert!(!msg.contains("line"), "{msg}");
    }

    #[test]
    fn indentation_errors_have_a_hint() {
        let hint = |text: &str| {
            let (pos, message) = read_tree(text).expect_err("fails");
            (pos, message.clone(), syntax_hint(&message, pos))
        };
        let (pos, _, h) = hint("a:\n\tb: 1\n");
        assert_eq!(pos.line, 2);
        assert_eq!(
            h.as_deref(),
            Some("YAML indents with spaces, never tabs; replace the tabs in the indentation of line 2")
        );
        let (pos, _, h) = hint("a:\n  b: 1\n c: 2\n");
        assert_eq!(pos.line, 3);
        assert_eq!(
            h.as_deref(),
            Some("YAML indents with spaces; check the indentation of line 3 against the lines above it")
        );
        let (_, _, h) = hint("a: x: y\n");
        assert_eq!(
            h.as_deref(),
            Some(
                "YAML indents with spaces; check the indentation of line 1 against the lines above it, or quote its \
                 value if it contains `: `"
            )
        );
        // Errors that say what is wrong get no hint.
        assert_eq!(hint("a: [1, 2\n").2, None);
        assert_eq!(syntax_hint("did not find expected key", Pos::default()), None);
    }

    #[test]
    fn json_is_yaml() {
        let tree = read_tree(r#"{"a": {"b": [1, 2.5, "c", null, true]}}"#).expect("parses");
        assert_eq!(tree.to_json(), serde_json::json!({"a": {"b": [1, 2.5, "c", null, true]}}));
    }
}
