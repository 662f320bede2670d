use agentic_macros::agents;

#[agents(crate = agentic_engine)]
pub trait Story {
    #[agent(user = "Write a story about {{ topic }}.")]
    async fn writer(&self, topic: String) -> String;
}

fn main() {}
