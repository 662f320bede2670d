//! Commands of the CLI contract whose backing (the durable store) is not in this build yet.

use super::EXIT_FAILED;

/// Reports that `cmd` is not available yet; exit code 1.
pub(crate) fn not_available(cmd: &str) -> u8 {
    eprintln!("error: not available yet: {cmd} (the HTML report lands with the observability work)");
    EXIT_FAILED
}
