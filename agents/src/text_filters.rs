//! Regular-expression filters of the expression language, named as Ansible's: `regex_search`,
//! `regex_findall` and `regex_replace` (Rust `regex` syntax, Unicode-aware; no look-around or
//! back-references, so matching is linear in the text).
//!
//! ```text
//! {{ ticket | regex_search("(?i)my name is (\\p{Lu}\\p{L}+)", 1) }}   → "Anna" or none
//! {{ text | regex_findall("\\d+") }}                                 → ["12", "7"]
//! {{ text | regex_replace("\\s+", " ") }}                            → the text with runs of spaces folded
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use minijinja::{Environment, Error, ErrorKind, Value};
use regex::Regex;

/// Compiled patterns, kept so that a template evaluated per run does not recompile its patterns; cleared when
/// it holds this many (patterns are written in specs, so there are few).
const CACHE_LIMIT: usize = 256;

fn compiled(pattern: &str) -> Result<Arc<Regex>, Error> {
    static CACHE: OnceLock<Mutex<HashMap<String, Arc<Regex>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(re) = cache.lock().ok().and_then(|c| c.get(pattern).cloned()) {
        return Ok(re);
    }
    let re = Arc::new(Regex::new(pattern).map_err(|e| {
        Error::new(ErrorKind::InvalidOperation, format!("invalid regular expression {pattern:?}: {e}"))
    })?);
    if let Ok(mut c) = cache.lock() {
        if c.len() >= CACHE_LIMIT {
            c.clear();
        }
        c.insert(pattern.to_string(), re.clone());
    }
    Ok(re)
}

/// The group's text of a match (`group` 0 is the whole match); an unknown group is an error, a group that
/// took no part in the match is none.
fn group_text(re: &Regex, caps: &regex::Captures<'_>, group: usize) -> Result<Value, Error> {
    if group >= re.captures_len() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("the regular expression {:?} has no group {group}", re.as_str()),
        ));
    }
    Ok(caps.get(group).map_or(Value::from(()), |m| Value::from(m.as_str())))
}

/// `text | regex_search(pattern, group=0)`: the first match's group, or none when nothing matches.
fn regex_search(text: &str, pattern: &str, group: Option<usize>) -> Result<Value, Error> {
    let re = compiled(pattern)?;
    match re.captures(text) {
        Some(caps) => group_text(&re, &caps, group.unwrap_or(0)),
        None => Ok(Value::from(())),
    }
}

/// `text | regex_findall(pattern, group=0)`: every match's group, in order (a list, empty when none).
fn regex_findall(text: &str, pattern: &str, group: Option<usize>) -> Result<Value, Error> {
    let re = compiled(pattern)?;
    let group = group.unwrap_or(0);
    let found: Result<Vec<Value>, Error> = re.captures_iter(text).map(|caps| group_text(&re, &caps, group)).collect();
    Ok(Value::from(found?))
}

/// `text | regex_replace(pattern, replacement)`: every match replaced; `$1` / `${name}` name groups.
fn regex_replace(text: &str, pattern: &str, replacement: &str) -> Result<String, Error> {
    Ok(compiled(pattern)?.replace_all(text, replacement).into_owned())
}

/// Adds the filters to `env`.
pub(crate) fn register(env: &mut Environment<'_>) {
    env.add_filter("regex_search", regex_search);
    env.add_filter("regex_findall", regex_findall);
    env.add_filter("regex_replace", regex_replace);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str, text: &str) -> Result<String, Error> {
        let mut env = Environment::new();
        register(&mut env);
        env.render_str(source, minijinja::context! { text => text })
    }

    #[test]
    fn search_gives_the_group_or_none() {
        let t = "Hi, my name is Anna Berg and I was billed twice";
        assert_eq!(
            render(r#"{{ text | regex_search("name is (\\p{Lu}\\p{L}+ \\p{Lu}\\p{L}+)", 1) }}"#, t).unwrap(),
            "Anna Berg"
        );
        assert_eq!(render(r#"{{ text | regex_search("billed \\w+") }}"#, t).unwrap(), "billed twice");
        assert_eq!(render(r#"{{ text | regex_search("refund") is none }}"#, t).unwrap(), "True");
        // An optional group that took no part is none.
        assert_eq!(render(r#"{{ text | regex_search("(x)?Hi", 1) is none }}"#, t).unwrap(), "True");
    }

    #[test]
    fn findall_and_replace() {
        assert_eq!(render(r#"{{ text | regex_findall("\\d+") | join(",") }}"#, "a 12 b 7").unwrap(), "12,7");
        assert_eq!(render(r#"{{ text | regex_findall("(\\w)=\\d", 1) | join }}"#, "a=1 b=2").unwrap(), "ab");
        assert_eq!(render(r#"{{ text | regex_replace("\\s+", " ") }}"#, "a \n\t b").unwrap(), "a b");
        assert_eq!(render(r#"{{ text | regex_replace("(\\w+)@", "$1 at ") }}"#, "ann@x").unwrap(), "ann at x");
    }

    #[test]
    fn bad_patterns_and_groups_are_errors_naming_them() {
        let e = render(r#"{{ text | regex_search("(") }}"#, "x").unwrap_err();
        assert!(e.to_string().contains("invalid regular expression \"(\""), "{e}");
        let e = render(r#"{{ text | regex_search("x", 2) }}"#, "x").unwrap_err();
        assert!(e.to_string().contains("has no group 2"), "{e}");
    }
}
