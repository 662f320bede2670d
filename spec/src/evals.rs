//! The spec's top-level `evals:` list (SPEC.md §6), and the same list in a file of its own (`agentic eval
//! --evals FILE.yaml`): read here into located entries ([`EvalEntry`]), each field kept as written (a JSON
//! value with its position). What the fields mean is the business of the crate `agentic-eval`, which reads
//! these entries into evaluators and reports its errors at the positions kept here.

use serde_json::Value;

use crate::error::{Sink, SpecErrors};
use crate::node::{Node, NodeValue, Pos};

/// One entry of an `evals:` list: a mapping of fields (`kind`, `name`, and the kind's own), in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalEntry {
    /// Where the entry's mapping starts.
    pub pos: Pos,
    /// The entry's fields in file order, each once (a duplicate key is an error).
    pub fields: Vec<EvalField>,
}

impl EvalEntry {
    /// The field named `key`.
    pub fn get(&self, key: &str) -> Option<&EvalField> {
        self.fields.iter().find(|f| f.key == key)
    }
}

/// One field of an [`EvalEntry`]: its key and value, with where each was read.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalField {
    /// The key.
    pub key: String,
    /// Where the key was read.
    pub key_pos: Pos,
    /// The value, as JSON (a YAML mapping's keys become strings).
    pub value: Value,
    /// Where the value starts.
    pub value_pos: Pos,
}

/// Reads the node of an `evals:` list into entries; each problem (not a list, an entry that is not a
/// mapping, a duplicate key) goes to `sink` under the field `evals`.
pub(crate) fn parse_entries(node: &Node, sink: &mut Sink) -> Vec<EvalEntry> {
    let field = Some("evals");
    let items = match &node.value {
        NodeValue::Null => return Vec::new(),
        NodeValue::Seq(items) => items,
        _ => {
            let message = format!("expected a list of evaluators (`- kind: equals`, ...), found {}", node.type_name());
            sink.push(node.pos, None, field, message);
            return Vec::new();
        }
    };
    let mut entries = Vec::with_capacity(items.len());
    for item in items {
        let NodeValue::Map(pairs) = &item.value else {
            let message = format!("an evaluator is a mapping with a `kind`, found {}", item.type_name());
            sink.push(item.pos, None, field, message);
            continue;
        };
        let mut fields: Vec<EvalField> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs {
            let key = k.key_text();
            if let Some(first) = fields.iter().find(|f| f.key == key) {
                let message = format!(
                    "duplicate field `{key}` (first defined at line {}, column {})",
                    first.key_pos.line, first.key_pos.column
                );
                sink.push(k.pos, None, field, message);
                continue;
            }
            fields.push(EvalField { key, key_pos: k.pos, value: v.to_json(), value_pos: v.pos });
        }
        entries.push(EvalEntry { pos: item.pos, fields });
    }
    entries
}

/// Reads an evaluators file (`agentic eval --evals FILE.yaml`): a YAML (or JSON) list of evaluators, or a
/// mapping whose `evals` key holds that list (a spec file's other keys are left alone, so a spec's
/// evaluators can be given to another spec). `file_name` names the file in errors.
///
/// ```
/// let entries = agentic_spec::read_evals("- kind: equals\n- { kind: regex, pattern: '^ok' }\n", "evals.yaml")?;
/// assert_eq!(entries.len(), 2);
/// assert_eq!(entries[1].get("pattern").map(|f| f.value.clone()), Some(serde_json::json!("^ok")));
/// assert_eq!(entries[1].get("pattern").map(|f| f.value_pos.line), Some(2));
/// # Ok::<(), agentic_spec::SpecErrors>(())
/// ```
///
/// # Errors
/// Located: the YAML syntax, a document that is neither a list nor a mapping with `evals`, an entry that is
/// not a mapping, a duplicate key.
pub fn read_evals(text: &str, file_name: &str) -> Result<Vec<EvalEntry>, SpecErrors> {
    let mut sink = Sink::new(file_name);
    let tree = match crate::node::read_tree(text) {
        Ok(tree) => tree,
        Err((pos, message)) => {
            let hint = crate::node::syntax_hint(&message, pos);
            sink.push_with_hint(pos, message, hint);
            return Err(sink.into_errors());
        }
    };
    let entries = match &tree.value {
        NodeValue::Seq(_) => parse_entries(&tree, &mut sink),
        NodeValue::Map(pairs) => match pairs.iter().find(|(k, _)| k.key_text() == "evals") {
            Some((_, list)) => parse_entries(list, &mut sink),
            None => {
                sink.push(
                    tree.pos,
                    None,
                    None,
                    "no `evals` key: expected a list of evaluators, or a mapping with `evals:`",
                );
                Vec::new()
            }
        },
        _ => {
            let message =
                format!("expected a list of evaluators, or a mapping with `evals:`, found {}", tree.type_name());
            sink.push(tree.pos, None, None, message);
            Vec::new()
        }
    };
    if sink.is_empty() { Ok(entries) } else { Err(sink.into_errors()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_or_a_mapping_with_evals() {
        let list = read_evals("- kind: equals\n  name: category\n", "e.yaml").unwrap_or_default();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].pos, Pos::new(1, 3));
        assert_eq!(
            list[0].get("name").map(|f| (f.value.clone(), f.value_pos)),
            Some((json!("category"), Pos::new(2, 9)))
        );
        let map = read_evals("version: 1\nevals:\n  - kind: cost\n    max_tokens: 10\n", "e.yaml").unwrap_or_default();
        assert_eq!(map[0].get("max_tokens").map(|f| f.value.clone()), Some(json!(10)));
    }

    #[test]
    fn bad_shapes_are_located() {
        let errors = read_evals("- kind: equals\n- 3\n- {kind: regex, kind: cost}\n", "e.yaml").unwrap_err();
        let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "e.yaml:2:3: field `evals`: an evaluator is a mapping with a `kind`, found an integer",
                "e.yaml:3:17: field `evals`: duplicate field `kind` (first defined at line 3, column 4)",
            ]
        );
        let errors = read_evals("kind: equals\n", "e.yaml").unwrap_err();
        assert_eq!(
            errors.to_string(),
            "e.yaml:1:1: no `evals` key: expected a list of evaluators, or a mapping with `evals:`"
        );
        let errors = read_evals("evals: 3\n", "e.yaml").unwrap_err();
        assert_eq!(
            errors.to_string(),
            "e.yaml:1:8: field `evals`: expected a list of evaluators (`- kind: equals`, ...), found an integer"
        );
    }
}
