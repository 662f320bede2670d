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

/// A Rust type that can be declared as the type of a state key: its [`ValueType`] and its Rust name.
///
/// Implemented for every [`schemars::JsonSchema`] type — the std scalars and collections (`String` is a
/// string, `i64` an integer, `f64` a number, `bool` a boolean, `Vec<T>` a list, maps an object) and any type
/// deriving `JsonSchema` — through the `type` of its JSON schema (`Option<T>` is `T`'s type; a schema
/// without one type, like `serde_json::Value`'s, is [`ValueType::Any`]). What typed builders
/// (`output_key(&KEY)`, `input(&KEY)`, the declarative agents) declare: two agents declaring one key with two
/// value types, or with two Rust types, fail when the system is built.
///
/// Plays the part of the original's typed `@V` parameters and agent return types.
pub trait StateType {
    /// The value type of `Self`'s JSON schema.
    fn value_type() -> ValueType;

    /// The Rust type's name (`std::any::type_name`), telling apart two types of one value type; `Option<T>`'s
    /// is `T`'s (a key may be absent whatever its type).
    fn rust_type() -> &'static str;

    /// The JSON schema of `Self` (with its definitions).
    fn schema() -> Value;
}

impl<T: schemars::JsonSchema + ?Sized> StateType for T {
    fn value_type() -> ValueType {
        let schema = Self::schema();
        schema_value_type(&schema, &schema)
    }

    fn rust_type() -> &'static str {
        let name = std::any::type_name::<T>();
        name.strip_prefix("core::option::Option<").and_then(|inner| inner.strip_suffix('>')).unwrap_or(name)
    }

    fn schema() -> Value {
        schemars::SchemaGenerator::default().into_root_schema_for::<T>().to_value()
    }
}

/// The value type a JSON schema describes: its `type` (without `null`), or the one type every alternative of
/// an `anyOf`/`oneOf` shares, following `$ref`s into the root's definitions; else [`ValueType::Any`].
fn schema_value_type(schema: &Value, root: &Value) -> ValueType {
    if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
        let resolved =
            target.strip_prefix("#/").map(|path| path.split('/').try_fold(root, |v, part| v.get(part))).unwrap_or(None);
        return match resolved {
            Some(s) if !std::ptr::eq(s, schema) => schema_value_type(s, root),
            _ => ValueType::Any,
        };
    }
    let named = |name: &str| match name {
        "string" => Some(ValueType::String),
        "number" => Some(ValueType::Number),
        "integer" => Some(ValueType::Integer),
        "boolean" => Some(ValueType::Boolean),
        "array" => Some(ValueType::List),
        "object" => Some(ValueType::Object),
        _ => None,
    };
    match schema.get("type") {
        Some(Value::String(name)) => return named(name).unwrap_or(ValueType::Any),
        Some(Value::Array(names)) => {
            let mut types = names.iter().filter_map(Value::as_str).filter(|n| *n != "null");
            return match (types.next(), types.next()) {
                (Some(one), None) => named(one).unwrap_or(ValueType::Any),
                _ => ValueType::Any,
            };
        }
        _ => {}
    }
    for alternatives in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = schema.get(alternatives) {
            let mut types = options
                .iter()
                .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
                .map(|o| schema_value_type(o, root));
            let first = types.next().unwrap_or(ValueType::Any);
            return if types.all(|t| t == first) { first } else { ValueType::Any };
        }
    }
    ValueType::Any
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

/// A JSON value's type as an error message says what it found: `null`, `a boolean`, `a number`, `a string`,
/// `an array`, `an object`.
pub fn json_type_phrase(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
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

    #[test]
    fn state_types_come_from_the_json_schema() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Story {
            title: String,
        }
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        enum Mood {
            Calm,
            Wild,
        }
        assert_eq!(String::value_type(), ValueType::String);
        assert_eq!(<str>::value_type(), ValueType::String);
        assert_eq!(i64::value_type(), ValueType::Integer);
        assert_eq!(u8::value_type(), ValueType::Integer);
        assert_eq!(f64::value_type(), ValueType::Number);
        assert_eq!(bool::value_type(), ValueType::Boolean);
        assert_eq!(Vec::<String>::value_type(), ValueType::List);
        assert_eq!(std::collections::BTreeMap::<String, i64>::value_type(), ValueType::Object);
        assert_eq!(Story::value_type(), ValueType::Object);
        assert_eq!(Option::<Story>::value_type(), ValueType::Object);
        assert_eq!(Option::<f64>::value_type(), ValueType::Number);
        assert_eq!(Mood::value_type(), ValueType::String);
        assert_eq!(Value::value_type(), ValueType::Any);
        assert_eq!(String::rust_type(), "alloc::string::String");
        assert_eq!(Story::rust_type(), "agentic_engine::value::tests::state_types_come_from_the_json_schema::Story");
    }
}
