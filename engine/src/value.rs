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
        if self.fits(value) { Some(value.clone()) } else { self.convert(value) }
    }

    /// [`ValueType::coerce`] taking the value: a value already of this type is returned as it is, without a
    /// copy (what an agent's inputs are, almost always).
    ///
    /// # Errors
    /// The value, unchanged, when it cannot be coerced.
    pub fn coerce_owned(self, value: Value) -> Result<Value, Value> {
        if self.fits(&value) {
            return Ok(value);
        }
        self.convert(&value).ok_or(value)
    }

    /// Whether `value` is already of this type (coercion is then the identity).
    fn fits(self, value: &Value) -> bool {
        match (self, value) {
            (ValueType::Any, _)
            | (ValueType::String, Value::String(_))
            | (ValueType::Number, Value::Number(_))
            | (ValueType::Boolean, Value::Bool(_))
            | (ValueType::List, Value::Array(_))
            | (ValueType::Object, Value::Object(_)) => true,
            (ValueType::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
            _ => false,
        }
    }

    /// The conversions of [`ValueType::coerce`] for a value not already of this type.
    fn convert(self, value: &Value) -> Option<Value> {
        match (self, value) {
            (ValueType::String, Value::Number(n)) => Some(Value::String(n.to_string())),
            (ValueType::String, Value::Bool(b)) => Some(Value::String(b.to_string())),
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
                n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| Value::from(f as i64))
            }
            (ValueType::Integer, Value::String(s)) => s.trim().parse::<i64>().ok().map(Value::from),
            (ValueType::Boolean, Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
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

    #[test]
    fn coerce_owned_keeps_fitting_values_and_returns_the_rest() {
        assert_eq!(ValueType::String.coerce_owned(json!("as is")), Ok(json!("as is")));
        assert_eq!(ValueType::Integer.coerce_owned(json!(7)), Ok(json!(7)));
        assert_eq!(ValueType::Integer.coerce_owned(json!(7.0)), Ok(json!(7)));
        assert_eq!(ValueType::Object.coerce_owned(json!(r#"{"a":1}"#)), Ok(json!({"a": 1})));
        assert_eq!(ValueType::Boolean.coerce_owned(json!("maybe")), Err(json!("maybe")));
        assert_eq!(ValueType::List.coerce_owned(json!({"a": 1})), Err(json!({"a": 1})));
    }
}
