//! The root's declared inputs (`params`): their types, defaults and descriptions, and the check of a run's
//! inputs against them ([`crate::Spec::check_inputs`], [`crate::Spec::complete_inputs`]).

use std::fmt;

use serde_json::{Map, Value};

use crate::error::suggest;
use crate::node::Pos;

/// The type of a declared input: a JSON-schema type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `string`.
    String,
    /// `number`: any JSON number.
    Number,
    /// `integer`: a number without a fractional part.
    Integer,
    /// `boolean`.
    Boolean,
    /// `array`: a JSON list.
    Array,
    /// `object`: a JSON object.
    Object,
}

impl ParamType {
    /// Every type, in the order error messages list them.
    pub const ALL: [ParamType; 6] = [
        ParamType::String,
        ParamType::Number,
        ParamType::Integer,
        ParamType::Boolean,
        ParamType::Array,
        ParamType::Object,
    ];

    /// The JSON-schema name (`number`).
    pub fn name(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Number => "number",
            ParamType::Integer => "integer",
            ParamType::Boolean => "boolean",
            ParamType::Array => "array",
            ParamType::Object => "object",
        }
    }

    /// The type named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<ParamType> {
        ParamType::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The name with its article, for messages (`a number`, `an integer`).
    pub fn described(self) -> &'static str {
        match self {
            ParamType::String => "a string",
            ParamType::Number => "a number",
            ParamType::Integer => "an integer",
            ParamType::Boolean => "a boolean",
            ParamType::Array => "an array",
            ParamType::Object => "an object",
        }
    }

    /// Whether `value` is of this type (`3.0` is an integer, as in JSON schema).
    pub fn accepts(self, value: &Value) -> bool {
        match self {
            ParamType::String => value.is_string(),
            ParamType::Number => value.is_number(),
            ParamType::Integer => {
                value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.is_finite() && f.fract() == 0.0)
            }
            ParamType::Boolean => value.is_boolean(),
            ParamType::Array => value.is_array(),
            ParamType::Object => value.is_object(),
        }
    }

    /// The names as a list for messages: `` `string`, `number`, ..`object` ``.
    pub(crate) fn names_list() -> String {
        ParamType::ALL.iter().map(|t| format!("`{}`", t.name())).collect::<Vec<_>>().join(", ")
    }
}

/// One declared input of the root (`params.<name>`): `name: TYPE`, or `name: {type, default, description}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamDef {
    /// The input's name: the state key it is written to.
    pub name: String,
    /// Position of the name.
    pub pos: Pos,
    /// Its type.
    pub ty: ParamType,
    /// The value used when the run is not given it; `None`: the input is required.
    pub default: Option<Value>,
    /// What it is (`description`), for people reading the spec.
    pub description: Option<String>,
}

/// A run input that does not fit the spec's `params`. Displayed `input `key`: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// The input's name.
    pub key: String,
    /// What is wrong: `expected a number, got "hot"`, `missing (read by agent `compose`)`.
    pub message: String,
    /// When the input is missing: why the spec needs it (`read by agent `compose``, `a number, declared in
    /// `params` without a default`); `None` for an input given that does not fit.
    pub missing: Option<String>,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "input `{}`: {}", self.key, self.message)
    }
}

impl std::error::Error for InputError {}

/// A value as an input error shows it: its JSON, cut after 60 characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 60 {
        return text;
    }
    let mut cut: String = text.chars().take(60).collect();
    cut.push('…');
    cut
}

/// Type errors and undeclared inputs (when `params` is declared), in the order of `inputs`.
pub(crate) fn check(params: &[ParamDef], inputs: &Map<String, Value>) -> Vec<InputError> {
    if params.is_empty() {
        return Vec::new();
    }
    let mut errors = Vec::new();
    for (key, value) in inputs {
        match params.iter().find(|p| p.name == *key) {
            Some(p) if !p.ty.accepts(value) => errors.push(InputError {
                key: key.clone(),
                message: format!("expected {}, got {}", p.ty.described(), shown(value)),
                missing: None,
            }),
            Some(_) => {}
            None => {
                let hint = match suggest(key, params.iter().map(|p| p.name.as_str())) {
                    Some(s) => format!(" (did you mean `{s}`?)"),
                    None => String::new(),
                };
                let names = params.iter().map(|p| format!("`{}`", p.name)).collect::<Vec<_>>().join(", ");
                errors.push(InputError {
                    key: key.clone(),
                    message: format!("not a parameter of this spec{hint}; its params are {names}"),
                    missing: None,
                });
            }
        }
    }
    errors
}

/// Adds the defaults of the params `inputs` lacks; the params without a default it lacks are errors, in
/// declaration order.
pub(crate) fn complete(params: &[ParamDef], inputs: &mut Map<String, Value>) -> Vec<InputError> {
    let mut errors = Vec::new();
    for p in params {
        if inputs.contains_key(&p.name) {
            continue;
        }
        match &p.default {
            Some(default) => {
                inputs.insert(p.name.clone(), default.clone());
            }
            None => {
                let why = format!("{}, declared in `params` without a default", p.ty.described());
                errors.push(InputError { key: p.name.clone(), message: format!("missing ({why})"), missing: Some(why) })
            }
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn param(name: &str, ty: ParamType, default: Option<Value>) -> ParamDef {
        ParamDef { name: name.into(), pos: Pos::default(), ty, default, description: None }
    }

    #[test]
    fn types_accept_their_json_values() {
        use ParamType::*;
        let accepted = |t: ParamType| {
            [json!("s"), json!(1), json!(1.5), json!(2.0), json!(true), json!([1]), json!({"a": 1}), json!(null)]
                .iter()
                .map(|v| t.accepts(v))
                .collect::<Vec<_>>()
        };
        assert_eq!(accepted(String), [true, false, false, false, false, false, false, false]);
        assert_eq!(accepted(Number), [false, true, true, true, false, false, false, false]);
        assert_eq!(accepted(Integer), [false, true, false, true, false, false, false, false]);
        assert_eq!(accepted(Boolean), [false, false, false, false, true, false, false, false]);
        assert_eq!(accepted(Array), [false, false, false, false, false, true, false, false]);
        assert_eq!(accepted(Object), [false, false, false, false, false, false, true, false]);
        assert_eq!(ParamType::from_name("integer"), Some(Integer));
        assert_eq!(ParamType::from_name("int"), None);
    }

    #[test]
    fn inputs_are_checked_and_completed() {
        let params =
            [param("temperature", ParamType::Number, None), param("city", ParamType::String, Some(json!("Paris")))];
        let inputs: Map<String, Value> =
            [("temperature".to_string(), json!("hot")), ("citty".to_string(), json!("Rome"))].into_iter().collect();
        let errors: Vec<String> = check(&params, &inputs).iter().map(ToString::to_string).collect();
        assert_eq!(
            errors,
            [
                r#"input `temperature`: expected a number, got "hot""#,
                "input `citty`: not a parameter of this spec (did you mean `city`?); its params are `temperature`, \
                 `city`",
            ]
        );
        let mut inputs = Map::new();
        let errors: Vec<String> = complete(&params, &mut inputs).iter().map(ToString::to_string).collect();
        assert_eq!(errors, ["input `temperature`: missing (a number, declared in `params` without a default)"]);
        assert_eq!(Value::Object(inputs), json!({"city": "Paris"}));
        // A long value is cut.
        let inputs: Map<String, Value> = [("temperature".to_string(), json!("x".repeat(100)))].into_iter().collect();
        assert_eq!(check(&params, &inputs)[0].message, format!("expected a number, got \"{}…", "x".repeat(59)));
        // Without params, anything goes.
        assert!(check(&[], &inputs).is_empty());
    }
}
