//! Telling a PostgreSQL URL from a store directory, and showing one without its password (available
//! without the `postgres` feature, so that a build without it can say why it refuses the URL).

/// Whether `store` names a PostgreSQL database (`postgres://…` or `postgresql://…`) rather than a directory.
pub fn is_postgres_url(store: &str) -> bool {
    store.starts_with("postgres://") || store.starts_with("postgresql://")
}

/// `url` with its password replaced by `***` (in the user info and in a `password=` parameter), for messages.
pub fn redact_url(url: &str) -> String {
    let mut shown = url.to_string();
    if let Some(scheme_end) = shown.find("://") {
        let rest = scheme_end + 3;
        let authority_end = shown[rest..].find(['/', '?']).map_or(shown.len(), |i| rest + i);
        if let Some(at) = shown[rest..authority_end].rfind('@').map(|i| rest + i)
            && let Some(colon) = shown[rest..at].find(':').map(|i| rest + i)
        {
            shown.replace_range(colon + 1..at, "***");
        }
    }
    if let Some(query) = shown.find('?') {
        let (head, params) = shown.split_at(query + 1);
        let params: Vec<String> = params
            .split('&')
            .map(|p| if p.starts_with("password=") { "password=***".to_string() } else { p.to_string() })
            .collect();
        shown = format!("{head}{}", params.join("&"));
    }
    shown
}

/// `url` naming the database `dbname` on the same server instead of its own (`postgres://u@h:5432/a?x=1` →
/// `postgres://u@h:5432/{dbname}?x=1`), for tools that create a database per test or per benchmark.
pub fn with_database(url: &str, dbname: &str) -> String {
    let authority = url.find("://").map_or(0, |i| i + 3);
    let query = url[authority..].find('?').map_or(url.len(), |i| authority + i);
    let path = url[authority..query].find('/').map_or(query, |i| authority + i);
    format!("{}/{dbname}{}", &url[..path], &url[query..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_directories_and_shown_without_their_password() {
        assert!(is_postgres_url("postgres://h/db") && is_postgres_url("postgresql://h/db"));
        assert!(!is_postgres_url(".agentic") && !is_postgres_url("/tmp/postgres://x"));
        assert_eq!(redact_url("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
        assert_eq!(redact_url("postgres://u@h/db?password=secret&x=1"), "postgres://u@h/db?password=***&x=1");
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
        assert_eq!(redact_url("postgres://u:p@ss@h/db"), "postgres://u:***@h/db");
    }

    #[test]
    fn another_database_on_the_same_server() {
        assert_eq!(with_database("postgres://a@127.0.0.1:5432/postgres", "b"), "postgres://a@127.0.0.1:5432/b");
        assert_eq!(with_database("postgres://a@h/x?sslmode=disable", "b"), "postgres://a@h/b?sslmode=disable");
        assert_eq!(with_database("postgres://a@h:1", "b"), "postgres://a@h:1/b");
    }
}
