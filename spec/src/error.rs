//! Located spec errors: [`SpecError`] (one problem) and [`SpecErrors`] (all the problems found).

use std::fmt;

use crate::node::Pos;

/// One problem in a spec, with where it is.
///
/// Displayed as `file:line:column: agent `name`: field `f`: message` (the agent and field parts only when
/// they apply; `line:column` omitted when unknown, e.g. for an unreadable file), then `  hint: ..` on a line
/// of its own when there is a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The spec file as given (path or name).
    pub file: String,
    /// Line, 1-based; 0 when the problem has no position (unreadable file).
    pub line: u64,
    /// Column, 1-based; 0 when unknown.
    pub column: u64,
    /// The agent the problem belongs to, when it belongs to one.
    pub agent: Option<String>,
    /// The field of the agent (or of the top level) the problem is about, when the message does not name it.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when the message alone may not say (e.g. for a YAML indentation error: `YAML indents
    /// with spaces; check the indentation of line 6 against the lines above it`).
    pub hint: Option<String>,
}

impl SpecError {
    /// The position of the error.
    pub fn pos(&self) -> Pos {
        Pos::new(self.line, self.column)
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        f.write_str(": ")?;
        if let Some(agent) = &self.agent {
            write!(f, "agent `{agent}`: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecError {}

/// Every problem found in a spec, in file order. Displayed one error per line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpecErrors {
    /// The errors, sorted by position.
    pub errors: Vec<SpecError>,
}

impl SpecErrors {
    /// Number of errors.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// Whether there is no error.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// Iterates over the errors.
    pub fn iter(&self) -> std::slice::Iter<'_, SpecError> {
        self.errors.iter()
    }

    /// Sorts by position (stable, so errors at one position keep their discovery order) and drops exact
    /// duplicates.
    pub(crate) fn finish(mut self) -> Self {
        self.errors.sort_by_key(|e| (e.line, e.column));
        self.errors.dedup();
        self
    }
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}

impl IntoIterator for SpecErrors {
    type Item = SpecError;
    type IntoIter = std::vec::IntoIter<SpecError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.into_iter()
    }
}

impl<'a> IntoIterator for &'a SpecErrors {
    type Item = &'a SpecError;
    type IntoIter = std::slice::Iter<'a, SpecError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

/// Collects errors for one file.
#[derive(Debug)]
pub(crate) struct Sink {
    file: String,
    errors: Vec<SpecError>,
}

impl Sink {
    pub(crate) fn new(file: impl Into<String>) -> Self {
        Sink { file: file.into(), errors: Vec::new() }
    }

    pub(crate) fn file(&self) -> &str {
        &self.file
    }

    /// Records an error at `pos`, for `agent` (if any), about `field` (if any).
    pub(crate) fn push(&mut self, pos: Pos, agent: Option<&str>, field: Option<&str>, message: impl Into<String>) {
        self.errors.push(SpecError {
            file: self.file.clone(),
            line: pos.line,
            column: pos.column,
            agent: agent.map(str::to_string),
            field: field.map(str::to_string),
            message: message.into(),
            hint: None,
        });
    }

    /// Records an error like [`Sink::push`] (no agent, no field), with a hint.
    pub(crate) fn push_with_hint(&mut self, pos: Pos, message: impl Into<String>, hint: Option<String>) {
        self.push(pos, None, None, message);
        if let Some(e) = self.errors.last_mut() {
            e.hint = hint;
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.errors.len()
    }

    /// Puts the errors recorded since index `from` under field `prefix`: a field `retry` becomes
    /// `prefix.retry`, no field becomes `prefix`.
    pub(crate) fn nest_since(&mut self, from: usize, prefix: &str) {
        for e in self.errors.iter_mut().skip(from) {
            e.field = Some(match e.field.take() {
                Some(f) => format!("{prefix}.{f}"),
                None => prefix.to_string(),
            });
        }
    }

    pub(crate) fn into_errors(self) -> SpecErrors {
        SpecErrors { errors: self.errors }.finish()
    }
}

/// The closest candidate to `word` (edit distance at most a third of its length, min 1), for "did you mean";
/// never one that shares nothing with it (`b` is no misspelling of `a`).
pub(crate) fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = word.chars().count();
    let limit = (len / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(word, c), c))
        .filter(|(d, c)| *d <= limit && *d < len.max(c.chars().count()))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent transpositions.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_formats() {
        let mut sink = Sink::new("spec.yaml");
        sink.push(Pos::new(12, 5), Some("review"), None, "unknown field `exit_wen`");
        sink.push(Pos::new(3, 1), None, Some("version"), "must be 1");
        sink.push(Pos::default(), None, None, "cannot read");
        let errs = sink.into_errors();
        assert_eq!(
            errs.to_string(),
            "spec.yaml: cannot read\nspec.yaml:3:1: field `version`: must be 1\n\
             spec.yaml:12:5: agent `review`: unknown field `exit_wen`"
        );
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("exit_wen", ["exit_when", "agents"]), Some("exit_when"));
        assert_eq!(suggest("zzz", ["exit_when", "agents"]), None);
        assert_eq!(suggest("sequnce", ["sequence", "loop"]), Some("sequence"));
        assert_eq!(suggest("retyr", ["retry", "backoff_ms"]), Some("retry"));
        // One-letter names: a replaced letter is another name, an added one may be a typo.
        assert_eq!(suggest("b", ["a", "c"]), None);
        assert_eq!(suggest("b", ["ab"]), Some("ab"));
    }
}
