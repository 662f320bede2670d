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
pub use agentic_planners::{Calls, FieldError, FieldType, KindArgs, KindField, ModelUse, PlannerKind};

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

/// The kinds specs know: the built-in kinds described by descriptors (`agentic_planners::builtin_kinds`) and
/// the ones the program registered.
fn registry() -> &'static RwLock<BTreeMap<String, KindRef>> {
    static KINDS: std::sync::OnceLock<RwLock<BTreeMap<String, KindRef>>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let builtin = agentic_planners::builtin_kinds().into_iter().map(|k| (k.name().to_string(), KindRef(k)));
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
    check_fields(kind.fields(), kind.fields(), None).map_err(invalid)?;
    let mut kinds = registry().write().unwrap_or_else(PoisonError::into_inner);
    if kinds.contains_key(&name) {
        return Err(KindError::Duplicate { name });
    }
    kinds.insert(name, KindRef(Arc::new(kind)));
    Ok(())
}

/// Checks the declared fields of a kind (`top`: the kind's own fields, which [`FieldType::AgentOf`] refers
/// to), and those of the entries of its list fields (`list`: the list field's name).
fn check_fields(fields: &[KindField], top: &[KindField], list: Option<&str>) -> Result<(), String> {
    let mut seen = Vec::new();
    for field in fields {
        let name = field.name;
        let shown = match list {
            Some(list) => format!("{list}.{name}"),
            None => name.to_string(),
        };
        let fail = |message: &str| Err(format!("field `{shown}`: {message}"));
        if !identifier(name) {
            return fail("not lowercase snake_case");
        }
        if list.is_none() && (COMMON_FIELDS.contains(&name) || COMPOSITE_FIELDS.contains(&name)) {
            return fail("every composite takes it already");
        }
        if seen.contains(&name) {
            return Err(format!("field `{shown}` is declared twice"));
        }
        match field.ty {
            FieldType::Integer { min, max } if min > max => return fail(&format!("min {min} is above max {max}")),
            FieldType::NumberIn { min, max, .. } if min.is_nan() || max.is_nan() || min > max => {
                return fail(&format!("min {min} is above max {max}"));
            }
            FieldType::AgentOf(other)
                if !top.iter().any(|f| f.name == other && matches!(f.ty, FieldType::Agents | FieldType::Agent)) =>
            {
                return fail(&format!("`{other}` is not an agent field of the kind"));
            }
            FieldType::List(inner) => check_fields(inner, top, Some(&shown))?,
            _ => {}
        }
        if field.min_items > 0 && field.ty != FieldType::Agents {
            return fail("`at_least` applies to a list of agents only");
        }
        if field.by_name && field.ty != FieldType::Agents {
            return fail("`by_name` applies to a list of agents only");
        }
        if field.unique && list.is_none() {
            return fail("`unique` applies to the fields of a list's entries only");
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

    /// A kind with nested fields: shifts (entries with a unique label, their workers, a lead among the crew and
    /// a condition), the crew after them, a chief among the crew, a chat model and a share.
    struct Rota;

    impl PlannerKind for Rota {
        fn name(&self) -> &str {
            "kind_test_rota"
        }

        fn fields(&self) -> &[KindField] {
            const SHIFT: &[KindField] = &[
                KindField::required("label", FieldType::Name).unique(),
                KindField::required("workers", FieldType::Agents),
                KindField::optional("lead", FieldType::AgentOf("crew")),
                KindField::optional("until", FieldType::Expression),
            ];
            const FIELDS: &[KindField] = &[
                KindField::required("shifts", FieldType::List(SHIFT)),
                KindField::required("crew", FieldType::Agents),
                KindField::optional("chief", FieldType::AgentOf("crew")),
                KindField::optional("model", FieldType::Model(ModelUse::Chat)),
                KindField::optional("share", FieldType::NumberIn { min: 0.0, max: 1.0, exclusive: false }),
            ];
            FIELDS
        }

        fn planner(&self, args: &KindArgs) -> Result<PlannerFactory, String> {
            let shifts = args.entries("shifts");
            let seen = (
                shifts.iter().map(|s| s.agents("workers").to_vec()).collect::<Vec<_>>(),
                shifts.iter().map(|s| (s.get_str("label"), s.agent("lead"))).collect::<Vec<_>>(),
                shifts.iter().map(|s| s.expression("until").is_some()).collect::<Vec<_>>(),
                args.agents("crew").to_vec(),
                (args.agent("chief"), args.get_str("chief")),
                (args.chat_model("model").is_some(), args.get_str("model"), args.get_f64("share"), args.sub_agents()),
            );
            let expected = (
                vec![vec![0, 1], vec![2]],
                vec![(Some("day"), Some(4)), (Some("night"), None)],
                vec![true, false],
                vec![3, 4],
                (Some(3), Some("c1")),
                (true, Some("default"), Some(1.0), 5),
            );
            if seen != expected {
                return Err(format!("unexpected arguments: {seen:?}"));
            }
            Ok(Arc::new(|| Box::new(agentic_planners::SequentialPlanner::default())))
        }
    }

    fn rota(fields: &str) -> String {
        let _ = register_kind(Rota);
        let leaves: String = ["w1", "w2", "w3", "c1", "c2"]
            .iter()
            .map(|n| format!("  {n}: {{kind: compute, value: \"1\"}}\n"))
            .collect();
        format!(
            "version: 1\nroot: r\nmodels:\n  default: {{provider: scripted, replies: [x]}}\nagents:\n  r: {{kind: \
             kind_test_rota, {fields}}}\n{leaves}"
        )
    }

    const SHIFTS: &str = "shifts: [{label: day, workers: [w1, w2], lead: c2, until: 'x > 1'}, {label: night, workers: \
                          [w3]}], crew: [c1, c2]";

    #[test]
    fn list_fields_are_read_per_entry_and_their_agents_numbered_in_order() {
        let spec = Spec::parse(&rota(&format!("{SHIFTS}, chief: c1, share: 1")), "rota.yaml")
            .unwrap_or_else(|e| panic!("{e}"));
        let Some(AgentKind::Planner(def)) = spec.agent("r").map(|a| &a.kind) else { panic!("not a described kind") };
        let refs: Vec<&str> =
            spec.agent("r").map(|a| a.kind.references()).unwrap_or_default().iter().map(|r| r.value.as_str()).collect();
        assert_eq!(refs, ["w1", "w2", "w3", "c1", "c2"]);
        assert_eq!(def.locate("shifts[0].lead").map(|p| (p.line, p.column)), Some((6, 76)));
        let built = spec.build().unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = built.root.topology().children.iter().map(|c| c.spec.name.clone()).collect();
        assert_eq!(names, ["w1", "w2", "w3", "c1", "c2"]);
    }

    #[test]
    fn nested_values_are_checked_where_they_are_written() {
        let errors = |fields: &str| match Spec::parse(&rota(fields), "rota.yaml") {
            Ok(_) => String::from("parsed"),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            errors("shifts: [{label: a, workers: []}, {label: a, workers: []}], crew: [c1]"),
            "rota.yaml:6:71: agent `r`: field `shifts[1].label`: duplicate label `a` (first defined at line 6, \
             column 46)"
        );
        assert_eq!(
            errors("shifts: [{label: a, workers: [], lead: w1}], crew: [c1]"),
            "rota.yaml:6:68: agent `r`: field `shifts[0].lead`: agent `w1` is not one of the `crew` of this \
             kind_test_rota (`c1`)"
        );
        assert_eq!(
            errors("shifts: [{workers: [w1], labl: a}], crew: [c1], share: 2"),
            "rota.yaml:6:54: agent `r`: field `shifts[0]`: unknown field `labl` (did you mean `label`?), expected one \
             of `label`, `workers`, `lead`, `until`\nrota.yaml:6:84: agent `r`: field `share`: must be between 0 and \
             1, found 2"
        );
        assert_eq!(
            errors("shifts: {label: a}, crew: [c1]"),
            "rota.yaml:6:37: agent `r`: field `shifts`: expected a list of `{label, workers, lead, until}`, found a \
             mapping"
        );
        assert_eq!(
            errors(&format!("{SHIFTS}, model: planner")),
            "rota.yaml:6:152: agent `r`: field `model`: unknown model `planner`; defined models: `default`"
        );
    }
}
