use agentic_macros::agent;

/// Counts words, but says not where the count goes.
#[agent(crate = agentic_engine)]
async fn word_count(story: String) -> usize {
    story.split_whitespace().count()
}

fn main() {}
