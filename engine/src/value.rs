//! Declared value types of state keys and the coercion rules applied to agent inputs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The declared type of a state key or agent input.
///
/// Values are stored as JSON; a declared type is checked (and coerced) when an agent reads its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ValueType {
    /// Any JSON value; no check.
    #[default]
    Any,
    /// A string.
    String,
    /// A number (integer or float).
    Number,
    /// An integer.
    Integer,
    /// `true` / `false`.
    Boolean,
    /// A JSON array.
    List,
    /// A JSON object.
    Object,
}

impl std::fmt::Display for ValueType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ValueType::Any => "any",
            ValueType::String => "string",
            ValueType::Number => "number",
            ValueType::Integer => "integer",
            ValueType::Boolean => "boolean",
            ValueType::List => "list",
            ValueType::Object => "object",
        })
    }
}

impl ValueType {
    /// Coerces `value` to this type, or returns `None` when it cannot be.
    ///
    /// Rules: strings holding a number/boolean parse to it (`"0.8"` → `0.8`); numbers and booleans render to
    /// strings for a string input; an integral float is an integer; strings holding JSON arrays/objects parse
    /// for list/object inputs. The stored value is never rewritten: coercion applies to the copy an agent reads.
    pub fn coerce(self, value: &Value) -> Option<Value> {
        match (self, value) {
            (ValueType::Any, v) => Some(v.clone()),
            (ValueType::String, Value::String(_)) => Some(value.clone()),
            (ValueType::String, Value::Number(n)) => Some(Value::String(n.to_string())),
            (ValueType::String, Value::Bool(b)) => Some(Value::String(b.to_string())),
            (ValueType::Number, Value::Number(_)) => Some(value.clone()),
            (ValueType::Number, Value::String(s)) => {
                s.trim().parse::<f64>().ok().and_then(serde_json::Number::from_f64).map(|n| {
                    // keep integers integral: "3" -> 3, "0.8" -> 0.8
                    match s.trim().parse::<i64>() {
                        Ok(i) => Value::from(i),
                        Err(_) => Value::Number(n),
                    }
                })
            }
            (ValueType::Integer, Value::Number(n)) => {
                if n.is_i64() || n.is_u64() {
                    Some(value.clone())
                } else {
                    n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| Value::from(f as i64))
                }
            }
            (ValueType::Integer, Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
            (ValueType::Boolean, Value::Bool(_)) => Some(value.clone()),
            (ValueType::Boolean, Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            (ValueType::List, Value::Array(_)) | (ValueType::Object, Value::Object(_)) => Some(value.clone()),
            (ValueType::List, Value::String(s)) => serde_json::from_str::<Value>(s).ok().filter(Value::is_array),
            (ValueType::Object, Value::String(s)) => serde_json::from_str::<Value>(s).ok().filter(Value::is_object),
            _ => None,
        }
    }
}

/// The JSON type name of a value (`null`, `boolean`, `number`, `string`, `list`, `object`), for messages.
pub fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn coerces_numeric_strings() {
        assert_eq!(ValueType::Number.coerce(&json!("0.8")), Some(json!(0.8)));
        assert_eq!(ValueType::Number.coerce(&json!("3")), Some(json!(3)));
        assert_eq!(ValueType::Integer.coerce(&json!(4.0)), Some(json!(4)));
        assert_eq!(ValueType::Integer.coerce(&json!(4.5)), None);
        assert_eq!(ValueType::Boolean.coerce(&json!("TRUE")), Some(json!(true)));
        assert_eq!(ValueType::String.coerce(&json!(12)), Some(json!("12")));
        assert_eq!(ValueType::Number.coerce(&json!("abc")), None);
        assert_eq!(ValueType::List.coerce(&json!("[1,2]")), Some(json!([1, 2])));
    }
}
