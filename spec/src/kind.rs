//! Planner kinds a program adds to specs. A [`PlannerKind`] describes one: the `kind` name a spec writes, its
//! fields with their types, and how its planner is made from their values. [`register_kind`] makes every spec
//! parsed afterwards in the process accept it, with the same checks and located errors as the built-in kinds
//! (unknown fields, wrong types, missing required fields, unknown sub-agents), and the CLI's `validate`,
//! `run` and `agentic serve` (MCP and A2A included) treat it like any composite. Adding a planner kind is one
//! file (the planner and its descriptor) and one registration line.
//!
//! ```
//! use std::sync::Arc;
//! use agentic_engine::{Action, AgentError, Completion, Planner, PlannerFactory, PlanningContext};
//! use agentic_spec::{FieldType, KindArgs, KindField, PlannerKind, Spec, register_kind};
//!
//! /// Calls its agents in turn, `rounds` times over.
//! struct RoundRobin { rounds: usize, turn: usize, agents: usize }
//!
//! impl Planner for RoundRobin {
//!     fn first_action(&mut self, ctx: &PlanningContext<'_>) -> Result<Action, AgentError> {
//!         self.agents = ctx.agents().len();
//!         Ok(Action::call(0))
//!     }
//!     fn next_action(&mut self, _: &PlanningContext<'_>, _: &Completion) -> Result<Action, AgentError> {
//!         self.turn += 1;
//!         if self.turn == self.rounds * self.agents { Ok(Action::Done) } else { Ok(Action::call(self.turn % self.agents)) }
//!     }
//! }
//!
//! struct RoundRobinKind;
//!
//! impl PlannerKind for RoundRobinKind {
//!     fn name(&self) -> &str { "round_robin_doc" }
//!     fn fields(&self) -> &[KindField] {
//!         const FIELDS: &[KindField] = &[
//!             KindField::required("agents", FieldType::Agents),
//!             KindField::optional("rounds", FieldType::Integer { min: 1, max: 100 }),
//!         ];
//!         FIELDS
//!     }
//!     fn planner(&self, args: &KindArgs) -> Result<PlannerFactory, String> {
//!         let rounds = args.get("rounds").and_then(|v| v.as_u64()).unwrap_or(2) as usize;
//!         Ok(Arc::new(move || Box::new(RoundRobin { rounds, turn: 0, agents: 0 })))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! register_kind(RoundRobinKind)?;
//! let spec = Spec::parse(r#"
//! version: 1
//! root: main
//! agents:
//!   main: { kind: round_robin_doc, agents: [tick], rounds: 3 }
//!   tick: { kind: compute, value: "n + 1", inputs: [n], output_key: n }
//! "#, "ticks.yaml")?;
//! let outcome = spec.build()?.root.invoke().input("n", 0).await?;
//! assert_eq!(outcome.state().get("n"), Some(&serde_json::json!(3)));
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

pub use agentic_planners::CompositeParts;
pub use agentic_planners::kind::{Calls, FieldError, FieldType, KindArgs, KindField, ModelUse, PlannerKind};

use crate::model::SUPPORTED_KINDS;
use crate::parse::{COMMON_FIELDS, COMPOSITE_FIELDS};

/// A registered [`PlannerKind`], as a spec refers to it. Two are equal when they have the same name.
#[derive(Clone)]
pub struct KindRef(pub(crate) Arc<dyn PlannerKind>);

impl KindRef {
    /// The kind's name.
    pub fn name(&self) -> &str {
        self.0.name()
    }

    /// The kind's descriptor.
    pub fn descriptor(&self) -> &dyn PlannerKind {
        &*self.0
    }
}

impl std::fmt::Debug for KindRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KindRef({})", self.name())
    }
}

impl PartialEq for KindRef {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

/// Why [`register_kind`] refused a kind.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum KindError {
    /// The name is a built-in kind's.
    #[error("planner kind `{name}`: the name of a built-in kind")]
    Builtin {
        /// The refused name.
        name: String,
    },
    /// Another kind of that name is registered.
    #[error("planner kind `{name}` is already registered")]
    Duplicate {
        /// The refused name.
        name: String,
    },
    /// The name or a field is not usable in a spec.
    #[error("planner kind `{name}`: {message}")]
    Invalid {
        /// The kind's name.
        name: String,
        /// What is wrong.
        message: String,
    },
}

/// The kinds specs know: the built-in kinds described by descriptors (`agentic_planners::kind::BUILTIN`) and
/// the ones the program registered.
fn registry() -> &'static RwLock<BTreeMap<String, KindRef>> {
    static KINDS: std::sync::OnceLock<RwLock<BTreeMap<String, KindRef>>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let builtin = agentic_planners::kind::builtin().into_iter().map(|k| (k.name().to_string(), KindRef(k)));
        RwLock::new(builtin.collect())
    })
}

fn identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Registers `kind` for every spec parsed afterwards in this process.
///
/// # Errors
/// [`KindError::Builtin`] for a built-in kind's name, [`KindError::Duplicate`] when a kind of that name is
/// registered, [`KindError::Invalid`] for a name or field name that is not lowercase snake_case, a field a
/// composite already takes (`output_key`, `error_handler`, ...), a field given twice, a range whose `min` is
/// above its `max`, an [`FieldType::AgentOf`] naming no agent field of the kind, or a modifier on a field it
/// does not apply to (`at_least` and `by_name` on agent lists, `unique` in a list's entries).
pub fn register_kind(kind: impl PlannerKind) -> Result<(), KindError> {
    let name = kind.name().to_string();
    let invalid = |message: String| KindError::Invalid { name: name.clone(), message };
    if SUPPORTED_KINDS.contains(&name.as_str()) || name == "registry" {
        return Err(KindError::Builtin { name });
    }
    if !identifier(&name) {
        return Err(invalid("a kind's name is lowercase letters, digits and `_`, starting with a letter".into()));
    }
    check_fields(kind.fields(), kind.fields(), false).map_err(invalid)?;
    let mut kinds = registry().write().unwrap_or_else(PoisonError::into_inner);
    if kinds.contains_key(&name) {
        return Err(KindError::Duplicate { name });
    }
    kinds.insert(name, KindRef(Arc::new(kind)));
    Ok(())
}

/// Checks the declared fields of a kind (`top`: the kind's own fields, which [`FieldType::AgentOf`] refers
/// to), those of the entries of its list fields too (`in_list`).
fn check_fields(fields: &[KindField], top: &[KindField], in_list: bool) -> Result<(), String> {
    let mut seen = Vec::new();
    for field in fields {
        let name = field.name;
        if !identifier(name) {
            return Err(format!("field `{name}`: not lowercase snake_case"));
        }
        if !in_list && (COMMON_FIELDS.contains(&name) || COMPOSITE_FIELDS.contains(&name)) {
            return Err(format!("field `{name}`: every composite takes it already"));
        }
        if seen.contains(&name) {
            return Err(format!("field `{name}` is declared twice"));
        }
        match field.ty {
            FieldType::Integer { min, max } if min > max => {
                return Err(format!("field `{name}`: min {min} is above max {max}"));
            }
            FieldType::NumberIn { min, max, .. } if min.is_nan() || max.is_nan() || min > max => {
                return Err(format!("field `{name}`: min {min} is above max {max}"));
            }
            FieldType::AgentOf(other)
                if !top.iter().any(|f| f.name == other && matches!(f.ty, FieldType::Agents | FieldType::Agent)) =>
            {
                return Err(format!("field `{name}`: `{other}` is not an agent field of the kind"));
            }
            FieldType::List(inner) => check_fields(inner, top, true).map_err(|m| format!("in `{name}`: {m}"))?,
            _ => {}
        }
        if field.min_items > 0 && field.ty != FieldType::Agents {
            return Err(format!("field `{name}`: `at_least` applies to a list of agents only"));
        }
        if field.by_name && field.ty != FieldType::Agents {
            return Err(format!("field `{name}`: `by_name` applies to a list of agents only"));
        }
        if field.unique && !in_list {
            return Err(format!("field `{name}`: `unique` applies to the fields of a list's entries only"));
        }
        seen.push(name);
    }
    Ok(())
}

/// The descriptor of the kind `name`: a built-in kind described by one, or a kind the program registered.
pub fn registered_kind(name: &str) -> Option<KindRef> {
    registry().read().unwrap_or_else(PoisonError::into_inner).get(name).cloned()
}

/// The names of the kinds the program registered (not the built-in ones), sorted.
pub fn registered_kinds() -> Vec<String> {
    let kinds = registry().read().unwrap_or_else(PoisonError::into_inner);
    kinds.keys().filter(|k| !SUPPORTED_KINDS.contains(&k.as_str())).cloned().collect()
}

#[cfg(test)]
mod tests {
    use agentic_engine::PlannerFactory;
    use serde_json::Value;

    use super::*;
    use crate::{AgentKind, FieldValue, Spec};

    /// A kind with a field of every type: a judge, a style, flags and settings.
    struct Panel;

    impl PlannerKind for Panel {
        fn name(&self) -> &str {
            "kind_test_panel"
        }

        fn fields(&self) -> &[KindField] {
            const FIELDS: &[KindField] = &[
                KindField::required("members", FieldType::Agents),
                KindField::required("judge", FieldType::Agent),
                KindField::optional("style", FieldType::Choice(&["calm", "loud"])),
                KindField::optional("strict", FieldType::Bool),
                KindField::optional("weight", FieldType::Number),
                KindField::optional("title", FieldType::String),
                KindField::optional("extra", FieldType::Any),
            ];
            FIELDS
        }

        fn planner(&self, args: &KindArgs) -> Result<PlannerFactory, String> {
            if args.agents("members").len() + 1 != args.sub_agents() || args.agent("judge") != Some(2) {
                return Err(format!("unexpected numbering: {args:?}"));
            }
            Ok(Arc::new(|| Box::new(agentic_planners::SequentialPlanner::default())))
        }
    }

    fn panel(fields: &str) -> String {
        let _ = register_kind(Panel);
        format!(
            "version: 1\nroot: p\nagents:\n  p: {{kind: kind_test_panel, {fields}}}\n  a: {{kind: compute, value: \
             \"1\"}}\n  b: {{kind: compute, value: \"2\"}}\n  j: {{kind: compute, value: \"3\"}}\n"
        )
    }

    #[test]
    fn every_field_type_is_read_and_numbered() {
        let text = panel(
            "members: [a, b], judge: j, style: loud, strict: true, weight: 0.5, title: Jury, extra: {seats: [1, 2]}",
        );
        let spec = Spec::parse(&text, "panel.yaml").unwrap_or_else(|e| panic!("{e}"));
        let Some(AgentKind::Planner(def)) = spec.agent("p").map(|a| &a.kind) else { panic!("not a custom kind") };
        let names: Vec<&str> = def.fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["members", "judge", "style", "strict", "weight", "title", "extra"]);
        let value = |i: usize| match &def.fields[i].1 {
            FieldValue::Value(v) => v.value.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            (value(2), value(3), value(4), value(5), value(6)),
            (
                Value::from("loud"),
                Value::Bool(true),
                Value::from(0.5),
                Value::from("Jury"),
                serde_json::json!({"seats": [1, 2]})
            )
        );
        let built = spec.build().unwrap_or_else(|e| panic!("{e}"));
        let topology = built.root.topology();
        assert_eq!(topology.children.iter().map(|c| c.spec.name.as_str()).collect::<Vec<_>>(), ["a", "b", "j"]);
        assert_eq!(
            topology.details,
            serde_json::json!({"style": "loud", "strict": true, "weight": 0.5, "title": "Jury", "extra": {"seats": [1, 2]}})
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused_where_it_is_written() {
        let errors = |fields: &str| match Spec::parse(&panel(fields), "panel.yaml") {
            Ok(_) => String::from("parsed"),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            errors("members: [a, b], judge: j, style: shouty"),
            "panel.yaml:4:64: agent `p`: field `style`: unknown style `shouty`, expected `calm` or `loud`"
        );
        assert_eq!(
            errors("members: [a, b], judge: j, strict: yes"),
            "panel.yaml:4:65: agent `p`: field `strict`: expected true or false, found a string"
        );
        assert_eq!(
            errors("members: [a, b], judge: [j]"),
            "panel.yaml:4:54: agent `p`: field `judge`: expected a string, found a list"
        );
        assert_eq!(errors("members: [a, b]"), "panel.yaml:4:6: agent `p`: missing field `judge` (an agent name)");
    }
}
