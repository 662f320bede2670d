use agentic_macros::agents;

#[agents(crate = agentic_engine)]
pub trait Story {
    #[agent(user = "Write a story about {{ topic }}.", output_key = "story")]
    async fn writer(&self, topic: String) -> String;

    /// Writers taking turns: a kind no attribute has.
    #[round_robin(agents(writer), output_key = "story")]
    async fn turns(&self, topic: String) -> String;
}

fn main() {}
