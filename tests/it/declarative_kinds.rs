//! The agent kinds of `#[agents]` (macros/src/system/kinds.rs, which the macro crate cannot check against the
//! planners it does not depend on) agree with the planners' descriptors (`agentic_planners::builtin_kinds`): one
//! attribute per built-in planner kind, and the attribute keys that stand for a planner field name a field of
//! that planner, covering every field the planner requires with a key the attribute requires.

#![allow(clippy::unwrap_used)]

#[path = "../../macros/src/system/kinds.rs"]
#[allow(dead_code)]
mod kinds;

use agentic::planners::builtin_kinds;

#[test]
fn every_built_in_planner_kind_has_one_attribute_and_every_composite_attribute_a_planner() {
    let mut runtime: Vec<String> = builtin_kinds().iter().map(|k| k.name().to_string()).collect();
    runtime.sort();
    let mut declared: Vec<String> = kinds::KINDS.iter().filter_map(|k| k.planner.map(str::to_string)).collect();
    declared.sort();
    assert_eq!(declared, runtime);
    let leaves: Vec<&str> = kinds::KINDS.iter().filter(|k| k.planner.is_none()).map(|k| k.name).collect();
    assert_eq!(leaves, ["agent", "human"]);
    for kind in kinds::KINDS {
        assert_eq!(kind.subs == kinds::Subs::Leaf, kind.planner.is_none(), "#[{}]", kind.name);
    }
}

#[test]
fn attribute_keys_standing_for_planner_fields_are_fields_and_cover_the_required_ones() {
    for kind in kinds::KINDS {
        let Some(planner) = kind.planner else {
            assert_eq!(kind.fields, &[], "#[{}] has no planner", kind.name);
            continue;
        };
        let runtime = builtin_kinds().into_iter().find(|k| k.name() == planner).unwrap();
        let fields = runtime.fields();
        for (key, field) in kind.fields {
            assert!(kind.keys.contains(key), "#[{}]: `{key}` is not one of its keys", kind.name);
            assert!(
                fields.iter().any(|f| f.name == *field),
                "#[{}]: `{key}` stands for `{field}`, which planner `{planner}` does not have",
                kind.name
            );
        }
        for required in fields.iter().filter(|f| f.required) {
            let key = kind.fields.iter().find(|(_, field)| *field == required.name).map(|(key, _)| *key);
            assert!(
                key.is_some_and(|key| kind.required.iter().any(|(r, _)| *r == key)),
                "#[{}]: planner `{planner}` requires `{}`, which no required key of the attribute gives ({key:?})",
                kind.name,
                required.name
            );
        }
        for (key, _) in kind.required {
            assert!(kind.keys.contains(key), "#[{}]: required `{key}` is not one of its keys", kind.name);
        }
    }
}
