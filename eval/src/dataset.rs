//! The dataset of an evaluation (SPEC.md §6): JSON lines `{"id", "inputs", "expected", "metadata"}`, one case
//! a line, checked line by line ([`Dataset::parse`]).

use std::fmt;
use std::path::Path;

use serde_json::{Map, Value};

/// The fields a dataset line may have.
const FIELDS: [&str; 5] = ["id", "inputs", "expected", "metadata", "answers"];

/// One case of a dataset: the inputs of a run and what its output should be.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The case's id: not empty, unique in its dataset.
    pub id: String,
    /// The run's inputs.
    pub inputs: Map<String, Value>,
    /// The expected output, when the line gives one (`None` without `expected`; a JSON `null` is `Some`).
    pub expected: Option<Value>,
    /// Anything else the line carries about the case (not read by the run; kept in the results).
    pub metadata: Map<String, Value>,
    /// Answers to the run's pending responses by response id (a `human` step's `response_id`, a tool call's
    /// `tool:<path>:<n>`), used when the run asks, as `agentic respond` would give them: a workflow with a
    /// person in it is evaluated to its end. Empty without `answers`.
    pub answers: Map<String, Value>,
    /// The line of the dataset the case is on, 1-based.
    pub line: usize,
}

/// A dataset: its file and its cases, in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// The file as given.
    pub file: String,
    /// The cases, in file order.
    pub cases: Vec<Case>,
}

/// A problem with a dataset line: `tickets.jsonl: line 3: `id` must be a non-empty string`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetError {
    /// The dataset file as given.
    pub file: String,
    /// The line, 1-based; 0 when the problem is the file's (unreadable, empty).
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for DatasetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: line {}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for DatasetError {}

/// Every problem found in a dataset, in line order; displayed one a line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DatasetErrors {
    /// The problems, in line order.
    pub errors: Vec<DatasetError>,
}

impl fmt::Display for DatasetErrors {
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

impl std::error::Error for DatasetErrors {}

impl Dataset {
    /// Reads and checks the dataset file at `path` ([`Dataset::parse`]).
    ///
    /// # Errors
    /// The file cannot be read (line 0), or every bad line.
    pub fn read(path: &Path) -> Result<Dataset, DatasetErrors> {
        let file = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Dataset::parse(&text, &file),
            Err(e) => Err(DatasetErrors { errors: vec![DatasetError { file, line: 0, message: e.to_string() }] }),
        }
    }

    /// Checks `text`, JSON lines, one case a line: a line is an object with a non-empty string `id` that no
    /// earlier line has, `inputs` an object (default empty), `expected` any JSON (optional), `metadata` an
    /// object (default empty), and no other field. Blank lines are skipped. `file` names the file in errors.
    ///
    /// ```
    /// use agentic_eval::Dataset;
    /// let text = "{\"id\": \"a\", \"inputs\": {\"x\": 1}, \"expected\": 2}\n\n{\"id\": \"b\"}\n";
    /// let dataset = Dataset::parse(text, "cases.jsonl")?;
    /// assert_eq!(dataset.cases.len(), 2);
    /// assert_eq!(dataset.cases[1].line, 3);
    /// let errors = Dataset::parse("{\"id\": \"a\"}\n{\"id\": \"a\"}\n", "cases.jsonl").unwrap_err();
    /// assert_eq!(errors.to_string(), "cases.jsonl: line 2: duplicate id `a` (first on line 1)");
    /// # Ok::<(), agentic_eval::DatasetErrors>(())
    /// ```
    ///
    /// # Errors
    /// Every bad line, naming its line number; a dataset without a case.
    pub fn parse(text: &str, file: &str) -> Result<Dataset, DatasetErrors> {
        let mut errors = Vec::new();
        let mut cases: Vec<Case> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let mut error = |message: String| errors.push(DatasetError { file: file.to_string(), line, message });
            match parse_line(raw, line) {
                Ok(case) => match cases.iter().find(|c| c.id == case.id) {
                    Some(first) => error(format!("duplicate id `{}` (first on line {})", case.id, first.line)),
                    None => cases.push(case),
                },
                Err(message) => error(message),
            }
        }
        if errors.is_empty() && cases.is_empty() {
            errors.push(DatasetError {
                file: file.to_string(),
                line: 0,
                message: "no case (expected one JSON object a line: {\"id\": .., \"inputs\": {..}, \"expected\": ..})"
                    .to_string(),
            });
        }
        if errors.is_empty() { Ok(Dataset { file: file.to_string(), cases }) } else { Err(DatasetErrors { errors }) }
    }
}

/// One line as a case, or what is wrong with it.
fn parse_line(raw: &str, line: usize) -> Result<Case, String> {
    let value: Value = serde_json::from_str(raw).map_err(|e| {
        let message = e.to_string();
        let message = message.rsplit_once(" at line ").map_or(message.as_str(), |(m, _)| m).to_string();
        format!("invalid JSON: {message}")
    })?;
    let Value::Object(mut object) = value else {
        return Err(format!(
            "expected a JSON object {{\"id\", \"inputs\", ..}}, found {}",
            agentic_engine::json_type_phrase(&value)
        ));
    };
    if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!("unknown field `{unknown}`, expected `id`, `inputs`, `expected`, `metadata` or `answers`"));
    }
    let id = match object.remove("id") {
        Some(Value::String(id)) if !id.trim().is_empty() => id,
        Some(Value::String(_)) => return Err("`id` must be a non-empty string, found an empty one".to_string()),
        Some(other) => {
            return Err(format!("`id` must be a non-empty string, found {}", agentic_engine::json_type_phrase(&other)));
        }
        None => return Err("missing `id` (a non-empty string naming the case)".to_string()),
    };
    let object_field = |object: &mut Map<String, Value>, key: &str| match object.remove(key) {
        None => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(other) => {
            Err(format!("case `{id}`: `{key}` must be an object, found {}", agentic_engine::json_type_phrase(&other)))
        }
    };
    let inputs = object_field(&mut object, "inputs")?;
    let metadata = object_field(&mut object, "metadata")?;
    let answers = object_field(&mut object, "answers")?;
    Ok(Case { id, inputs, expected: object.remove("expected"), metadata, answers, line })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_cases_and_skips_blank_lines() {
        let text = "{\"id\": \"a\", \"inputs\": {\"q\": \"hi\"}, \"expected\": \"x\", \"metadata\": {\"tag\": 1}}\n  \n{\"id\": \"b\", \"expected\": null}\n";
        let d = Dataset::parse(text, "d.jsonl").unwrap();
        assert_eq!(d.cases[0].inputs, json!({"q": "hi"}).as_object().cloned().unwrap());
        assert_eq!(d.cases[0].expected, Some(json!("x")));
        assert_eq!(d.cases[0].metadata.get("tag"), Some(&json!(1)));
        assert_eq!((d.cases[1].id.as_str(), d.cases[1].line, d.cases[1].expected.clone()), ("b", 3, Some(Value::Null)));
        assert!(d.cases[1].inputs.is_empty());
    }

    #[test]
    fn every_bad_line_is_named() {
        let text = [
            "{\"id\": \"a\"}",
            "[1]",
            "{\"id\": \"\"}",
            "{\"id\": 3}",
            "{\"inputs\": {}}",
            "{\"id\": \"b\", \"input\": {}}",
            "{\"id\": \"c\", \"inputs\": [1]}",
            "{\"id\": \"d\", \"metadata\": \"x\"}",
            "{\"id\": \"a\"}",
            "{\"id\": \"e\",",
        ]
        .join("\n");
        let errors = Dataset::parse(&text, "d.jsonl").unwrap_err();
        let shown: Vec<String> = errors.errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "d.jsonl: line 2: expected a JSON object {\"id\", \"inputs\", ..}, found an array",
                "d.jsonl: line 3: `id` must be a non-empty string, found an empty one",
                "d.jsonl: line 4: `id` must be a non-empty string, found a number",
                "d.jsonl: line 5: missing `id` (a non-empty string naming the case)",
                "d.jsonl: line 6: unknown field `input`, expected `id`, `inputs`, `expected`, `metadata` or `answers`",
                "d.jsonl: line 7: case `c`: `inputs` must be an object, found an array",
                "d.jsonl: line 8: case `d`: `metadata` must be an object, found a string",
                "d.jsonl: line 9: duplicate id `a` (first on line 1)",
                "d.jsonl: line 10: invalid JSON: EOF while parsing a value",
            ]
        );
    }

    #[test]
    fn an_empty_dataset_or_file_is_an_error() {
        assert_eq!(
            Dataset::parse("\n\n", "d.jsonl").unwrap_err().to_string(),
            "d.jsonl: no case (expected one JSON object a line: {\"id\": .., \"inputs\": {..}, \"expected\": ..})"
        );
        let e = Dataset::read(Path::new("/nonexistent/d.jsonl")).unwrap_err();
        assert_eq!(e.errors[0].line, 0);
        assert!(e.to_string().starts_with("/nonexistent/d.jsonl: "), "{e}");
    }
}
