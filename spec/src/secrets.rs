//! Secrets by reference (SERVER.md §8): a spec names a secret as `${secret:NAME}` where a credential goes (a
//! model's `api_key`, an MCP server's `env` or `headers`, an A2A agent's `headers`), and the value is looked
//! up when the spec is built for a run — from the secrets file
//! given with `--secrets FILE` (a YAML map of names to strings), else from the environment variable
//! `AGENTIC_SECRET_<NAME>`. The spec's text, which the store archives with every run, holds the reference
//! only, and the value goes only where it is used (an HTTP header, a child process's environment).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, RwLock};

/// The prefix of the environment variable that holds secret `NAME`: `AGENTIC_SECRET_NAME`.
pub const SECRET_ENV_PREFIX: &str = "AGENTIC_SECRET_";

/// Where secrets are looked up: the entries of a secrets file, then the environment
/// (`AGENTIC_SECRET_<NAME>`). Cheap to clone. `Debug` shows the names, never a value.
#[derive(Clone, Default)]
pub struct Secrets {
    /// The secrets file's entries, name → value.
    file: BTreeMap<String, String>,
    /// The secrets file, for messages.
    origin: Option<PathBuf>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets").field("file", &self.origin).field("names", &self.file.keys()).finish()
    }
}

/// A secrets file that cannot be used: it cannot be read, is not a YAML map of names to strings, or names a
/// secret with characters a reference cannot hold. The message names the file (and the line where YAML says
/// so) and never holds a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SecretsFileError {
    message: String,
}

/// A `${secret:NAME}` reference that neither the secrets file nor the environment answers.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "secret `{name}` is not set: give it in the file of --secrets FILE (`{name}: <value>`) or in the environment \
     variable {SECRET_ENV_PREFIX}{name}"
)]
pub struct MissingSecret {
    /// The secret's name.
    pub name: String,
}

impl Secrets {
    /// No secrets file: only the environment answers.
    pub fn new() -> Self {
        Self::default()
    }

    /// The secrets of the YAML file at `path`: a map of names (letters, digits and `_`, not starting with a
    /// digit) to strings.
    ///
    /// # Errors
    /// [`SecretsFileError`] naming the file and what is wrong in it (never a value).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, SecretsFileError> {
        let path = path.as_ref();
        let shown = path.display();
        let text = std::fs::read_to_string(path)
            .map_err(|e| SecretsFileError { message: format!("cannot read the secrets file {shown}: {e}") })?;
        let file = Self::parse(&text).map_err(|why| SecretsFileError { message: format!("{shown}: {why}") })?;
        Ok(Self { file, origin: Some(path.to_path_buf()) })
    }

    /// The entries of a secrets file's text, or why it is not one.
    fn parse(text: &str) -> Result<BTreeMap<String, String>, String> {
        if text.trim().is_empty() {
            return Ok(BTreeMap::new());
        }
        let value: serde_json::Value = serde_saphyr::from_str(text).map_err(|e| {
            // saphyr's message may quote the text it could not read, which may be a value: keep its location only.
            let location = e.to_string().lines().find(|l| l.contains("line")).map(str::trim).map(str::to_string);
            match location {
                Some(at) => format!("not a YAML map of secret names to strings ({at})"),
                None => "not a YAML map of secret names to strings".to_string(),
            }
        })?;
        let serde_json::Value::Object(map) = value else {
            return Err("expected a map of secret names to strings (`NAME: value`)".to_string());
        };
        map.into_iter()
            .map(|(name, value)| {
                if !is_name(&name) {
                    return Err(format!(
                        "secret name `{name}` is not a name (letters, digits and `_`, not starting with a digit)"
                    ));
                }
                match value {
                    serde_json::Value::String(s) => Ok((name, s)),
                    serde_json::Value::Number(n) => Ok((name, n.to_string())),
                    other => Err(format!(
                        "secret `{name}`: expected a string, found {}",
                        agentic_engine::json_type_phrase(&other)
                    )),
                }
            })
            .collect()
    }

    /// Adds (or replaces) secret `name` with `value`: what a Rust program supplies without a file.
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.file.insert(name.into(), value.into());
        self
    }

    /// The value of secret `name`: the secrets file's entry, else `AGENTIC_SECRET_<NAME>` (not blank).
    pub fn get(&self, name: &str) -> Option<String> {
        self.file
            .get(name)
            .cloned()
            .or_else(|| std::env::var(format!("{SECRET_ENV_PREFIX}{name}")).ok().filter(|v| !v.trim().is_empty()))
    }

    /// `text` with each `${secret:NAME}` replaced by the secret's value.
    ///
    /// # Errors
    /// [`MissingSecret`] naming the first reference nothing answers.
    pub fn resolve(&self, text: &str) -> Result<String, MissingSecret> {
        self.resolve_used(text).map(|(resolved, _)| resolved)
    }

    /// [`Secrets::resolve`], with the secrets used: `(name, value)` in order of appearance.
    ///
    /// # Errors
    /// [`MissingSecret`] naming the first reference nothing answers.
    pub fn resolve_used(&self, text: &str) -> Result<(String, Vec<(String, String)>), MissingSecret> {
        let mut out = String::with_capacity(text.len());
        let mut used = Vec::new();
        let mut rest = text;
        while let Some((before, name, after)) = next_reference(rest) {
            out.push_str(before);
            let value = self.get(name).ok_or_else(|| MissingSecret { name: name.to_string() })?;
            out.push_str(&value);
            used.push((name.to_string(), value));
            rest = after;
        }
        out.push_str(rest);
        Ok((out, used))
    }

    /// Makes these the secrets of this process: what models built from specs resolve their references with
    /// ([`Secrets::installed`]). The CLI installs the file of `--secrets FILE` once, at its start.
    pub fn install(self) {
        let slot = INSTALLED.get_or_init(|| RwLock::new(Secrets::default()));
        match slot.write() {
            Ok(mut s) => *s = self,
            Err(poisoned) => *poisoned.into_inner() = self,
        }
    }

    /// The secrets of this process ([`Secrets::install`]); without any installed, the environment only.
    pub fn installed() -> Secrets {
        match INSTALLED.get() {
            Some(slot) => match slot.read() {
                Ok(s) => s.clone(),
                Err(poisoned) => poisoned.into_inner().clone(),
            },
            None => Secrets::default(),
        }
    }
}

/// The secrets installed for this process.
static INSTALLED: OnceLock<RwLock<Secrets>> = OnceLock::new();

/// Whether `name` can be a secret's name: ASCII letters, digits and `_`, not empty, not starting with a digit.
pub(crate) fn is_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The first `${secret:NAME}` in `text`: the text before it, the name, the text after it.
fn next_reference(text: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    while let Some(at) = text[from..].find("${secret:") {
        let start = from + at;
        let name_at = start + "${secret:".len();
        if let Some(len) = text[name_at..].find('}') {
            let name = &text[name_at..name_at + len];
            if is_name(name) {
                return Some((&text[..start], name, &text[name_at + len + 1..]));
            }
        }
        from = name_at;
    }
    None
}

/// The first text of `text` that starts like a secret's reference (`${secret`) but is not one
/// (`${secret:bad-name}`, `${secret: X}`, `${secrets:X}`, an unclosed `${secret:X`): what a located error
/// quotes, so that a misspelt reference is not sent as it is written.
pub fn malformed_secret_reference(text: &str) -> Option<String> {
    let mut from = 0;
    while let Some(at) = text[from..].find("${") {
        let start = from + at;
        let rest = &text[start..];
        // `${secret`, `${SECRET`, `${ secret`: meant as a reference, in any case and spacing.
        let word = rest[2..].trim_start();
        let meant = word.get(..6).is_some_and(|w| w.eq_ignore_ascii_case("secret"));
        match next_reference(rest) {
            Some(("", _, after)) => from = start + (rest.len() - after.len()),
            _ if meant => {
                let end = rest.find('}').map_or(rest.len().min(24), |i| i + 1);
                return Some(rest.chars().take(end).collect());
            }
            _ => from = start + 2,
        }
    }
    None
}

/// The names of the secrets `text` refers to (`${secret:NAME}`), in order of appearance.
pub fn secret_references(text: &str) -> Vec<&str> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some((_, name, after)) = next_reference(rest) {
        names.push(name);
        rest = after;
    }
    names
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn references_are_found_and_resolved() {
        let text = "Bearer ${secret:ACME_KEY}-${secret:b2} and ${secret:not a name} ${secret:";
        assert_eq!(secret_references(text), vec!["ACME_KEY", "b2"]);
        let secrets = Secrets::new().with("ACME_KEY", "sk-1").with("b2", "x");
        assert_eq!(secrets.resolve(text).unwrap(), "Bearer sk-1-x and ${secret:not a name} ${secret:");
        assert_eq!(
            Secrets::new().resolve("${secret:NOWHERE_SET_42}").unwrap_err().to_string(),
            "secret `NOWHERE_SET_42` is not set: give it in the file of --secrets FILE (`NOWHERE_SET_42: <value>`) \
             or in the environment variable AGENTIC_SECRET_NOWHERE_SET_42"
        );
    }

    #[test]
    fn misspelt_references_are_found() {
        for (text, found) in [
            ("Bearer ${secret:bad-name}", Some("${secret:bad-name}")),
            ("${secret: X}", Some("${secret: X}")),
            ("x ${secrets:X} y", Some("${secrets:X}")),
            ("${secret:X", Some("${secret:X")),
            ("${SECRET:X}", Some("${SECRET:X}")),
            ("${ secret:X}", Some("${ secret:X}")),
            ("${other} and ${secret:B}", None),
            ("${secret:A} and ${secret:B}", None),
            ("no reference", None),
        ] {
            assert_eq!(malformed_secret_reference(text).as_deref(), found, "{text}");
        }
        let (resolved, used) = Secrets::new().with("A", "aaaa").resolve_used("${secret:A}-${secret:A}").unwrap();
        assert_eq!(resolved, "aaaa-aaaa");
        assert_eq!(used, [("A".to_string(), "aaaa".to_string()), ("A".to_string(), "aaaa".to_string())]);
    }

    #[test]
    fn a_secrets_file_is_a_map_of_names_to_strings_and_its_errors_show_no_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secrets.yaml");
        std::fs::write(&path, "ACME_KEY: sk-live-1\nPIN: 1234\n").unwrap();
        let secrets = Secrets::from_file(&path).unwrap();
        assert_eq!(secrets.get("ACME_KEY").as_deref(), Some("sk-live-1"));
        assert_eq!(secrets.get("PIN").as_deref(), Some("1234"));
        assert!(!format!("{secrets:?}").contains("sk-live-1"));

        std::fs::write(&path, "ACME_KEY: [sk-live-1]\n").unwrap();
        let e = Secrets::from_file(&path).unwrap_err().to_string();
        assert_eq!(e, format!("{}: secret `ACME_KEY`: expected a string, found an array", path.display()));
        std::fs::write(&path, "- sk-live-1\n").unwrap();
        let e = Secrets::from_file(&path).unwrap_err().to_string();
        assert_eq!(e, format!("{}: expected a map of secret names to strings (`NAME: value`)", path.display()));
        std::fs::write(&path, "bad-name: sk-live-1\n").unwrap();
        let e = Secrets::from_file(&path).unwrap_err().to_string();
        assert!(
            e.ends_with("secret name `bad-name` is not a name (letters, digits and `_`, not starting with a digit)")
        );
        let missing = dir.path().join("nope.yaml");
        let e = Secrets::from_file(&missing).unwrap_err().to_string();
        assert!(e.starts_with(&format!("cannot read the secrets file {}: ", missing.display())), "{e}");
    }
}
