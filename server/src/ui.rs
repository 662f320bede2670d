//! The web UI (SERVER.md §3).

use axum::Router;

use crate::AppState;

/// The UI's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}

/// The login page shown to a browser without the token.
pub(crate) fn login_page(wrong: bool) -> String {
    let note = if wrong { "<p>That token is wrong.</p>" } else { "" };
    format!(
        "<!doctype html><title>agentic: sign in</title>{note}<form method=post action=/login><input name=token type=password><button>Sign in</button></form>"
    )
}
