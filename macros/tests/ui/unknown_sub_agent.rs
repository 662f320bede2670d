use agentic_macros::agents;

#[agents(crate = agentic_engine)]
pub trait Story {
    #[agent(user = "Write a story about {{ topic }}.", output_key = "story")]
    async fn writer(&self, topic: String) -> String;

    #[agent(user = "Edit this story: {{ story }}", output_key = "story")]
    async fn editor(&self, story: String) -> String;

    #[sequence(agents(writer, style_editor), output_key = "story")]
    async fn pipeline(&self, topic: String) -> String;
}

fn main() {}
