//! Run ids chosen by users: what is accepted, and why.

/// What [`check_run_id`] accepts, as its errors say it.
pub(crate) const RUN_ID_RULE: &str =
    "(a run id is 1 to 200 bytes, not blank, without control characters, and not `.` or `..`)";

/// The longest run id (memory id) accepted, in bytes.
pub const MAX_RUN_ID_LEN: usize = 200;

/// Checks a run id (memory id) chosen by a user: 1 to [`MAX_RUN_ID_LEN`] bytes, not blank, no control
/// character, and not `.` or `..` — so that, percent-encoded, it is one path segment of the server's URLs
/// (a `.` or `..` segment would be resolved away by clients).
///
/// # Errors
/// What is wrong, as a phrase after the id: `` `..` is a path step (a run id is ..) ``.
pub fn check_run_id(id: &str) -> Result<(), String> {
    let problem = if id.trim().is_empty() {
        "is blank"
    } else if id.len() > MAX_RUN_ID_LEN {
        "is too long"
    } else if id == "." || id == ".." {
        "is a path step"
    } else if id.chars().any(char::is_control) {
        "has a control character"
    } else {
        return Ok(());
    };
    let shown: String =
        if id.chars().count() > 40 { id.chars().take(40).chain("..".chars()).collect() } else { id.to_string() };
    Err(format!("`{}` {problem} {RUN_ID_RULE}", shown.escape_debug()))
}
